"""Blocked right-looking Cholesky factorization and solve, with the trailing updates emulated.

For each block column: factor the diagonal block (A11 = L11 L11^T), solve for
the panel below it (L21 = A21 L11^-T), then update the trailing matrix
A22 -= L21 L21^T. The trailing updates are almost all of the flops (n^3/3)
and they are GEMMs, so `jax.jit(jaxemu.emulate(cholesky_solve, scheme=s))`
moves them onto the emulated tensor-core products; the small diagonal
factorizations and triangular solves stay in native float32.

What it shows: per scheme, the normwise backward error of the solve,
||A x - b|| / (||A|| ||x||) (2-norms, in float64 with numpy), next to the FP32
run's, and the median time of factorization plus solve. A one-pass BF16 or
FP16 update leaves an error ~1e-3 (or breaks down on an ill-conditioned
matrix); FP32-class schemes stay at FP32's ~1e-7.

Dense factorizations are the scientific-computing workload of the emulation
papers: APE (Ma et al., ICS 2022), MixPert (LCTES 2024) and LE-GEMM (J. Syst.
Archit. 2025) all target the FP32 GEMM that dominates them.

    python examples/cholesky.py --n 512 --block 128 --schemes fp32,bf16,bf16x6,fp16x3,int8_l4
"""
from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import jaxemu
from jaxemu.testing import median_time

DEFAULT_SCHEMES = "fp32,bf16,tf32,bf16x3,bf16x6,fp16x3"


# -- the algorithm: plain JAX -------------------------------------------------

def cholesky(a, block):
    """Lower-triangular L with A = L L^T (blocked, right-looking).
    The block loop is unrolled at trace time: every slice has a static shape."""
    n = a.shape[0]
    for k in range(0, n, block):
        e = min(k + block, n)
        l11 = jnp.linalg.cholesky(a[k:e, k:e])
        a = a.at[k:e, k:e].set(l11)
        if e < n:
            # L21 = A21 L11^-T, i.e. solve X L11^T = A21.
            l21 = lax.linalg.triangular_solve(l11, a[e:, k:e], left_side=False, lower=True,
                                              transpose_a=True)
            a = a.at[e:, k:e].set(l21)
            a = a.at[e:, e:].add(-(l21 @ l21.T))     # trailing update: the GEMM
    return jnp.tril(a)


def cholesky_solve(a, b, block):
    """x with A x = b, from the blocked Cholesky factor: L y = b, L^T x = y."""
    l = cholesky(a, block)
    y = lax.linalg.triangular_solve(l, b[:, None], left_side=True, lower=True)
    x = lax.linalg.triangular_solve(l, y, left_side=True, lower=True, transpose_a=True)
    return x[:, 0]


# -- data and metrics ---------------------------------------------------------

def make_spd(n, cond=1e3, seed=0):
    """A = Q diag(eig) Q^T with eigenvalues log-spaced from 1 to 1/cond and a
    random orthogonal Q (built in float64, stored in float32), and a
    right-hand side b."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    eig = np.logspace(0, -np.log10(cond), n)
    a = (q * eig) @ q.T
    a = (a + a.T) / 2
    return a.astype(np.float32), rng.standard_normal(n).astype(np.float32)


def backward_error(a, x, b):
    """||A x - b|| / (||A|| ||x||) in float64 (2-norms), for the float32 A, b given."""
    a, x, b = (np.asarray(v, np.float64) for v in (a, x, b))
    return float(np.linalg.norm(a @ x - b) / (np.linalg.norm(a, 2) * np.linalg.norm(x)))



def run(n=512, block=128, scheme="bf16x6", cond=1e3, seed=0, repeats=5, data=None, reference=None):
    """Factor and solve with `scheme`. Returns a dict: backward_error,
    backward_error_fp32 (the same with scheme "fp32"), ratio (the two's
    quotient), forward_error (||x - x64|| / ||x64||, x64 from numpy's float64
    solve), time_s, and "_data" / "_ref" to pass back (data=, reference=)."""
    a, b = data if data is not None else make_spd(n, cond, seed)
    aj, bj = jnp.asarray(a), jnp.asarray(b)

    def solve_with(s):
        f = jax.jit(jaxemu.emulate(cholesky_solve, scheme=s), static_argnums=2)
        return f, np.asarray(f(aj, bj, block))

    if reference is None:
        x64 = np.linalg.solve(np.asarray(a, np.float64), np.asarray(b, np.float64))
        reference = dict(x64=x64, backward_error=backward_error(a, solve_with("fp32")[1], b))
    f, x = solve_with(scheme)
    be = backward_error(a, x, b)
    x64 = reference["x64"]
    return dict(scheme=str(scheme), backward_error=be, backward_error_fp32=reference["backward_error"],
                ratio=be / reference["backward_error"],
                forward_error=float(np.linalg.norm(x - x64) / np.linalg.norm(x64)),
                time_s=median_time(lambda: f(aj, bj, block), repeats), _data=(a, b), _ref=reference)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=512, help="matrix size (default 512)")
    p.add_argument("--block", type=int, default=128, help="block size (default 128)")
    p.add_argument("--cond", type=float, default=1e3, help="condition number of A (default 1e3)")
    p.add_argument("--schemes", default=DEFAULT_SCHEMES, help=f"comma list (default {DEFAULT_SCHEMES})")
    p.add_argument("--repeats", type=int, default=5, help="timed solves per scheme (default 5)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    print(f"Cholesky solve: n={args.n} block={args.block} cond={args.cond:g} on {jax.devices()[0].platform}")
    print(f"{'scheme':<14}{'backward err':>14}{'/ FP32':>10}{'forward err':>14}{'time':>11}")
    data, ref, rows = make_spd(args.n, args.cond, args.seed), None, []
    for s in args.schemes.split(","):
        r = run(n=args.n, block=args.block, scheme=s.strip(), repeats=args.repeats, data=data, reference=ref)
        ref = r["_ref"]
        rows.append(r)
        print(f"{r['scheme']:<14}{r['backward_error']:>14.2e}{r['ratio']:>10.2f}"
              f"{r['forward_error']:>14.2e}{r['time_s'] * 1e3:>9.2f}ms")
    return rows


if __name__ == "__main__":
    main()
