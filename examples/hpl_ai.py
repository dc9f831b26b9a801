"""HPL-AI (HPL-MxP) style solve: low-precision LU, then float64 iterative refinement.

1. Factor P A = L U by blocked right-looking LU with partial pivoting in
   float32 (panels natively, the trailing updates A22 -= L21 U12 -- nearly
   all the flops -- through `jax.jit(jaxemu.emulate(lu_factor, scheme=s))`).
   With s = "bf16" or "fp16" the updates are native one-pass BF16 / FP16
   tensor-core products, as the benchmark's reference runs them; with an
   FP32-class scheme (bf16x6, fp16x3, ...) the factors are as good as
   FP32's.
2. Refine in float64 (numpy/scipy) until the HPL scaled residual
       ||A x - b||_inf / (||A||_inf ||x||_inf n eps),   eps = 2^-53,
   is below 16, the benchmark's acceptance test:
     - classical IR: x += (LU)^-1 (b - A x);
     - GMRES-IR (Carson & Higham): each correction solves A d = r by GMRES
       left-preconditioned with the LU factors.
   The better the factors, the fewer refinement steps; classical IR may not
   converge at all from BF16 factors of a general matrix, GMRES-IR does.

What it shows: per scheme and method, the scaled residual before refinement,
the iterations needed (GMRES-IR: outer corrections and total GMRES steps),
and the time of factorization and refinement against a float64 LU solve
(scipy). On a CPU the emulated factorization is not faster than LAPACK's;
the speed comes from GPU tensor cores.

The method is that of the HPL-AI mixed-precision benchmark (now HPL-MxP;
Haidar, Tomov, Dongarra and Higham, "Harnessing GPU tensor cores for fast
FP16 arithmetic to speed up mixed-precision iterative refinement solvers",
SC 2018; GMRES-IR from Carson and Higham, SIAM J. Sci. Comput. 2018).

    python examples/hpl_ai.py --n 512 --schemes bf16,fp16,bf16x6 --matrix uniform
    python examples/hpl_ai.py --matrix diagdom
"""
from __future__ import annotations

import argparse
import functools

import jax
import jax.numpy as jnp
import numpy as np
import jax.scipy.sparse.linalg  # noqa: F401 (gmres_refine)
import scipy.linalg
from jax import lax

import jaxemu
from jaxemu.testing import median_time

DEFAULT_SCHEMES = "fp32,bf16,fp16,bf16x3,bf16x6"
EPS64 = 2.0 ** -53  # unit roundoff of float64, as HPL's dlamch("e")


# -- the low-precision factorization: plain JAX ------------------------------

def lu_factor(a, block):
    """Blocked right-looking LU with partial pivoting: returns (lu, perm) with
    A[perm] = L U, L unit lower triangular and U upper triangular, both in lu.
    The block loop is unrolled at trace time (static shapes)."""
    n = a.shape[0]
    perm = jnp.arange(n)
    for k in range(0, n, block):
        e = min(k + block, n)
        panel, _, p = lax.linalg.lu(a[k:, k:e])    # the tall panel, with pivoting
        a = a.at[k:].set(a[k:][p])                  # its row interchanges, on whole rows
        perm = perm.at[k:].set(perm[k:][p])
        a = a.at[k:, k:e].set(panel)
        if e < n:
            u12 = lax.linalg.triangular_solve(panel[:e - k], a[k:e, e:], left_side=True,
                                              lower=True, unit_diagonal=True)
            a = a.at[k:e, e:].set(u12)
            a = a.at[e:, e:].add(-(panel[e - k:] @ u12))   # trailing update: the GEMM
    return a, perm


# -- float64 refinement: numpy / scipy ----------------------------------------

class Factors:
    """The low-precision factors, applied in float64: solve(r) = (LU)^-1 P r."""

    def __init__(self, lu, perm):
        self.lu = np.asarray(lu, np.float64)
        self.perm = np.asarray(perm)

    def solve(self, r):
        y = scipy.linalg.solve_triangular(self.lu, r[self.perm], lower=True, unit_diagonal=True,
                                          check_finite=False)
        return scipy.linalg.solve_triangular(self.lu, y, lower=False, check_finite=False)


