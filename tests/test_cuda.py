"""GPU tests of the cuda backend (skipped without an NVIDIA GPU and the CUDA
extension). Run on the GPU machine with JAX_PLATFORMS=cuda (see BUILD.md)."""
import re
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gpu
import jaxemu
from jaxemu import testing as T
from jaxemu.backends import backend_for, cuda


pytestmark = gpu.MARKS

FLOAT = ["bf16x3", "bf16x6", "bf16x9", "tf32x3", "fp16x3", "fp16x3_bitcut"]  # the kernels' schemes
# FP64 schemes (ozaki2_f64) take float64 operands: tests/test_ozaki.py has them.
ALL = [n for n in jaxemu.schemes() if n != "fp32" and jaxemu.get_scheme(n).operand_dtype == "float32"]


def run(name, a, b, backend="default"):
    return jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=name, backend=backend))(a, b)


def test_float_schemes_run_on_the_cuda_backend(monkeypatch):
    assert cuda.supports(jaxemu.get_scheme("bf16x6"))
    for n in FLOAT + ["auto"]:
        assert backend_for(n, "cuda") == "cuda"
    # ozaki2_f32: the int8 kernels (test_cuda_int8.py)
    for n in ["bf16", "fp16", "tf32"]:  # natives: cuBLAS through XLA
        assert backend_for(n, "cuda") == "xla"
    # MixPert's levels: the MixPert int8 kernel (test_cuda_mixpert.py), the
    # xla backend where its switch is off
    monkeypatch.delenv("JAXEMU_CUDA_MIXPERT", raising=False)
    for n in ["int8_l1", "int8_l2", "int8_l3", "int8_l4"]:
        assert backend_for(n, "cuda") == "cuda"
    monkeypatch.setenv("JAXEMU_CUDA_MIXPERT", "0")
    assert backend_for("int8_l4", "cuda") == "xla"
    monkeypatch.delenv("JAXEMU_CUDA_MIXPERT")
    # Custom float schemes that no kernel configuration holds (a stage keeps
    # every slice: 4 slices do not fit) run on the xla backend, and say so.
    from jaxemu.schemes import FloatSplit
    x4 = FloatSplit("bf16x4_custom", "bf16", 4, ((0, 0), (0, 1), (1, 0), (0, 3)), kc=64)
    assert backend_for(x4, "cuda") == "xla"
    monkeypatch.delenv("JAXEMU_CUDA_SPLIT", raising=False)  # the split kernel: the default (switches.py)
    monkeypatch.setenv("JAXEMU_CUDA_F32_OPERANDS", "0")  # the slice path (test_cuda_f32.py: the other one)
    for device_specials in ("0", "1"):
        monkeypatch.setenv("JAXEMU_CUDA_DEVICE_SPECIALS", device_specials)
        hlo = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme="bf16x6")).lower(
            jnp.ones((256, 256)), jnp.ones((256, 256))).compile().as_text()
        # One kernel launch per emulated product: the entry computation splits A
        # and B (which also gives max |A| and max |B|), then either the GEMM
        # settles special values in its own call (a fix-up that tests the
        # maxima on the device: no conditional), or a conditional runs either
        # the GEMM alone or the special-value path (its own split and GEMM).
        entry = hlo[hlo.index("\nENTRY"):]
        entry = entry[:entry.index("\n}")]
        assert entry.count('custom_call_target="jaxemu_fused_split"') == 2, entry  # A's and B's
        if device_specials == "1":
            assert entry.count('custom_call_target="jaxemu_fused_bf16"') == 1, entry
            assert hlo.count('custom_call_target="jaxemu_fused_bf16"') == 1 and " conditional(" not in hlo, hlo
        else:
            assert entry.count('custom_call_target="jaxemu_fused_bf16"') == 0, entry
            assert hlo.count('custom_call_target="jaxemu_fused_bf16"') == 2, hlo
        assert "jaxemu_gemm_" not in hlo
        # Nothing copies C (a branch passing C through unchanged made XLA
        # copy it: 5.6 of 19.5 ms at 8192 x 128 x 262144 on an H100).
        assert not re.search(r"f32\[(1,)?256,256\]\{[0-9,]*\} copy\(", hlo), hlo


