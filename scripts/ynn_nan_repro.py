"""A NaN that jaxlib 0.11.2's CPU compiler makes, without jaxemu: compile and
run a StableHLO module (docs/data/jax0112_cpu_ynn_nan_repro.mlir), several
times, and count the NaN in each result.

The module is jaxemu's bf16x6 emulation of ``b - matvec(zeros_like(b))``
with the matvec's products under ``lax.map`` (a: f32[512, 512], b: f32[512,
64] arguments), lowered by jax 0.11.2 on the CPU: plain StableHLO, no custom
call. Its result is b exactly. On jaxlib 0.11.2 some compilations give NaN
(e.g. [14016, 0, 0, 0, 0, 0], [0, 32768, 0, 32768, 0, 0]); with XLA's
YNNPACK fusions off none do:

    python scripts/ynn_nan_repro.py
    XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type= python scripts/ynn_nan_repro.py

(docs/performance.md, stop 39: bicgstab from its default start with an
emulated blocked matvec gave NaN this way.)
"""
import argparse
import os

import jax
import numpy as np
from jax._src import xla_bridge as xb
from jax._src.lib import xla_client as xc

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--module", default=os.path.join(HERE, "..", "docs", "data", "jax0112_cpu_ynn_nan_repro.mlir"))
    p.add_argument("--compilations", type=int, default=6)
    args = p.parse_args(argv)
    text = open(args.module).read()
    backend = xb.get_backend("cpu")
    dev = backend.devices()[0]
    rng = np.random.default_rng(4)
    a = rng.standard_normal((512, 512)).astype(np.float32)
    b = rng.standard_normal((512, 64)).astype(np.float32)
    rows = []
    for _ in range(args.compilations):
        exe = backend.compile_and_load(text, xc.DeviceList((dev,)), xc.CompileOptions())
        out = exe.execute_sharded([jax.device_put(a, dev), jax.device_put(b, dev)])
        res = np.asarray(out.disassemble_into_single_device_arrays()[0][0])
        rows.append(int(np.isnan(res).sum()))
    print(f"jax {jax.__version__}, XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}: NaN per compilation {rows} "
          f"(of {b.size}; the right result is b, no NaN)")


if __name__ == "__main__":
    main()
