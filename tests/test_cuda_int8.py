"""GPU tests of the cuda backend's int8 path (Ozaki II on the int8 tensor
cores: ffi/int8/, jaxemu/backends/cuda_int8.py); skipped without an NVIDIA
GPU and the CUDA extension. The CPU side of Ozaki II is test_ozaki.py."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gpu
import jaxemu
from jaxemu import _ozaki2
from jaxemu import testing as T
from jaxemu.backends import cuda, cuda_int8


pytestmark = gpu.MARKS


@pytest.fixture(autouse=True)
def int8_kernels_on(monkeypatch):
    # The defaults: every int8 kernel on (switches.py).
    for var in ("JAXEMU_CUDA_INT8", "JAXEMU_CUDA_RESIDUES", "JAXEMU_CUDA_CRT64", "JAXEMU_CUDA_GEMM_RESIDUES"):
        monkeypatch.delenv(var, raising=False)


def _int8(rng, shape, lo=-128, hi=127):
    return rng.integers(lo, hi + 1, shape).astype(np.int8)


@pytest.mark.parametrize("l,m,n", [(1, 7, 8), (9, 128, 256), (2, 300, 260)])
def test_xla_int8_products_are_exact_on_the_gpu(l, m, n, rng):
    # XLA's own int8 dot_general gave wrong products at K = 17 and 33 on an
    # H100 (jax 0.11.2); the xla backend pads K to a multiple of 16
    # (jaxemu/_int8dot.py; raw, every K < 128 not a multiple of 4 but 1 was
    # wrong at 1 x 7 x 8). Against numpy's int64 product.
    from jaxemu._int8dot import int8_dot_general
    dot = jax.jit(lambda a, b: int8_dot_general(a, b, (((2,), (2,)), ((0,), (0,)))))
    for k in (1, 2, 3, 5, 17, 33, 63, 100, 127, 130):
        a, bt = _int8(rng, (l, m, k)), _int8(rng, (l, n, k))
        ref = np.einsum("lmk,lnk->lmn", a.astype(np.int64), bt.astype(np.int64))
        np.testing.assert_array_equal(np.asarray(dot(a, bt)), ref, err_msg=f"K = {k}")


@pytest.mark.parametrize("name", ["ozaki2_f32", "int8_l4"])
@pytest.mark.parametrize("m,k,n", [(7, 17, 5), (128, 33, 256), (300, 1001, 260)])
def test_xla_backend_int8_schemes_on_the_gpu(name, m, k, n, rng):
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    # The same scheme on the CPU (whose int8 products are exact) sets the bar.
    ref = T.reference(a, b)
    f = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=name, backend="xla"))
    cpu = jax.devices("cpu")[0]
    got = np.asarray(f(a, b))
    on_cpu = np.asarray(f(jax.device_put(a, cpu), jax.device_put(b, cpu)))
    assert T.componentwise_err(got, a, b, ref) <= 2 * T.componentwise_err(on_cpu, a, b, ref) + 1e-7


@pytest.mark.parametrize("l,m,n,k", [(1, 1, 4, 16), (3, 7, 12, 48), (2, 129, 260, 1008), (1, 1000, 4, 4096),
                                     (5, 17, 1028, 80), (1, 300, 600, 16400), (1, 7, 8, 17), (9, 128, 256, 33)])
def test_int8_gemm_is_exact(l, m, n, k, rng):
    # Every product reproduced bit for bit by an int64 reference, both tile
    # configurations (wide tiles for big outputs, stream-K for small ones).
    a, bt = _int8(rng, (l, m, k)), _int8(rng, (l, n, k))
    got = np.asarray(jax.jit(cuda_int8.int8_matmul)(a, bt))
    ref = np.einsum("lmk,lnk->lmn", a.astype(np.int64), bt.astype(np.int64))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, ref)


def test_int8_gemm_at_the_int32_bound():
    # All -128: each term is 2^14, the largest; K = MAX_EXACT_K - 15 (a
    # multiple of 16) sums to just below 2^31, exactly.
    k = cuda_int8.MAX_EXACT_K - 15
    a = np.full((1, 2, k), -128, np.int8)
    bt = np.full((1, 4, k), -128, np.int8)
    got = np.asarray(jax.jit(cuda_int8.int8_matmul)(a, bt))
    assert k * 2 ** 14 < 2 ** 31
    np.testing.assert_array_equal(got, np.full((1, 2, 4), k * 2 ** 14, np.int64))
    with pytest.raises(ValueError, match="overflow"):
        cuda_int8.int8_matmul(jnp.zeros((1, 2, k + 16), jnp.int8), jnp.zeros((1, 4, k + 16), jnp.int8))


@pytest.mark.parametrize("nm,per,m,n,k", [(8, 1, 7, 16, 48), (8, 2, 129, 272, 1008), (20, 1, 100, 32, 4096),
                                          (3, 1, 1000, 1040, 512), (2, 1, 5, 16, 17)])
def test_int8_gemm_residue_epilogue_is_exact(nm, per, m, n, k, rng):
    # The products reduced mod m_l in the GEMM's epilogue (uint8), entry l of
    # the batch with modulus l // per: equal to the int64 products' residues,
    # both tile configurations (wide tiles and stream-K).
    moduli = [int(x) for x in _ozaki2.MODULI[:nm]]
    a, bt = _int8(rng, (nm * per, m, k)), _int8(rng, (nm * per, n, k))
    got = np.asarray(jax.jit(lambda a, b: cuda_int8.int8_matmul_residues(a, b, moduli))(a, bt))
    ref = np.einsum("lmk,lnk->lmn", a.astype(np.int64), bt.astype(np.int64))
    mods = np.repeat(np.asarray(moduli, np.int64), per)[:, None, None]
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, np.mod(ref, mods))


def test_int8_gemm_residue_epilogue_at_the_int32_bound():
    k = cuda_int8.MAX_EXACT_K - 15
    a, bt = np.full((2, 2, k), -128, np.int8), np.full((2, 16, k), -128, np.int8)
    got = np.asarray(jax.jit(lambda a, b: cuda_int8.int8_matmul_residues(a, b, [256, 255]))(a, bt))
    np.testing.assert_array_equal(got[0], np.full((2, 16), (k * 2 ** 14) % 256))
    np.testing.assert_array_equal(got[1], np.full((2, 16), (k * 2 ** 14) % 255))
    with pytest.raises(ValueError, match="multiple of 16"):
        cuda_int8.int8_matmul_residues(jnp.zeros((1, 2, 16), jnp.int8), jnp.zeros((1, 4, 16), jnp.int8), [256])


def test_ozaki2_runs_on_the_int8_kernels(monkeypatch):
    assert cuda.supports(jaxemu.get_scheme("ozaki2_f32"))
    monkeypatch.setenv("JAXEMU_CUDA_INT8", "0")  # the switch back to the xla backend
    assert not cuda.supports(jaxemu.get_scheme("ozaki2_f32"))
    monkeypatch.delenv("JAXEMU_CUDA_INT8")
    hlo = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme="ozaki2_f32")).lower(
        jnp.ones((256, 256)), jnp.ones((256, 256))).compile().as_text()
    # The product sits in both branches of FP32's special-value conditional
    # (xla.one_of): every computation that holds the GEMM runs the whole
    # path, two residue launches (the fixture's defaults), one GEMM, one CRT.
    comps = [c for c in hlo.split("\n\n") if 'custom_call_target="jaxemu_int8_gemm_residues"' in c]
    assert comps, hlo
    for comp in comps:
        assert comp.count('custom_call_target="jaxemu_ozaki2_residues"') == 2, comp
        assert comp.count('custom_call_target="jaxemu_int8_gemm_residues"') == 1, comp
        assert comp.count('custom_call_target="jaxemu_ozaki2_crt"') == 1, comp


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("kind", ["normal(0,1)", "edges", "mixed"])
def test_residue_kernel_is_exact(dtype, transposed, kind, rng):
    # Byte for byte against numpy's exact residues (test_int8_host.py runs
    # the same per-thread code on the CPU): odd shapes, K a multiple of 4
    # (vector loads) and not, B's layout with rows padded to 4, every
    # magnitude including subnormals and zero rows.
    from test_int8_host import exact_residues, residue_operand
    from jaxemu import _ozaki2
    nm, bits = (9, 30) if dtype == np.float32 else (18, 62)
    moduli = _ozaki2.MODULI[:nm]
    with jax.enable_x64(dtype == np.float64):
        for bsz, rows, k in [(1, 1, 1), (2, 7, 17), (1, 129, 4097), (3, 300, 128), (1, 1000, 64), (2, 33, 4096)]:
            shape = (bsz, k, rows) if transposed else (bsz, rows, k)
            x = residue_operand(kind, shape, dtype, rng)
            x[0, 0, :] = 0
            e = _ozaki2.scale_exponents(jnp.asarray(x), 1 if transposed else 2, bits)
            e = e[:, 0, :] if transposed else e[:, :, 0]
            rows_out = -(-rows // 4) * 4 if transposed else rows
            f = jax.jit(lambda x, e: cuda_int8.operand_residues(x, e, moduli, transposed, rows_out))
            got = np.asarray(f(jnp.asarray(x), e))
            want = exact_residues(x, np.asarray(e), moduli, transposed, rows_out, -(-k // 16) * 16)
            np.testing.assert_array_equal(got, want, err_msg=f"{kind} {shape}")


@pytest.mark.parametrize("law", T.LAWS)
def test_ozaki2_f32_accuracy_against_float64(law):
    a, b = T.operands(law, 1024, 4096, 1024, seed=7)
    ref = T.reference(a, b)
    e32 = T.relerr(jaxemu.dot(a, b, scheme="fp32"), ref)
    e = T.relerr(jax.jit(lambda a, b: jaxemu.dot(a, b, scheme="ozaki2_f32"))(a, b), ref)
    assert e <= e32, (law, e, e32)


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 17, 5), (129, 1000, 131), (33, 70001, 9)])
def test_ozaki2_f32_agrees_with_the_xla_backend(m, k, n, rng):
    # Same integers, residues and moduli: the same exact C'. The CRT kernel
    # sums it in double and rounds once; the xla backend adds exact limbs in
    # float32: within one ulp of each other. K = 70001 takes two K-pieces.
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    f = lambda be: jax.jit(lambda a, b: jaxemu.dot(a, b, scheme="ozaki2_f32", backend=be))(a, b)
    got, ref = np.asarray(f("default")), np.asarray(f("xla"))
    np.testing.assert_array_max_ulp(got, ref, maxulp=1)
    assert T.relerr(got, T.reference(a, b)) <= 2 * T.relerr(jaxemu.dot(a, b, scheme="fp32"), T.reference(a, b)) + 1e-7


@pytest.mark.parametrize("dtype,scheme", [(np.float32, "ozaki2_f32"), (np.float64, "ozaki2_f64")])
def test_ozaki2_in_column_blocks_is_bit_identical(dtype, scheme, monkeypatch, rng):
    """Outputs whose residue products would pass MAX_PRODUCT_BYTES run in
    column blocks of C (each block's products, then its CRT): the same bits
    as in one piece, here with blocks of 16 columns (and a padded last one)."""
    a = rng.standard_normal((2, 40, 70)).astype(dtype)
    b = rng.standard_normal((2, 70, 45)).astype(dtype)
    with jax.enable_x64(dtype == np.float64):
        program = jax.jit(lambda a, b: jaxemu.matmul(a, b, scheme=scheme))
        whole, crts = np.asarray(program(a, b)), program.lower(a, b).as_text().count("jaxemu_ozaki2_crt")
        nm = jaxemu.get_scheme(scheme).moduli_for(70)
        monkeypatch.setattr(cuda_int8, "MAX_PRODUCT_BYTES", nm * 2 * 40 * 16)  # one byte per residue
        jax.clear_caches()
        program = jax.jit(lambda a, b: jaxemu.matmul(a, b, scheme=scheme))
        assert program.lower(a, b).as_text().count("jaxemu_ozaki2_crt") == 3 * crts > 0  # 48 padded columns
        np.testing.assert_array_equal(np.asarray(program(a, b)), whole)
    assert whole.dtype == dtype and np.all(np.isfinite(whole))


def test_ozaki2_many_moduli_and_f64_match_the_xla_backend(rng):
    # More moduli than the CRT kernel holds: the xla backend's exact
    # reconstruction on the GPU's residue products, so bit-identical. float64:
    # the CRT kernel rounds the exact integer once, the xla backend adds
    # exact limbs in float64: within one ulp of each other.
    a = rng.standard_normal((65, 300)).astype(np.float32)
    b = rng.standard_normal((300, 33)).astype(np.float32)
    s = jaxemu.get_scheme("ozaki2_f32").replace(moduli=cuda_int8.MAX_CRT_MODULI + 1)
    f = lambda be: np.asarray(jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=s, backend=be))(a, b))
    np.testing.assert_array_equal(f("default"), f("xla"))
    with jax.enable_x64(True):
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        g = lambda be: np.asarray(jax.jit(lambda a, b: jaxemu.dot(a, b, scheme="ozaki2_f64", backend=be))(a64, b64))
        got, ref = g("default"), g("xla")
        np.testing.assert_array_max_ulp(got, ref, maxulp=1)
        assert T.relerr(got, a64 @ b64) < 1e-14


def test_ozaki2_special_values_and_overflow():
    a = np.ones((4, 64), np.float32)
    b = np.ones((64, 8), np.float32)
    a[0, 0], a[1, 3], b[5, 2] = np.nan, np.inf, -np.inf
    a[2, :] = 3e38
    b[:, 7] = 2.0
    got = np.asarray(jax.jit(lambda a, b: jaxemu.dot(a, b, scheme="ozaki2_f32"))(a, b))
    xla = np.asarray(jax.jit(lambda a, b: jaxemu.dot(a, b, scheme="ozaki2_f32", backend="xla"))(a, b))
    ref = np.asarray(jaxemu.dot(a, b, scheme="fp32"))
    # The special-value rules are the xla backend's (canonical_dot): the same
    # NaN/Inf pattern everywhere, and the same values.
    np.testing.assert_array_equal(got, xla)
    # FP32 where its pattern does not depend on the summation order: C[2, 2]
    # adds 3e38 * -inf to 63 products of 3e38, NaN in FP32 once its running
    # sum overflows; the pattern rule gives the operand's -inf (exact sum).
    assert got[2, 2] == -np.inf and np.isposinf(got[2, [0, 1, 3, 4, 5, 6, 7]]).all()
    rows = [0, 1, 3]
    np.testing.assert_array_equal(np.isnan(got[rows]), np.isnan(ref[rows]))
    np.testing.assert_array_equal(np.isinf(got[rows]), np.isinf(ref[rows]))
    fin = np.isfinite(ref[rows])
    np.testing.assert_allclose(got[rows][fin], ref[rows][fin], rtol=1e-6)


def test_ozaki2_repeated_runs_are_bit_identical(rng):
    a = rng.standard_normal((3, 200, 5000)).astype(np.float32)
    b = rng.standard_normal((3, 5000, 40)).astype(np.float32)  # stream-K: small output, long K
    f = jax.jit(lambda a, b: jaxemu.matmul(a, b, scheme="ozaki2_f32"))
    first = np.asarray(f(a, b))
    for _ in range(3):
        np.testing.assert_array_equal(np.asarray(f(a, b)), first)