@pytest.mark.parametrize("name", FLOAT)
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("split_exps", ["0", "1"])
def test_split_kernel_gives_the_xla_slices(name, transposed, split_exps, rng, monkeypatch):
    # The split kernel against XLA's split of the same operand on the GPU,
    # bit for bit (NaN payloads aside): odd shapes, K a multiple of 4 (vector
    # loads) and not, test_fused_layout.split_operand's data. The CPU runs the
    # kernel's per-thread code against the same reference
    # (test_fused_layout.py); this checks the device's tiling and stores.
    # JAXEMU_CUDA_SPLIT_EXPS=1: fp16's rows of up to 2048 values split by the
    # kernel that finds their exponents (8, 16 or 32 lanes per row, 1 to 8 tasks per
    # lane: every form here), which must be XLA's.
    from test_fused_layout import same_bits, split_operand
    from jaxemu.backends import cuda_fused as F
    s = jaxemu.get_scheme(name)
    if split_exps == "1" and (s.fmt != "fp16" or transposed):
        pytest.skip("the switch changes fp16's rows only")
    monkeypatch.setenv("JAXEMU_CUDA_SPLIT_EXPS", split_exps)
    jax.clear_caches()
    tk = F.tile_k(s.fmt)
    for bsz, rows, k in [(1, 1, 1), (2, 5, 77), (1, 1000, 4096), (3, 129, 300), (1, 4097, 129), (1, 7, 1000),
                         (2, 33, 2048)]:
        x = split_operand((bsz, k, rows) if transposed else (bsz, rows, k), transposed, rng)
        kp = -(-k // tk) * tk
        got, eg, amax = jax.jit(lambda x: F.slices_kernel(x, s, kp, transposed))(x)
        want, ew = jax.jit(lambda x: F.slices_xla(jnp.swapaxes(x, 1, 2) if transposed else x, s, kp))(x)
        same_bits(got, want)
        same_bits(amax, F.abs_max(x))  # max |x|, NaN/Inf included (split_operand's data has them)
        xf = np.where(np.isfinite(x), x, np.float32(0))
        _, _, amax = jax.jit(lambda x: F.slices_kernel(x, s, kp, transposed))(xf)
        assert float(amax) == float(np.max(np.abs(xf))), (float(amax), bsz, rows, k)
        if ew is not None:
            np.testing.assert_array_equal(np.asarray(eg), np.asarray(ew))
        hlo = jax.jit(lambda x: F.slices_kernel(x, s, kp, transposed)).lower(x).as_text()
        assert ("find_exp = 1" in hlo) == (split_exps == "1" and kp <= F.SPLIT_EXP_MAX_K), (bsz, rows, k)
    if split_exps == "1":
        # a row of subnormals: the exponent from its bits (13 - floor(log2
        # max) = 154 here), and slices that add up to x 2^e
        x = rng.uniform(0.5, 1, (1, 3, 256)).astype(np.float32)
        x[0, 1] = (np.float32(2.0**-140) * x[0, 1]).astype(np.float32)
        sl, e, _ = jax.jit(lambda x: F.slices_kernel(x, s, 256, False))(x)
        amax = np.max(np.abs(x.astype(np.float64)), axis=2)
        np.testing.assert_array_equal(np.asarray(e), 13 - (np.frexp(amax)[1] - 1))
        sub = np.asarray(sl)[0, 1].astype(np.float64)  # (K/TK, S, TK)
        total = sum(sub[:, i, :] * 2.0 ** (-s.lo_scale_bits * i) for i in range(s.slices)).reshape(-1)
        np.testing.assert_allclose(total, x[0, 1].astype(np.float64) * 2.0 ** int(np.asarray(e)[0, 1]),
                                   rtol=2.0**-20)


def test_split_with_stats_gives_the_splits_and_the_statistics_kernels_numbers(rng, monkeypatch):
    # The split's stats form (jaxemu_fused_split_stats, JAXEMU_CUDA_SPLIT_STATS)
    # against the split that finds the exponents (slices, exponents and max
    # |x| bit for bit) and the row statistics kernel with the same probe:
    # max, min nonzero, the non-finite flag and max |t| equal; the sums
    # within probe_roundings(K) units of their sums of |terms|; the
    # eighth-root sum within 1e-5 (a heuristic weight). Every lanes/tasks
    # form (K up to 2048) and the block form (to 8192), a batch, NaN/Inf, a
    # zero row, subnormals.
    from test_fused_layout import same_bits, split_operand
    from jaxemu.backends import cuda_fused as F, cuda_stats
    monkeypatch.setenv("JAXEMU_CUDA_SPLIT_STATS", "1")
    monkeypatch.setenv("JAXEMU_CUDA_F32_OPERANDS", "0")
    jax.clear_caches()
    s = jaxemu.get_scheme("fp16x3")
    eps = 2.0 ** -24
    for bsz, rows, k in [(1, 3, 8), (2, 5, 64), (1, 33, 128), (3, 129, 300), (1, 7, 1000), (2, 33, 2048),
                         (1, 5, 2100), (2, 9, 4096), (1, 4, 5000), (1, 300, 8192), (1, 6, 4097)]:  # (past 2048: a block per row)
        x = split_operand((bsz, rows, k), False, rng)
        x[-1, -1, :] = (np.float32(2.0**-140) * rng.uniform(0.5, 1, k)).astype(np.float32)
        x[0, 1, [1, 3, 5]] = np.inf, np.nan, -np.inf  # (split_operand's zero row took its own)
        v = rng.uniform(-2, 2, (bsz, k)).astype(np.float32)
        got = jax.jit(lambda x, v: F.split_rows_with_stats(x, v, 4096))(x, v)
        assert got is not None, (bsz, rows, k)
        (sl, e, amax), st = got
        kp = F.padded_k(k, s)
        want_sl, want_e, want_amax = jax.jit(lambda x: F.slices_kernel(x, s, kp))(x)
        same_bits(sl, want_sl)
        np.testing.assert_array_equal(np.asarray(e), np.asarray(want_e))
        same_bits(amax, want_amax)
        ref = [np.asarray(r) for r in jax.jit(cuda_stats.rows)(x, v)]
        st = [np.asarray(r) for r in st]
        for i in (0, 1, 3, 6):  # max, min nonzero, bad, max |t|: no rounding but the product's
            np.testing.assert_array_equal(st[i], ref[i], err_msg=f"stat {i}, {(bsz, rows, k)}")
        x0 = np.where(np.isfinite(x), x, np.float32(0))
        # the products as the kernel rounds them (float32: a subnormal
        # product's error is absolute, outside a relative bound), summed in float64
        t = (x0 * v[:, None, :]).astype(np.float32).astype(np.float64)
        terms = np.abs(t).sum(axis=2)
        slack = 2 * cuda_stats.probe_roundings(k) * eps
        l1 = np.abs(x0.astype(np.float64)).sum(axis=2)
        assert np.all(np.abs(st[2] - l1) <= slack * l1), (bsz, rows, k)
        assert np.all(st[3][0, 1] == 1.0) and np.all(st[3][0, 0] == 0.0), (bsz, rows, k)
        for i in (4, 5):
            exact = t.sum(axis=2) if i == 4 else terms
            assert np.all(np.abs(st[i] - exact) <= slack * terms), (i, bsz, rows, k)
        np.testing.assert_allclose(st[7], ref[7], rtol=1e-5, err_msg=str((bsz, rows, k)))
    # Where it cannot run: rows past 8192 values, the switch off, and by
    # default (the switch unset) the probe's form; the extremes alone run.
    assert F.split_rows_with_stats(jnp.ones((1, 4, 8200)), jnp.ones((1, 8200)), 4096) is None
    monkeypatch.setenv("JAXEMU_CUDA_SPLIT_STATS", "0")
    assert F.split_rows_with_stats(jnp.ones((1, 4, 256)), jnp.ones((1, 256)), 4096) is None
    assert F.split_rows_with_stats(jnp.ones((1, 4, 256)), None, 4096) is None
    monkeypatch.delenv("JAXEMU_CUDA_SPLIT_STATS")
    assert F.split_rows_with_stats(jnp.ones((1, 4, 256)), jnp.ones((1, 256)), 4096) is None
    assert F.split_rows_with_stats(jnp.ones((1, 4, 256)), None, 4096) is not None


def test_auto_with_the_split_stats_chooses_as_with_the_statistics_kernel(monkeypatch, rng):
    # auto on the k-means distances' kind of shape (K = 256, x @ c.T) and a
    # square, JAXEMU_CUDA_SPLIT_STATS 0, unset and 1: the same choice (by
    # the result's error), the stats split in the lowering with the switch
    # "1", and unset only where the probe runs over B's side (the
    # distances: auto.probe_on_b), errors within fp16x3's against float64.
    from test_fused_layout import set_split_stats

    from jaxemu import auto
    monkeypatch.setenv("JAXEMU_CUDA_F32_OPERANDS", "0")
    # (shapes where the shipped cost model plans fp16x3 first, its test included)
    cases = [(T.sample("uniform(-1,1)", (65536, 256), rng), T.sample("uniform(-1,1)", (1024, 256), rng).T),
             (T.sample("normal(0,1)", (2048, 2048), rng), T.sample("normal(0,1)", (2048, 2048), rng))]
    for a, b in cases:
        ref = a.astype(np.float64) @ b.astype(np.float64)
        out = {}
        for switch in ("0", "unset", "1"):
            set_split_stats(monkeypatch, switch)
            jax.clear_caches()
            f = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme="auto"))
            hlo = f.lower(a, b).as_text()
            by_default = switch == "unset" and auto.probe_on_b(a.shape[0], b.shape[1])
            assert ("jaxemu_fused_split_stats" in hlo) == (switch == "1" or by_default), (a.shape, switch)
            out[switch] = np.asarray(f(a, b))
        fp = np.asarray(run("fp16x3", a, b))
        err = {k: np.linalg.norm(v - ref) / np.linalg.norm(ref) for k, v in out.items()}
        err16 = np.linalg.norm(fp - ref) / np.linalg.norm(ref)
        assert err["0"] == err["1"] == err["unset"] and err["1"] <= 1.01 * err16, (a.shape, err, err16)