def scaled_residual(a, x, b):
    """HPL's acceptance test value: ||Ax - b||_inf / (||A||_inf ||x||_inf n eps)."""
    n = a.shape[0]
    r = np.linalg.norm(a @ x - b, np.inf)
    return float(r / (np.linalg.norm(a, np.inf) * np.linalg.norm(x, np.inf) * n * EPS64))


def classical_ir(a, b, factors, max_iter=50, history=None):
    """x_{i+1} = x_i + (LU)^-1 (b - A x_i). Returns (x, corrections, scaled residual);
    appends the scaled residual of every iterate to ``history`` if given."""
    x = factors.solve(b)
    for it in range(max_iter + 1):
        res = scaled_residual(a, x, b)
        if history is not None:
            history.append(res)
        if res < 16 or not np.isfinite(res) or it == max_iter:
            return x, it, res
        x = x + factors.solve(b - a @ x)


def gmres(op, rhs, tol, max_steps):
    """Plain GMRES (Arnoldi with modified Gram-Schmidt, x0 = 0) on op(x) = rhs.
    Stops when the residual is below tol * ||rhs||. Returns (x, steps)."""
    beta = np.linalg.norm(rhs)
    if beta == 0:
        return np.zeros_like(rhs), 0
    v = np.zeros((max_steps + 1, rhs.size))
    h = np.zeros((max_steps + 1, max_steps))
    v[0] = rhs / beta
    for j in range(max_steps):
        w = op(v[j])
        for i in range(j + 1):
            h[i, j] = v[i] @ w
            w = w - h[i, j] * v[i]
        h[j + 1, j] = np.linalg.norm(w)
        if h[j + 1, j] > 0:
            v[j + 1] = w / h[j + 1, j]
        e1 = np.zeros(j + 2)
        e1[0] = beta
        y = np.linalg.lstsq(h[:j + 2, :j + 1], e1, rcond=None)[0]
        if np.linalg.norm(h[:j + 2, :j + 1] @ y - e1) <= tol * beta or h[j + 1, j] == 0:
            break
    return v[:j + 1].T @ y, j + 1


def gmres_ir(a, b, factors, max_iter=10, tol=1e-8, max_steps=50, history=None):
    """Each correction d solves (LU)^-1 P A d = (LU)^-1 P r by GMRES.
    Returns (x, corrections, total GMRES steps, scaled residual); appends
    (GMRES steps so far, scaled residual) of every iterate to ``history``."""
    x = factors.solve(b)
    steps = 0
    for it in range(max_iter + 1):
        res = scaled_residual(a, x, b)
        if history is not None:
            history.append((steps, res))
        if res < 16 or not np.isfinite(res) or it == max_iter:
            return x, it, steps, res
        d, k = gmres(lambda v: factors.solve(a @ v), factors.solve(b - a @ x), tol, max_steps)
        x, steps = x + d, steps + k


def hpl_residual(a, x, b):
    """HPL's scaled residual ||Ax - b||_inf / (eps (||A||_inf ||x||_inf + ||b||_inf) n),
    eps = 2^-53, in JAX (call it on float64 arrays under jax.enable_x64)."""
    inf = functools.partial(jnp.linalg.norm, ord=jnp.inf)
    return inf(a @ x - b) / (EPS64 * (inf(a) * inf(x) + inf(b)) * a.shape[0])


def refine(a, b, lu, perm, max_iter=50):
    """Classical iterative refinement on the device, in the precision of a
    (float64 under jax.enable_x64): x += (LU)^-1 P (b - A x) until the HPL
    scaled residual is below 16 or max_iter corrections.
    Returns (x, corrections, scaled residual)."""
    lu = lu.astype(a.dtype)
    tri = jax.scipy.linalg.solve_triangular

    def solve(r):
        return tri(lu, tri(lu, r[perm], lower=True, unit_diagonal=True), lower=False)

    def cond(c):
        _, it, res = c
        return (res >= 16) & jnp.isfinite(res) & (it < max_iter)

    def body(c):
        x, it, _ = c
        x = x + solve(b - a @ x)
        return x, it + 1, hpl_residual(a, x, b)

    x0 = solve(b)
    return jax.lax.while_loop(cond, body, (x0, jnp.int32(0), hpl_residual(a, x0, b)))


