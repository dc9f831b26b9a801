"""GPU tests of the FP32-operand fused kernels (ffi/fused/kernel_f32.cuh:
bf16 schemes, fp16x3 and tf32x3, whose operands are split in the GEMM's shared
memory, fp16x3's rows scaled first, tf32x3's B transposed by its cut), on every
shape here with JAXEMU_CUDA_F32_OPERANDS=1 (by default they run only where
cuda_fused.f32_kernel says they pay). Skipped without an
NVIDIA GPU and the CUDA extension."""
import re
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gpu
import jaxemu
from jaxemu import testing as T
from jaxemu.backends import cuda_fused

pytestmark = gpu.MARKS

BF16 = ["bf16x3", "bf16x6", "bf16x9"]
FLOAT = BF16 + ["fp16x3", "tf32x3"]  # every scheme with an FP32-operand kernel


@pytest.fixture(autouse=True, params=["smem", "registers"])
def f32_operands(monkeypatch, request):
    """Every test on both forms of the kernel: A's slices in shared memory,
    and in registers (JAXEMU_CUDA_F32_REGISTER_A=1, wgmma's RS form, the default).
    (tf32x3 has no register form: it runs once.)"""
    if request.param == "registers" and "tf32" in request.node.name:
        pytest.skip("tf32x3 keeps A's slices in shared memory (no register form)")
    monkeypatch.setenv("JAXEMU_CUDA_F32_OPERANDS", "1")
    monkeypatch.setenv("JAXEMU_CUDA_F32_REGISTER_A", "1" if request.param == "registers" else "0")


def run(name, a, b):
    return jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=name, backend="cuda"))(a, b)


@pytest.mark.parametrize("name", ["bf16x6", "tf32x3"])
def test_one_custom_call_and_no_conditional(name):
    hlo = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=name, backend="cuda")).lower(
        jnp.ones((256, 260)), jnp.ones((260, 132))).compile().as_text()
    assert hlo.count('custom_call_target="jaxemu_fused_f32"') == 1, hlo
    assert "jaxemu_fused_split" not in hlo and " conditional(" not in hlo, hlo
    # N % 4 != 0: TMA cannot read B's rows; the slice path runs
    hlo = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=name, backend="cuda")).lower(
        jnp.ones((256, 260)), jnp.ones((260, 130))).compile().as_text()
    assert "jaxemu_fused_f32" not in hlo and "jaxemu_fused_split" in hlo


@pytest.mark.parametrize("law", T.LAWS)
@pytest.mark.parametrize("name", FLOAT)
def test_accuracy_against_float64_and_the_slice_path(name, law, monkeypatch):
    a, b = T.operands(law, 2048, 4096, 2048, seed=zlib.crc32(f"{name}/{law}".encode()) % 1000)
    ref = T.reference(a, b)
    e32 = T.relerr(jaxemu.dot(a, b, scheme="fp32"), ref)
    e = T.relerr(run(name, a, b), ref)
    monkeypatch.setenv("JAXEMU_CUDA_F32_OPERANDS", "0")
    e_slices = T.relerr(run(name, a, b), ref)
    s = jaxemu.get_scheme(name)
    bound = e32 if s.fp32_class else s.error_bound()
    if name == "fp16x3" and law == "wide-exp":
        bound = 4 * e32  # values far below their row maximum lose bits (as tests/test_cuda.py)
    assert e <= bound, (name, law, e, e32)
    # The same slices, promoted every 32 K-steps here (cuda_fused.f32_product),
    # every 64 there: twice the round-to-nearest adds into the FP32 total,
    # up to sqrt(2) x the error where they dominate (signed data: 1.30x at
    # K = 4096, H200; uniform(0,1): below the slice path's).
    assert e <= 1.5 * e_slices + 1e-9, (name, law, e, e_slices)


# K-splits (small outputs, long K), edge tiles, batches.
@pytest.mark.parametrize("bsz,m,k,n", [(1, 1, 4, 4), (1, 7, 12, 8), (1, 129, 1032, 68), (1, 3, 65536, 12),
                                       (1, 1000, 64, 4), (1, 257, 200, 128), (3, 130, 1 << 15, 68),
                                       (2, 300, 96, 1024)])