@pytest.mark.parametrize("law", T.LAWS)
@pytest.mark.parametrize("name", ALL)
def test_accuracy_against_float64(name, law):
    # 2048 x 4096 x 2048: large enough that cuBLAS runs its ordinary SGEMM
    # kernel (for small M, N it splits K, which lowers its error several-fold).
    a, b = T.operands(law, 2048, 4096, 2048, seed=zlib.crc32(f"{name}/{law}".encode()) % 1000)
    ref = T.reference(a, b)
    e32 = T.relerr(jaxemu.dot(a, b, scheme="fp32"), ref)  # cuBLAS SGEMM
    e = T.relerr(run(name, a, b), ref)
    s = jaxemu.get_scheme(name)
    bound = 2 * e32 if s.fp32_class else s.error_bound()
    if name == "fp16x3" and law == "wide-exp":
        bound = max(bound, 4 * e32)  # values far below their row maximum lose bits
    assert e <= bound, (name, law, e, e32)


@pytest.mark.parametrize("name", ["fp16x3", "tf32x3"])
def test_short_k_promotes_every_half_k_tile(name):
    # K <= SHORT_K_HALF_KC: hi*hi's partial promoted every half K-tile
    # (cuda_fused.kernel_kc; the kernel with kc_sub = 2). On data of one
    # sign the tensor cores' truncation is biased; with whole K-tiles both
    # schemes' error was above SGEMM's at K = 128 (H200, kNN's 8192 x 128
    # x 262144: 1.19 and 1.07 of it), with halves 0.88 and 0.90 (stop 63).
    from jaxemu.backends import cuda_fused
    a, b = T.operands("uniform(0,1)", 8192, 128, 32768, seed=5)
    f = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=name, backend="cuda"))
    subs = re.findall(r"kc_sub\s*=\s*(\d+)", f.lower(a, b).compile().as_text())
    assert subs == ["2"] and 128 <= cuda_fused.SHORT_K_HALF_KC, subs
    ref = T.reference(a, b)
    e32 = T.relerr(jaxemu.dot(a, b, scheme="fp32"), ref)  # cuBLAS SGEMM
    e = T.relerr(f(a, b), ref)
    assert e <= e32, (name, e, e32)


@pytest.mark.parametrize("name", FLOAT)
def test_agrees_with_the_xla_backend(name):
    a, b = T.operands("normal(0,1)", 200, 3000, 300, seed=3)
    ref = T.reference(a, b)
    e_cuda = T.relerr(run(name, a, b, "cuda"), ref)
    e_xla = T.relerr(run(name, a, b, "xla"), ref)
    s = jaxemu.get_scheme(name)
    bound = 2 * e_xla if s.fp32_class else s.error_bound()
    assert e_cuda <= max(bound, 2 * T.relerr(jaxemu.dot(a, b, scheme="fp32"), ref))


# N % 4 == 0 takes the TMA-store epilogue, other N the register one; small
# outputs with long K take split-K.
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 13, 5), (129, 1031, 65), (3, 65536, 9), (1000, 64, 3),
                                   (257, 200, 128), (300, 96, 1024), (130, 1 << 17, 68)])
