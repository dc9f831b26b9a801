"""Where auto's overhead over fp16x3 goes (issue 13), on the GPU:

    JAX_PLATFORMS=cuda python scripts/auto_overhead.py [--n 4096,8192]

Times, per square size (uniform(-1, 1) operands): fp16x3 alone, the data
test alone, the data test and fp16x3 both run without a conditional (what
auto would cost if the branch were free), and auto itself. auto minus
"test + fp16x3" is the price of the conditional (lax.cond); "test + fp16x3"
minus fp16x3 is the price of the test.
"""
from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import jaxemu
from jaxemu import auto
from jaxemu import testing as T


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", default="4096,8192")
    p.add_argument("--reps", type=int, default=10)
    args = p.parse_args(argv)
    dev = jax.devices()[0]
    print(f"{dev.device_kind}, jax {jax.__version__}; {jaxemu.info().auto_cost_model}")
    s = jaxemu.get_scheme("auto")

    def test(a, b):
        t = auto.DataTest.of(a[None], b[None], s)
        return t.fp16x3_ok

    fns = {
        "fp16x3": jax.jit(lambda a, b: jaxemu.matmul(a, b, scheme="fp16x3")),
        "test": jax.jit(test),
        "test+fp16x3": jax.jit(lambda a, b: (test(a, b), jaxemu.matmul(a, b, scheme="fp16x3"))),
        "auto": jax.jit(lambda a, b: jaxemu.matmul(a, b, scheme="auto")),
        # A candidate design: fp16x3 first, unconditionally; the conditional
        # only decides whether to replace it (by bf16x6 here), so the common
        # case waits for no predicate before its product.
        "fp16x3|cond": jax.jit(lambda a, b: lax.cond(
            test(a, b), lambda c, a, b: c, lambda c, a, b: jaxemu.matmul(a, b, scheme="bf16x6"),
            jaxemu.matmul(a, b, scheme="fp16x3"), a, b)),
    }
    print(f"{'n':>6s} " + " ".join(f"{k:>12s}" for k in fns) + "   (ms)")
    for n in (int(x) for x in args.n.split(",")):
        rng = np.random.default_rng(0)
        a = jax.device_put(rng.uniform(-1, 1, (n, n)).astype(np.float32))
        b = jax.device_put(rng.uniform(-1, 1, (n, n)).astype(np.float32))
        ms = {k: 1e3 * T.median_time(lambda f=f: f(a, b), args.reps, min_rep_s=0.05) for k, f in fns.items()}
        print(f"{n:6d} " + " ".join(f"{v:12.3f}" for v in ms.values()))
        print(f"       test costs {ms['test+fp16x3'] - ms['fp16x3']:.3f} ms, the conditional "
              f"{ms['auto'] - ms['test+fp16x3']:.3f} ms; auto/fp16x3 = {ms['auto'] / ms['fp16x3']:.3f}, "
              f"fp16x3|cond/fp16x3 = {ms['fp16x3|cond'] / ms['fp16x3']:.3f}")
        del a, b
    jnp.zeros(()).block_until_ready()


if __name__ == "__main__":
    main()
