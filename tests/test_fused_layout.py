"""The fused CUDA path's host-side logic, on the CPU: the slice layout the
kernel reads, the split kernel's per-thread code (compiled for the host with
nvcc), its term table and its launch heuristic (the kernels themselves are
tested on the GPU in test_cuda.py)."""
import os
import shutil
import subprocess
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxemu
from jaxemu import testing as T
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
    out, e = F.slices_xla(jnp.asarray(x), s, kp)
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


def _host_program(tmp_path_factory, name, extra=()):
    """tests/native/<name>.cu compiled for the host with nvcc (skips without it)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found (CI has the CUDA toolkit: this runs there)")
    exe = tmp_path_factory.mktemp("native") / name
    src = Path(__file__).resolve().parent / "native" / f"{name}.cu"
    subprocess.run([nvcc, "-std=c++17", "-O2", *extra, "-o", str(exe), str(src)], check=True, capture_output=True,
                   timeout=300)
    return exe


@pytest.fixture(scope="module")
def split_check(tmp_path_factory):
    return _host_program(tmp_path_factory, "split_check")


def run_split(exe, tmp_path, x, e, s, kp, transposed):
    """The split kernels' tasks on the host: the slices (L, rows, kp/TK, S,
    TK); ``e`` "find": the exponents found as split_rows_exp_kernel finds
    them, and (slices, exponents (L, rows))."""
    find = isinstance(e, str) and e == "find"
    bsz = x.shape[0]
    rows, k = (x.shape[2], x.shape[1]) if transposed else (x.shape[1], x.shape[2])
    src, dst = tmp_path / "split_in.bin", tmp_path / "split_out.bin"
    with open(src, "wb") as fh:
        np.asarray([F._SLICE_TYPE[s.fmt], s.slices, s.lo_scale_bits, s.split == "bitcut", transposed, bsz, rows, k,
                    kp, 2 if find else e is not None], np.int64).tofile(fh)
        np.ascontiguousarray(x, np.float32).tofile(fh)
        if e is not None and not find:
            np.ascontiguousarray(e, np.int32).tofile(fh)
    r = subprocess.run([str(exe), str(src), str(dst)], capture_output=True, text=True, timeout=60)
    if r.returncode:
        raise RuntimeError(r.stderr.strip())
    tk = F.tile_k(s.fmt)
    dt = np.float32 if s.fmt == "tf32" else (np.float16 if s.fmt == "fp16" else jnp.bfloat16)
    shape = (bsz, rows, kp // tk, s.slices, tk)
    raw = np.fromfile(dst, np.uint8)
    sl = raw[:np.prod(shape) * np.dtype(dt).itemsize].view(dt).reshape(shape)
    return (sl, raw[sl.nbytes:].view(np.int32).reshape(bsz, rows)) if find else sl


def split_operand(shape, transposed, rng):
    """Split test data: exponents over 2^+-30 (fp16's row scaling puts small
    values on its subnormal grid), NaN / Inf / -Inf / -0, and a zero row."""
    x = (rng.standard_normal(shape) * np.exp2(rng.integers(-30, 30, shape))).astype(np.float32)
    flat = x.reshape(-1)
    if flat.size > 8:
        flat[[1, 3, 5, 7]] = [np.inf, np.nan, -np.inf, -0.0]
    bsz, d1, d2 = shape
    if d1 > 1 and d2 > 1:
        (x[0, :, 0] if transposed else x[0, 0, :])[:] = 0
    return x


def same_bits(got, want):
    """Bit-identical slices, NaN payloads aside (any NaN is a NaN)."""
    g, w = np.asarray(got).astype(np.float32), np.asarray(want).astype(np.float32)
    nan = np.isnan(w)
    np.testing.assert_array_equal(np.isnan(g), nan)
    np.testing.assert_array_equal(g[~nan].view(np.uint32), w[~nan].view(np.uint32))


@pytest.mark.parametrize("name", FLOAT)
@pytest.mark.parametrize("transposed", [False, True])
def test_split_kernel_code_gives_the_xla_slices(split_check, tmp_path, name, transposed, rng):
    # Bit for bit the slices of slices_xla (the layout above), for A's rows
    # and B's columns (transposed: B is split as B^T without a transpose):
    # odd shapes, split_operand's data, and the row exponents computed as
    # the backend computes them.
    s = jaxemu.get_scheme(name)
    tk = F.tile_k(s.fmt)
    for bsz, rows, k in [(1, 1, 1), (2, 5, 77), (1, 33, 128), (3, 7, 300)]:
        x = split_operand((bsz, k, rows) if transposed else (bsz, rows, k), transposed, rng)
        kp = -(-k // tk) * tk
        xt = np.swapaxes(x, 1, 2) if transposed else x
        want, e = F.slices_xla(jnp.asarray(xt), s, kp)
        got = run_split(split_check, tmp_path, x, None if e is None else np.asarray(e), s, kp, transposed)
        same_bits(got, want)


@pytest.mark.parametrize("name", ["fp16x3", "fp16x3_bitcut"])
@pytest.mark.parametrize("shape,kp", [((2, 5, 256), 256), ((1, 3, 200), 256), ((1, 4, 1030), 1088),
                                      ((1, 2, 2048), 2048), ((1, 3, 8), 64)])
def test_split_kernel_code_finds_the_row_exponents(split_check, tmp_path, name, shape, kp, rng):
    """The split that finds fp16's row exponents itself (split_rows_exp_kernel's
    work per row, on the host): XLA's exponents (row_scale_exponents: NaN/Inf
    ignored, a zero row 0, subnormal maxima exact) and, with them, XLA's
    slices bit for bit; rows of 1, 2, 4 and 8 tasks per lane, padding."""
    s = jaxemu.get_scheme(name)
    x = split_operand(shape, False, rng)
    x[-1, -1, :] = (np.float32(2.0**-140) * rng.uniform(0.5, 1, shape[2])).astype(np.float32)  # subnormals
    x[-1, 0, :3] = [np.nan, np.inf, -np.inf]
    got_sl, got_e = run_split(split_check, tmp_path, x, "find", s, kp, False)
    # the rule in float64, exactly: 13 - floor(log2 max finite |x|), 0 for none
    amax = np.max(np.where(np.isfinite(x), np.abs(x.astype(np.float64)), 0.0), axis=2)
    want_e = np.where(amax > 0, 13 - (np.frexp(amax)[1] - 1), 0)
    np.testing.assert_array_equal(got_e, want_e)
    assert (got_e == 0).any() and (got_e > 140).any()  # the zero row, the subnormal one
    # XLA on the CPU flushes subnormals (its exponents and slices of that
    # row are zero): the other rows bit for bit against slices_xla, given
    # the exponents; the subnormal row's slices add up to x 2^e.
    want_sl, want_ex = F.slices_xla(x, s, kp)
    keep = np.ones(shape[:2], bool)
    keep[-1, -1] = False
    np.testing.assert_array_equal(np.asarray(want_ex).reshape(shape[:2])[keep], got_e[keep])
    same_bits(np.asarray(got_sl)[keep], np.asarray(want_sl)[keep])
    sub = np.asarray(got_sl)[-1, -1].astype(np.float64)  # (K/TK, S, TK)
    total = sum(sub[:, i, :] * 2.0 ** (-s.lo_scale_bits * i) for i in range(s.slices)).reshape(-1)[:shape[2]]
    np.testing.assert_allclose(total, x[-1, -1].astype(np.float64) * 2.0 ** int(got_e[-1, -1]), rtol=2.0**-20)


@pytest.mark.parametrize("law", ["every-magnitude", "normal"])
@pytest.mark.parametrize("shape", [(2, 5, 256), (1, 3, 200), (1, 4, 1030), (1, 2, 2048), (1, 3, 8), (2, 7, 64),
                                   (1, 3, 2100), (2, 5, 5000), (1, 3, 8192)])
def test_split_kernel_code_takes_auto_row_statistics(split_check, tmp_path, shape, law, rng):
    """The split's stats form (split_rows_exp_kernel with the statistics,
    on the host in the kernel's order: has_exp 3): slices and exponents
    byte for byte those of the split that finds the exponents alone; the
    eight row statistics against float64 (t = a v rounded to float32, as the
    kernel multiplies): max, min nonzero, the non-finite flag and max |t|
    exactly; the sums within (chain + 6) float32 roundings of their sums of
    |terms| (chain: a lane's values plus its xor levels, <= 70 at K = 2048;
    past 2048 a block per row; within cuda_stats.probe_roundings, which auto
    applies); the eighth-root
    sum (the host's powf, the device's approximations) within 1e-5."""
    from jaxemu.backends import cuda_stats
    bsz, rows, k = shape
    if law == "every-magnitude":  # subnormals .. 2^100
        x = np.ldexp(rng.uniform(1, 2, shape) * rng.choice([-1.0, 1.0], shape), rng.integers(-149, 101, shape))
    else:
        x = rng.standard_normal(shape)
    x = x.astype(np.float32)
    coin = rng.integers(0, 100, shape)
    x[coin == 0], x[coin == 1], x[coin == 2], x[coin == 3] = 0, np.inf, np.nan, -np.inf
    x[0, 0, :] = 0
    if rows > 2:
        x[0, 2, :] = np.ldexp(rng.uniform(1, 2, k), rng.integers(-149, -126, k)).astype(np.float32)
    v = rng.uniform(-2, 2, (bsz, k)).astype(np.float32)
    v[:, ::7] = 0
    kp = -(-k // 64) * 64
    src, dst = tmp_path / "in.bin", tmp_path / "out.bin"
    outs = {}
    for mode in (2, 3):
        with open(src, "wb") as fh:
            np.asarray([1, 2, 12, 0, 0, bsz, rows, k, kp, mode], np.int64).tofile(fh)
            x.tofile(fh)
            if mode == 3:
                v.tofile(fh)
        r = subprocess.run([str(split_check), str(src), str(dst)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        outs[mode] = np.fromfile(dst, np.uint8)
    head = bsz * rows * kp * 2 * 2 + 4 * bsz * rows  # slices, then the exponents
    np.testing.assert_array_equal(outs[3][:head], outs[2])
    st = outs[3][head:].view(np.float32).reshape(F.STATS_COUNT, bsz, rows).astype(np.float64)
    a = np.where(np.isfinite(x), x, np.float32(0))
    t = np.abs((a * v[:, None, :]).astype(np.float32).astype(np.float64))
    ad = np.abs(a.astype(np.float64))
    ts = (a * v[:, None, :]).astype(np.float32).astype(np.float64)
    np.testing.assert_array_equal(st[0], ad.max(axis=2))
    np.testing.assert_array_equal(st[1], np.where(ad > 0, ad, np.inf).min(axis=2))
    np.testing.assert_array_equal(st[3], (~np.isfinite(x)).any(axis=2))
    np.testing.assert_array_equal(st[6], t.max(axis=2))
    if kp <= 2048:  # a warp per row: 8 to 32 lanes, then their xor levels
        lanes = 8 if kp <= 64 else 16 if kp <= 128 else 32
        chain = -(-kp // (8 * lanes)) * 8 + int(np.log2(lanes))
    else:  # a block of 256 threads per row: its values, then 5 + 3 levels
        chain = -(-kp // 2048) * 8 + 8
    assert chain <= 70 and chain + 1 <= cuda_stats.probe_roundings(k)  # (+1: the product's rounding)
    bound = (chain + 6) * 2.0 ** -24
    for i, want, terms in ((2, ad.sum(axis=2), ad.sum(axis=2)), (4, ts.sum(axis=2), t.sum(axis=2)),
                           (5, t.sum(axis=2), t.sum(axis=2))):
        assert np.all(np.abs(st[i] - want) <= bound * terms), (i, np.max(np.abs(st[i] - want) / np.maximum(terms, 1e-300)))
    np.testing.assert_allclose(st[7], (t ** 0.125).sum(axis=2), rtol=1e-5)


def test_split_kernel_code_takes_four_slices(split_check, tmp_path, rng):
    # FloatSplit allows 4 slices; the fused path sends such schemes to the
    # kernels like the catalogue's.
    from jaxemu.schemes import FloatSplit
    s = FloatSplit("bf16x4_custom", "bf16", 4, ((0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (2, 0), (0, 3), (3, 0)))
    for transposed in (False, True):
        x = split_operand((2, 40, 37) if transposed else (2, 37, 40), transposed, rng)
        want, _ = F.slices_xla(jnp.asarray(np.swapaxes(x, 1, 2) if transposed else x), s, 64)
        same_bits(run_split(split_check, tmp_path, x, None, s, 64, transposed), want)


@pytest.mark.parametrize("name", ["bf16x6", "bf16x9"])
def test_split_kernel_code_on_tiny_values(split_check, tmp_path, name, rng):
    # XLA's CPU flushes subnormal arithmetic, so slices_xla is no reference
    # for tiny values; the kernel keeps them. Three bf16 slices reassemble x
    # exactly down to |x| >= 2^-100 and, below, within half of bf16's
    # subnormal spacing (2^-133): the slices round to nearest on bf16's grid.
    s = jaxemu.get_scheme(name)
    x = np.ldexp(rng.uniform(-2, 2, (2, 9, 70)), rng.integers(-149, -90, (2, 9, 70))).astype(np.float32)
    got = run_split(split_check, tmp_path, x, None, s, 128, False)
    parts = got.astype(np.float64).transpose(3, 0, 1, 2, 4).reshape(s.slices, 2, 9, 128)
    back = X.reassemble(list(parts), s)[..., :70]
    x64 = x.astype(np.float64)
    big = np.abs(x64) >= 2.0 ** -100
    assert big.any() and (~big & (x64 != 0)).any()
    np.testing.assert_array_equal(back[big], x64[big])
    assert np.abs(back - x64).max() <= 2.0 ** -134
    assert np.all(parts[..., 70:] == 0)


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
    f16, b3 = jaxemu.get_scheme("fp16x3"), jaxemu.get_scheme("bf16x3")
    # big squares: 192-wide tiles where the scheme has them, no split
    assert F.launch_config(8192, 8192, 8192, 1, b3, 132) == (192, 1)
    # fp16's two partial accumulators fit 128-wide tiles only
    assert F.launch_config(8192, 8192, 8192, 1, f16, 132) == (128, 1)
    # short K: 128-wide tiles (TMA-store epilogue)
    assert F.launch_config(1 << 20, 1024, 256, 1, b3, 132).tile_n == 128
    # N = 1024 with long K: 192 would pad N by 12.5 %, 128 fits
    assert F.launch_config(8192, 1024, 8192, 1, b3, 132).tile_n == 128
    # 2048^3: 192-wide is 176 tiles, 2 waves on 132 SMs with the second a
    # third full; 128-wide is 256 tiles, 2 nearly full waves
    assert F.launch_config(2048, 2048, 2048, 1, jaxemu.get_scheme("tf32x3"), 132).tile_n == 128
    # on many tiles the last wave hardly matters: 192 wherever it pads little
    assert F.launch_config(16384, 16384, 16384, 1, b3, 132).tile_n == 192
    # a small output with a long K splits K to fill the GPU, and never into
    # more pieces than there is work
    cfg = F.launch_config(1024, 256, 1 << 20, 1, f16, 132)
    tiles = (1024 // 128) * (256 // cfg.tile_n)
    assert cfg.splits > 1 and tiles * cfg.splits <= 2 * 132
    assert F.launch_config(1, 1, 64, 1, f16, 132).splits == 1


def test_f32_operand_kernels_match_the_generated_ones_and_run_where_they_pay(monkeypatch):
    # cuda_fused.F32_KERNELS mirrors generate.py's F32_CONFIGS; the kernel
    # runs only where it was built, by default on outputs of up to two waves
    # of tiles (f32_pays), with the switch at "1" wherever it can.
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "generate", Path(__file__).resolve().parents[1] / "ffi" / "fused" / "generate.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert tuple((fmt, *gen.slice_counts(sl), sum(gen.f32_terms(t))) for fmt, sl, t in gen.F32_CONFIGS) == F.F32_KERNELS
    x6 = jaxemu.get_scheme("bf16x6")
    monkeypatch.delenv("JAXEMU_CUDA_F32_OPERANDS", raising=False)
    waves = F.F32_MAX_WAVES * F.sm_count()  # 128 x 128 tiles
    assert F.f32_kernel(x6, 1024, 1 << 20, 256)  # the k-means update: 16 tiles
    # an exact operand (the update's one-hot) too: measured faster there than on the slice path
    assert F.f32_kernel(x6.with_exact(True, False), 1024, 1 << 20, 256)
    assert F.f32_kernel(x6, 128, 64, 128 * waves) and not F.f32_kernel(x6, 128, 64, 128 * waves + 4)
    assert not F.f32_kernel(x6, 8192, 8192, 8192) and not F.f32_kernel(x6, 2048, 2048, 2048, batch=8)
    monkeypatch.setenv("JAXEMU_CUDA_F32_OPERANDS", "0")
    assert not F.f32_kernel(x6, 1024, 1 << 20, 256)
    monkeypatch.setenv("JAXEMU_CUDA_F32_OPERANDS", "1")
    assert F.f32_kernel(x6, 8192, 8192, 8192)
    for name in ("bf16x3", "bf16x6", "bf16x9"):
        s = jaxemu.get_scheme(name)
        assert F.f32_kernel(s, 8, 256, 128) and F.f32_kernel(s.with_exact(True, False), 8, 256, 128), name
        assert F.f32_kernel(s.with_exact(False, True), 8, 4, 4), name
        assert not F.f32_kernel(s, 8, 258, 128) and not F.f32_kernel(s, 8, 256, 130), name  # TMA's 16-byte rows
    # fp16x3 too (its rows scaled in the kernel), and its exact-operand
    # forms; by default on small outputs without an exact operand (f32_fp16_pays)
    x3 = jaxemu.get_scheme("fp16x3")
    monkeypatch.delenv("JAXEMU_CUDA_F32_OPERANDS", raising=False)
    assert F.f32_kernel(x3, 1024, 1 << 20, 256) and F.f32_kernel(x3, 1024, 1 << 19, 512)
    assert not F.f32_kernel(x3.with_exact(True, False), 1024, 1 << 20, 256)
    assert not F.f32_kernel(x3, 1024, 1 << 18, 1024) and not F.f32_kernel(x3, 2048, 2048, 2048)
    monkeypatch.setenv("JAXEMU_CUDA_F32_OPERANDS", "1")
    assert F.f32_kernel(x3, 8, 256, 128) and F.f32_kernel(x3.with_exact(True, False), 8, 256, 128)
    assert F.f32_kernel(x3.with_exact(False, True), 8, 4, 4) and not F.f32_kernel(x3, 8, 258, 128)
    assert not F.f32_kernel(jaxemu.get_scheme("fp16x3_bitcut"), 8, 256, 128)  # truncated slices
    # tf32x3 (B's cut transposes it: wgmma reads tf32 K-major only), and its
    # exact-operand forms; by default on outputs of up to one wave of tiles
    # (f32_tf32_pays): the k-means update, not 2048^3
    t3 = jaxemu.get_scheme("tf32x3")
    assert F.f32_kernel(t3, 8, 256, 128) and F.f32_kernel(t3.with_exact(True, False), 8, 256, 128)
    assert F.f32_kernel(t3.with_exact(False, True), 8, 4, 4) and not F.f32_kernel(t3, 8, 256, 130)
    monkeypatch.delenv("JAXEMU_CUDA_F32_OPERANDS", raising=False)
    assert F.f32_kernel(t3, 1024, 1 << 20, 256) and F.f32_kernel(t3.with_exact(True, False), 1024, 1 << 20, 256)
    assert F.f32_kernel(t3, 128, 512, 128 * F.sm_count()) and not F.f32_kernel(t3, 128, 512, 128 * F.sm_count() + 4)
    assert not F.f32_kernel(t3, 2048, 2048, 2048) and not F.f32_kernel(t3, 8192, 8192, 8192)
    # not at K <= SHORT_K_HALF_KC, where the slice kernel promotes every half K-tile (kernel_kc)
    assert not F.f32_kernel(t3, 8, 256, 128) and F.f32_kernel(t3, 8, 260, 128)
    monkeypatch.setenv("JAXEMU_CUDA_F32_OPERANDS", "1")
    # fp16x3's exponents found in the kernel: by default where the passes
    # it saves read >= 1 GiB (the k-means update's 5 GiB), never for an
    # exact operand or bf16 slices; "1" anywhere, "0" nowhere
    monkeypatch.delenv("JAXEMU_CUDA_F32_OPERANDS", raising=False)
    monkeypatch.delenv("JAXEMU_CUDA_F32_SCALES_IN_KERNEL", raising=False)
    in_kernel = F.f32_scales_in_kernel
    assert in_kernel(x3, 1024, 1 << 20, 256) and in_kernel(x3, 1024, 1 << 18, 1024)
    assert not in_kernel(x3, 512, 1 << 16, 512) and not in_kernel(x3, 8, 256, 128)
    assert in_kernel(x3, 512, 1 << 16, 512, batch=4)  # (4 x 256 MiB)
    assert not in_kernel(x3.with_exact(True, False), 1024, 1 << 20, 256)
    assert not in_kernel(x6, 1024, 1 << 20, 256)
    monkeypatch.setenv("JAXEMU_CUDA_F32_SCALES_IN_KERNEL", "1")
    assert in_kernel(x3, 8, 256, 128) and not in_kernel(x3.with_exact(False, True), 8, 256, 128)
    monkeypatch.setenv("JAXEMU_CUDA_F32_SCALES_IN_KERNEL", "0")
    assert not in_kernel(x3, 1024, 1 << 20, 256)
    monkeypatch.delenv("JAXEMU_CUDA_F32_SCALES_IN_KERNEL")
    # promotion intervals in the kernel's 32-wide K-tiles: twice the 64-wide count
    t32, t64 = F.terms_of(x6, 1 << 16, 32), F.terms_of(x6, 1 << 16)
    assert t32.kc_tiles == tuple(2 * x for x in t64.kc_tiles) and t32.a == t64.a and t32.b == t64.b
    # K-splits only where the 128 x 128 tiles cannot fill the GPU
    assert F.f32_splits(8192, 8192, 8192, 1) == 1
    sp = F.f32_splits(1024, 256, 1 << 20, 1)
    assert 2 <= sp <= F.MAX_SPLITS and 16 * sp <= 2 * F.sm_count()


def test_f32_row_exponents_are_the_slice_paths(rng):
    """fp16x3's exponents on the FP32-operand kernel: A's rows and B's
    columns as the split computes them (xla.row_scale_exponents), the
    caller's where given, zero for an exact operand (its one slice is
    unscaled, as exact_slices')."""
    s = jaxemu.get_scheme("fp16x3")
    a = (rng.standard_normal((2, 5, 40)) * np.exp2(rng.integers(-30, 30, (2, 5, 1)))).astype(np.float32)
    b = (rng.standard_normal((2, 40, 7)) * np.exp2(rng.integers(-30, 30, (2, 1, 7)))).astype(np.float32)
    ea, eb = F.f32_row_exponents(a, s, 0), F.f32_row_exponents(b, s, 1)
    assert ea.shape == (2, 5) and eb.shape == (2, 7) and ea.dtype == eb.dtype == jnp.int32
    np.testing.assert_array_equal(ea, np.asarray(X.row_scale_exponents(a, 2))[..., 0])
    np.testing.assert_array_equal(eb, np.asarray(X.row_scale_exponents(b, 1))[:, 0, :])
    given = jnp.arange(10, dtype=jnp.int32).reshape(2, 5, 1)
    np.testing.assert_array_equal(F.f32_row_exponents(a, s, 0, given), np.arange(10).reshape(2, 5))
    exact = s.with_exact(True, False)
    np.testing.assert_array_equal(F.f32_row_exponents(a, exact, 0, given), np.zeros((2, 5)))
    np.testing.assert_array_equal(F.f32_row_exponents(b, exact, 1), eb)