@pytest.mark.parametrize("name", ["bf16x6", "fp16x3", "tf32x3"])
def test_odd_shapes_and_long_k(name, m, k, n):
    rng = np.random.default_rng(m * k * n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    c = np.asarray(run(name, a, b, "cuda"), np.float64)
    absab = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    np.testing.assert_array_less(np.abs(c - ref), 4 * np.sqrt(k) * 2.0**-24 * absab + 1e-30)



@pytest.mark.parametrize("name", ["fp16x3", "fp16x3_bitcut"])
def test_fp16_scaling_far_from_one_gives_the_same_bits(name, rng):
    # fp16 scales each row of A and column of B by a power of two (exponent
    # 13 - floor(log2 max): 14 on uniform(-1, 1) rows), so rows times 2^er
    # and columns times 2^ec give C's bits times the same powers (every
    # value stays normal, and max|A| max|B| K < 2^100: no FP32 fallback).
    # The kernel's epilogue undoes the scaling with one multiply per value
    # where all of a thread's exponents lie in [-63, 63] and value by value
    # otherwise (ffi/fused/epilogue.cuh). er = 84 + U[-3, 3] on alternate
    # 64-row blocks (exponents -73..-67), ec = -84 + U[-3, 3] on alternate
    # 128-column blocks (95..101), U[-3, 3] elsewhere (11..17): both paths,
    # with exponents that differ row by row and column by column, and
    # N = 600 ends in a partial column tile (the exponents' scalar loads).
    m, k, n = 384, 320, 600
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    er = np.where((np.arange(m) // 64) % 2 == 1, 84, 0) + rng.integers(-3, 4, m)
    ec = np.where((np.arange(n) // 128) % 2 == 1, -84, 0) + rng.integers(-3, 4, n)
    c = np.asarray(run(name, a, b, "cuda"))
    far = np.asarray(run(name, (a * np.exp2(er)[:, None]).astype(np.float32),
                         (b * np.exp2(ec)[None, :]).astype(np.float32), "cuda"))
    want = (c.astype(np.float64) * np.exp2(er)[:, None] * np.exp2(ec)[None, :]).astype(np.float32)
    np.testing.assert_array_equal(far.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("name", FLOAT)
@pytest.mark.parametrize("side", ["lhs", "rhs"])
def test_exact_operand_kernels_give_the_full_schemes_result(name, side, rng):
    # A one-hot operand (jaxemu.emulate flags it exact) runs on the kernel
    # with one slice on its side: the product of the full scheme, bit for bit
    # (the dropped products are zero), K long enough for several promotions
    # and K-splits (update shape: small output, long K), NaN/Inf in the other
    # operand included.
    k, m, n = 70001, 13, 200
    lab = jnp.asarray(rng.integers(0, m, size=k))
    x = T.sample("normal(0,1)", (k, n), rng)
    x[5, 7], x[9, :] = np.inf, np.nan
    if side == "lhs":
        def f(x, lab):
            return jax.nn.one_hot(lab, m, dtype=x.dtype).T @ x
    else:
        def f(x, lab):
            return x.T @ jax.nn.one_hot(lab, m, dtype=x.dtype)
    emulated = jax.jit(jaxemu.emulate(f, scheme=name))
    hlo = emulated.lower(x, lab).compile().as_text()
    entry = hlo[hlo.index("\nENTRY"):]
    assert entry.count('custom_call_target="jaxemu_fused_split"') == 1, entry  # the data only
    # The one-hot is written once, in 16 bits: no float32 form of it outside
    # the special-value branch (which rebuilds it from the slice).
    assert not re.search(r"f32\[(1,)?(13,70001|70001,13)\]", entry), entry
    got = np.asarray(emulated(x, lab))
    oh = np.asarray(jax.nn.one_hot(lab, m), np.float32)
    a, b = (oh.T, x) if side == "lhs" else (x.T, oh)
    full = np.asarray(jax.jit(lambda a, b: jaxemu.matmul(a, b, scheme=name))(a, b))
    np.testing.assert_array_equal(got.view(np.uint32), full.view(np.uint32))
    x[5, 7], x[9, :] = 0.0, 0.0
    got = np.asarray(emulated(x, lab))
    ref = (oh.T.astype(np.float64) @ x.astype(np.float64)) if side == "lhs" else (x.T.astype(np.float64) @ oh)
    sgemm = np.asarray(jax.jit(lambda a, b: jnp.matmul(a, b, precision="highest"))(*((oh.T, x) if side == "lhs"
                                                                                         else (x.T, oh))))
    err, err_sgemm = T.relerr(got, ref), T.relerr(sgemm, ref)
    s = jaxemu.get_scheme(name)
    assert err <= (2 * max(err_sgemm, 2.0 ** -24) if s.fp32_class else s.error_bound()), (err, err_sgemm)


@pytest.mark.parametrize("dtype,k", [("float32", 256), ("float32", 1001), ("float32", 5000), ("float16", 8192),
                                     ("bfloat16", 300), ("float16", 7)])
def test_row_stats_kernel_gives_the_data_tests_statistics(dtype, k, rng):
    # auto's A pass on the GPU (ffi/stats): per row over the finite values,
    # max |a|, min nonzero |a| and max |a v| exactly; sum |a|, sum a v and
    # sum |a v| within the kernel's chain of roundings
    # (StatsKernels.probe_roundings); sum |a v|^(1/8) within the approximate
    # root's 1e-6; 1 exactly on the rows holding NaN/Inf; block rows (K >=
    # 4096) and short rows on 4 to 32 lanes each (37 rows: a group past the
    # last row), vector loads and scalar ones, vectors of zeros skipped;
    # bit-identical reruns.
    from jaxemu.backends import cuda_stats
    a = T.sample("wide-exp", (3, 37, k), rng)
    a[0, 3] = 0.0                                   # a zero row
    a[1, 5, :3] = [np.nan, np.inf, -np.inf]         # non-finite values count as 0
    a[2, 36, k - 1] = np.inf                        # (the last row, the last value)
    a[2, 7, : k // 2] = 0.0                         # zero vectors, skipped
    a = jnp.asarray(a).astype(dtype)
    v = jnp.asarray(T.sample("uniform(-1,1)", (3, k), rng))
    a64 = np.asarray(a.astype(jnp.float32), np.float64)
    bad = (~np.isfinite(a64)).any(2).astype(np.float64)
    a64 = np.where(np.isfinite(a64), a64, 0.0)
    t = a64 * np.asarray(v, np.float64)[:, None, :]         # exact in float64
    ax, at = np.abs(a64), np.abs(t)
    at32 = at.astype(np.float32)                            # FP32's product |a v|
    bound = 2 * cuda_stats.probe_roundings(k) * 2.0 ** -24
    root8 = (at32.astype(np.float64)) ** 0.125
    for lanes in ((None, 4, 8, 16, 32) if k < 4096 else (None,)):
        f = jax.jit(lambda a, v, lanes=lanes: cuda_stats.rows(a, v, lanes))
        got = [np.asarray(x, np.float64) for x in f(a, v)]
        again = [np.asarray(x) for x in f(a, v)]
        assert all(np.array_equal(np.asarray(x), y) for x, y in zip(f(a, v), again))
        np.testing.assert_array_equal(got[0], ax.max(2))
        np.testing.assert_array_equal(got[1], np.where(ax > 0, ax, np.inf).min(2))
        np.testing.assert_array_equal(got[3], bad)
        assert bad.sum() == 2
        np.testing.assert_array_equal(got[6], at32.max(2))
        for x, ref, mag in ((got[2], ax.sum(2), ax.sum(2)), (got[4], t.sum(2), at.sum(2)),
                            (got[5], at.sum(2), at.sum(2))):
            assert np.all(np.abs(x - ref) <= bound * mag), (lanes, np.max(np.abs(x - ref) / np.maximum(mag, 1e-300)))
        assert np.all(np.abs(got[7] - root8.sum(2)) <= (2 * k * 2.0 ** -24 + 1e-6) * root8.sum(2)), lanes
        assert np.isinf(got[1][0, 3]) and got[0][0, 3] == 0 and got[2][0, 3] == 0
        no_probe = [np.asarray(x) for x in jax.jit(lambda a, lanes=lanes: cuda_stats.rows(a, lanes=lanes))(a)]
        assert len(no_probe) == 4 and all(np.array_equal(x, y) for x, y in zip(no_probe, again[:4]))


@pytest.mark.parametrize("dtype,k,n", [("float32", 3000, 256), ("float32", 70001, 24), ("float32", 513, 1001),
                                       ("float16", 4096, 520), ("bfloat16", 33, 7)])
def test_column_stats_kernel_gives_the_data_tests_statistics(dtype, k, n, rng):
    # auto's B pass on the GPU: per column over the finite values, max |b|
    # and min nonzero |b| exactly, sum |b| within float32's bound (partial
    # sums per chunk of K, reduced in a fixed order: bit-identical reruns);
    # 1 exactly on the columns holding NaN/Inf; 16-byte loads (N a multiple
    # of the vector) and scalar ones.
    from jaxemu.backends import cuda_stats
    b = T.sample("wide-exp", (2, k, n), rng)
    b[0, :, 3] = 0.0                                # a zero column
    b[1, :3, 5] = [np.nan, np.inf, -np.inf]
    b[0, k - 1, n - 1] = -np.inf                    # the last column's last value
    b = jnp.asarray(b).astype(dtype)
    f = jax.jit(cuda_stats.columns)
    got = [np.asarray(x) for x in f(b)]
    assert all(np.array_equal(np.asarray(x), y) for x, y in zip(f(b), got))
    b64 = np.asarray(b.astype(jnp.float32), np.float64)
    bx = np.abs(np.where(np.isfinite(b64), b64, 0.0))
    np.testing.assert_array_equal(got[0], bx.max(1))
    np.testing.assert_array_equal(got[1], np.where(bx > 0, bx, np.inf).min(1))
    assert np.all(np.abs(got[2] - bx.sum(1)) <= 2 * k * 2.0 ** -24 * bx.sum(1))
    np.testing.assert_array_equal(got[3], (~np.isfinite(b64)).any(1))
    assert got[3].sum() == 2
    assert np.isinf(got[1][0, 3]) and got[0][0, 3] == 0


def test_auto_runs_its_data_test_on_the_stats_kernels(rng, monkeypatch):
    # With JAXEMU_CUDA_STATS on (the default) auto's passes over A and B are
    # the kernels (no XLA reduction over them); their statistics give the XLA
    # reductions' ratio up to the two probes' bounds (at K = 3000 the
    # kernel's 4-lane chains allow 764 roundings, XLA's blocked sums 261: a
    # fraction of a per cent of the ratio), and the same decision on every law.
    from jaxemu import auto
    from jaxemu.backends import cuda_stats
    monkeypatch.delenv("JAXEMU_CUDA_STATS", raising=False)  # the default
    s = jaxemu.get_scheme("auto")
    f = jax.jit(lambda a, b: jaxemu.matmul(a, b, scheme="auto"))
    x = jax.ShapeDtypeStruct((8192, 8192), jnp.float32)
    hlo = f.lower(x, x).compile().as_text()
    assert 'custom_call_target="jaxemu_row_stats"' in hlo and 'custom_call_target="jaxemu_col_stats"' in hlo
    # C leaves each conditional as its branch wrote it (xla.one_of): no
    # transpose of it on fp16x3's path (branch 1 of auto's conditional; the
    # refused branch's hybrids, branch 0, still transpose theirs).
    where = re.findall(r"%\S*transpose\S* = f32\[[0-9,]*8192,[0-9,]*8192\].*?op_name=\"([^\"]*)\"", hlo)
    assert all("/cond/branch_0_fun/" in w for w in where), where
    for law in T.LAWS:
        a, b = (jnp.asarray(x)[None] for x in T.operands(law, 512, 3000, 256, 1))
        kernel = jax.jit(lambda a, b: (lambda t: (t.normwise_ratio, t.fp16x3_ok))(
            auto.DataTest.of(a, b, s, kernels=cuda_stats.KERNELS)))(a, b)
        xla = jax.jit(lambda a, b: (lambda t: (t.normwise_ratio, t.fp16x3_ok))(auto.DataTest.of(a, b, s)))(a, b)
        rk, rx = float(kernel[0][0]), float(xla[0][0])
        assert rx * 0.98 <= rk <= rx * 1.02, (law, rk, rx)
        assert bool(kernel[1]) == bool(xla[1]), law


def test_auto_with_the_stats_kernels_admits_fp16x3_on_a_long_centre_update(rng, monkeypatch):
    # A k-means centre update on structureless normal data, K = 2^18: the
    # column sums of C are ~1/50 of |A| |B|'s, below a float32 reduction's
    # guarantee over K (2K u = 1/32); both the kernels' probe (ceil(K / 2048) 8 + 14
    # roundings) and XLA's blocked one (256 + log2(K / 256) + 1) bound ||C||
    # from below and admit fp16x3. The result keeps SGEMM's accuracy
    # against float64.
    from jaxemu import auto
    from jaxemu.backends import cuda_stats
    k, m, n = 1 << 18, 64, 128
    lab = rng.integers(0, m, size=k)
    oh = np.zeros((m, k), np.float32)
    oh[lab, np.arange(k)] = 1.0
    x = T.sample("normal(0,1)", (k, n), rng)
    s = jaxemu.get_scheme("auto")
    a, b = jnp.asarray(oh)[None], jnp.asarray(x)[None]
    ok = lambda kern: bool(jax.jit(lambda a, b: auto.DataTest.of(a, b, s, (True, False), kern).fp16x3_ok)(a, b))  # noqa: E731
    assert ok(None) and ok(cuda_stats.KERNELS)
    monkeypatch.setenv("JAXEMU_CUDA_STATS", "1")
    f = jax.jit(jaxemu.emulate(lambda lab, x: jax.nn.one_hot(lab, m, dtype=x.dtype).T @ x, scheme="auto"))
    got = np.asarray(f(jnp.asarray(lab), jnp.asarray(x)))
    ref = oh.astype(np.float64) @ x.astype(np.float64)
    sgemm = np.asarray(jax.jit(lambda a, b: jnp.matmul(a, b, precision="highest"))(oh, x))
    assert T.relerr(got, ref) <= max(T.relerr(sgemm, ref), 2.0 ** -24), (T.relerr(got, ref), T.relerr(sgemm, ref))


@pytest.mark.parametrize("stats", ["0", "1"])
def test_auto_gives_fp16x3s_bits_with_the_tests_row_scaling(stats, rng, monkeypatch):
    # Where its test passes fp16x3, auto hands the kernel the row scaling
    # from the test's maxima (backends.row_scales) instead of a pass of its
    # own: the same exponents, so the same bits as fp16x3 called directly
    # with the passes' exponents (not the ones the FP32-operand kernel finds
    # itself, JAXEMU_CUDA_F32_SCALES_IN_KERNEL=1: a row's first K-tile's
    # maximum, 8 binades to spare, other bits in C's last places: H200, stop
    # 53), with XLA's statistics or the kernels'; and no reduction over B
    # remains in the conditional's fp16x3 branch.
    monkeypatch.setenv("JAXEMU_CUDA_STATS", stats)
    monkeypatch.setenv("JAXEMU_CUDA_F32_SCALES_IN_KERNEL", "0")
    s = jaxemu.get_scheme("auto").replace(min_flops=0.0, min_dim=0, cost_model="counts")
    for law in T.LAWS:
        a, b = T.operands(law, 700, 3000, 300, 2)
        got = np.asarray(jax.jit(lambda a, b: jaxemu.matmul(a, b, scheme=s))(a, b))
        want = np.asarray(jax.jit(lambda a, b: jaxemu.matmul(a, b, scheme="fp16x3"))(a, b))
        report = jaxemu.auto_report(a, b, s)
        assert report["scheme"] == "fp16x3", (law, report)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=law)


@pytest.mark.parametrize("name", ["fp16x3", "bf16x6", "auto"])
def test_a_transposed_b_is_split_as_rows_with_the_same_bits(name, rng, monkeypatch):
    # x @ y.T under emulate: B reaches the backend as y's rows (emulate folds
    # the transpose; backends.b_rows_free), which the split kernel (and
    # auto's statistics: the row kernel) read as they lie, with no transposed
    # copy and no column-statistics kernel; the same bits as the product of
    # a (K, N) B (the transposed split kernel), on every law. (bf16x6 on the
    # slice path: this output would take the FP32-operand kernel, which
    # reads B as it is either way. auto: the row kernel sums |b| in another
    # order than the column kernel; a column sum on one of the test's
    # thresholds could change its choice, which these data do not have.)
    monkeypatch.delenv("JAXEMU_CUDA_B_ROWS", raising=False)
    monkeypatch.setenv("JAXEMU_CUDA_F32_OPERANDS", "0")
    s = jaxemu.get_scheme(name)
    if name == "auto":
        s = s.replace(min_flops=0.0, min_dim=0, cost_model="counts")
    f = jax.jit(jaxemu.emulate(lambda x, y: x @ y.T, scheme=s))
    if name == "auto":
        hlo = f.lower(jax.ShapeDtypeStruct((512, 256), jnp.float32),
                      jax.ShapeDtypeStruct((4096, 256), jnp.float32)).compile().as_text()
        assert 'custom_call_target="jaxemu_col_stats"' not in hlo
        assert hlo.count('custom_call_target="jaxemu_row_stats"') >= 2  # A's and B^T's
    for law in T.LAWS:
        x, yt = T.operands(law, 512, 256, 4096, 3)
        y = np.ascontiguousarray(yt.T)
        got = np.asarray(f(x, y))
        want = np.asarray(jax.jit(lambda a, b: jaxemu.matmul(a, b, scheme=s))(x, yt))
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=law)


def test_auto_takes_an_exact_operand_in_16_bits(rng):
    # auto's data test and conditional take the one-hot in fp16 (the fastest
    # candidate's slice format): an operand of a conditional is written
    # whichever branch runs, so no float32 form of it may reach the entry
    # computation; the result keeps FP32's accuracy.
    from jaxemu.schemes import Auto
    k, m, n = 70001, 13, 200
    lab = jnp.asarray(rng.integers(0, m, size=k))
    x = T.sample("normal(0,1)", (k, n), rng)

    def f(x, lab):
        return jax.nn.one_hot(lab, m, dtype=x.dtype).T @ x
    emulated = jax.jit(jaxemu.emulate(f, scheme=Auto(min_flops=0, min_dim=0, cost_model="counts")))
    hlo = emulated.lower(x, lab).compile().as_text()
    entry = hlo[hlo.index("\nENTRY"):]
    assert re.search(r"f16\[(1,)?13,70001\]", entry), entry
    assert not re.search(r"f32\[(1,)?(13,70001|70001,13)\]", entry), entry
    oh = np.asarray(jax.nn.one_hot(lab, m), np.float32)
    ref = oh.T.astype(np.float64) @ x.astype(np.float64)
    sgemm = np.asarray(jax.jit(lambda a, b: jnp.matmul(a, b, precision="highest"))(oh.T, x))
    assert T.relerr(np.asarray(emulated(x, lab)), ref) <= 2 * max(T.relerr(sgemm, ref), 2.0 ** -24)


def test_zero_sized_dims():
    for sa, sb in [((0, 5), (5, 3)), ((4, 0), (0, 3)), ((4, 5), (5, 0))]:
        c = run("bf16x6", np.ones(sa, np.float32), np.ones(sb, np.float32), "cuda")
        assert c.shape == (sa[0], sb[1]) and np.all(np.asarray(c) == 0)


@pytest.mark.parametrize("device_specials", ["0", "1"])
@pytest.mark.parametrize("name", ["bf16x6", "fp16x3", "tf32x3", "bf16x3"])
def test_special_values_on_the_gpu(name, device_specials, monkeypatch):
    # Settled before the GEMM (a conditional) or by the fix-up in the GEMM's
    # own call (JAXEMU_CUDA_DEVICE_SPECIALS=1, the default); B as it is, and
    # as the rows of B^T (x @ y.T under emulate: the fix-up reads y's rows).
    from test_special_values import ieee_reference, planted
    monkeypatch.setenv("JAXEMU_CUDA_DEVICE_SPECIALS", device_specials)
    monkeypatch.setenv("JAXEMU_CUDA_F32_OPERANDS", "0")  # the slice path (test_cuda_f32.py: the other one)
    a, b = planted(np.random.default_rng(7))
    ref = ieee_reference(a, b)
    bt = np.ascontiguousarray(b.T)
    for c in (run(name, a, b, "cuda"),
              jax.jit(jaxemu.emulate(lambda x, y: x @ y.T, scheme=name, backend="cuda"))(a, bt)):
        c = np.asarray(c, np.float64)
        np.testing.assert_array_equal(np.isnan(c), np.isnan(ref))
        np.testing.assert_array_equal(np.isposinf(c), np.isposinf(ref))
        np.testing.assert_array_equal(np.isneginf(c), np.isneginf(ref))
        # A finite entry's row of A and column of B hold no NaN/Inf (else
        # the entry would not be finite): the scheme's componentwise bound there.
        fin = np.isfinite(ref)
        scale = np.nan_to_num(np.abs(a), posinf=0).astype(np.float64) @ np.nan_to_num(np.abs(b), posinf=0)
        bound = max(1e-6, 16 * jaxemu.get_scheme(name).unit_roundoff)
        assert np.all(np.abs(c[fin] - ref[fin]) <= bound * scale[fin]), name
    if device_specials == "1":
        hlo = jax.jit(jaxemu.emulate(lambda x, y: x @ y.T, scheme=name, backend="cuda")).lower(a, bt).compile().as_text()
        assert " conditional(" not in hlo, hlo


def test_batched_and_general_dimension_numbers():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 40, 5, 70)).astype(np.float32)
    b = rng.standard_normal((70, 3, 33)).astype(np.float32)
    dn = (((3,), (0,)), ((0,), (1,)))
    c = jax.jit(lambda a, b: jaxemu.dot_general(a, b, dn, scheme="bf16x6", backend="cuda"))(a, b)
    ref = T.dot_general_reference(a.astype(np.float64), b.astype(np.float64), dn)
    np.testing.assert_allclose(np.asarray(c), ref, rtol=2e-5, atol=2e-5)


def test_vmap_grad_and_emulate_through_the_cuda_lowering():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 64, 96)).astype(np.float32)
    w = rng.standard_normal((96, 48)).astype(np.float32)
    f = lambda a, w: jnp.sum(jnp.tanh(a @ w) ** 2)
    em = jax.jit(jax.grad(jaxemu.emulate(f, backend="cuda"), (0, 1)))
    hlo = em.lower(a, w).as_text()
    assert "jaxemu_fused_" in hlo
    ga, gw = em(a, w)
    with jax.enable_x64(True):
        ra, rw = jax.grad(f, (0, 1))(jnp.asarray(a, jnp.float64), jnp.asarray(w, jnp.float64))
    np.testing.assert_allclose(np.asarray(ga), np.asarray(ra), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(gw), np.asarray(rw), rtol=1e-4, atol=1e-4)
    v = jax.jit(jax.vmap(lambda x: jaxemu.dot(x, w, backend="cuda")))(a)
    np.testing.assert_allclose(np.asarray(v), a.astype(np.float64) @ w, rtol=2e-5, atol=2e-5)


def outside_and_inside_loops(hlo: str, needle: str):
    """Occurrences of ``needle`` in an optimized HLO module's text: (outside
    while loops, inside them: in a while body or any computation reachable
    from one: fusions, command buffers, conditional branches)."""
    text, name = {}, None
    for line in hlo.splitlines():
        if not line.startswith(" ") and line.rstrip().endswith("{"):
            name = re.match(r"^(?:ENTRY )?%?([\w.\-]+)", line).group(1)
            text[name] = ""
        elif name is not None:
            text[name] += line + "\n"
    seen, todo = set(), list(set(re.findall(r"body=%?([\w.\-]+)", hlo)))
    while todo:
        c = todo.pop()
        if c in text and c not in seen:
            seen.add(c)
            todo += [r for r in re.findall(r"%([\w.\-]+)", text[c]) if r in text]
    inside = sum(text[c].count(needle) for c in seen)
    return sum(t.count(needle) for t in text.values()) - inside, inside


@pytest.mark.parametrize("name", ["fp16x3", "bf16x6", "auto"])
@pytest.mark.parametrize("loop", ["map_rhs", "fori_lhs"])
def test_a_loop_invariant_operand_is_split_once_before_the_loop(name, loop, monkeypatch):
    """jaxemu/hoist.py: the const of a scan split before it, by the split
    kernel outside XLA's while loop; the loop splits only what changes; the
    same bits as splitting in every iteration. auto: fp16x3's split is made
    ahead and read where auto's plan for the shape runs fp16x3 first (at
    kNN's chunk shape it must: that is the case the hoisting is for); where
    it does not, no product reads it and XLA deletes it; its statistics of
    an invariant B are taken once, before the loop."""
    from jaxemu import auto, hoist
    from jaxemu.schemes import get_scheme
    rng = np.random.default_rng(5)
    q = jnp.asarray(rng.standard_normal((8192, 128)) + 3.0, jnp.float32)
    db = jnp.asarray(rng.standard_normal((262144, 128)) + 3.0, jnp.float32)
    if loop == "map_rhs":  # kNN: chunks of 2048 queries, the database B^T
        f = lambda q, db: jax.lax.map(lambda qc: jnp.max(qc @ db.T, axis=1), q.reshape(4, 2048, 128))
        mkn = (2048, 128, 262144)
    else:  # k-means: the points A, the centres the carry
        f = lambda q, db: jax.lax.fori_loop(0, 4, lambda i, c: 0.5 * c + 1e-3 * (db @ c.T)[:512, :128], q[:512])
        mkn = (262144, 128, 512)
    reads = True
    if name == "auto":
        pl = auto.plan(1, mkn[0], mkn[2], mkn[1], get_scheme("auto"), "cuda", "cuda")
        first = pl.static or (pl.candidates[0].label if pl.candidates else "")
        reads = first == "fp16x3"
        assert reads or loop != "map_rhs", ("auto's plan at kNN's chunk shape", first, pl.reason)
    outs = {}
    monkeypatch.setenv("JAXEMU_CUDA_HOIST_STATS", "1")  # (the default: auto's statistics of B too)
    for on in ("1", "0"):
        monkeypatch.setenv(hoist.SWITCH, on)
        g = jax.jit(jaxemu.emulate(f, scheme=name))
        hlo = g.lower(q, db).compile().as_text()
        splits = outside_and_inside_loops(hlo, 'custom_call_target="jaxemu_fused_split"')
        outs[on] = np.asarray(g(q, db))
        # hoisted: the invariant operand's split before the loop, the other's in it
        # (auto: its other branches split for themselves, in the loop)
        if name == "auto":
            assert splits[0] == (1 if on == "1" and reads else 0), (name, on, splits)
            # and its statistics of an invariant B (the database), by the row kernel on B^T
            stats = [outside_and_inside_loops(hlo, f'custom_call_target="jaxemu_{k}_stats"') for k in ("row", "col")]
            ahead = sum(o for o, _ in stats)
            assert ahead == (1 if on == "1" and loop == "map_rhs" else 0), (name, on, loop, stats)
        else:
            assert splits == ((1, 1) if on == "1" else (0, 2)), (name, on, splits)
    np.testing.assert_array_equal(outs["1"].view(np.uint32), outs["0"].view(np.uint32))
    if loop == "map_rhs":  # the first 256 queries against float64
        ref = np.max(np.asarray(q[:256], np.float64) @ np.asarray(db, np.float64).T, axis=1)
        np.testing.assert_allclose(outs["1"][0, :256], ref, rtol=2e-6, atol=0)


@pytest.mark.parametrize("shape", [(512, 4096, 512), (256, 1 << 18, 128)])  # the second splits K
def test_repeated_runs_are_bit_identical(shape):
    from jaxemu.backends import cuda_fused
    m, k, n = shape
    a, b = T.operands("uniform(-1,1)", m, k, n, seed=11)
    if k > 65536:
        assert cuda_fused.launch_config(m, n, k, 1, jaxemu.get_scheme("bf16x6"), cuda_fused.sm_count()).splits > 1
    f = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme="bf16x6", backend="cuda"))
    first = np.asarray(f(a, b))
    for _ in range(5):
        np.testing.assert_array_equal(np.asarray(f(a, b)), first)