@pytest.mark.parametrize("name", ["bf16x3", "bf16x6", "fp16x3", "tf32x3"])
def test_odd_shapes_long_k_and_batches(name, bsz, m, k, n):
    rng = np.random.default_rng(m * k * n + bsz)
    a = rng.standard_normal((bsz, m, k)).astype(np.float32)
    b = rng.standard_normal((bsz, k, n)).astype(np.float32)
    c = np.asarray(jax.jit(lambda a, b: jaxemu.matmul(a, b, scheme=name, backend="cuda"))(a, b), np.float64)
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    absab = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    # its slices' share of each product, and FP32's (fp16x3: 11 + 11 bits
    # of the row-scaled values, normal data stays far from fp16's subnormals;
    # tf32x3: lo*lo dropped and each value's residual past two 11-bit
    # slices, 3 x 2^-22 of a product)
    u = {"bf16x3": 2.0**-16, "fp16x3": 2.0**-22, "tf32x3": 2.0**-21}.get(name, 2.0**-23)
    np.testing.assert_array_less(np.abs(c - ref), (4 * np.sqrt(k) * 2.0**-24 + 2 * u) * absab + 1e-30)


@pytest.mark.parametrize("in_kernel", ["0", "1"])  # fp16x3's exponents: the passes', or found in the kernel
def test_special_values_on_the_gpu(in_kernel, monkeypatch):
    from test_special_values import ieee_reference, planted
    monkeypatch.setenv("JAXEMU_CUDA_F32_SCALES_IN_KERNEL", in_kernel)
    a, b = planted(np.random.default_rng(7), n=12)  # N % 4 == 0: this kernel
    ref = ieee_reference(a, b)
    fin = np.isfinite(ref)
    with np.errstate(invalid="ignore"):
        absab = (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))[fin]
    for name in FLOAT:
        c = np.asarray(run(name, a, b), np.float64)
        np.testing.assert_array_equal(np.isnan(c), np.isnan(ref))
        np.testing.assert_array_equal(np.isposinf(c), np.isposinf(ref))
        np.testing.assert_array_equal(np.isneginf(c), np.isneginf(ref))
        u = max(jaxemu.get_scheme(name).unit_roundoff, 2.0**-24)  # as test_special_values.py
        assert np.all(np.abs(c[fin] - ref[fin]) <= (a.shape[1] + 2) * u * absab + 2.0**-126), name


@pytest.mark.parametrize("name,in_kernel", [("bf16x6", "0"), ("fp16x3", "0"), ("fp16x3", "1"), ("tf32x3", "0")])
def test_overflow_takes_fp32s_value(name, in_kernel, monkeypatch):
    monkeypatch.setenv("JAXEMU_CUDA_F32_SCALES_IN_KERNEL", in_kernel)
    rng = np.random.default_rng(5)
    a = rng.uniform(-1, 1, (200, 300)).astype(np.float32)
    b = rng.uniform(-1, 1, (300, 136)).astype(np.float32)
    a[0, :] = 1e36
    b[:, 0] = 1e36
    c = np.asarray(run(name, a, b))
    assert np.isposinf(c[0, 0]) and np.isfinite(c).sum() == c.size - 1
    ref = T.reference(a, b)
    fin = np.isfinite(c)
    assert T.componentwise_err(np.where(fin, c, 0), a, b, np.where(fin, ref, 0)) < 1e-6


@pytest.mark.parametrize("name", ["bf16x6", "fp16x3", "tf32x3"])
def test_an_exact_operand(name):
    rng = np.random.default_rng(3)
    onehot = (rng.integers(0, 64, 4096)[None, :] == np.arange(64)[:, None]).astype(np.float32)  # (64, 4096)
    x = rng.standard_normal((4096, 256)).astype(np.float32)
    s = jaxemu.get_scheme(name).with_exact(True, False)
    assert cuda_fused.f32_kernel(s, 64, 4096, 256)
    c = np.asarray(jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=s, backend="cuda"))(onehot, x), np.float64)
    ref = onehot.astype(np.float64) @ x.astype(np.float64)
    bound = (4 * np.sqrt(4096) * 2.0**-24 + 2 * 2.0**-23) * (onehot.astype(np.float64) @ np.abs(x.astype(np.float64)))
    np.testing.assert_array_less(np.abs(c - ref), bound + 1e-30)