def test_register_a_fragments_pair_adjacent_k_steps(tmp_path_factory):
    """tests/native/f32_layout_check.cu: in the FP32-operand kernels with
    A's slices in registers, every thread's A fragment pairs K-steps k, k + 1
    (k even) of one row, adjacent and 8-byte aligned in the FP32 stage
    (transform.cuh: cut_a_regs), and covers the tile once; in every
    configuration the cut's runs lie at run 0's offset plus the constant
    the kernel adds, in all four layouts, and cover each tile once; the
    compiled-in term tables are terms_of's. Needs CUTLASS's headers
    (JAXEMU_CUTLASS_DIR or .cutlass/, BUILD.md)."""
    root = Path(__file__).resolve().parents[1]
    cutlass = Path(os.environ.get("JAXEMU_CUTLASS_DIR") or root / ".cutlass")
    if not (cutlass / "include" / "cute" / "tensor.hpp").exists():
        pytest.skip(f"no CUTLASS headers at {cutlass} (JAXEMU_CUTLASS_DIR)")
    exe = _host_program(tmp_path_factory, "f32_layout_check",
                        ("-arch=sm_90a", "--expt-relaxed-constexpr", f"-I{root / 'ffi'}", f"-I{cutlass / 'include'}"))
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    register_a = [c for c in F.F32_KERNELS if c[0] == "bf16"]  # (fp16's kernels keep A in shared memory)
    runs = out.stdout.count(" runs: ok")  # every configuration, and one with A in registers
    assert out.returncode == 0 and runs == len(F.F32_KERNELS) + 1, out.stdout
    assert out.stdout.count(": ok") - runs == len(register_a), out.stdout