@pytest.mark.parametrize("device_specials", ["0", "1"])
@pytest.mark.parametrize("name", FLOAT)
def test_overflow_takes_fp32s_value(name, device_specials, monkeypatch):
    # Row 0 of A times column 0 of B overflows in any summation order; every
    # other entry is finite. max|A| max|B| K (from the split) must route the
    # product through FP32's rules (the conditional, or the fix-up in the
    # GEMM's call): Inf exactly there, finite values elsewhere. (The slice
    # path: the FP32-operand kernel would take the bf16 schemes here; tf32x3
    # runs 2 K-splits at this shape, so the conditional either way.) Then
    # K = 1 and bf16x6: its slices of 2^64 - 2^40 round up to 2^64 and their
    # product overflows where FP32's does not: FP32's finite value must
    # replace the emulated Inf.
    monkeypatch.setenv("JAXEMU_CUDA_DEVICE_SPECIALS", device_specials)
    monkeypatch.setenv("JAXEMU_CUDA_F32_OPERANDS", "0")
    rng = np.random.default_rng(5)
    a = rng.uniform(-1, 1, (200, 300)).astype(np.float32)
    b = rng.uniform(-1, 1, (300, 136)).astype(np.float32)
    a[0, :] = 1e36
    b[:, 0] = 1e36
    c = np.asarray(run(name, a, b, "cuda"))
    assert np.isposinf(c[0, 0]) and np.isfinite(c).sum() == c.size - 1
    ref = T.reference(a, b)
    fin = np.isfinite(c)
    bound = max(1e-6, 16 * jaxemu.get_scheme(name).unit_roundoff)
    assert T.componentwise_err(np.where(fin, c, 0), a, b, np.where(fin, ref, 0)) < bound
    if name == "bf16x6":
        top = np.float32(2.0 ** 64) * np.float32(1 - 2.0 ** -24)
        c = np.asarray(run(name, np.full((64, 1), top, np.float32), np.full((1, 64), top, np.float32), "cuda"))
        assert np.all(c == np.float32(top) * np.float32(top)), c


