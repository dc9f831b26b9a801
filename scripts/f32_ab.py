"""bf16 schemes with their operands split in the GEMM's shared memory
(JAXEMU_CUDA_F32_OPERANDS=1, ffi/fused/kernel_f32.cuh; with A's slices in
shared memory, JAXEMU_CUDA_F32_REGISTER_A=0, and in registers, the default) against the
slice path (split kernel, then the slice GEMM), same process:

    JAX_PLATFORMS=cuda python scripts/f32_ab.py [--shapes 1x1024x1048576x256,...] [--schemes bf16x6,bf16x3]

Per shape (B x M x K x N, normal(0,1)) and scheme: ms of SGEMM, of the slice
path and of the FP32-operand kernel, each x SGEMM, and their largest
difference relative to max |C| (computed on the device: kNN's C is 8 GiB).
"""
from __future__ import annotations

import argparse
import faulthandler
import os

import jax
import jax.numpy as jnp

import jaxemu
from jaxemu import testing as T

SHAPES = "1x1024x1048576x256,1x1048576x256x1024,1x8192x128x262144,1x8192x8192x8192,1x2048x2048x2048"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default=SHAPES)
    p.add_argument("--schemes", default="bf16x6,bf16x3")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--hang-s", type=float, default=120, help="dump the stacks and exit if a shape takes longer")
    args = p.parse_args(argv)
    print(f"{jax.devices()[0].device_kind}, jax {jax.__version__}", flush=True)
    for shape in args.shapes.split(","):
        faulthandler.dump_traceback_later(args.hang_s, exit=True)
        bsz, m, k, n = (int(x) for x in shape.split("x"))
        pre = (bsz,) if bsz > 1 else ()  # operands drawn on the device (the update's A is 4 GiB)
        ka, kb = jax.random.split(jax.random.PRNGKey(0))
        a = jax.random.normal(ka, pre + (m, k), jnp.float32)
        b = jax.random.normal(kb, pre + (k, n), jnp.float32)
        sgemm = jax.jit(lambda a, b: jnp.matmul(a, b, precision="highest"))
        t32 = 1e3 * T.median_time(lambda: sgemm(a, b), args.reps, 0.02)
        for name in args.schemes.split(","):
            ms, out = {}, {}
            for flag in ("0", "1", "rs"):  # the slice path; FP32 operands, A's slices in shared memory / registers
                os.environ["JAXEMU_CUDA_F32_OPERANDS"] = "0" if flag == "0" else "1"
                os.environ["JAXEMU_CUDA_F32_REGISTER_A"] = "1" if flag == "rs" else "0"
                f = jax.jit(lambda a, b, name=name: jaxemu.matmul(a, b, scheme=name))  # traced with the switch as set
                ms[flag] = 1e3 * T.median_time(lambda: f(a, b), args.reps, 0.02)
                out[flag] = f(a, b)
            diff = float(jnp.max(jnp.abs(out["1"] - out["0"])) / jnp.max(jnp.abs(out["0"])))
            same = bool(jnp.all(out["rs"] == out["1"]))  # the same sums in the same order: the same bits
            print(f"{shape:22s} {name:7s} sgemm {t32:8.3f} ms  slices {ms['0']:8.3f} ({t32 / ms['0']:.2f}x)"
                  f"  f32 operands {ms['1']:8.3f} ({t32 / ms['1']:.2f}x)  A in registers {ms['rs']:8.3f} "
                  f"({t32 / ms['rs']:.2f}x, bits {'same' if same else 'DIFFER'})  max diff {diff:.1e}", flush=True)
            del out
        faulthandler.cancel_dump_traceback_later()


if __name__ == "__main__":
    main()