def test_kernel_table_matches_the_generated_kernels():
    # cuda_fused.KERNELS mirrors ffi/fused/generate.py's CONFIGS (the
    # instantiations that exist), so the backend never asks for a kernel
    # that was not built, and takes every scheme one was built for.
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "generate", Path(__file__).resolve().parents[1] / "ffi" / "fused" / "generate.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert tuple(gen.CONFIGS) == F.KERNELS
    assert tuple(gen.HALF_TILE) == F.HALF_TILE_KERNELS
    assert len({gen.config_name(c[0], c[1], c[2], c[4]) for c in gen.CONFIGS}) == len(gen.CONFIGS)
    from jaxemu.schemes import FloatSplit
    for name in FLOAT:  # every catalogue scheme has a kernel
        assert F.kernel_tiles(jaxemu.get_scheme(name)), name
    x4 = FloatSplit("bf16x4_custom", "bf16", 4, ((0, 0), (0, 1), (1, 0)))
    f16x6 = FloatSplit("fp16x6_custom", "fp16", 3, ((0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (2, 0)),
                       lo_scale_bits=11, scaling="row")
    assert F.kernel_tiles(x4) == () and F.kernel_tiles(f16x6) == ()
    assert F.kernel_tiles(f16x6.replace(lo_scale_bits=0)) == ()  # no 3-slice fp16 kernel at all


def test_catalogue_schemes_get_kernels_compiled_for_their_term_counts():
    # The catalogue's schemes run on a kernel whose term counts are template
    # parameters (one wgmma group per K-tile); a custom term list of a slice
    # type and count that has kernels runs on the 128-wide run-time-count one.
    from jaxemu.schemes import FloatSplit
    expect = {"bf16x3": (3, 0), "bf16x6": (6, 0), "bf16x9": (9, 0), "tf32x3": (3, 0), "fp16x3": (1, 2),
              "fp16x3_bitcut": (1, 2)}
    for name, groups in expect.items():
        s = jaxemu.get_scheme(name)
        assert F.term_groups(s) == groups, name
        fixed = tuple(sorted(c[2] for c in F.KERNELS if c[:2] == (s.fmt, s.slices) and c[4] == groups))
        assert fixed and F.kernel_tiles(s) == fixed, name
    bf16x4 = FloatSplit("bf16x4_custom", "bf16", 2, ((0, 0), (0, 1), (1, 0), (1, 1)))
    assert F.term_groups(bf16x4) == (4, 0) and F.kernel_tiles(bf16x4) == (128,)
    fp16x2 = FloatSplit("fp16x2_custom", "fp16", 2, ((0, 0), (0, 1)), lo_scale_bits=12, scaling="row")
    assert F.term_groups(fp16x2) == (1, 1) and F.kernel_tiles(fp16x2) == (128,)
    # Three weights (hi*hi, the corrections, lo*lo): more than two partial accumulators.
    fp16x4 = FloatSplit("fp16x4_custom", "fp16", 2, ((0, 0), (0, 1), (1, 0), (1, 1)), lo_scale_bits=12,
                        scaling="row")
    assert F.term_groups(fp16x4) == (1, 3) and F.kernel_tiles(fp16x4) == ()
    fp16_3w = fp16x4.replace(products=((0, 0), (0, 1), (1, 1)))  # 1 + 2 terms, but three weights
    assert F.term_groups(fp16_3w) == (1, 2) and F.kernel_tiles(fp16_3w) == ()


@pytest.fixture(scope="module")
def chunk_check(tmp_path_factory):
    return _host_program(tmp_path_factory, "chunk_check")


def run_chunk_check(exe, k_tiles, splits, terms, sub=None):
    """The kernel's plan and K-loop schedule for terms [(exp, kc_tiles)] in
    kernel order (``sub``: Problem::kc_sub): (plan line (groups, n1, kc0,
    kc1, sub0), chunks (split, kt_begin, kt_end, promotes_group1))."""
    extra = [] if sub is None else [f"sub={sub}"]
    out = subprocess.run([str(exe), str(k_tiles), str(splits)] + extra + [f"{e}:{kc}" for e, kc in terms],
                         check=True, capture_output=True, text=True, timeout=60).stdout.splitlines()
    if out[0].startswith("refused"):
        return out[0], None
    plan = tuple(int(v) for v in out[0].split()[1:])
    return plan, np.array([[int(v) for v in line.split()] for line in out[1:]]).reshape(-1, 4)


X3_FP16 = [(-12, 8), (-12, 8), (0, 1)]  # fp16x3 at kc = 64: the corrections, then hi*hi
X6_BF16 = [(0, 64)] * 3 + [(0, 8)] * 2 + [(0, 1)]


@pytest.mark.parametrize("k_tiles,splits,terms,plan", [
    (1, 1, [(0, 1)], (1, 0, 1, 1)),
    (5, 3, X3_FP16, (2, 2, 1, 8)),
    (17, 7, [(-12, 8), (-12, 8), (0, 2)], (2, 2, 2, 8)),
    (16384, 8, X3_FP16, (2, 2, 1, 8)),  # fp16x3, the k-means update
    (16384, 32, X6_BF16, (1, 0, 1, 1)),  # bf16x6: one weight, one partial
    (100, 9, [(-12, 7), (-12, 5), (0, 3)], (2, 2, 3, 3)),  # group 1's interval: a multiple of group 0's
    (40, 3, [(-12, 2), (-12, 2), (0, 4)], (2, 2, 2, 2)),  # group 1 asks for less: group 0 follows
    (3, 3, [(0, 1)] * 9, (1, 0, 1, 1)),
])
def test_k_splits_share_the_k_tiles_equally(chunk_check, k_tiles, splits, terms, plan):
    # The kernel's term plan and K-loop schedule (params.h: plan_terms,
    # scheduler.cuh: KChunks, compiled for the host): terms of equal weight
    # share a partial (group 0: the largest weight; group 1 first in the
    # order), each promoting at the least of its terms' intervals, group 1's
    # rounded to a multiple of group 0's. Every K-tile exactly once; each
    # split one contiguous K range, equal to within one K-tile (whole chunks
    # of a term-major list per split once gave one split 10x the work of the
    # others); chunks inside one kc0-aligned run, aligned from K = 0 whatever
    # the split; group 1 promotes at its kc1-aligned points and at the end of
    # each split's range, nowhere else.
    got_plan, chunks = run_chunk_check(chunk_check, k_tiles, splits, terms)
    assert got_plan == plan + (1,)
    _, _, kc0, kc1 = plan
    seen = np.zeros(k_tiles, int)
    ranges = {}
    for sp, b, e, p1 in chunks:
        assert 0 <= b < e <= k_tiles and b // kc0 == (e - 1) // kc0
        seen[b:e] += 1
        lo, hi = ranges.get(sp, (b, b))
        assert b == hi  # chunks in order, contiguous
        ranges[sp] = (lo, e)
    assert np.all(seen == 1)
    for sp, b, e, p1 in chunks:
        assert e == ranges[sp][1] or e % kc0 == 0
        assert p1 == int(e == ranges[sp][1] or e % kc1 == 0)
    sizes = [hi - lo for lo, hi in ranges.values()]
    assert len(ranges) == min(splits, k_tiles) and max(sizes) - min(sizes) <= 1, ranges


def _schedule_by_division(tiles_m, tiles_n, batch, splits):
    """The persistent grid's work items as scheduler.cuh: TileScheduler
    defines them (split-major, then batch, then groups of 8 tile rows walked
    column by column), by plain integer division."""
    out = []
    per_batch, per_group = tiles_m * tiles_n, 8 * tiles_n
    for idx in range(tiles_m * tiles_n * batch * splits):
        outer, t = divmod(idx, per_batch)
        split, l = divmod(outer, batch)
        group, in_group = divmod(t, per_group)
        rows = min(8, tiles_m - 8 * group)
        n_blk, r = divmod(in_group, rows)
        out.append((8 * group + r, n_blk, l, split))
    return np.array(out).reshape(-1, 4)


@pytest.mark.parametrize("tiles_m,tiles_n,batch,splits", [
    (1, 1, 1, 1), (8, 3, 1, 1), (13, 7, 3, 2), (64, 2048, 1, 1),  # kNN's 8192 x 262144 at 128 x 128
    (21, 5, 5, 3), (3, 1000, 2, 1), (9, 1, 1, 7),
])
def test_tile_schedule_by_multiplication_is_the_division_schedule(chunk_check, tiles_m, tiles_n, batch, splits):
    # The kernel computes each work item's coordinates with multipliers made
    # on the host (FastDiv: no division on the GPU between two tiles): the
    # same items as dividing, each tile of every split and batch element
    # exactly once, the last group of fewer than 8 tile rows included.
    out = subprocess.run([str(chunk_check), "sched", str(tiles_m), str(tiles_n), str(batch), str(splits)],
                         check=True, capture_output=True, text=True, timeout=60).stdout
    got = np.array([[int(v) for v in line.split()] for line in out.splitlines()]).reshape(-1, 4)
    want = _schedule_by_division(tiles_m, tiles_n, batch, splits)
    np.testing.assert_array_equal(got, want)
    assert len({tuple(r) for r in got}) == tiles_m * tiles_n * batch * splits


def test_fast_division_is_exact_below_2_to_31(chunk_check):
    # FastDiv (one multiply and shift for n / d) against the division, at
    # the range's ends and around the multiples of d nearest 2^31, for
    # divisors from 1 to 2^31 - 1: powers of two, their neighbours, primes.
    ds = sorted({1, 2, 3, 5, 7, 8, 9, 127, 128, 129, 1000, 2048, 8 * 2048, 65535, 65536, 65537, 131071,
                 (1 << 24) - 3, (1 << 30) - 1, 1 << 30, (1 << 30) + 1, (1 << 31) - 1})
    out = subprocess.run([str(chunk_check), "div"] + [str(d) for d in ds], check=True, capture_output=True,
                         text=True, timeout=120).stdout
    bad = {int(d): int(b) for d, b in (line.split() for line in out.splitlines())}
    assert sorted(bad) == ds and not any(bad.values()), bad


@pytest.mark.parametrize("terms,why", [
    ([(-24, 64), (-12, 8), (0, 1)], "distinct term weights"),  # three weights: no kernel has three partials
    ([(0, 1), (-12, 8)], "smaller weight must come first"),
])
def test_term_plan_refuses(chunk_check, terms, why):
    plan, _ = run_chunk_check(chunk_check, 4, 1, terms)
    assert isinstance(plan, str) and why in plan


@pytest.mark.parametrize("sub,terms,expect", [
    (2, X3_FP16, (2, 2, 1, 8, 2)),  # fp16x3 at kc = 32: hi*hi twice per K-tile, the corrections every 8
    (2, [(0, 1)] * 3, (1, 0, 1, 1, 2)),  # tf32x3 at kc = 16
    (2, [(-12, 8), (-12, 8), (0, 2)], "one K-tile"),  # hi*hi's interval two K-tiles: no promotion within one
    (4, X3_FP16, "kc_sub must be 1 or 2"),
])
def test_term_plan_promotes_within_a_k_tile(chunk_check, sub, terms, expect):
    # Problem::kc_sub: group 0 (hi*hi) promotes twice per K-tile,
    # only where its interval is one K-tile (mainloop.cuh); the chunks are
    # those of kc_sub = 1.
    plan, chunks = run_chunk_check(chunk_check, 5, 1, terms, sub=sub)
    if isinstance(expect, str):
        assert isinstance(plan, str) and expect in plan
        return
    assert plan == expect
    assert np.array_equal(chunks, run_chunk_check(chunk_check, 5, 1, terms)[1])


def test_kc_below_a_k_tile_promotes_within_it():
    # The scheme's kc below one K-tile becomes promotions within it: every
    # half K-tile (32 K-steps of 64 for fp16 and bf16, 16 of 32 for tf32),
    # the shortest interval the kernel has; kc >= a K-tile: whole tiles.
    x3 = jaxemu.get_scheme("fp16x3")
    t32 = jaxemu.get_scheme("tf32x3")
    assert F.terms_of(x3, 4096).kc_sub == 1 and F.terms_of(x3.replace(kc=128), 4096).kc_sub == 1
    t = F.terms_of(x3.replace(kc=32), 4096)  # hi*hi (last) every half K-tile, the corrections every 4 K-tiles
    assert t.kc_sub == 2 and t.kc_tiles == (4, 4, 1) and t.exp == F.terms_of(x3, 4096).exp
    assert F.terms_of(x3.replace(kc=48), 4096).kc_sub == 2
    assert F.terms_of(x3.replace(kc=16), 4096).kc_sub == 2 and F.terms_of(x3.replace(kc=1), 4096).kc_sub == 2
    assert F.terms_of(t32.replace(kc=16), 4096).kc_sub == 2 and F.terms_of(t32, 4096).kc_sub == 1
    assert F.terms_of(x3.replace(kc=None), 4096).kc_sub == 1
    # At K <= SHORT_K_HALF_KC, fp16 and tf32 slices promote at half the
    # scheme's kc (kernel_kc): hi*hi every half K-tile on the slice kernel,
    # every 32-step K-tile on the FP32-operand kernel; not bf16's
    short = F.SHORT_K_HALF_KC
    assert F.kernel_kc(x3, short) == 32 and F.kernel_kc(x3, short + 1) == 64
    assert F.terms_of(x3, short).kc_sub == 2 and F.terms_of(x3, short + 64).kc_sub == 1
    assert F.terms_of(x3, 128, F.F32_TILE_K).kc_sub == 1 and F.terms_of(x3, 128, F.F32_TILE_K).kc_tiles[-1] == 1
    assert F.terms_of(t32, 128).kc_sub == 2 and F.kernel_kc(t32, 128) == 16
    x6 = jaxemu.get_scheme("bf16x6")
    assert F.kernel_kc(x6, 128) == 64 and F.terms_of(x6, 128).kc_sub == 1
    assert F.kernel_kc(x3.replace(kc=None), 128) is None
    # the kernels that promote within a K-tile: the fixed-term fp16 and tf32
    # ones at 128-wide tiles (short K's width), exact forms included
    for s in (x3, t32, x3.with_exact(True, False), t32.with_exact(False, True)):
        assert F.has_half_tile_kernel(s, 128) and not F.has_half_tile_kernel(s, 192), s
    assert not F.has_half_tile_kernel(x6, 128) and not F.has_half_tile_kernel(x3.replace(products=((0, 0), (1, 0))), 128)


def _kernel_twin(name, out_types):
    """A stand-in for the fused kernel's FFI call, in plain JAX on the CPU:
    the weighted sum of the slice products the term table lists, the
    row/column scaling undone when passed, the result in the first of the
    partial sums. Not the kernel's arithmetic, but a
    function of exactly what the kernel is given: enough to check the glue
    around it."""
    if name == "jaxemu_fused_split":
        return _split_twin(out_types)
    if name == "jaxemu_fused_split_stats":
        return _split_stats_twin(out_types)

    def call(a_sl, b_sl, row, col, a32, b32, amax, term_a, term_b, term_exp, kc_tiles, kc_sub, splits, tile_n,
             b32_rows):
        def slices(x):  # (L, R, T, S, TK) -> (S, L, R, T * TK)
            s = x.shape
            return jnp.moveaxis(x.astype(jnp.float32), 3, 0).reshape(s[3], s[0], s[1], s[2] * s[4])
        a, b = slices(a_sl), slices(b_sl)
        c = sum(jnp.einsum("lmk,lnk->lmn", a[i], b[j], precision="highest") * 2.0 ** int(e)
                for i, j, e in zip(term_a, term_b, term_exp))
        if row.size:
            c = X.ldexp(c, -(row[:, :, None] + col[:, None, :]))
        if a32.size or b32.size:  # the fix-up: unless max|A| max|B| K < 2^100, values that are not finite from the FP32 operands
            assert int(splits) == 1 and amax.shape == (2,)
            fp32 = jnp.einsum("lmk,lnk->lmn" if b32_rows else "lmk,lkn->lmn", a32, b32, precision="highest")
            fits = (amax[0] * amax[1]) * np.float32(a32.shape[2]) < np.float32(2.0 ** 100)
            c = jnp.where(fits | jnp.isfinite(c), c, fp32)
        return jnp.concatenate([c[None], jnp.zeros((int(splits) - 1,) + c.shape, c.dtype)])
    return call


def _nan_bits(x):
    """x's float32 bits with every NaN as one quiet NaN: equal bits up to
    NaN's sign and payload, which FP32's rules leave open."""
    return np.where(np.isnan(x), np.float32(np.nan), x).view(np.uint32)


def use_twins(monkeypatch, twin=None):
    """The slice path's kernels replaced by their twins (``_kernel_twin``),
    the FP32-operand kernel off: these tests check the slice path's glue."""
    monkeypatch.setattr(jax.ffi, "ffi_call", twin or _kernel_twin)
    monkeypatch.setenv("JAXEMU_CUDA_F32_OPERANDS", "0")


def _split_twin(out_types):
    """A stand-in for the split kernel's FFI call: slices_xla of the catalogue
    scheme its attributes describe, the row exponents checked against XLA's
    (or, with find_exp, returned: XLA's), and the bits of max |x|."""
    out_type = out_types[0]

    def call(x, e, slice_type, lo_scale_bits, truncate, transposed, find_exp):
        fmt = ("bf16", "fp16", "tf32")[slice_type]
        s = next(jaxemu.get_scheme(n) for n in FLOAT
                 if jaxemu.get_scheme(n).fmt == fmt and jaxemu.get_scheme(n).slices == out_type.shape[3]
                 and jaxemu.get_scheme(n).lo_scale_bits == lo_scale_bits
                 and (jaxemu.get_scheme(n).split == "bitcut") == bool(truncate))
        sl, ex = F.slices_xla(jnp.swapaxes(x, 1, 2) if transposed else x, s, out_type.shape[2] * out_type.shape[4])
        assert sl.shape == out_type.shape and sl.dtype == out_type.dtype
        assert (ex is None) == (e.size == 0 and not find_exp) and not (find_exp and (transposed or e.size))
        assert out_types[2].shape == (ex.shape[:2] if find_exp else (1,))
        found = ex.reshape(out_types[2].shape).astype(jnp.int32) if find_exp else jnp.zeros((1,), jnp.int32)
        return sl, jax.lax.bitcast_convert_type(F.abs_max(x), jnp.int32)[None], found
    return call


def _xla_row_stats(a, v=None):
    """The row statistics kernel's eight (four without the probe), by XLA's
    reductions as auto computes them without kernels (auto.operand_stats)."""
    from jaxemu import auto
    a = a.astype(jnp.float32)
    a_max, a_min, a_l1, a_bad = auto._side(a, 2)
    if v is None:
        return a_max, a_min, a_l1, a_bad
    av = jnp.where(jnp.isfinite(a), a, 0.0) * v[:, None, :]
    t = jnp.abs(av)
    return (a_max, a_min, a_l1, a_bad, auto._blocked_sum(av), auto._blocked_sum(t), jnp.max(t, axis=2, initial=0.0),
            jnp.sum(auto._root8(t), axis=2))


def _split_stats_twin(out_types):
    """A stand-in for the split's stats form (jaxemu_fused_split_stats):
    the split that finds fp16's row exponents (``_split_twin``) and, with
    the probe, the row statistics as XLA computes them (``_xla_row_stats``)."""
    split = _split_twin(out_types[:3])

    def call(x, v, slice_type, lo_scale_bits, truncate):
        probe = v.shape != (0,)  # (0,): the extremes alone
        count = F.STATS_COUNT if probe else F.EXTREMES_COUNT
        assert slice_type == 1 and out_types[3].shape == (count,) + x.shape[:2]
        assert not probe or v.shape == (x.shape[0], x.shape[2])
        sl, amax, e = split(x, jnp.zeros((0,), jnp.int32), slice_type, lo_scale_bits, truncate, 0, 1)
        return sl, amax, e, jnp.stack(_xla_row_stats(x, v if probe else None))
    return call


def test_split_with_the_extremes_alone(monkeypatch, rng):
    """split_rows_with_stats without a probe (a data test that probes B's
    side): the same split as with the probe, and the four extremes of the
    statistics' own pass (max, min nonzero and sum of |a|, the non-finite
    flag), with the kernels replaced by their twins on the CPU."""
    use_twins(monkeypatch)
    monkeypatch.setenv("JAXEMU_CUDA_SPLIT_STATS", "1")
    a = T.sample("wide-exp", (2, 40, 200), rng)
    a[0, 3], a[1, 5, 7] = 0.0, np.inf
    a = jnp.asarray(a)
    v = jnp.asarray(T.sample("uniform(-1,1)", (2, 200), rng))
    split4, four = F.split_rows_with_stats(a, None, 96)
    split8, eight = F.split_rows_with_stats(a, v, 96)
    assert len(four) == F.EXTREMES_COUNT and len(eight) == F.STATS_COUNT
    for x, y in zip(split4, split8):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    for x, y in zip(four, _xla_row_stats(a)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert float(four[3][1, 5]) == 1.0 and float(four[0][0, 3]) == 0.0 and np.isinf(float(four[1][0, 3]))


def _slice_path_product(a, b, scheme, scales=None, fits=False, presplit=(None, None)):
    """The cuda backend's product as auto calls it, on the slice path (the
    kernels' twins where use_twins is on), XLA's FP32 for fp32."""
    return X.canonical_dot(a, b, scheme, "cuda", fits=fits) if scheme.name == "fp32" else \
        F.fused_product(a, b, scheme, scales, fits, presplit)


def set_split_stats(monkeypatch, switch):
    """JAXEMU_CUDA_SPLIT_STATS set to switch, or removed where switch is
    "unset" (the backend's default)."""
    if switch == "unset":
        monkeypatch.delenv("JAXEMU_CUDA_SPLIT_STATS", raising=False)
    else:
        monkeypatch.setenv("JAXEMU_CUDA_SPLIT_STATS", switch)


def _auto_on_the_slice_path(monkeypatch, switch, calls, a, b):
    """auto (test_auto's AUTO) of a x b on the cuda backend's slice path
    with JAXEMU_CUDA_SPLIT_STATS = switch: JAX's caches and the recorded
    kernel calls cleared first."""
    from test_auto import AUTO

    from jaxemu import auto
    from jaxemu.backends import cuda_lowering
    set_split_stats(monkeypatch, switch)
    jax.clear_caches()
    calls.clear()
    f = jax.jit(lambda a, b: auto.auto_dot(a[None], b[None], AUTO, "cuda", _slice_path_product, "cuda",
                                           split=cuda_lowering.split_product())[0])
    return np.asarray(f(a, b))


def test_auto_with_the_probe_on_bs_side(monkeypatch, rng):
    """JAXEMU_CUDA_SPLIT_STATS=1 where A has >= PROBE_B_RATIO times B's
    columns: A's split sums the four extremes alone and a row of A probes
    B's columns (auto._rows_probe_of_b). The test is exactly today's test of
    the transposed product B^T A^T (ratio, term count, hybrid order and
    hybrid tests, bit for bit), and auto gives fp16x3's bits where it
    admits fp16x3, with the kernels replaced by their twins on the CPU."""
    from test_auto import AUTO

    from jaxemu import auto, backends
    from jaxemu.backends import cuda_stats
    calls = []

    def twin(name, out_types):
        call = _kernel_twin(name, out_types)

        def record(*args, **attrs):
            calls.append((name, tuple(x.shape for x in args)))
            return call(*args, **attrs)
        return record
    use_twins(monkeypatch, twin)
    monkeypatch.setenv("JAXEMU_CUDA_SPLIT_STATS", "1")
    rows = lambda x, v=None: _xla_row_stats(x, v)  # noqa: E731
    kernels = backends.StatsKernels(rows=rows, columns=lambda b: _xla_row_stats(jnp.swapaxes(b, 1, 2)),
                                    probe_roundings=auto.xla_probe_roundings,
                                    split_rows=cuda_stats.KERNELS.split_rows)
    m, k, n = 256, 320, 48
    assert auto.probe_on_b(m, n) and not auto.probe_on_b(n, m)
    ratios = []
    for tiny_partners in (False, True):
        a, b = T.sample("uniform(-1,1)", (m, k), rng), T.sample("uniform(-1,1)", (k, n), rng)
        a[rng.permutation(m)[: m // 2]] *= np.exp2(rng.integers(-40, 40, (m // 2, k))).astype(np.float32)
        b[:, :7] *= np.exp2(rng.integers(-30, 30, (k, 7))).astype(np.float32)
        if tiny_partners:  # (refused: a column of A at 2^-40 meets a row of B at 2^40)
            a[:, 7] *= np.float32(2.0 ** -40)
            b[7, :] *= np.float32(2.0 ** 40)
        a, b = jnp.asarray(a)[None], jnp.asarray(b)[None]
        test, _ = auto.DataTest.with_split(a, b, AUTO, kernels, probe_b=True)
        assert test.probe_on_b
        mirror = auto.DataTest.of(jnp.swapaxes(b, 1, 2), jnp.swapaxes(a, 1, 2), AUTO, kernels=kernels)
        for got, want in ((test.normwise_ratio, mirror.normwise_ratio), (test.terms, mirror.terms),
                          (test.order[0], mirror.order[1]), (test.order[1], mirror.order[0])):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        hyb_rows, hyb_cols = [64, 128, 192, m, 128], [n, n, 24, 36, 24]
        np.testing.assert_array_equal(np.asarray(test.hybrids_ok(hyb_rows, hyb_cols)),
                                      np.asarray(mirror.hybrids_ok(hyb_cols, hyb_rows)))
        ratios.append(float(test.normwise_ratio[0]))
    assert ratios[0] <= 1 < ratios[1], ratios  # one admitted, one refused
    # End to end on admitted data: fp16x3's bits, A's split with the extremes (no probe) once.
    monkeypatch.setattr(backends, "stats_for", lambda *args, **kw: kernels)
    a, b = T.sample("normal(0,1)", (m, k), rng), T.sample("normal(0,1)", (k, n), rng)
    a[3, 5] = np.inf
    got = {}
    for switch in ("0", "unset", "1"):  # (unset: on where the probe runs over B's side)
        got[switch] = _auto_on_the_slice_path(monkeypatch, switch, calls, a, b)
        stats_forms = [shapes for name, shapes in calls if name == "jaxemu_fused_split_stats"]
        assert stats_forms == ([] if switch == "0" else [((1, m, k), (0,))]), (switch, stats_forms)
    np.testing.assert_array_equal(_nan_bits(got["1"]), _nan_bits(got["0"]))
    np.testing.assert_array_equal(_nan_bits(got["unset"]), _nan_bits(got["0"]))
    assert jaxemu.auto_report(a, b, AUTO)["scheme"] == "fp16x3"
    jax.clear_caches()


def test_auto_takes_a_rows_statistics_from_fp16x3s_split(monkeypatch, rng):
    """JAXEMU_CUDA_SPLIT_STATS=1: where auto's plan puts fp16x3 first on the
    slice path, A's row statistics come from fp16x3's split of A (the split
    kernel's stats form) and fp16x3's branch reads that split. With the
    kernels replaced by their twins on the CPU (the statistics kernels by
    XLA's reductions, in both settings): the same bits as with the
    statistics' own pass, where the test admits fp16x3 (NaN/Inf included)
    and where it refuses it; no split of A in fp16x3's branches, and the
    stats split once."""
    from test_auto import AUTO, adversarial

    from jaxemu import auto, backends
    from jaxemu.backends import cuda_stats
    calls = []

    def twin(name, out_types):
        call = _kernel_twin(name, out_types)

        def record(*args, **attrs):
            calls.append((name, args[0].shape, attrs.get("slice_type"), attrs.get("transposed")))
            return call(*args, **attrs)
        return record
    use_twins(monkeypatch, twin)
    kernels = backends.StatsKernels(rows=_xla_row_stats, columns=lambda b: auto._side(b.astype(jnp.float32), 1),
                                    probe_roundings=auto.xla_probe_roundings,
                                    split_rows=cuda_stats.KERNELS.split_rows)
    monkeypatch.setattr(backends, "stats_for", lambda *args, **kw: kernels)

    a_u, b_u = T.sample("uniform(-1,1)", (96, 320), rng), T.sample("uniform(-1,1)", (320, 64), rng)
    a_s, b_s = a_u.copy(), b_u.copy()
    a_s[3, 5], a_s[7, :], b_s[9, 4] = np.inf, np.nan, -np.inf
    cases = {"uniform": (a_u, b_u), "wide-exp": (T.sample("wide-exp", (96, 320), rng), T.sample("wide-exp", (320, 64), rng)),
             "specials": (a_s, b_s), "refused": adversarial("half the rows wide", np.random.default_rng(0))}
    for label, (a, b) in cases.items():
        rep = jaxemu.auto_report(a, b, AUTO)
        assert (rep["scheme"] == "fp16x3") == (label != "refused"), (label, rep)
        got, fp16_a_splits, stats_splits = {}, {}, {}
        for switch in ("0", "unset", "1"):  # (unset: the probe's form only where "1")
            got[switch] = _auto_on_the_slice_path(monkeypatch, switch, calls, a, b)
            fp16_a_splits[switch] = sum(1 for n, shape, st, tr in calls
                                        if n == "jaxemu_fused_split" and st == 1 and not tr and shape == (1,) + a.shape)
            stats_splits[switch] = sum(1 for n, *_ in calls if n == "jaxemu_fused_split_stats")
        np.testing.assert_array_equal(_nan_bits(got["1"]), _nan_bits(got["0"]), err_msg=label)
        np.testing.assert_array_equal(_nan_bits(got["unset"]), _nan_bits(got["0"]), err_msg=label)
        assert stats_splits == {"0": 0, "unset": 0, "1": 1}, (label, stats_splits)
        # (fp16x3's two branches, with and without FP32's special-value rules, each split A before)
        assert fp16_a_splits["0"] - fp16_a_splits["1"] == 2, (label, fp16_a_splits)
    # The statistics themselves, field by field: those of the statistics'
    # pass (the twins compute both alike, so a field out of place shows),
    # rows of different scales, a zero row and special values.
    a, b = T.sample("normal(0,1)", (96, 320), rng), T.sample("normal(0,1)", (320, 64), rng)
    a[::3] *= np.float32(2.0 ** 20)
    a[5], a[6, 7], a[8, 9] = 0.0, np.nan, -np.inf
    monkeypatch.setenv("JAXEMU_CUDA_SPLIT_STATS", "1")
    fused, _ = jax.jit(lambda a, b: auto.operand_stats_with_split(a[None], b[None], kernels))(a, b)
    alone = jax.jit(lambda a, b: auto.operand_stats(a[None], b[None], kernels=kernels))(a, b)
    assert type(fused) is auto.Stats
    for field in auto.Stats._fields:
        np.testing.assert_array_equal(np.asarray(getattr(fused, field)), np.asarray(getattr(alone, field)), err_msg=field)
    # Where it cannot run (rows past the split's 8192 values), the statistics' own pass.
    monkeypatch.setenv("JAXEMU_CUDA_SPLIT_STATS", "1")
    a, b = T.sample("uniform(-1,1)", (40, 8200), rng), T.sample("uniform(-1,1)", (8200, 24), rng)
    assert F.split_rows_with_stats(jnp.asarray(a)[None], jnp.ones((1, 8200), jnp.float32), 24) is None
    calls.clear()
    jax.jit(lambda a, b: auto.auto_dot(a[None], b[None], AUTO, "cuda", _slice_path_product, "cuda")[0])(a, b)
    assert not any(n == "jaxemu_fused_split_stats" for n, *_ in calls)
    jax.clear_caches()


@pytest.mark.parametrize("criterion", ["normwise", "componentwise"])
def test_auto_hybrids_split_once_on_the_fused_path(criterion, monkeypatch):
    """auto's hybrids on the cuda backend split A and B once and gather the
    kernel's slices (cuda_lowering.split_product): with the kernel replaced
    by a twin on the CPU, the result is bit for bit that of the hybrid's
    products run one by one through fused_product, NaN/Inf included (the
    kernel gets the same slices, row scaling and launch parameters)."""
    import jax
    from test_auto import AUTO, adversarial

    from jaxemu import auto
    from jaxemu.backends import cuda_lowering
    use_twins(monkeypatch)
    # One criterion with the split kernel's call (the default), one with XLA's split.
    monkeypatch.setenv("JAXEMU_CUDA_SPLIT", "1" if criterion == "normwise" else "0")
    s = AUTO.replace(criterion=criterion)

    def product(a, b, scheme, scales=None, fits=False):  # as the cuda backend's: the kernel for the emulated schemes, XLA for FP32
        return X.canonical_dot(a, b, scheme, "cuda", fits=fits) if scheme.name == "fp32" else \
            F.fused_product(a, b, scheme, scales, fits)

    def run(split):
        return jax.jit(lambda a, b: auto.auto_dot(a[None], b[None], s, "cuda", product, "cuda", split=split)[0])
    shared, alone = run(cuda_lowering.split_product()), run(None)
    rng = np.random.default_rng(0)
    # Rows split (both criteria), columns split (componentwise), both (componentwise: test_auto's two-sided case).
    a2, b2 = T.sample("wide-exp", (96, 160), rng), T.sample("wide-exp", (160, 64), rng)
    a2[rng.permutation(96)[:60]] = rng.uniform(-1, 1, (60, 160))
    b2[:, rng.permutation(64)[:40]] = rng.uniform(-1, 1, (160, 40))
    cases = [adversarial(kind, np.random.default_rng(0)) for kind in ("half the rows wide", "half the columns wide")]
    splits = set()
    for a, b in cases + [(a2, b2)]:
        for specials in (False, True):
            if specials:
                a[10:14, 20:24], a[40, 50], b[100:103, 5:8] = np.inf, np.nan, -np.inf
            rep = jaxemu.auto_report(a, b, s)
            if rep["scheme"] != "fp16x3+bf16x6":
                continue
            splits.add((rep["split"]["rows"] < a.shape[0], rep["split"]["cols"] < b.shape[1]))
            np.testing.assert_array_equal(np.asarray(shared(a, b)).view(np.uint32),
                                          np.asarray(alone(a, b)).view(np.uint32), err_msg=f"{rep}, {specials}")
    assert splits == ({(True, False)} if criterion == "normwise" else {(True, False), (False, True), (True, True)})


def test_auto_choosing_fp16x3_gives_fp16x3s_bits(monkeypatch):
    """auto's common case (its test admits fp16x3; fp16x3 takes its row
    scaling from the test's maxima) on the cuda backend, with the kernels
    replaced by their twins on the CPU: bit for bit fp16x3 called alone, on
    two of the benchmark's laws."""
    import jax
    from test_auto import AUTO

    from jaxemu import auto
    from jaxemu.backends import cuda_lowering
    use_twins(monkeypatch)

    def product(a, b, scheme, scales=None, fits=False):
        return X.canonical_dot(a, b, scheme, "cuda", fits=fits) if scheme.name == "fp32" else \
            F.fused_product(a, b, scheme, scales, fits)

    f = jax.jit(lambda a, b: auto.auto_dot(a[None], b[None], AUTO, "cuda", product, "cuda",
                                           split=cuda_lowering.split_product())[0])
    rng = np.random.default_rng(0)
    for law in ("uniform(-1,1)", "wide-exp"):
        a, b = T.sample(law, (96, 320), rng), T.sample(law, (320, 64), rng)
        rep = jaxemu.auto_report(a, b, AUTO)
        assert rep["scheme"] == "fp16x3", (law, rep)
        want = np.asarray(jax.jit(lambda a, b: F.fused_product(a[None], b[None], "fp16x3")[0])(a, b))
        np.testing.assert_array_equal(np.asarray(f(a, b)).view(np.uint32), want.view(np.uint32), err_msg=law)


def test_product_fits_decides_from_max_abs():
    # The special-value rules are skipped exactly when both operands are
    # finite and max|A| max|B| K < 2^100 (xla.product_fits).
    def fits(am, bm, k):
        return bool(X.product_fits(jnp.float32(am), jnp.float32(bm), k))
    assert fits(1.0, 1.0, 65536) and fits(2.0 ** 49, 2.0 ** 50, 1) and fits(0.0, 3e38, 4096)
    assert not fits(2.0 ** 50, 2.0 ** 50, 1) and not fits(2.0 ** 40, 2.0 ** 40, 2 ** 20)
    assert not fits(np.nan, 1.0, 8) and not fits(1.0, np.inf, 8) and not fits(np.inf, 0.0, 8)
    assert not fits(3e38, 3e38, 1)  # the product overflows float32: Inf, refused
    x = np.array([[1.0, -2.5], [np.float32(-3e38), 0.0]], np.float32)
    assert float(F.abs_max(jnp.asarray(x))) == np.float32(3e38)
    x[0, 0] = -np.inf
    assert np.isposinf(float(F.abs_max(jnp.asarray(x))))
    x[1, 1] = np.nan
    assert np.isnan(float(F.abs_max(jnp.asarray(x))))


@pytest.mark.parametrize("split_kernel,device_specials", [("1", "0"), ("0", "0"), ("1", "1"), ("0", "1")])
@pytest.mark.parametrize("b_layout", ["kn", "transposed"])
def test_fused_product_special_values(split_kernel, device_specials, b_layout, monkeypatch, rng):
    """fused_product with the kernels replaced by their twins on the CPU: the
    kernel's C on ordinary data; FP32's NaN/Inf pattern, and its value where
    the emulation overflows, on data that product_fits refuses (NaN/Inf
    operands, values near 2^64 and beyond). Settled before the GEMM (a
    conditional) or, JAXEMU_CUDA_DEVICE_SPECIALS=1, by the fix-up in the
    GEMM's call (no conditional; the twin recomputes the values that are not
    finite from the FP32 operands it is given: B^T's rows where B is the
    transpose of an (N, K) array and the split takes it as rows)."""
    use_twins(monkeypatch)
    monkeypatch.setenv("JAXEMU_CUDA_SPLIT", split_kernel)
    monkeypatch.setenv("JAXEMU_CUDA_DEVICE_SPECIALS", device_specials)
    from jaxemu import backends
    for name in ("bf16x6", "fp16x3"):
        s = jaxemu.get_scheme(name)
        if b_layout == "kn":
            f = jax.jit(lambda a, b: F.fused_product(a[None], b[None], s)[0])
        else:  # as the primitive calls it on x @ y.T: y (N, K) transposed, the layout hint set
            def f_t(a, bt):
                with backends.b_rows_free(True):
                    return F.fused_product(a[None], jnp.swapaxes(bt, 0, 1)[None], s)[0]
            f = jax.jit(lambda a, b, f_t=f_t: f_t(a, jnp.asarray(b).T))
        a, b = T.sample("normal(0,1)", (33, 70), rng), T.sample("normal(0,1)", (70, 17), rng)
        hlo = jax.jit(f).lower(a, b).compile().as_text()
        assert (" conditional(" in hlo) == (device_specials == "0"), name
        exact = a.astype(np.float64) @ b.astype(np.float64)
        got = np.asarray(f(a, b))
        assert np.max(np.abs(got - exact)) <= 1e-5 * np.max(np.abs(exact)), name
        cases = []
        a1 = a.copy(); a1[3, 5], a1[7, :] = np.inf, np.nan  # noqa: E702
        b1 = b.copy(); b1[9, 4] = -np.inf  # noqa: E702
        cases.append((a1, b1))
        # Near 2^64: FP32's products are finite; (2^64 - ulp) rounds up to 2^64 in bf16.
        top = np.float32(2.0 ** 64) * np.float32(1 - 2.0 ** -24)
        a2, b2 = a.copy(), b.copy()
        a2[0, :], b2[:, 0] = top, top
        cases.append((a2, b2))
        a3 = a.copy(); a3[2, :] = 1e30  # noqa: E702  (FP32 overflows row 2: Inf or NaN there)
        cases.append((a3, b))
        # K = 1: bf16's slice of top rounds up to 2^64, its product overflows,
        # FP32's (2^128 - 2^105) does not: FP32's finite value must replace it.
        cases.append((np.full((33, 1), top, np.float32), np.full((1, 17), top, np.float32)))
        for x, y in cases:
            want = np.asarray(X.canonical_dot(jnp.asarray(x)[None], jnp.asarray(y)[None],
                                              jaxemu.get_scheme("fp32"), "cpu")[0])
            got = np.asarray(f(x, y))
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=name)
            np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want), err_msg=name)
            np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want), err_msg=name)
            fin = np.isfinite(want)
            ref = x.astype(np.float64) @ y.astype(np.float64)
            scale = np.abs(x.astype(np.float64)) @ np.abs(y.astype(np.float64))
            assert np.all(np.abs(got[fin] - ref[fin]) <= 1e-5 * scale[fin]), name


