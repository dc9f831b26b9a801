"""The fused CUDA path's host-side logic, on the CPU: the slice layout the
kernel reads, its term table and its launch heuristic (the kernel itself is
tested on the GPU in test_cuda.py)."""
import jax.numpy as jnp
import numpy as np
import pytest

import jaxemu
from jaxemu.backends import cuda_fused as F
from jaxemu.backends import xla as X

FLOAT = ["bf16x3", "bf16x6", "bf16x9", "tf32x3", "fp16x3", "fp16x3_bitcut"]


@pytest.mark.parametrize("name", FLOAT)
def test_slices_are_the_xla_backends_slices_tile_by_tile(name, rng):
    # (L, rows, K/TK, S, TK) in the slice dtype must hold exactly the xla
    # backend's slices (bitwise, NaN/Inf included), zero-padded to whole tiles.
    s = jaxemu.get_scheme(name)
    x = (rng.standard_normal((2, 5, 77)) * np.exp2(rng.integers(-30, 30, (2, 5, 77)))).astype(np.float32)
    x[0, 1, 3], x[1, 2, 4], x[1, 4, 76] = np.inf, np.nan, -np.inf
    tk = F.tile_k(s.fmt)
    kp = -(-77 // tk) * tk
    out, e = F._slices(jnp.asarray(x), s, kp)
    assert out.shape == (2, 5, kp // tk, s.slices, tk) and out.dtype == F._DTYPES[s.fmt]
    got = np.asarray(out.astype(jnp.float32)).transpose(3, 0, 1, 2, 4).reshape(s.slices, 2, 5, kp)
    ref, er = X.split_float(jnp.asarray(x), s, axis=2)
    for i in range(s.slices):
        np.testing.assert_array_equal(got[i, ..., :77], np.asarray(ref[i]))
        assert np.all(got[i, ..., 77:] == 0)
    if s.scaling == "row":
        np.testing.assert_array_equal(np.asarray(e), np.asarray(er)[..., 0])
    else:
        assert e is None


@pytest.mark.parametrize("name", FLOAT)
def test_term_table(name):
    s = jaxemu.get_scheme(name)
    tk = F.tile_k(s.fmt)
    t = F.terms_of(s, 8192)
    assert sorted(zip(t.a, t.b)) == sorted(s.products)
    levels = [i + j for i, j in zip(t.a, t.b)]
    assert levels == sorted(levels, reverse=True)  # smallest terms first, hi*hi last
    for (i, j), e, kc in zip(zip(t.a, t.b), t.exp, t.kc_tiles):
        assert e == -s.lo_scale_bits * (i + j)
        # hi*hi promotes every kc K-steps; level L every kc * 8^L (capped at K)
        assert kc == min(max(1, s.kc * 8 ** (i + j) // tk), 8192 // tk)


def test_launch_heuristic():
    f16 = jaxemu.get_scheme("fp16x3")
    # big squares: 192-wide tiles, no split
    assert F.launch_config(8192, 8192, 8192, 1, f16, 132) == (192, 1)
    # short K: 128-wide tiles (TMA-store epilogue)
    assert F.launch_config(1 << 20, 1024, 256, 1, f16, 132).tile_n == 128
    # N = 1024 with long K: 192 would pad N by 12.5 %, 128 fits
    assert F.launch_config(8192, 1024, 8192, 1, f16, 132).tile_n == 128
    # a small output with a long K splits K to fill the GPU, and never into
    # more pieces than there is work
    cfg = F.launch_config(1024, 256, 1 << 20, 1, f16, 132)
    tiles = (1024 // 128) * (256 // cfg.tile_n)
    assert cfg.splits > 1 and tiles * cfg.splits <= 2 * 132
    assert F.launch_config(1, 1, 64, 1, f16, 132).splits == 1
