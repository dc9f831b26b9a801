"""Two or more GPUs (issue 7): jaxemu under jit with NamedShardings.

1. A large GEMM split across the GPUs: rows of A sharded (no communication),
   and the contracting dim sharded (local products + psum), for SGEMM and
   jaxemu schemes; time, error vs float64 (computed on the GPUs), collectives
   in the compiled HLO.
2. A data-parallel MLP training step (batch sharded, weights replicated).
Prints a table; writes JSON to argv[1].
"""
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

import jaxemu
from jaxemu.testing import median_time


def timed(f, *args, reps=5):
    return median_time(lambda: f(*args), reps)


def main():
    out_path = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 32768
    ndev = len(jax.devices())
    mesh = jax.make_mesh((ndev,), ("x",))
    rows = []
    print(f"{ndev} x {jax.devices()[0].device_kind}, jax {jax.__version__}", flush=True)
    key = jax.random.PRNGKey(0)
    for layout, sa, sb, so in [("rows of A sharded", P("x", None), P(), P("x", None)),
                               ("K sharded (psum)", P(None, "x"), P("x", None), P())]:
        sha, shb = NamedSharding(mesh, sa), NamedSharding(mesh, sb)
        a = jax.jit(lambda k: jax.random.uniform(k, (n, n), jnp.float32, -1, 1), out_shardings=sha)(key)
        b = jax.jit(lambda k: jax.random.uniform(k, (n, n), jnp.float32, -1, 1), out_shardings=shb)(
            jax.random.fold_in(key, 1))
        out_sh = NamedSharding(mesh, so)
        with jax.enable_x64(True):
            ref = jax.jit(lambda x, y: jnp.dot(x.astype(jnp.float64), y.astype(jnp.float64),
                                               precision="highest", out_sharding=out_sh))(a, b)
            nref = float(jnp.linalg.norm(ref))
        cases = {"sgemm": jax.jit(lambda x, y: jnp.dot(x, y, precision="highest", out_sharding=out_sh))}
        for s in ["bf16x6", "fp16x3", "bf16x3"]:
            cases[s] = jax.jit(lambda x, y, s=s: jaxemu.dot(x, y, scheme=s, out_sharding=out_sh))
        base = None
        for name, f in cases.items():
            hlo = f.lower(a, b).compile().as_text()
            t = timed(f, a, b, reps=3)
            c = f(a, b)
            with jax.enable_x64(True):
                err = float(jnp.linalg.norm(c.astype(jnp.float64) - ref) / nref)
            base = base or t
            row = dict(case=f"GEMM {n}^3, {layout}", scheme=name, ms=t * 1e3, tflops=2.0 * n ** 3 / t / 1e12,
                       speedup=base / t, error=err, all_gather="all-gather" in hlo, all_reduce="all-reduce" in hlo,
                       out_spec=str(c.sharding.spec))
            rows.append(row)
            print(json.dumps(row), flush=True)
        del a, b, ref

    # Data-parallel MLP step: batch sharded, weights replicated.
    d, h, batch = (4096, 8192, 16384) if n >= 4096 else (64, 128, 256)
    ks = jax.random.split(key, 4)
    params = [jax.random.normal(ks[0], (d, h)) / np.sqrt(d), jax.random.normal(ks[1], (h, h)) / np.sqrt(h),
              jax.random.normal(ks[2], (h, 1)) / np.sqrt(h)]
    params = jax.device_put(params, NamedSharding(mesh, P()))
    x = jax.device_put(jax.random.normal(ks[3], (batch, d)), NamedSharding(mesh, P("x", None)))
    y = jax.device_put(jnp.sin(x[:, :1]), NamedSharding(mesh, P("x", None)))

    def loss(p, x, y):
        z = jnp.tanh(x @ p[0])
        z = jnp.tanh(z @ p[1])
        return jnp.mean((z @ p[2] - y) ** 2)

    def step(loss_fn):
        @jax.jit
        def f(p, x, y):
            l, g = jax.value_and_grad(loss_fn)(p, x, y)
            return l, g, [w - 0.01 * gw for w, gw in zip(p, g)]
        return f

    jax.set_mesh(mesh)  # explicit-sharding reductions below need the mesh in context
    with jax.enable_x64(True):
        p64 = [w.astype(jnp.float64) for w in params]
        l64, g64 = jax.value_and_grad(loss)(p64, x.astype(jnp.float64), y.astype(jnp.float64))
        g64n = float(jnp.sqrt(sum(jnp.sum(g ** 2) for g in g64)))
    base = None
    for s in ["fp32", "bf16x6", "fp16x3", "bf16x3"]:
        fn = step(loss if s == "fp32" else jaxemu.emulate(loss, scheme=s))
        with jax.default_matmul_precision("highest" if s == "fp32" else None):  # fp32: SGEMM, not TF32
            t = timed(fn, params, x, y)
            l, g, _ = fn(params, x, y)
        with jax.enable_x64(True):
            gerr = float(jnp.sqrt(sum(jnp.sum((gi.astype(jnp.float64) - g6) ** 2) for gi, g6 in zip(g, g64)))) / g64n
        base = base or t
        row = dict(case=f"MLP step {d}-{h}-{h}-1, batch {batch} sharded", scheme=s, ms=t * 1e3, speedup=base / t,
                   loss_rel=abs(float(l) - float(l64)) / abs(float(l64)), grad_error=gerr)
        rows.append(row)
        print(json.dumps(row), flush=True)
    with open(out_path, "w") as f:
        json.dump(dict(devices=[str(d) for d in jax.devices()], jax=jax.__version__, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
