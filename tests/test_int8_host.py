"""The cuda backend's int8 path, checked without a GPU: the Ozaki II
residue kernels' per-thread code (ffi/int8/residues.cuh) and the
reconstruction kernel's per-element code (ffi/int8/crt.cuh) compiled for the
host with nvcc and run against exact numpy references and the xla backend's
exact reconstruction, and the Python glue (jaxemu/backends/cuda_int8.py:
padding, B transposed, K-pieces, the CRT call) with the FFI calls replaced
by exact CPU equivalents. The kernels themselves run in test_cuda_int8.py
(GPU)."""
import math
import shutil
import subprocess
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jaxemu
from jaxemu import _ozaki2
from jaxemu import testing as T
from jaxemu.backends import cuda_int8
from jaxemu.backends import xla as X

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def build_native(tmp_path_factory, name):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found (CI has the CUDA toolkit: this runs there)")
    exe = tmp_path_factory.mktemp("native") / name
    subprocess.run([nvcc, "-std=c++17", "-O2", "-o", str(exe), str(ROOT / f"tests/native/{name}.cu")],
                   check=True, capture_output=True, timeout=300)
    return exe


@pytest.fixture(scope="module")
def crt_check(tmp_path_factory):
    return build_native(tmp_path_factory, "crt_check")


@pytest.fixture(scope="module")
def residue_check(tmp_path_factory):
    return build_native(tmp_path_factory, "residue_check")


def run_residues(exe, tmp_path, x, e, moduli, transposed, rows_out, k_out):
    """The residue kernels' tasks on the host: int8 (n, B, rows_out, k_out)."""
    bsz = x.shape[0]
    rows, k = (x.shape[2], x.shape[1]) if transposed else (x.shape[1], x.shape[2])
    src, dst = tmp_path / "res_in.bin", tmp_path / "res_out.bin"
    with open(src, "wb") as fh:
        np.asarray([x.dtype == np.float64, transposed, bsz, rows, k, rows_out, k_out, len(moduli), *moduli],
                   np.int64).tofile(fh)
        np.ascontiguousarray(x).tofile(fh)
        np.ascontiguousarray(e, np.int32).tofile(fh)
    r = subprocess.run([str(exe), str(src), str(dst)], capture_output=True, text=True, timeout=60)
    if r.returncode:
        raise RuntimeError(r.stderr.strip())
    return np.fromfile(dst, np.int8).reshape(len(moduli), bsz, rows_out, k_out)