def gmres_refine(a, b, lu, perm, max_outer=10, restart=30):
    """GMRES-IR on the device (Carson & Higham), in the precision of a: each
    correction d solves A d = b - A x by jax.scipy.sparse.linalg.gmres (one
    cycle of at most `restart` steps, to relative tolerance 1e-8)
    preconditioned by the LU factors, until the HPL scaled residual is below
    16 or max_outer corrections. Returns (x, corrections, scaled residual)."""
    lu = lu.astype(a.dtype)
    tri = jax.scipy.linalg.solve_triangular

    def solve(r):
        return tri(lu, tri(lu, r[perm], lower=True, unit_diagonal=True), lower=False)

    def cond(c):
        _, it, res = c
        return (res >= 16) & jnp.isfinite(res) & (it < max_outer)

    def body(c):
        x, it, _ = c
        d, _ = jax.scipy.sparse.linalg.gmres(lambda v: a @ v, b - a @ x, tol=1e-8, restart=restart,
                                             maxiter=1, M=solve)
        x = x + d
        return x, it + 1, hpl_residual(a, x, b)

    x0 = solve(b)
    return jax.lax.while_loop(cond, body, (x0, jnp.int32(0), hpl_residual(a, x0, b)))


# -- data and the whole benchmark ---------------------------------------------

def make_system(n, matrix="uniform", seed=0):
    """A with entries uniform in [-0.5, 0.5) (HPL's generator's law), or its
    diagonally dominant variant (each diagonal entry raised by its row's
    absolute sum), stored in float32; b uniform too. Returns float64 copies."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(-0.5, 0.5, (n, n))
    if matrix == "diagdom":
        a[np.diag_indices(n)] += np.sum(np.abs(a), axis=1)
    elif matrix != "uniform":
        raise ValueError(f"matrix must be 'uniform' or 'diagdom', got {matrix!r}")
    b = rng.uniform(-0.5, 0.5, n)
    return a.astype(np.float32).astype(np.float64), b



def float64_solve_time(a, b, repeats=3):
    """Median time of scipy's float64 LU factorization and solve."""
    return median_time(lambda: scipy.linalg.lu_solve(scipy.linalg.lu_factor(a, check_finite=False), b,
                                                     check_finite=False), repeats)


@functools.lru_cache(maxsize=None)
def _factor_fn(scheme):
    """The jitted, emulated factorization (one per scheme: compiled once per shape)."""
    return jax.jit(jaxemu.emulate(lu_factor, scheme=scheme), static_argnums=1)