def test_auto_hybrid_and_cost_model_on_the_gpu():
    """On an H200 auto plans with the shipped cost model. Rows of A and
    columns of B on wide-exponent data: the default (normwise) test admits
    fp16x3 for the whole product; the componentwise test refuses those rows
    and runs the two-sided hybrid, which on the cuda kernels equals its three
    products run by hand and keeps bf16x6's bound."""
    from jaxemu import costs
    kind = jax.devices("cuda")[0].device_kind
    if costs.model_for(kind, "cuda") is None:
        pytest.skip(f"no cost model for {kind} (run jaxemu.calibrate())")
    rng = np.random.default_rng(7)
    m = k = n = 6144
    a = T.sample("wide-exp", (m, k), rng)
    b = T.sample("wide-exp", (k, n), rng)
    rows, cols = np.arange(0, m, 4), np.arange(0, n, 4)  # 1/4 wide: 3/4 safe -> split 4608 x 4608
    safe_r, safe_c = np.setdiff1d(np.arange(m), rows), np.setdiff1d(np.arange(n), cols)
    # Safe rows and columns within 2^-1..1: uniform(-1, 1) rows of 6144 values
    # can hold a value below 2^-24 (their spread then fails the fp16 test:
    # seed 7 gives 4606 safe rows, not 4608, and the split drops to 3072).
    away = lambda shape: rng.uniform(0.5, 1, shape) * rng.choice([-1, 1], shape)  # noqa: E731
    a[safe_r] = away((safe_r.size, k))
    b[:, safe_c] = away((k, safe_c.size))
    ref = T.reference(a, b)
    err32 = T.componentwise_err(run("fp32", a, b), a, b, ref)
    assert jaxemu.auto_report(a, b)["scheme"] == "fp16x3"
    assert T.relerr(run("auto", a, b), ref) <= T.relerr(run("fp32", a, b), ref)
    cw = jaxemu.get_scheme("auto").replace(criterion="componentwise")
    rep = jaxemu.auto_report(a, b, cw)
    assert rep["scheme"] == "fp16x3+bf16x6" and rep["split"] == dict(rows=4608, cols=4608, of=(m, n)), rep
    c = np.asarray(run(cw, a, b))
    r, q = safe_r[:4608], safe_c[:4608]
    other_r, other_q = np.setdiff1d(np.arange(m), r), np.setdiff1d(np.arange(n), q)
    np.testing.assert_array_equal(c[np.ix_(r, q)], run("fp16x3", a[r], b[:, q]))
    np.testing.assert_array_equal(c[np.ix_(r, other_q)], run("bf16x6", a[r], b[:, other_q]))
    np.testing.assert_array_equal(c[other_r], run("bf16x6", a[other_r], b))
    assert T.componentwise_err(c, a, b, ref) <= 2 * err32