def exact_residues(x, e, moduli, transposed, rows_out, k_out):
    """numpy's exact residues: x 2^e in float64 (exact: a float32 value, or
    a float64 one whose scaled magnitude stays below 2^62, times a power of
    two), rounded half to even, symmetric residues, transposed and padded."""
    q = np.rint(np.ldexp(x.astype(np.float64), (e[:, None, :] if transposed else e[:, :, None]).astype(np.int64)))
    q = q.astype(np.int64)
    if transposed:
        q = np.swapaxes(q, 1, 2)
    q = np.pad(q, ((0, 0), (0, rows_out - q.shape[1]), (0, k_out - q.shape[2])))
    out = []
    for m in moduli:
        r = np.mod(q, m)
        out.append(np.where(r >= (m + 1) // 2, r - m, r).astype(np.int8))
    return np.stack(out)


def residue_operand(kind, shape, dtype, rng):
    """Operands for the residue code: the four laws, plus zeros, subnormals,
    huge values, signs, and rows of mixed magnitudes."""
    if kind in T.LAWS:
        return T.sample(kind, shape, rng).astype(dtype)
    info = np.finfo(dtype)
    if kind == "edges":
        pool = np.asarray([0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, -2.5, info.tiny, -info.tiny, info.tiny * 2 ** -5,
                           info.smallest_subnormal, -info.smallest_subnormal, info.max, -info.max, 3.0, 1e-3], dtype)
        return rng.choice(pool, shape)
    if kind == "mixed":  # magnitudes across the whole exponent range, random signs
        lo, hi = (-140, 127) if dtype == np.float32 else (-1070, 1023)
        mag = np.ldexp(rng.uniform(1, 2, shape), rng.integers(lo, hi, shape))
        return (mag * rng.choice([-1.0, 1.0], shape)).astype(dtype)
    raise ValueError(kind)


@pytest.mark.parametrize("dtype,bits", [(np.float32, 28), (np.float32, 30), (np.float64, 55), (np.float64, 62)])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("kind", list(T.LAWS) + ["edges", "mixed"])
def test_residue_kernel_code_is_exact(residue_check, tmp_path, dtype, bits, transposed, kind, rng):
    # Odd shapes: k below, at and above 16; rows padded like B's (to 4) when
    # transposed. Exponents as the backend computes them (row maxima at
    # `bits` bits), so every integer is in the kernels' contract.
    moduli = _ozaki2.MODULI[:9] if dtype == np.float32 else _ozaki2.MODULI[:18]
    for bsz, rows, k in [(1, 1, 1), (2, 7, 17), (1, 33, 100), (3, 5, 16), (1, 40, 130)]:
        shape = (bsz, k, rows) if transposed else (bsz, rows, k)
        x = residue_operand(kind, shape, dtype, rng)
        x[0, 0, :] = 0  # a row (or, transposed, a k) of zeros
        with jax.enable_x64(dtype == np.float64):
            e = np.asarray(_ozaki2.scale_exponents(jnp.asarray(x), 1 if transposed else 2, bits))
        e = e[:, 0, :] if transposed else e[:, :, 0]
        rows_out = -(-rows // 4) * 4 if transposed else rows
        k_out = -(-k // 16) * 16
        got = run_residues(residue_check, tmp_path, x, e, moduli, transposed, rows_out, k_out)
        want = exact_residues(x, e, moduli, transposed, rows_out, k_out)
        np.testing.assert_array_equal(got, want, err_msg=f"{kind} {shape} transposed={transposed}")


def test_residue_kernel_code_matches_the_xla_twin(residue_check, tmp_path, rng):
    # On normal data the xla backend's own integers (float scaling) are the
    # kernel's (integer scaling), bit for bit, for both layouts.
    moduli = _ozaki2.MODULI[:9]
    a = rng.standard_normal((2, 37, 45)).astype(np.float32)
    b = rng.standard_normal((2, 45, 30)).astype(np.float32)
    ea = np.asarray(_ozaki2.scale_exponents(jnp.asarray(a), 2, 28))[:, :, 0]
    eb = np.asarray(_ozaki2.scale_exponents(jnp.asarray(b), 1, 28))[:, 0, :]
    for x, e, tr, rows_out in [(a, ea, False, 37), (b, eb, True, 32)]:
        got = run_residues(residue_check, tmp_path, x, e, moduli, tr, rows_out, 48)
        twin = np.asarray(cuda_int8.operand_residues_xla(jnp.asarray(x), jnp.asarray(e), moduli, tr, rows_out))
        np.testing.assert_array_equal(got, twin)


def test_residue_tables_refuse_bad_moduli(residue_check, tmp_path):
    x = np.ones((1, 2, 3), np.float32)
    e = np.zeros((1, 2), np.int32)
    with pytest.raises(RuntimeError, match="2..256"):
        run_residues(residue_check, tmp_path, x, e, (256, 1), False, 2, 16)
    with pytest.raises(RuntimeError, match="k_out"):
        run_residues(residue_check, tmp_path, x, e, (256,), False, 2, 8)


def test_crt_division_free_reductions(crt_check):
    # mod_u24 for every x < 2^24 and modulus 2..256, mod_i32 over int32's range.
    r = subprocess.run([str(crt_check), "--selftest"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "selftest ok" in r.stdout, r.stderr


def run_crt(exe, tmp_path, prod, row, col, moduli, f64=False):
    nm, bsz, m, n = prod.shape
    src, dst = tmp_path / "in.bin", tmp_path / "out.bin"
    with open(src, "wb") as fh:
        np.asarray([nm, bsz, m, n, *moduli], np.int64).tofile(fh)
        for x in (prod, row, col):
            np.ascontiguousarray(x, np.int32).tofile(fh)
    r = subprocess.run([str(exe)] + (["--f64"] if f64 else []) + [str(src), str(dst)],
                       capture_output=True, text=True, timeout=60)
    if r.returncode:
        raise RuntimeError(r.stderr.strip())
    return np.fromfile(dst, np.float64 if f64 else np.float32).reshape(bsz, m, n)


def correctly_rounded(c_int, scale):
    """float64 of the exact c_int 2^scale (Python ints), rounded once."""
    return np.vectorize(lambda c, s: float(Fraction(int(c)) * Fraction(2) ** int(s)), otypes=[np.float64])(c_int, scale)


@pytest.mark.parametrize("law", T.LAWS)
def test_crt_kernel_code_float64_is_correctly_rounded(crt_check, tmp_path, law):
    # ozaki2_f64's integers (norm rule, its default moduli): the kernel's
    # float64 C is the exact A'B' 2^-(ea + eb) rounded once, bit for bit.
    a, b = T.operands(law, 9, 300, 7, seed=5, batch=2)
    with jax.enable_x64(True):
        s = jaxemu.get_scheme("ozaki2_f64")
        nm = s.moduli_for(300)
        moduli, (ea, ai), (eb, bi), _ = _ozaki2.scaled_integers(jnp.asarray(a, jnp.float64), jnp.asarray(b, jnp.float64),
                                                                 nm, 62)
        ai, bi = np.asarray(ai).astype(object), np.asarray(bi).astype(object)
        ea, eb = np.asarray(ea)[:, :, 0], np.asarray(eb)[:, 0, :]
    exact = np.einsum("bmk,bkn->bmn", ai, bi)
    prod = np.stack([(exact % m).astype(np.int64) for m in moduli]).astype(np.int32)  # residues as raw products
    got = run_crt(crt_check, tmp_path, prod, ea, eb, moduli, f64=True)
    want = correctly_rounded(exact, -(ea[:, :, None] + eb[:, None, :]))
    np.testing.assert_array_equal(got, want)
    assert T.relerr(got, np.matmul(a.astype(np.float64), b.astype(np.float64))) < 1e-14


def test_crt_kernel_code_float64_rounding_edges(crt_check, tmp_path):
    # Chosen integers C' (given by their residues) and scalings: ties to even
    # at 2^53 + 1 and + 3, a sticky bit beyond 64 bits, the largest |C'| the
    # 18 moduli admit, subnormal results (ties too), below half the least
    # subnormal, overflow, zero and signs.
    moduli = _ozaki2.MODULI[:18]
    lim = math.prod(moduli) // 4 - 1
    cases = [(2 ** 53 + 1, 0), (2 ** 53 + 3, 0), (-(2 ** 53 + 1), 0), (2 ** 120 + 2 ** 67 + 1, -60),
             (lim, -100), (-lim, 3), (3, -1075), (1, -1075), (1, -1076), (2 ** 60 + 1, -1130),
             (5 * 2 ** 51, -1126), (lim, 900), (0, 7), (-(2 ** 70) - 12345, -40), (123456789, 20)]
    vals = [c for c, _ in cases]
    prod = np.asarray([[v % m for v in vals] for m in moduli], np.int64).astype(np.int32).reshape(18, 1, 1, len(cases))
    row = np.zeros((1, 1), np.int32)
    col = np.asarray([[-s for _, s in cases]], np.int32)  # C = C' 2^-(row + col)
    got = run_crt(crt_check, tmp_path, prod, row, col, moduli, f64=True)[0, 0]
    for (c, s), g in zip(cases, got):
        exact = Fraction(c) * Fraction(2) ** s
        want = float(exact) if abs(exact) < Fraction(2) ** 1024 else math.copysign(math.inf, c)
        assert g == want and math.copysign(1, g) == math.copysign(1, want), (c, s, g, want)


def integer_parts(a, b, nm):
    """The xla backend's integers for a (B, M, K) x (B, K, N): raw int64
    products of the residues (as the GEMM gives them), the exponents, and the
    xla backend's own result."""
    moduli, (ea, ai), (eb, bi), vb = _ozaki2.scaled_integers(jnp.asarray(a), jnp.asarray(b), nm, 30)
    ra = np.asarray(_ozaki2.symmetric_residues(ai, moduli)).astype(np.int64)
    rb = np.asarray(_ozaki2.symmetric_residues(bi, moduli)).astype(np.int64)
    prod = np.einsum("lbmk,lbkn->lbmn", ra, rb)
    assert np.abs(prod).max() < 2 ** 31
    ref = np.asarray(_ozaki2.ozaki2_dot(jnp.asarray(a), jnp.asarray(b), nm, 30))
    return moduli, prod, np.asarray(ea)[:, :, 0], np.asarray(eb)[:, 0, :], ref


@pytest.mark.parametrize("law", T.LAWS)
@pytest.mark.parametrize("nm", [8, 9, 12])
def test_crt_kernel_code_matches_the_exact_reconstruction(crt_check, tmp_path, law, nm):
    a, b = T.operands(law, 37, 300, 29, seed=nm, batch=2)
    moduli, prod, ea, eb, ref = integer_parts(a, b, nm)
    got = run_crt(crt_check, tmp_path, prod, ea, eb, moduli)
    # Same C' = A'B'; a double sum rounded once vs exact limbs added in
    # float32: within one ulp.
    np.testing.assert_array_max_ulp(got, ref, maxulp=1)
    e64 = T.relerr(got, np.matmul(a.astype(np.float64), b.astype(np.float64)))
    assert e64 < 1e-6


def test_crt_kernel_code_edge_values(crt_check, tmp_path):
    # Zero rows, results rounding to subnormals and overflowing to Inf (the
    # caller then takes FP32's value), and 20 moduli (the kernel's maximum).
    a = np.zeros((1, 4, 64), np.float32)
    b = np.ones((1, 64, 3), np.float32)
    b[0, :, 1] = 2.0 ** -70
    b[0, :, 2] = 0.75
    a[0, 1] = 2.0 ** -70  # normal operands, subnormal results (64 * 2^-140)
    a[0, 2] = 3e38   # 64 * 3e38 overflows
    a[0, 3] = np.linspace(-1, 1, 64)
    moduli, prod, ea, eb, ref = integer_parts(a, b, 20)
    got = run_crt(crt_check, tmp_path, prod, ea, eb, moduli)
    assert np.all(got[0, 0] == 0)
    np.testing.assert_array_equal(got[0, 1], np.float32([2.0 ** -64, 2.0 ** -134, 0.75 * 2.0 ** -64]))
    assert np.all(np.isinf(got[0, 2, [0, 2]]) & (got[0, 2, [0, 2]] > 0))
    assert got[0, 2, 1] == np.float32(64 * 3e38 * 2.0 ** -70)
    np.testing.assert_array_max_ulp(got[0, 3], ref[0, 3], maxulp=1)


def test_crt_tables_refuse_bad_moduli(crt_check, tmp_path):
    prod = np.zeros((2, 1, 1, 1), np.int32)
    z = np.zeros((1, 1), np.int32)
    with pytest.raises(RuntimeError, match="coprime"):
        run_crt(crt_check, tmp_path, prod, z, z, (256, 254))
    with pytest.raises(RuntimeError, match="2..256"):
        run_crt(crt_check, tmp_path, prod, z, z, (256, 257))


@pytest.fixture
def cpu_kernels(monkeypatch):
    """The FFI calls replaced by exact CPU equivalents that check the
    kernels' input contract; every kernel switched on (the default)."""
    monkeypatch.delenv("JAXEMU_CUDA_RESIDUES", raising=False)
    monkeypatch.delenv("JAXEMU_CUDA_CRT64", raising=False)
    monkeypatch.delenv("JAXEMU_CUDA_GEMM_RESIDUES", raising=False)
    calls = []

    def int8_matmul(a, bt):
        assert a.dtype == bt.dtype == jnp.int8 and a.shape[2] == bt.shape[2] <= cuda_int8.MAX_EXACT_K
        assert bt.shape[1] % cuda_int8.ALIGN_N == 0
        calls.append(("gemm", a.shape, bt.shape))
        return lax.dot_general(a, bt, (((2,), (2,)), ((0,), (0,))), preferred_element_type=jnp.int32)

    def int8_matmul_residues(a, bt, moduli):  # the epilogue's contract: uint8 in [0, m_l), l = batch // (L / n)
        assert a.dtype == bt.dtype == jnp.int8 and a.shape[2] == bt.shape[2] <= cuda_int8.MAX_EXACT_K
        assert bt.shape[1] % cuda_int8.ALIGN_N_RESIDUES == 0 and a.shape[0] % len(moduli) == 0
        calls.append(("gemm_residues", a.shape, bt.shape))
        p = lax.dot_general(a, bt, (((2,), (2,)), ((0,), (0,))), preferred_element_type=jnp.int32)
        mods = jnp.repeat(jnp.asarray(moduli, jnp.int32), a.shape[0] // len(moduli))[:, None, None]
        return jnp.remainder(p, mods).astype(jnp.uint8)

    def crt(p, ea, eb, moduli, dtype=jnp.float32):
        nm, bsz, m, n = p.shape
        assert ea.shape == (bsz, m) and eb.shape == (bsz, n) and len(moduli) == nm <= cuda_int8.MAX_CRT_MODULI
        assert p.dtype in (jnp.int32, jnp.uint8)
        calls.append(("crt", p.shape, np.dtype(dtype).name))
        p = p.astype(jnp.int32)
        pr = jnp.remainder(p, jnp.asarray(moduli, jnp.int32).reshape(nm, 1, 1, 1))
        vb = math.ceil(_ozaki2.moduli_bits(nm))  # generous: |C'| < M / 4
        return _ozaki2.reconstruct(pr, moduli, vb, ea[:, :, None], eb[:, None, :], dtype)

    def operand_residues(x, e, moduli, transposed, rows_out):
        assert e.dtype == jnp.int32 and e.shape == (x.shape[0], x.shape[2] if transposed else x.shape[1])
        calls.append(("residues", x.shape, bool(transposed), rows_out))
        return cuda_int8.operand_residues_xla(x, e, moduli, transposed, rows_out)

    monkeypatch.setattr(cuda_int8, "operand_residues", operand_residues)
    monkeypatch.setattr(cuda_int8, "int8_matmul", int8_matmul)
    monkeypatch.setattr(cuda_int8, "int8_matmul_residues", int8_matmul_residues)
    monkeypatch.setattr(cuda_int8, "crt", crt)
    return calls


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 17, 5), (33, 250, 10)])
def test_glue_gives_the_xla_backends_product(cpu_kernels, m, k, n, rng):
    a = rng.standard_normal((2, m, k)).astype(np.float32)
    b = rng.standard_normal((2, k, n)).astype(np.float32)
    s = jaxemu.get_scheme("ozaki2_f32")
    got = np.asarray(cuda_int8.ozaki2_finite(jnp.asarray(a), jnp.asarray(b), s))
    ref = np.asarray(X.ozaki2_dot(jnp.asarray(a), jnp.asarray(b), s))
    np.testing.assert_array_equal(got, ref)
    nm = s.moduli_for(k)
    kp, np16 = -(-k // 16) * 16, -(-n // 16) * 16
    assert cpu_kernels == [("residues", (2, m, k), False, m), ("residues", (2, k, n), True, np16),
                           ("gemm_residues", (nm * 2, m, kp), (nm * 2, np16, kp)), ("crt", (nm, 2, m, np16), "float32")]


def test_glue_with_the_kernels_switched_off(cpu_kernels, monkeypatch, rng):
    # The residue kernel and the float64 CRT switched off (switches.py): XLA's
    # residues (the same bytes) and, for float64, the exact limb
    # reconstruction; the same products.
    monkeypatch.setenv("JAXEMU_CUDA_RESIDUES", "0")
    monkeypatch.setenv("JAXEMU_CUDA_CRT64", "0")
    monkeypatch.setenv("JAXEMU_CUDA_GEMM_RESIDUES", "0")
    a = rng.standard_normal((2, 9, 70)).astype(np.float32)
    b = rng.standard_normal((2, 70, 6)).astype(np.float32)
    s = jaxemu.get_scheme("ozaki2_f32")
    got = np.asarray(cuda_int8.ozaki2_finite(jnp.asarray(a), jnp.asarray(b), s))
    np.testing.assert_array_equal(got, np.asarray(X.ozaki2_dot(jnp.asarray(a), jnp.asarray(b), s)))
    with jax.enable_x64(True):
        s64 = jaxemu.get_scheme("ozaki2_f64")
        a64, b64 = jnp.asarray(a, jnp.float64), jnp.asarray(b, jnp.float64)
        np.testing.assert_array_equal(np.asarray(cuda_int8.ozaki2_finite(a64, b64, s64)),
                                      np.asarray(X.ozaki2_dot(a64, b64, s64)))
    assert [c[0] for c in cpu_kernels] == ["gemm", "crt", "gemm"]


def test_glue_cuts_long_k_into_exact_pieces(cpu_kernels, monkeypatch, rng):
    monkeypatch.setattr(cuda_int8, "K_PIECE", 64)
    a = rng.standard_normal((1, 3, 200)).astype(np.float32)
    b = rng.standard_normal((1, 200, 4)).astype(np.float32)
    s = jaxemu.get_scheme("ozaki2_f32")
    got = np.asarray(cuda_int8.ozaki2_finite(jnp.asarray(a), jnp.asarray(b), s))
    np.testing.assert_array_equal(got, np.asarray(X.ozaki2_dot(jnp.asarray(a), jnp.asarray(b), s)))
    assert [c[0] for c in cpu_kernels] == ["residues"] * 2 + ["gemm_residues"] * 4 + ["crt"]


@pytest.mark.parametrize("epilogue,blocks", [("1", 3), ("0", 12)])
def test_glue_column_blocks_count_the_product_bytes(cpu_kernels, monkeypatch, rng, epilogue, blocks):
    # MAX_PRODUCT_BYTES bounds the products alive at once: one byte per
    # product from the residue epilogue, four as int32 with it switched off.
    monkeypatch.setenv("JAXEMU_CUDA_GEMM_RESIDUES", epilogue)
    a = rng.standard_normal((1, 8, 40)).astype(np.float32)
    b = rng.standard_normal((1, 40, 190)).astype(np.float32)  # 192 padded columns
    s = jaxemu.get_scheme("ozaki2_f32")
    monkeypatch.setattr(cuda_int8, "MAX_PRODUCT_BYTES", s.moduli_for(40) * 8 * 64)  # 64 columns of uint8
    got = np.asarray(cuda_int8.ozaki2_finite(jnp.asarray(a), jnp.asarray(b), s))
    np.testing.assert_array_equal(got, np.asarray(X.ozaki2_dot(jnp.asarray(a), jnp.asarray(b), s)))
    assert [c[0] for c in cpu_kernels].count("crt") == blocks


def test_glue_many_moduli_use_the_exact_reconstruction(cpu_kernels, rng):
    a = rng.standard_normal((1, 5, 40)).astype(np.float32)
    b = rng.standard_normal((1, 40, 6)).astype(np.float32)
    s = jaxemu.get_scheme("ozaki2_f32").replace(moduli=cuda_int8.MAX_CRT_MODULI + 1)
    got = np.asarray(cuda_int8.ozaki2_finite(jnp.asarray(a), jnp.asarray(b), s))
    np.testing.assert_array_equal(got, np.asarray(X.ozaki2_dot(jnp.asarray(a), jnp.asarray(b), s)))
    kinds = [c[0] for c in cpu_kernels]
    assert "crt" not in kinds and "gemm_residues" not in kinds and "gemm" in kinds  # 21 moduli: int32 products


def test_glue_float64_takes_the_crt_kernel(cpu_kernels, rng):
    a = rng.standard_normal((1, 5, 40))
    b = rng.standard_normal((1, 40, 6))
    with jax.enable_x64(True):
        s64 = jaxemu.get_scheme("ozaki2_f64")
        a64, b64 = jnp.asarray(a, jnp.float64), jnp.asarray(b, jnp.float64)
        np.testing.assert_array_equal(np.asarray(cuda_int8.ozaki2_finite(a64, b64, s64)),
                                      np.asarray(X.ozaki2_dot(a64, b64, s64)))
        with pytest.raises(TypeError, match="float32"):
            cuda_int8.ozaki2_finite(jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32), s64)
    nm = s64.moduli_for(40)
    assert cpu_kernels[-1] == ("crt", (nm, 1, 5, 16), "float64")


@pytest.mark.parametrize("k", [1, 15, 16, 17, 33, 100])
def test_int8_dot_general_pads_k_and_stays_exact(k, rng):
    from jaxemu._int8dot import int8_dot_general
    a = rng.integers(-128, 128, (2, 5, k)).astype(np.int8)
    b = rng.integers(-128, 128, (2, k, 3)).astype(np.int8)
    got = np.asarray(int8_dot_general(a, b, (((2,), (1,)), ((0,), (0,)))))
    np.testing.assert_array_equal(got, np.einsum("bmk,bkn->bmn", a.astype(np.int64), b.astype(np.int64)))
    low = jax.jit(lambda a, b: int8_dot_general(a, b, (((2,), (1,)), ((0,), (0,))))).lower(a, b).as_text()
    assert f"{-(-k // 16) * 16}xi8" in low
    with pytest.raises(ValueError, match="one contracting dimension"):
        int8_dot_general(a, b.reshape(2, k, 3, 1), (((1, 2), (1, 2)), ((0,), (0,))))