def run(n=512, block=128, scheme="bf16", matrix="uniform", seed=0, repeats=3, max_iter=50,
        data=None, time64=True):
    """Factor with `scheme`, refine both ways. Returns a dict: initial_residual
    (scaled, before refinement), ir_iters / ir_residual / ir_converged,
    gmres_outer / gmres_steps / gmres_residual / gmres_converged, factor_s,
    ir_s, gmres_s (median times) and f64_s (scipy float64 LU solve); ir_history
    and gmres_history, the scaled residual per iterate.
    data = (a, b) as from make_system skips regenerating the system."""
    a, b = data if data is not None else make_system(n, matrix, seed)
    aj = jnp.asarray(a, jnp.float32)
    factor = _factor_fn(scheme)
    lu, perm = factor(aj, block)
    f = Factors(lu, perm)
    out = dict(scheme=str(scheme), matrix=matrix, n=a.shape[0],
               initial_residual=scaled_residual(a, f.solve(b), b))
    ir_hist, gm_hist = [], []
    x, it, res = classical_ir(a, b, f, max_iter, history=ir_hist)
    out.update(ir_iters=it, ir_residual=res, ir_converged=res < 16, ir_history=ir_hist)
    x, it, steps, res = gmres_ir(a, b, f, history=gm_hist)
    out.update(gmres_outer=it, gmres_steps=steps, gmres_residual=res, gmres_converged=res < 16,
               gmres_history=gm_hist)
    out["factor_s"] = median_time(lambda: factor(aj, block), repeats)
    out["ir_s"] = median_time(lambda: classical_ir(a, b, f, max_iter)[0], repeats)
    out["gmres_s"] = median_time(lambda: gmres_ir(a, b, f)[0], repeats)
    if time64:
        out["f64_s"] = float64_solve_time(a, b, repeats)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=512, help="matrix size (default 512)")
    p.add_argument("--block", type=int, default=128, help="LU block size (default 128)")
    p.add_argument("--matrix", choices=["uniform", "diagdom", "both"], default="both",
                   help="uniform entries, diagonally dominant, or both (default)")
    p.add_argument("--schemes", default=DEFAULT_SCHEMES, help=f"comma list (default {DEFAULT_SCHEMES})")
    p.add_argument("--max-iter", type=int, default=50, help="classical IR steps at most (default 50)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs (default 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plot", default=None, help="PNG path: scaled residual per refinement step (needs matplotlib)")
    args = p.parse_args(argv)

    rows = []
    for matrix in (["uniform", "diagdom"] if args.matrix == "both" else [args.matrix]):
        data = make_system(args.n, matrix, args.seed)
        t64 = float64_solve_time(*data, args.repeats)
        print(f"HPL-AI: n={args.n} block={args.block} matrix={matrix} on {jax.devices()[0].platform}; "
              f"float64 LU solve (scipy) {t64 * 1e3:.1f}ms")
        print(f"{'':<10}{'':>10}{'--- classical IR ---':>30}{'--- GMRES-IR ---':>30}")
        print(f"{'scheme':<10}{'resid0':>10}{'iters':>8}{'resid':>10}{'time':>12}{'iters/steps':>12}"
              f"{'resid':>8}{'time':>10}{'factor':>10}{'best/f64':>10}")
        for s in args.schemes.split(","):
            r = run(block=args.block, scheme=s.strip(), matrix=matrix, repeats=args.repeats,
                    max_iter=args.max_iter, data=data, time64=False)
            r["f64_s"] = t64
            rows.append(r)
            ir = f"{r['ir_iters']}" if r["ir_converged"] else f"{r['ir_iters']}(no)"
            gm = f"{r['gmres_outer']}/{r['gmres_steps']}" + ("" if r["gmres_converged"] else "(no)")
            done = [t for t, ok in ((r["ir_s"], r["ir_converged"]), (r["gmres_s"], r["gmres_converged"])) if ok]
            best = f"{(r['factor_s'] + min(done)) / t64:.2f}x" if done else "-"
            print(f"{r['scheme']:<10}{r['initial_residual']:>10.2g}{ir:>8}{r['ir_residual']:>10.2g}"
                  f"{r['ir_s'] * 1e3:>10.1f}ms{gm:>12}{r['gmres_residual']:>8.2g}{r['gmres_s'] * 1e3:>8.1f}ms"
                  f"{r['factor_s'] * 1e3:>8.1f}ms{best:>10}")
    print("resid: HPL scaled residual ||Ax-b||/(||A|| ||x|| n eps), accepted below 16; (no): not converged;\n"
          "best/f64: (factor + the faster converged refinement) / the float64 LU solve's time")
    if args.plot:
        plot_convergence(rows, args.plot)
    return rows


def plot_convergence(rows, path):
    """Scaled residual against refinement step, classical IR and GMRES-IR
    (x axis: GMRES steps), one line per scheme and matrix."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    names = list(dict.fromkeys(r["scheme"] for r in rows))
    color = {n: f"C{i % 10}" for i, n in enumerate(names)}  # one color per scheme, a style per matrix
    for r in rows:
        style = "-" if r["matrix"] == "uniform" else ":"
        ax1.semilogy(range(len(r["ir_history"])), r["ir_history"], style, marker="o", ms=3,
                     color=color[r["scheme"]], label=f"{r['scheme']} ({r['matrix']})")
        steps, res = zip(*r["gmres_history"])
        ax2.semilogy(steps, res, style, marker="o", ms=3, color=color[r["scheme"]])
    for ax, title, xl in ((ax1, "classical IR", "refinement step"), (ax2, "GMRES-IR", "GMRES steps (total)")):
        ax.axhline(16, color="k", lw=0.8)
        ax.set_title(f"{title}, n = {rows[0]['n']}")
        ax.set_xlabel(xl)
        ax.grid(alpha=0.3)
    ax1.set_ylabel("HPL scaled residual (accepted < 16)")
    ax1.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