def test_repeated_runs_are_bit_identical():
    a, b = T.operands("uniform(-1,1)", 256, 1 << 18, 128, seed=11)
    assert cuda_fused.f32_splits(256, 128, 1 << 18, 1) > 1
    f = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme="bf16x6", backend="cuda"))
    first = np.asarray(f(a, b))
    for _ in range(3):
        np.testing.assert_array_equal(np.asarray(f(a, b)), first)


@pytest.mark.parametrize("name", BF16 + ["bf16x6_exact_a"])
def test_a_in_registers_gives_the_same_bits(name, monkeypatch):
    # The RS form runs the same wgmma terms in the same order into the same
    # accumulator, from the same slices (cut in registers instead of shared
    # memory): the same bits, K-splits and edge tiles included.
    s = jaxemu.get_scheme("bf16x6").with_exact(True, False) if name == "bf16x6_exact_a" else jaxemu.get_scheme(name)
    rng = np.random.default_rng(11)
    for m, k, n in [(129, 1032, 68), (3, 1 << 14, 12), (300, 96, 260)]:
        a = rng.standard_normal((m, k)).astype(np.float32)
        if s.exact[0]:
            a = (rng.integers(0, 3, (m, k)) == 0).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        out = {}
        for reg in ("0", "1"):
            monkeypatch.setenv("JAXEMU_CUDA_F32_REGISTER_A", reg)
            out[reg] = np.asarray(jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=s, backend="cuda"))(a, b))
        np.testing.assert_array_equal(out["1"].view(np.uint32), out["0"].view(np.uint32), err_msg=f"{m}x{k}x{n}")


@pytest.mark.parametrize("m,k,n", [(2048, 2048, 2048), (1000, 544, 1024), (1024, 8192, 256), (3, 1 << 14, 12)])
def test_tf32x3_gives_the_slice_paths_bits(m, k, n, monkeypatch):
    # The same slices (cvt.rn.tf32 rounds as round_bits: tests/native/
    # tf32_round_check.cu), the same terms in the same order into one
    # partial promoted every 32-step K-tile, the same K-splits (asserted
    # first): the same bits as the slice path. (At K <= SHORT_K_HALF_KC the
    # slice kernel promotes every half K-tile: not compared there.)
    s = jaxemu.get_scheme("tf32x3")
    assert k % 32 == 0 and k > cuda_fused.SHORT_K_HALF_KC
    assert cuda_fused.f32_splits(m, n, k, 1) == cuda_fused.launch_config(m, n, k, 1, s, cuda_fused.sm_count()).splits
    rng = np.random.default_rng(m + k + n)
    a = np.ldexp(rng.uniform(-1, 1, (m, k)), rng.integers(-16, 16, (m, k))).astype(np.float32)  # wide exponents
    b = rng.standard_normal((k, n)).astype(np.float32)
    f = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=s, backend="cuda"))
    assert "jaxemu_fused_f32" in f.lower(a, b).compile().as_text()
    kernel = np.asarray(f(a, b))
    monkeypatch.setenv("JAXEMU_CUDA_F32_OPERANDS", "0")
    g = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=s, backend="cuda"))
    assert "jaxemu_fused_f32" not in g.lower(a, b).compile().as_text()
    np.testing.assert_array_equal(kernel.view(np.uint32), np.asarray(g(a, b)).view(np.uint32))