def test_split_finds_the_row_exponents_where_it_can(monkeypatch, rng):
    """JAXEMU_CUDA_SPLIT_EXPS=1: fp16x3's split of rows of up to 2048 values
    (A here; B is split transposed) finds their exponents itself instead of
    an XLA reduction, with the kernels replaced by their twins on the CPU:
    the same bits as with the reduction, special values included; longer
    rows and bf16 slices (unscaled) keep the old call."""
    seen = []

    def twin(name, out_types):
        call = _kernel_twin(name, out_types)
        if name != "jaxemu_fused_split":
            return call

        def record(x, e, **attrs):
            seen.append((attrs["find_exp"], attrs["transposed"], x.shape))
            return call(x, e, **attrs)
        return record
    use_twins(monkeypatch, twin)
    monkeypatch.setenv("JAXEMU_CUDA_SPLIT", "1")
    a, b = T.sample("wide-exp", (33, 70), rng), T.sample("normal(0,1)", (70, 17), rng)
    a[3, 5], a[7, :], b[9, 4] = np.inf, np.nan, -np.inf
    a[11, :] = 0
    long_a, long_b = T.sample("normal(0,1)", (5, 2100), rng), T.sample("normal(0,1)", (2100, 8), rng)
    for name, x, y, finds in (("fp16x3", a, b, [1, 0]), ("fp16x3", long_a, long_b, [0, 0]),
                              ("bf16x6", a, b, [0, 0])):
        s = jaxemu.get_scheme(name)
        got = {}
        for switch in ("0", "1"):
            monkeypatch.setenv("JAXEMU_CUDA_SPLIT_EXPS", switch)
            jax.clear_caches()
            seen.clear()
            got[switch] = np.asarray(jax.jit(lambda a, b: F.fused_product(a[None], b[None], s)[0])(x, y))
            want = dict(enumerate(finds if switch == "1" else [0, 0]))  # by `transposed`: A's, B's
            assert seen and all(f == want[t] for f, t, _ in seen), (name, x.shape, seen)
        np.testing.assert_array_equal(_nan_bits(got["1"]), _nan_bits(got["0"]), err_msg=f"{name} {x.shape}")
    jax.clear_caches()


