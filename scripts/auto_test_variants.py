"""auto's data test in several formulations, same process (stop 25's open
question, docs/performance.md): where XLA materializes an is-finite mask
(0.33 ms per GiB of operand) or the one-hot's comparison mask, and whether
writing the same statistics differently avoids it.

    JAX_PLATFORMS=cuda python scripts/auto_test_variants.py

Variants (the same statistics, bit for bit where noted):
  current    auto.operand_stats as on main
  lt-inf     where(|x| < inf, x, 0) instead of where(isfinite(x), x, 0) (same values)
  raw-probe  the probe column gathered from b, then made finite (same values)
  both       lt-inf and raw-probe
  kernel     the row-statistics kernel for A (JAXEMU_CUDA_ROW_STATS's path)
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import jaxemu
from jaxemu import auto
from jaxemu import testing as T
from jaxemu.auto import Stats, _root8, _side, _wide
from jaxemu.backends.xla import exponent, ldexp


def stats(a, b, lt_inf: bool, raw_probe: bool, row_stats=None) -> Stats:
    a_in = a
    a, b = _wide(a), _wide(b)
    fin = (lambda x: jnp.where(jnp.abs(x) < jnp.inf, x, 0.0)) if lt_inf else \
        (lambda x: jnp.where(jnp.isfinite(x), x, 0.0))
    b0 = fin(b)
    b_max, b_min, b_l1 = _side(b0, 1)
    j = jnp.argmax(b_l1, axis=1)
    eb = exponent(jnp.max(b_l1, axis=1, initial=0.0))
    col = jnp.take_along_axis(b if raw_probe else b0, j[:, None, None], axis=2)[:, :, 0]
    v = ldexp(fin(col) if raw_probe else col, -eb[:, None])
    if row_stats is not None:
        r = row_stats(a_in, v)
        return Stats(*r[:3], b_max, b_min, b_l1, *r[3:], eb)
    a0 = fin(a)
    a_max, a_min, a_l1 = _side(a0, 2)
    av = a0 * v[:, None, :]
    t = jnp.abs(av)
    return Stats(a_max, a_min, a_l1, b_max, b_min, b_l1, jnp.sum(av, axis=2), jnp.sum(t, axis=2),
                 jnp.max(t, axis=2, initial=0.0), jnp.sum(_root8(t), axis=2), eb)


def main():
    from jaxemu.backends.cuda_stats import row_stats
    n, d, k = 1 << 20, 256, 1024
    rng = np.random.default_rng(0)
    x = jax.device_put(rng.normal(size=(n, d)).astype(np.float32))
    c = jax.device_put(rng.normal(size=(k, d)).astype(np.float32))
    lab = jax.device_put(rng.integers(0, k, size=n).astype(np.int32))
    sq = jax.device_put(rng.normal(size=(8192, 8192)).astype(np.float32))
    s = jaxemu.get_scheme("auto")
    shapes = {
        "update": (lambda x, c, lab, sq: (jax.nn.one_hot(lab, k, dtype=jnp.float16).T[None], x[None]), (True, False)),
        "distances": (lambda x, c, lab, sq: (x[None], c.T[None]), (False, False)),
        "8192^3": (lambda x, c, lab, sq: (sq[None], sq[None]), (False, False)),
    }
    variants = {"current": None, "lt-inf": (True, False), "raw-probe": (False, True), "both": (True, True),
                "kernel": "kernel"}
    print(f"{jax.devices()[0].device_kind}, jax {jax.__version__}")
    print(f"{'shape':10s} {'variant':10s} {'ms':>8s}  fp16x3_ok ratio")
    for shape, (ops, exact) in shapes.items():
        for name, var in variants.items():
            def f(x, c, lab, sq, var=var, ops=ops, exact=exact):
                a, b = ops(x, c, lab, sq)
                if var is None:
                    test = auto.DataTest.of(a, b, s, exact)
                else:
                    st = stats(a, b, False, False, row_stats) if var == "kernel" else stats(a, b, *var)
                    test = auto.DataTest(st, (a.shape[1], a.shape[2], b.shape[2]), s.criterion, exact)
                return test.fp16x3_ok, test.normwise_ratio
            g = jax.jit(f)
            ok, ratio = g(x, c, lab, sq)
            t = T.median_time(lambda: g(x, c, lab, sq), 7)
            print(f"{shape:10s} {name:10s} {t * 1e3:8.3f}  {bool(ok)} {float(ratio[0]):.4e}")


if __name__ == "__main__":
    main()