@pytest.mark.parametrize("scheme", ["fp16x3", "bf16x6"])
def test_gated_split_and_product_write_only_where_the_choice_opens_them(scheme):
    """auto's choice on the device (docs/auto.md): a gated split and GEMM
    (cuda_fused.Gate) give the ungated call's bits where the choice is in
    run_if, and where it is not leave C as the candidate before left it
    (c_in, aliased) or, for the first candidate, write nothing that a later
    one does not overwrite: a chain of three candidates (two schemes and
    jaxemu's FP32 GEMM) gives exactly the chosen one's C, special values
    included (an Inf in A, fixed up on the device)."""
    from jaxemu.backends import cuda_fused as cf
    from test_fused_layout import same_bits
    s = jaxemu.get_scheme(scheme)
    other = jaxemu.get_scheme("bf16x6" if scheme == "fp16x3" else "fp16x3")
    rng = np.random.default_rng(7)
    bsz, m, k, n = 2, 384, 320, 256
    a = rng.uniform(-1, 1, (bsz, m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (bsz, k, n)).astype(np.float32)
    a[1, 5, 7] = np.inf

    def product(sc, a, b, gate=None, c_in=None):
        kp = cf.padded_k(k, sc)
        a_split = cf.slices_kernel(a, sc, kp, gate=gate)
        b_split = cf.slices_kernel(b, sc, kp, transposed=True, gate=gate)
        rows = cf.b_as_rows()
        return cf.split_product(a_split, b_split, sc, specials=(a, jnp.swapaxes(b, 1, 2) if rows else b, rows),
                                gate=gate, c_in=c_in)

    plain = jax.jit(lambda a, b: product(s, a, b))(a, b)
    plain_other = jax.jit(lambda a, b: product(other, a, b))(a, b)

    from jaxemu.backends.cuda_fp32 import fp32_product_gated

    @jax.jit
    def chain(a, b, choice):  # candidate 0: `other`, 1: `s`, 2: jaxemu's FP32 GEMM
        c = product(other, a, b, gate=cf.Gate(choice, (0,)))
        c = product(s, a, b, gate=cf.Gate(choice, (1,)), c_in=c)
        return fp32_product_gated(a, b, cf.Gate(choice, (2,)), c_in=c)

    for choice, want in ((1, plain), (0, plain_other)):
        same_bits(chain(a, b, jnp.int32(choice)), want)
    # FP32 (choice 2): an FP32 dot product per entry (within K 2^-24 of
    # sum |a b|), FP32's NaN/Inf where the float64 product has them
    c32 = np.asarray(chain(a, b, jnp.int32(2)))
    ref = np.einsum("lmk,lkn->lmn", a.astype(np.float64), b.astype(np.float64))
    mag = np.einsum("lmk,lkn->lmn", np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    fin = np.isfinite(ref)
    np.testing.assert_array_equal(np.isfinite(c32), fin)
    np.testing.assert_array_equal(c32[~fin & ~np.isnan(ref)], ref[~fin & ~np.isnan(ref)])
    assert np.all(np.abs(c32[fin] - ref[fin]) <= k * 2.0 ** -24 * mag[fin])
    # (FP32's rules: A's Inf makes its row of C not finite)
    assert not np.isfinite(np.asarray(plain)[1, 5]).any()
    ref = a[0].astype(np.float64) @ b[0].astype(np.float64)  # batch entry 0: finite
    assert np.max(np.abs(np.asarray(plain)[0] - ref)) <= 1e-6 * np.max(np.abs(ref))
    with pytest.raises(ValueError, match="0..31"):
        cf.Gate(jnp.int32(0), (32,)).run_if_bits()


def test_auto_chooses_on_the_device_without_a_conditional(monkeypatch):
    """JAXEMU_CUDA_DEVICE_CHOICE=1 (opt-in; docs/auto.md, "The choice on the
    device"): at 2048^3 auto's compiled program holds no conditional, and
    gives the conditional's bits where fp16x3 or bf16x6 runs; on values
    beyond 2^100 (FP32 only) jaxemu's FP32 GEMM runs: FP32's error class
    against float64, not cuBLAS's bits."""
    from test_fused_layout import same_bits
    rng = np.random.default_rng(11)
    n = 2048
    a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, n)).astype(np.float32)

    def auto_run(a, b):
        jax.clear_caches()
        f = jax.jit(lambda a, b: jaxemu.matmul(a, b, scheme="auto"))
        return np.asarray(f(a, b)), f.lower(a, b).compile().as_text()

    monkeypatch.delenv("JAXEMU_CUDA_DEVICE_CHOICE", raising=False)
    want, hlo = auto_run(a, b)
    assert "conditional(" in hlo
    monkeypatch.setenv("JAXEMU_CUDA_DEVICE_CHOICE", "1")
    got, hlo = auto_run(a, b)
    assert "conditional(" not in hlo and "jaxemu_fp32_gated" in hlo
    same_bits(got, want)
    a2 = a.copy()
    a2[3, 5] = np.float32(2.0**110)  # class 2: FP32 only
    got2, _ = auto_run(a2, b)
    ref = a2.astype(np.float64) @ b.astype(np.float64)
    mag = np.abs(a2).astype(np.float64) @ np.abs(b).astype(np.float64)
    assert np.all(np.abs(got2 - ref) <= n * 2.0 ** -24 * mag)