@pytest.mark.parametrize("name", FLOAT)
def test_exact_operands_run_on_their_one_slice_kernels(name, monkeypatch, rng):
    """A one-hot operand (FloatSplit.exact) on the fused path: a kernel with
    one slice on its side exists for every catalogue scheme (both sides),
    its slices are the operand itself in the slice dtype, with no split call
    for it; with the kernels replaced by their twins on the CPU the product
    is the full scheme's, bit for bit, NaN/Inf in the other operand
    included."""
    s = jaxemu.get_scheme(name)
    for lhs, rhs in ((True, False), (False, True)):
        v = s.with_exact(lhs, rhs)
        counts = (v.slices_of(0), v.slices_of(1))
        assert F.kernel_tiles(v) == (128,) and counts == ((1, s.slices) if lhs else (s.slices, 1))
    calls = []

    def twin(name_, out_types):
        calls.append(name_)
        return _kernel_twin(name_, out_types)
    use_twins(monkeypatch, twin)
    lab = rng.integers(0, 9, size=130)
    oh = np.asarray(jax.nn.one_hot(lab, 9), np.float32)  # (130, 9)
    x = T.sample("wide-exp", (130, 21), rng)
    for a, b, exact in ((oh.T, x, (True, False)), (x.T, oh, (False, True))):
        for specials in (False, True):
            if specials:
                if exact[0]:
                    b = b.copy(); b[4, 3], b[7, :] = np.inf, np.nan  # noqa: E702
                else:
                    a = a.copy(); a[3, 4], a[:, 7] = -np.inf, np.nan  # noqa: E702
            calls.clear()
            got = np.asarray(jax.jit(lambda a, b: F.fused_product(a[None], b[None], s.with_exact(*exact))[0])(a, b))
            # The other operand's split only, in each of the conditional's two branches (full: both operands').
            assert calls.count("jaxemu_fused_split") == 2, calls
            full = np.asarray(jax.jit(lambda a, b: F.fused_product(a[None], b[None], s)[0])(a, b))
            # (NaN's sign and payload aside: the full product may take the fix-up, JAXEMU_CUDA_DEVICE_SPECIALS)
            np.testing.assert_array_equal(_nan_bits(got), _nan_bits(full), err_msg=f"{name} {exact}")
    sl, e, amax = F.exact_slices(jnp.asarray(oh.T)[None], s, 192)
    tk = F.tile_k(s.fmt)
    assert sl.shape == (1, 9, 192 // tk, 1, tk) and sl.dtype == F._DTYPES[s.fmt] and float(amax) == F.EXACT_MAX
    assert (e is None) == (s.scaling != "row")
    np.testing.assert_array_equal(np.asarray(sl, np.float32).reshape(9, 192)[:, :130], oh.T)
