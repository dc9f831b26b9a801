"""The int8 path on the GPU (issue 14): the int8 GEMM kernel against
torch._int_mm (cuBLASLt) and XLA's int8 dot, beside the fp16 and FP32 rates;
then ozaki2_f32 on the cuda backend (residue, int8 GEMM and CRT kernels) and on the xla backend,
against cuBLAS SGEMM, with error / SGEMM's error on the four input laws and
the time split into its three steps. Same-run ratios; prints a table last.

    JAX_PLATFORMS=cuda python scripts/int8_bench.py [--n 8192] [--moduli 7,8,9] [--f64]
"""
import argparse
import json
import os
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # leave room for torch

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import jaxemu
from jaxemu import _ozaki2
from jaxemu import testing as T
from jaxemu.backends import cuda_int8
from jaxemu.bench import device_facts


def timed(fn, reps=5):
    return T.median_time(fn, reps, min_rep_s=0.05)


def torch_int_mm_s(n):
    try:
        import torch
    except ImportError:
        return None
    a = torch.randint(-128, 128, (n, n), dtype=torch.int8, device="cuda")
    b = torch.randint(-128, 128, (n, n), dtype=torch.int8, device="cuda").t().contiguous().t()
    f = lambda: torch._int_mm(a, b)
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    reps = 20
    start.record()
    for _ in range(reps):
        f()
    end.record()
    torch.cuda.synchronize()
    t = start.elapsed_time(end) / 1e3 / reps
    torch.cuda.empty_cache()
    return t


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--moduli", default="7,8,9", help="ozaki2_f32 moduli counts to time besides the default")
    ap.add_argument("--json", default=None)
    ap.add_argument("--f64", action="store_true", help="also ozaki2_f64 against DGEMM (needs jax_enable_x64)")
    args = ap.parse_args(argv)
    n = args.n
    facts = device_facts()
    print(facts, flush=True)
    rows = []
    ops = 2.0 * n ** 3
    rng = np.random.default_rng(0)

    # 1. int8 GEMM rates at n^3.
    a8 = jnp.asarray(rng.integers(-128, 128, (1, n, n)).astype(np.int8))
    b8t = jnp.asarray(rng.integers(-128, 128, (1, n, n)).astype(np.int8))
    ours = jax.jit(cuda_int8.int8_matmul)
    t_ours = timed(lambda: ours(a8, b8t))
    xla_i8 = jax.jit(lambda a, bt: lax.dot_general(a, bt, (((2,), (2,)), ((0,), (0,))),
                                                  preferred_element_type=jnp.int32))
    t_xla8 = timed(lambda: xla_i8(a8, b8t))
    np.testing.assert_array_equal(np.asarray(ours(a8[:, :256], b8t[:, :256])), np.asarray(xla_i8(a8[:, :256], b8t[:, :256])))
    x = jnp.asarray(rng.standard_normal((n, n)).astype(np.float32))
    y = jnp.asarray(rng.standard_normal((n, n)).astype(np.float32))
    x16, y16 = x.astype(jnp.float16), y.astype(jnp.float16)
    hgemm = jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32))
    t_fp16 = timed(lambda: hgemm(x16, y16))
    sgemm = jax.jit(lambda a, b: jnp.dot(a, b, precision="highest"))
    t_sgemm = timed(lambda: sgemm(x, y))
    t_torch = torch_int_mm_s(n)
    for name, t in [("jaxemu int8 GEMM", t_ours), ("torch._int_mm (cuBLASLt)", t_torch),
                    ("XLA int8 dot_general", t_xla8), ("fp16 jnp.dot (cuBLAS)", t_fp16), ("SGEMM (highest)", t_sgemm)]:
        rows.append(dict(kind="rate", name=name, ms=None if t is None else t * 1e3,
                         tops=None if t is None else ops / t / 1e12))

    # 2. The batched product of ozaki2_f32's moduli, and its three steps.
    s = jaxemu.get_scheme("ozaki2_f32")
    nm = s.moduli_for(n)
    moduli = _ozaki2.MODULI[:nm]
    a3, b3 = x[None], y[None]

    res = jax.jit(lambda a, b: cuda_int8.residues(a, b, s)[1:5])
    t_res = timed(lambda: res(a3, b3))
    ra, rbt, ea, eb = res(a3, b3)
    ea, eb = ea[:, :, 0], eb[:, 0, :]  # n is a multiple of 4: no padding
    prod = jax.jit(lambda ra, rbt: cuda_int8.residue_products(ra, rbt, moduli))
    t_prod = timed(lambda: prod(ra, rbt))
    p = prod(ra, rbt)
    crt = jax.jit(lambda p, ea, eb: cuda_int8.crt(p, ea, eb, moduli))
    t_crt = timed(lambda: crt(p, ea, eb))
    # For comparison, the residue passes as XLA fusions (the path before the
    # residue kernel): A's alone, and B's with the transpose fused in.
    pa, pb = _ozaki2.operand_bits(nm, n, s.MAX_BITS[s.dtype])
    res_a = jax.jit(lambda a: _ozaki2.symmetric_residues(_ozaki2.scale_to_integers(a, 2, pa)[1], moduli))
    res_b_fused = jax.jit(lambda b: _ozaki2.symmetric_residues(
        jnp.swapaxes(_ozaki2.scale_to_integers(b, 1, pb)[1], 1, 2), moduli))
    t_res_a, t_res_b_fused = timed(lambda: res_a(a3)), timed(lambda: res_b_fused(b3))
    steps = dict(residues_ms=t_res * 1e3, int8_products_ms=t_prod * 1e3, crt_ms=t_crt * 1e3,
                 products_tops=nm * ops / t_prod / 1e12, moduli=nm, residues_a_ms=t_res_a * 1e3,
                 residues_b_transpose_fused_ms=t_res_b_fused * 1e3)
    print("ozaki2_f32 steps:", steps, flush=True)

    # 3. ozaki2_f32 end to end, error / SGEMM's on the four laws.
    variants = [("ozaki2_f32", s)] + [(f"ozaki2_f32 moduli={m}", s.replace(moduli=int(m)))
                                      for m in args.moduli.split(",") if m and int(m) != nm]
    for law in T.LAWS:
        a, b = T.operands(law, n, n, n, seed=1)
        ref = T.reference(a, b)
        aj, bj = jnp.asarray(a), jnp.asarray(b)
        t32 = timed(lambda: sgemm(aj, bj))
        e32 = T.relerr(sgemm(aj, bj), ref)
        for name, sc in variants:
            for be in (["default", "xla"] if name == "ozaki2_f32" and law == T.LAWS[0] else ["default"]):
                f = jax.jit(lambda a, b, sc=sc, be=be: jaxemu.dot(a, b, scheme=sc, backend=be))
                t = timed(lambda: f(aj, bj), reps=3)
                e = T.relerr(f(aj, bj), ref)
                rows.append(dict(kind="ozaki2", law=law, name=name, backend="cuda" if be == "default" else "xla",
                                 moduli=sc.moduli_for(n), ms=t * 1e3, x_sgemm=t32 / t, err=e, err_sgemm=e32,
                                 err_ratio=e / e32))
                print(rows[-1], flush=True)
    # 4. ozaki2_f64 against DGEMM: time, and error on sampled entries of C
    #    against their exact value (error-free products, math.fsum).
    if args.f64:
        with jax.enable_x64(True):
            rng64 = np.random.default_rng(2)
            for law in T.LAWS:
                a64 = T.sample(law, (n, n), rng64).astype(np.float64) * (1 + rng64.random((n, n)) * 2.0 ** -30)
                b64 = T.sample(law, (n, n), rng64).astype(np.float64) * (1 + rng64.random((n, n)) * 2.0 ** -30)
                aj, bj = jnp.asarray(a64), jnp.asarray(b64)
                dgemm = jax.jit(lambda a, b: jnp.dot(a, b, precision="highest"))
                oz = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme="ozaki2_f64"))
                t64, toz = timed(lambda: dgemm(aj, bj)), timed(lambda: oz(aj, bj), reps=3)
                idx = rng64.integers(0, n, (2, 256))
                exact = T.exact_dot_samples(a64, b64, idx)
                e64 = T.sampled_relerr(np.asarray(dgemm(aj, bj)), idx, exact)
                eoz = T.sampled_relerr(np.asarray(oz(aj, bj)), idx, exact)
                rows.append(dict(kind="ozaki2_f64", law=law, moduli=jaxemu.get_scheme("ozaki2_f64").moduli_for(n),
                                 dgemm_ms=t64 * 1e3, ms=toz * 1e3, x_dgemm=t64 / toz, err=eoz, err_dgemm=e64,
                                 err_ratio=eoz / e64))
                print(rows[-1], flush=True)
    out = dict(facts=facts, n=n, rows=rows, steps=steps)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    print(f"\n{facts.get('device')} jax {facts.get('jax')} driver {facts.get('driver')}  n = {n}")
    print(f"{'int8 / reference rates':34s} {'ms':>9s} {'TOP/s':>8s}")
    for r in rows:
        if r["kind"] == "rate":
            ms = "-" if r["ms"] is None else f"{r['ms']:.3f}"
            tops = "-" if r["tops"] is None else f"{r['tops']:.0f}"
            print(f"{r['name']:34s} {ms:>9s} {tops:>8s}")
    print(f"ozaki2_f32 steps ({nm} moduli): residues {steps['residues_ms']:.2f} ms, int8 products "
          f"{steps['int8_products_ms']:.2f} ms ({steps['products_tops']:.0f} TOP/s), CRT {steps['crt_ms']:.2f} ms; "
          f"as XLA fusions: A's residues {steps['residues_a_ms']:.2f} ms, B's with the transpose fused "
          f"{steps['residues_b_transpose_fused_ms']:.2f} ms")
    print(f"{'scheme':26s} {'backend':7s} {'law':14s} {'moduli':>6s} {'ms':>8s} {'x SGEMM':>8s} {'err/SGEMM':>9s}")
    for r in rows:
        if r["kind"] == "ozaki2":
            print(f"{r['name']:26s} {r['backend']:7s} {r['law']:14s} {r['moduli']:6d} {r['ms']:8.2f} "
                  f"{r['x_sgemm']:8.2f} {r['err_ratio']:9.3f}")
    for r in rows:
        if r["kind"] == "ozaki2_f64":
            print(f"ozaki2_f64 {r['law']:14s} moduli {r['moduli']:2d}: {r['ms']:8.2f} ms, DGEMM {r['dgemm_ms']:8.2f} ms "
                  f"({r['x_dgemm']:.2f}x), err/DGEMM {r['err_ratio']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