def assert_fp16x3_componentwise(c, a, b, err_msg=""):
    """|C - A B| within fp16x3's componentwise bound, entry by entry against
    float64 (A, B float32, (M, K) x (K, N) or batched (L, M, K) x (L, K, N)):
    (4 sqrt(K) 2^-24 + 2 2^-22) (|A| |B|)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = (4 * np.sqrt(a.shape[-1]) * 2.0**-24 + 2 * 2.0**-22) * np.matmul(np.abs(a64), np.abs(b64))
    np.testing.assert_array_less(np.abs(np.asarray(c, np.float64) - np.matmul(a64, b64)), bound + 1e-38,
                                 err_msg=err_msg)


@pytest.mark.parametrize("exact", [False, True])
def test_fp16x3_scales_rows_in_the_kernel(exact):
    # fp16x3's row scaling in the cut (transform.cuh: Scales): rows of A and
    # columns of B times powers of two from 2^-40 to 2^40, one operand
    # exact or none, edge tiles and K-splits. Each product of a scaled row
    # and column is the unscaled one times the same powers, so its error
    # relative to |A| |B| stays FP32's (every value and product stays normal).
    rng = np.random.default_rng(17)
    for m, k, n in [(129, 1032, 68), (3, 1 << 15, 12), (300, 96, 260)]:
        a = rng.standard_normal((m, k)).astype(np.float32)
        if exact:
            a = (rng.integers(0, 3, (m, k)) == 0).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        er = rng.integers(-40, 41, m) if not exact else np.zeros(m, np.int64)
        ec = rng.integers(-40, 41, n)
        a = np.ldexp(a, er[:, None]).astype(np.float32)
        b = np.ldexp(b, ec[None, :]).astype(np.float32)
        s = jaxemu.get_scheme("fp16x3").with_exact(exact, False)
        assert cuda_fused.f32_kernel(s, m, k, n)
        c = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=s, backend="cuda"))(a, b)
        assert_fp16x3_componentwise(c, a, b, err_msg=f"{m}x{k}x{n}")


# fp16x3's exponents found in the kernel (JAXEMU_CUDA_F32_SCALES_IN_KERNEL,
# on by default: ffi/fused/transform.cuh, choose_rows): each row's and column's from
# its first nonzero K-tile of the work item, with cuda_fused.F32_EXP_HEADROOM
# binades to spare; where C then holds an entry that is not finite (a value
# past that, or a special value), the product is redone with the passes'
# exponents. (The switch is read while lowering and JAX caches lowerings by
# function: caches cleared around each change.)
@pytest.fixture
def scales_in_kernel(monkeypatch):
    monkeypatch.setenv("JAXEMU_CUDA_F32_SCALES_IN_KERNEL", "1")
    jax.clear_caches()
    yield
    jax.clear_caches()


def _compiled(f, *args):
    """f's compiled HLO and whether its product finds fp16's exponents in
    the kernel: then two FP32-operand kernel calls, the kernel's
    (exp_headroom = F32_EXP_HEADROOM) and the redo's with the passes'
    exponents (-1) in a conditional; else one call (-1), no conditional."""
    hlo = jax.jit(f).lower(*args).compile().as_text()
    heads = sorted(int(h) for h in re.findall(r"exp_headroom\s*=\s*(-?\d+)", hlo))
    in_kernel = heads == [-1, cuda_fused.F32_EXP_HEADROOM]
    assert hlo.count('custom_call_target="jaxemu_fused_f32"') == len(heads), hlo
    assert in_kernel or heads == [-1], heads
    assert (" conditional(" in hlo) == in_kernel, hlo
    return hlo, in_kernel


def _fp16x3(a, b):
    return jaxemu.dot(a, b, scheme="fp16x3", backend="cuda")


@pytest.mark.parametrize("law", T.LAWS)
def test_exponents_in_the_kernel_against_float64_and_the_pass(law, scales_in_kernel, monkeypatch):
    a, b = T.operands(law, 2048, 4096, 2048, seed=zlib.crc32(f"in-kernel/{law}".encode()) % 1000)
    hlo, in_kernel = _compiled(_fp16x3, a, b)
    assert in_kernel
    ref = T.reference(a, b)
    e32 = T.relerr(jaxemu.dot(a, b, scheme="fp32"), ref)
    e = T.relerr(run("fp16x3", a, b), ref)
    monkeypatch.setenv("JAXEMU_CUDA_F32_SCALES_IN_KERNEL", "0")
    jax.clear_caches()
    assert not _compiled(_fp16x3, a, b)[1]
    e_pass = T.relerr(run("fp16x3", a, b), ref)
    bound = 4 * e32 if law == "wide-exp" else e32
    assert e <= bound, (law, e, e32)
    assert e <= 1.5 * e_pass + 1e-9, (law, e, e_pass)


@pytest.mark.parametrize("bsz,m,k,n", [(1, 7, 12, 8), (1, 129, 1032, 68), (1, 3, 65536, 12), (3, 130, 520, 132)])
def test_exponents_in_the_kernel_odd_shapes_and_k_splits(bsz, m, k, n, scales_in_kernel):
    rng = np.random.default_rng(m * 7 + n)
    a = rng.standard_normal((bsz, m, k)).astype(np.float32)
    b = rng.standard_normal((bsz, k, n)).astype(np.float32)
    f = lambda a, b: jaxemu.dot_general(a, b, (((2,), (1,)), ((0,), (0,))), scheme="fp16x3", backend="cuda")
    assert _compiled(f, a, b)[1]
    assert_fp16x3_componentwise(jax.jit(f)(a, b), a, b)


@pytest.mark.parametrize("case", ["zero first tiles", "past the headroom"])
@pytest.mark.parametrize("bsz,k", [(1, 4096), (2, 256)])  # K-splits (16 here); one split, a batch
def test_exponents_in_the_kernel_zero_first_tiles_and_past_the_headroom(case, bsz, k, scales_in_kernel,
                                                                         monkeypatch):
    # "zero first tiles": rows and columns whose first K-tile (32 values) is
    # all zero and the rest tiny (their scale comes from the next K-tile: at
    # the scale of the first they would be fp16 subnormals with a few bits).
    # "past the headroom": rows and columns whose later values exceed the
    # first tile's maximum by far more than the headroom (they overflow
    # fp16: the product is redone with the passes' exponents). The others
    # as usual.
    rng = np.random.default_rng(5)
    m, n = 256, 192
    a = rng.standard_normal((bsz, m, k)).astype(np.float32)
    b = rng.standard_normal((bsz, k, n)).astype(np.float32)
    if case == "zero first tiles":
        a[:, :40, :32] = 0
        a[:, :40, 32:] *= np.float32(2.0**-30)
        b[:, :32, 30:50] = 0
        b[:, 32:, 30:50] *= np.float32(2.0**-30)
    else:
        a[:, 40:80, 32:] *= np.float32(2.0**(cuda_fused.F32_EXP_HEADROOM + 8))
        b[:, 32:, :30] *= np.float32(2.0**(cuda_fused.F32_EXP_HEADROOM + 8))
    assert cuda_fused.f32_kernel(jaxemu.get_scheme("fp16x3"), m, k, n, bsz)
    f = lambda a, b: jaxemu.dot_general(a, b, (((2,), (1,)), ((0,), (0,))), scheme="fp16x3", backend="cuda")
    assert _compiled(f, a, b)[1]
    c = np.asarray(jax.jit(f)(a, b))
    assert_fp16x3_componentwise(c, a, b)  # every entry at fp16x3's own accuracy
    if case == "past the headroom":  # the redo is the product with the passes' exponents, bit for bit
        monkeypatch.setenv("JAXEMU_CUDA_F32_SCALES_IN_KERNEL", "0")
        jax.clear_caches()
        np.testing.assert_array_equal(np.asarray(jax.jit(f)(a, b)).view(np.uint32), c.view(np.uint32))


def test_exponents_in_the_kernel_give_the_same_bits_twice(scales_in_kernel):
    a, b = T.operands("normal(0,1)", 512, 1 << 16, 256, seed=3)
    assert _compiled(_fp16x3, a, b)[1]
    c1 = np.asarray(run("fp16x3", a, b))
    c2 = np.asarray(run("fp16x3", a, b))
    assert np.array_equal(c1.view(np.uint32), c2.view(np.uint32))


def test_exponents_in_the_kernel_on_sparse_operands(scales_in_kernel):
    # A sparse A that is not exact (one nonzero per column, of any value: the
    # k-means update's one-hot^T with weights): most rows' first K-tiles are
    # all zero, and their scales come from where their values are.
    rng = np.random.default_rng(9)
    m, k, n = 512, 1 << 15, 256
    a = np.zeros((m, k), np.float32)
    a[rng.integers(0, m, k), np.arange(k)] = rng.uniform(0.5, 2.0, k).astype(np.float32) * np.float32(2.0**-20)
    b = rng.standard_normal((k, n)).astype(np.float32)
    assert _compiled(_fp16x3, a, b)[1]
    assert_fp16x3_componentwise(run("fp16x3", a, b), a, b)
