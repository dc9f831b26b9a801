"""GPU tests of the MixPert kernel (ffi/mixpert/, jaxemu/backends/
cuda_mixpert.py): MixPert's levels on the int8 tensor cores against the
kernel's float64 twin (packed_sum), the xla backend on the same GPU, and
float64; skipped without an NVIDIA GPU and the CUDA extension. The host
side is test_mixpert_host.py."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gpu
import jaxemu
from jaxemu import testing as T
from jaxemu.backends import cuda_mixpert as CM
from jaxemu.backends import xla as X
from jaxemu.schemes import get_scheme

pytestmark = gpu.MARKS
LEVELS = ("int8_l1", "int8_l2", "int8_l3", "int8_l4")


def cuda_dot(a, b, name):
    return np.asarray(jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=name, backend="cuda"))(a, b))


def xla_dot(a, b, name):
    return np.asarray(jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=name, backend="xla"))(a, b))


def test_the_kernel_runs():
    a = jnp.ones((64, 256), jnp.float32)
    text = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme="int8_l4", backend="cuda")).lower(a, a.T).as_text()
    assert "jaxemu_mixpert" in text


@pytest.mark.parametrize("name", LEVELS)
@pytest.mark.parametrize("m,k,n", [(37, 300, 23), (128, 256, 64), (300, 1001, 260), (1, 4096, 5)])
def test_kernel_is_its_float64_twin(name, m, k, n):
    """The kernel's sum against packed_sum on the same packed operands: both
    are the same exact integer sums per K-tile; the kernel rounds once per
    K-tile (the fold) and where the levels' combination exceeds 24 bits."""
    s = get_scheme(name)
    a, b = T.operands("normal(0,1)", m, k, n, seed=m + k)
    ap, bp = X.pad_k(jnp.asarray(a)[None], jnp.asarray(b)[None], CM.TILE_K)
    stats = X.int8_tile_stats(ap, bp, s)[2:]
    packed = CM.pack(*stats, s)
    got = np.asarray(jax.jit(CM.kernel_sum)(*packed), np.float64)[0]
    twin = CM.packed_sum(*packed, max(s.level) + 1)[0]
    scale = np.abs(a) @ np.abs(b)
    tiles = -(-k // 32)
    assert np.max(np.abs(got - twin) / scale) <= (2 * tiles + 4) * 2.0 ** -24


@pytest.mark.parametrize("name", LEVELS)
@pytest.mark.parametrize("m,k,n,batch", [(37, 300, 23, 1), (385, 512, 70, 2), (300, 1001, 260, 1),
                                         (64, 16384, 130, 1)])  # the last with K-splits
def test_two_or_three_consumer_warpgroups_give_the_same_bits(monkeypatch, name, m, k, n, batch):
    """The kernel with 128- and 192-row tiles (JAXEMU_CUDA_MIXPERT_THREE_WARPGROUPS
    "0" / "1"; by shape otherwise): each output's K-tiles are folded in the
    same order whichever warpgroup holds its row, so C's bits are the same;
    both within the twin's bound."""
    s = get_scheme(name)
    a, b = T.operands("normal(0,1)", m, k, n, seed=m + n, batch=batch)
    ap, bp = X.pad_k(jnp.asarray(a), jnp.asarray(b), CM.TILE_K)
    packed = CM.pack(*X.int8_tile_stats(ap, bp, s)[2:], s)
    got = {}
    for flag in ("0", "1"):
        monkeypatch.setenv("JAXEMU_CUDA_MIXPERT_THREE_WARPGROUPS", flag)
        assert CM.consumer_warpgroups() == (2 if flag == "0" else 3)
        got[flag] = np.asarray(jax.jit(lambda *x: CM.kernel_sum(*x))(*packed))
    np.testing.assert_array_equal(got["0"], got["1"])
    twin = CM.packed_sum(*packed, max(s.level) + 1)
    scale = np.abs(np.asarray(a, np.float64)) @ np.abs(np.asarray(b, np.float64))
    assert np.max(np.abs(got["1"] - twin) / scale) <= (2 * -(-k // 32) + 4) * 2.0 ** -24


@pytest.mark.parametrize("name", LEVELS)
@pytest.mark.parametrize("law", T.LAWS)
def test_accuracy_against_float64_and_the_xla_backend(name, law):
    a, b = T.operands(law, 256, 2048, 192, seed=7)
    ref = T.reference(a, b)
    got, xla = cuda_dot(a, b, name), xla_dot(a, b, name)
    e_cuda, e_xla = T.componentwise_err(got, a, b, ref), T.componentwise_err(xla, a, b, ref)
    assert e_cuda <= 1.25 * e_xla + 2 ** -24, (e_cuda, e_xla)
    assert T.relerr(got, ref) <= 1.25 * T.relerr(xla, ref) + 1e-7


@pytest.mark.parametrize("m,k,n,batch", [(1, 1, 1, 0), (5, 17, 3, 0), (64, 65536, 64, 0), (33, 129, 65, 3),
                                         (1024, 8192, 8, 0)])
def test_shapes_splits_and_batches(m, k, n, batch):
    """K = 1 and odd sizes, a long K with a small output (K-splits), a batch."""
    s = get_scheme("int8_l4")
    a, b = T.operands("uniform(-1,1)", m, k, n, seed=k, batch=batch)
    ref = T.reference(a, b)
    f = jax.jit(lambda a, b: jaxemu.matmul(a, b, scheme="int8_l4", backend="cuda"))
    got = np.asarray(f(a, b))
    assert T.componentwise_err(got, a, b, ref) <= 4 * s.unit_roundoff + 2 ** -23
    np.testing.assert_array_equal(got, np.asarray(f(a, b)))  # reruns bit-identical (K-splits included)
    if batch == 0:
        assert CM.splits_for(m, n, -(-k // 128) * 128, 1) >= 1


def test_wide_exponents_fall_back_like_the_xla_backend():
    a, b = T.operands("wide-exp", 128, 512, 96, seed=11)
    a[:, :64] *= np.float32(2.0 ** 30)  # tiles whose spread exceeds max_spread
    ref = T.reference(a, b)
    got, xla = cuda_dot(a, b, "int8_l4"), xla_dot(a, b, "int8_l4")
    assert T.componentwise_err(got, a, b, ref) <= 1.25 * T.componentwise_err(xla, a, b, ref) + 2 ** -24


def test_out_of_range_tiles_take_the_xla_sum():
    a, b = T.operands("uniform(-1,1)", 64, 256, 64, seed=3)
    for factor in (2.0 ** -110, 2.0 ** 70):
        a2 = (a * np.float32(factor)).astype(np.float32)
        ref = T.reference(a2, b)
        got = cuda_dot(a2, b, "int8_l4")
        assert T.componentwise_err(got, a2, b, ref) <= 4 * get_scheme("int8_l4").unit_roundoff + 2 ** -23


def test_tiny_operands_whose_products_are_normal():
    """Both operands near 2^-62 (tile exponents in range): the tile factors'
    product, 2^-150 at level IV, is no normal float, the contributions
    (~2^-123) are: the kernel scales by A's factor first (mainloop.cuh)."""
    a, b = T.operands("uniform(-1,1)", 64, 256, 64, seed=8)
    a, b = (np.where(np.abs(x) < 2.0 ** -12, np.float32(0.5), x) for x in (a, b))  # no tile falls back
    a2, b2 = (a * np.float32(2.0 ** -62)).astype(np.float32), (b * np.float32(2.0 ** -62)).astype(np.float32)
    ref = T.reference(a2, b2)
    got = cuda_dot(a2, b2, "int8_l4")
    assert T.relerr(got, ref) < 1e-5


def test_products_near_the_fits_bound_take_the_general_branch():
    """max |A| max |B| K just under 2^100: FP32's rule (xla.product_fits)
    holds and the split's exponent bound (2^E per operand: E = 46 for
    both) does not, so the product takes the general branch
    (cuda_mixpert.mixpert_product, stop 48): within the scheme's bound of
    float64. A at 2^40 instead (bound 2^94) takes the common branch: the
    unit-scale product's bits times 2^86 (power-of-two scalings are exact)."""
    a, b = T.operands("uniform(-1,1)", 64, 256, 48, seed=6)
    a, b = (np.where(np.abs(x) < 2.0 ** -12, np.float32(0.5), x) for x in (a, b))  # no tile falls back
    b = (b * np.float32(0.999)).astype(np.float32)
    b2 = (b * np.float32(2.0 ** 46)).astype(np.float32)
    for a2 in ((a * np.float32(2.0 ** 45.99)).astype(np.float32), (a * np.float32(2.0 ** 40)).astype(np.float32)):
        assert X.product_fits(np.max(np.abs(a2)), np.max(np.abs(b2)), a.shape[1])
        got = cuda_dot(a2, b2, "int8_l4")
        err = T.componentwise_err(got, a2, b2, T.reference(a2, b2))
        assert err <= 4 * get_scheme("int8_l4").unit_roundoff + 2 ** -23
    np.testing.assert_array_equal(got, cuda_dot(a, b, "int8_l4") * np.float32(2.0 ** 86))


def test_special_values_follow_fp32():
    a, b = T.operands("uniform(-1,1)", 40, 96, 24, seed=4)
    a[3, 5], a[7, 0], b[10, 2] = np.nan, np.inf, -np.inf
    got = cuda_dot(a, b, "int8_l4")
    want = np.asarray(jnp.dot(jnp.asarray(a), jnp.asarray(b), precision="highest"))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])
    fin = np.isfinite(want)
    ref = T.reference(np.where(np.isfinite(a), a, 0), np.where(np.isfinite(b), b, 0))
    assert np.max(np.abs(got[fin] - ref[fin]) / (np.abs(np.where(np.isfinite(a), a, 0)) @
                                                    np.abs(np.where(np.isfinite(b), b, 0)))[fin]) < 1e-5


@pytest.mark.parametrize("m,n,limit", [
    (40, 70, 560), (90, 24, 432),  # 5 blocks of columns, of rows (run on an H200, stop 50)
    (40, 70, 960), (90, 24, 552),  # 3 and 4 blocks, the last overlapping the one before by 2
])
def test_general_branch_in_blocks(monkeypatch, m, n, limit):
    """The general branch block by block (cuda_mixpert.in_blocks, forced
    here by a small GENERAL_BLOCK_ELEMENTS): NaN/Inf as FP32 places them,
    out-of-range exponents, and tiles that fall back, each within the
    scheme's bound of float64, and the finite entries equal to the whole
    general branch's within the fallback's reordering."""
    a, b = T.operands("uniform(-1,1)", m, 300, n, seed=21)
    a[:, :32] *= np.float32(2.0 ** 70)  # A's first K-tile: exponents beyond the kernel's range
    a[5, 40] = a[5, 32] * np.float32(2.0 ** -20)  # a tile of A that falls back
    b[100, 3] = b[96, 3] * np.float32(2.0 ** -20)  # and one of B
    a[3, 200], b[7, n - 1] = np.nan, np.inf
    whole = cuda_dot(a, b, "int8_l4")
    monkeypatch.setattr(CM, "GENERAL_BLOCK_ELEMENTS", limit)
    got = cuda_dot(a, b, "int8_l4")
    want = np.asarray(jnp.dot(jnp.asarray(a), jnp.asarray(b), precision="highest"))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])
    fin = np.isfinite(want)
    a0, b0 = np.where(np.isfinite(a), a, 0), np.where(np.isfinite(b), b, 0)
    scale = (np.abs(a0) @ np.abs(b0))[fin]
    err = np.max(np.abs(got[fin] - T.reference(a0, b0)[fin]) / scale)
    assert err <= 4 * get_scheme("int8_l4").unit_roundoff + 2 ** -23
    assert np.max(np.abs(got[fin] - whole[fin]) / scale) <= 2 ** -22


@pytest.mark.parametrize("bad_rows", [20, 300])
def test_fallback_tiles_in_one_k_tile(bad_rows):
    """Tiles 2^-20 below their maximum in the first K-tile of some rows of A
    and columns of B: 20 rows, the fallback kernel; 300 rows (over 1/64 of
    A's tiles and a quarter of its rows), the whole products
    (cuda_mixpert.fallback_route). Against the xla backend and float64."""
    a, b = T.operands("uniform(-1,1)", 1024, 512, 768, seed=13)
    rows, cols = np.arange(bad_rows), np.arange(0, 768, 16)
    a[rows, 1] = a[rows, 0] * np.float32(2.0 ** -20)
    b[1, cols] = b[0, cols] * np.float32(2.0 ** -20)
    ref = T.reference(a, b)
    got, xla = cuda_dot(a, b, "int8_l4"), xla_dot(a, b, "int8_l4")
    assert T.componentwise_err(got, a, b, ref) <= 1.25 * T.componentwise_err(xla, a, b, ref) + 2 ** -24
    np.testing.assert_array_equal(got, cuda_dot(a, b, "int8_l4"))


def _scattered(a, b, n, seed, hot_row=None):
    """n tiles of A and n of B fall back (a value 2^-20 below its tile's
    maximum), scattered over K, each pair of them in one K-tile; with
    hot_row, every K-tile of that row of A too."""
    m, k = a.shape
    n_cols, nt = b.shape[1], k // 32
    rng = np.random.default_rng(seed)
    for _ in range(n):
        i, t, j = rng.integers(m), rng.integers(nt), rng.integers(n_cols)
        a[i, 32 * t + 1] = a[i, 32 * t] * np.float32(2.0 ** -20)
        b[32 * t + 1, j] = b[32 * t, j] * np.float32(2.0 ** -20)
    if hot_row is not None:
        a[hot_row, 1::32] = a[hot_row, 0::32] * np.float32(2.0 ** -20)
    return a, b


@pytest.mark.parametrize("m,k,n,batch,n_bad,hot", [
    (1024, 4096, 768, 1, 60, None), (37, 256, 23, 2, 3, 5), (300, 1024, 1000, 1, 40, 299),
    (64, 65536, 48, 1, 200, None), (1, 128, 5, 1, 1, None), (200, 2048, 70000, 1, 20, 3)])
def test_fallback_kernel_is_the_fallback(m, k, n, batch, n_bad, hot):
    """The fallback kernel (ffi/mixpert/fallback.cuh) against the float64
    value of c + a_bad b + a_good b_bad, on the split kernel's flags:
    scattered tiles, pairs of A's and B's tiles in one K-tile, a row whose
    every tile falls back, odd sizes, a batch, K = 65536, a wide N.
    Within FP32's error of a few tiles' sums; lines without a flagged tile
    untouched, bit for bit; reruns bit-identical."""
    s = get_scheme("int8_l4")
    pairs = [_scattered(*T.operands("uniform(-1,1)", m, k, n, seed=31 + i), n_bad, seed=i, hot_row=hot)
             for i in range(batch)]
    a3 = jnp.asarray(np.stack([p[0] for p in pairs]))
    b3 = jnp.asarray(np.stack([p[1] for p in pairs]))
    oka, okb = CM.split(a3, s, False)[2], CM.split(b3, s, True)[2]
    assert int(jnp.sum(~oka)) >= 1 and int(jnp.sum(~okb)) >= 1
    c = jnp.asarray(np.random.default_rng(1).standard_normal((batch, m, n)), jnp.float32)
    fallback = jax.jit(CM.kernel_fallback)
    got = np.asarray(fallback(c, a3, b3, oka, okb), np.float64)
    a64, b64, c64 = np.asarray(a3, np.float64), np.asarray(b3, np.float64), np.asarray(c, np.float64)
    ma = np.repeat(~np.asarray(oka), 32, axis=2)  # (B, M, K): A's tiles that fall back
    mb = np.repeat(~np.asarray(okb), 32, axis=1)  # (B, K, N)
    want = c64 + np.where(ma, a64, 0) @ b64 + np.where(ma, 0, a64) @ np.where(mb, b64, 0)
    scale = np.abs(a64) @ np.abs(b64) + np.abs(c64)
    assert np.max(np.abs(got - want) / scale) < 2.0 ** -20
    quiet = ~np.any(ma, axis=2)[:, :, None] & ~np.any(mb, axis=1)[:, None, :]
    np.testing.assert_array_equal(got[quiet], c64[quiet])
    assert np.any(got != c64)
    np.testing.assert_array_equal(got, np.asarray(fallback(c, a3, b3, oka, okb)))


@pytest.mark.parametrize("m,k,n,batch,n_bad,hot", [
    (2048, 2048, 2304, 1, 400, 7), (9000, 256, 40, 1, 300, 8999), (40, 512, 9000, 2, 200, None),
    (300, 1024, 1000, 1, 40, 299), (1, 128, 5, 1, 1, None)])
def test_fallback_tiles_are_the_line_by_line_bits(monkeypatch, m, k, n, batch, n_bad, hot):
    """The fallback kernel's K-tile by K-tile path (single-flag lines, a
    block per K-tile: $JAXEMU_CUDA_MIXPERT_FALLBACK_TILES=1, both sides)
    against its line-by-line path on the same flags: the same bits (the same
    FMA chains), with many lines sharing a K-tile, lines of several flagged
    tiles, a row whose every tile falls back, several scan segments (M or
    N = 9000), a batch and tiny sizes; and within FP32's error of the
    float64 fallback sum; reruns bit-identical."""
    s = get_scheme("int8_l4")
    pairs = [_scattered(*T.operands("normal(0,1)", m, k, n, seed=41 + i), n_bad, seed=7 + i, hot_row=hot)
             for i in range(batch)]
    a3 = jnp.asarray(np.stack([p[0] for p in pairs]))
    b3 = jnp.asarray(np.stack([p[1] for p in pairs]))
    oka, okb = CM.split(a3, s, False)[2], CM.split(b3, s, True)[2]
    c = jnp.asarray(np.random.default_rng(2).standard_normal((batch, m, n)), jnp.float32)
    monkeypatch.setenv("JAXEMU_CUDA_MIXPERT_FALLBACK_TILES", "0")
    assert CM.fallback_tiles(m, n, k // 32) == (False, False)
    lines = np.asarray(jax.jit(lambda *x: CM.kernel_fallback(*x))(c, a3, b3, oka, okb))
    monkeypatch.setenv("JAXEMU_CUDA_MIXPERT_FALLBACK_TILES", "1")
    assert CM.fallback_tiles(m, n, k // 32) == (True, True)
    tiles = jax.jit(lambda *x: CM.kernel_fallback(*x))  # (a fresh function: the switch is read while tracing)
    got = np.asarray(tiles(c, a3, b3, oka, okb))
    np.testing.assert_array_equal(got, lines)
    np.testing.assert_array_equal(got, np.asarray(tiles(c, a3, b3, oka, okb)))
    a64, b64, c64 = np.asarray(a3, np.float64), np.asarray(b3, np.float64), np.asarray(c, np.float64)
    ma = np.repeat(~np.asarray(oka), 32, axis=2)
    mb = np.repeat(~np.asarray(okb), 32, axis=1)
    want = c64 + np.where(ma, a64, 0) @ b64 + np.where(ma, 0, a64) @ np.where(mb, b64, 0)
    scale = np.abs(a64) @ np.abs(b64) + np.abs(c64)
    assert np.max(np.abs(got - want) / scale) < 2.0 ** -20
    assert np.any(got != np.asarray(c))
    single = np.sum(~np.asarray(oka), axis=2) == 1
    assert np.any(single)  # the tile path had lines to take


def test_scattered_fallback_tiles_go_to_the_fallback_kernel(monkeypatch):
    """Tiles falling back scattered over K (a few per K-tile, as on real
    data), some pairs of A's and B's in one K-tile: the product through the
    fallback kernel against the XLA tile-by-tile route
    ($JAXEMU_CUDA_MIXPERT_FALLBACK=0), the gathered route (and
    $JAXEMU_CUDA_MIXPERT_SPARSE=0), the xla backend and float64;
    deterministic."""
    s = get_scheme("int8_l4")
    a, b = _scattered(*T.operands("uniform(-1,1)", 1024, 4096, 768, seed=17), 60, seed=3)
    ref = T.reference(a, b)
    monkeypatch.setenv("JAXEMU_CUDA_MIXPERT_FALLBACK", "0")
    tile_by_tile = cuda_dot(a, b, "int8_l4")
    monkeypatch.setenv("JAXEMU_CUDA_MIXPERT_SPARSE", "0")
    gathered = cuda_dot(a, b, "int8_l4")
    monkeypatch.delenv("JAXEMU_CUDA_MIXPERT_FALLBACK")
    monkeypatch.delenv("JAXEMU_CUDA_MIXPERT_SPARSE")
    ap, bp = X.pad_k(jnp.asarray(a)[None], jnp.asarray(b)[None], CM.TILE_K)
    oka, okb = CM.split(ap, s, False)[2], CM.split(bp, s, True)[2]
    assert int(CM.fallback_route(~oka, ~okb, s, kernel=True)) == 1
    got = cuda_dot(a, b, "int8_l4")
    xla = xla_dot(a, b, "int8_l4")
    err = T.componentwise_err(got, a, b, ref)
    assert err <= 1.25 * T.componentwise_err(xla, a, b, ref) + 2 ** -24
    for other in (tile_by_tile, gathered):
        assert err <= 1.25 * T.componentwise_err(other, a, b, ref) + 2 ** -24
    np.testing.assert_array_equal(got, cuda_dot(a, b, "int8_l4"))


def _kernel_split(a, b, s):
    """The split kernel's outputs for A (1, M, K) and B (1, K, N), K padded."""
    ap, bp = X.pad_k(jnp.asarray(a)[None], jnp.asarray(b)[None], CM.TILE_K)
    return ap, bp, jax.jit(lambda x: CM.split(x, s, False))(ap), jax.jit(lambda x: CM.split(x, s, True))(bp)


@pytest.mark.parametrize("name", ["int8_l2", "int8_l3"])  # 2 and 3 slices on each side
@pytest.mark.parametrize("law", T.LAWS)
@pytest.mark.parametrize("m,k,n", [(37, 300, 23), (130, 1024, 70)])
def test_split_kernel_is_xla_split_bit_for_bit(name, law, m, k, n):
    """The split kernel (ffi/mixpert/split.cuh) against XLA's split on the
    same GPU: the same slices in the kernel's layout, exponents and flags."""
    s = get_scheme(name)
    a, b = T.operands(law, m, k, n, seed=k + n)
    a[0, :32] = 0.0  # a zero tile
    ap, bp, (sa_, ea, oka), (sb_, eb, okb) = _kernel_split(a, b, s)
    stats = X.int8_tile_stats(ap, bp, s)[2:]
    xa_p, xb_p, _, _ = CM.pack(*stats, s)
    np.testing.assert_array_equal(np.asarray(sa_), np.asarray(xa_p))
    np.testing.assert_array_equal(np.asarray(sb_), np.asarray(xb_p))
    np.testing.assert_array_equal(np.asarray(ea), np.asarray(stats[1])[..., 0])
    np.testing.assert_array_equal(np.asarray(oka), np.asarray(stats[2])[..., 0])
    np.testing.assert_array_equal(np.asarray(eb), np.asarray(stats[4])[:, :, 0, :])
    np.testing.assert_array_equal(np.asarray(okb), np.asarray(stats[5])[:, :, 0, :])


def test_split_kernel_is_the_definition_at_the_float_range():
    """Subnormals, values near FLT_MAX, zeros and spreads at max_spread,
    against the numpy definition (testing.int8_split_reference)."""
    s = get_scheme("int8_l4")
    rng = np.random.default_rng(5)
    a = rng.uniform(-1, 1, (40, 256)).astype(np.float32)
    a[0, :32] = 0.0
    a[1, 32:64] *= np.float32(2.0 ** -140)  # subnormal tile
    a[2, 64:96] *= np.float32(2.0 ** -126)
    a[2, 70] = np.float32(2.0 ** -149)  # one smallest subnormal: spread > 16
    a[3, :32] *= np.float32(2.0 ** 127)
    a[3, 5] = np.float32(3.0e38)  # near FLT_MAX: E = 128
    a[4, 96:128] = np.float32(2.0 ** -16)
    a[4, 100] = 1.0  # spread exactly 16
    a[5, 128:160] *= np.float32(2.0 ** -120)
    a[5, 129] = np.float32(3.0 * 2.0 ** -140)
    b = np.ascontiguousarray(a[:, :].T[:, :33] * 1.0)  # B (256, 33): the same tiles down its columns
    _, _, (sa_, ea, oka), (sb_, eb, okb) = _kernel_split(a, b, s)
    ref = T.int8_split_reference(a.reshape(40, 8, 32), s.a_slices, s.max_spread)
    got = np.asarray(sa_)[0].transpose(2, 0, 1, 3).reshape(s.a_slices, 40, 8, 32)  # (S, M, nt, 32)
    np.testing.assert_array_equal(got, ref[0])
    np.testing.assert_array_equal(np.asarray(ea)[0], ref[1])
    np.testing.assert_array_equal(np.asarray(oka)[0], ref[2])
    refb = T.int8_split_reference(b.T.reshape(33, 8, 32), s.b_slices, s.max_spread)
    gotb = np.asarray(sb_)[0].transpose(2, 0, 1, 3).reshape(s.b_slices, 33, 8, 32)
    np.testing.assert_array_equal(gotb, refb[0])
    np.testing.assert_array_equal(np.asarray(eb)[0].T, refb[1])
    np.testing.assert_array_equal(np.asarray(okb)[0].T, refb[2])
    assert not refb[2][2, 2] and refb[2][4, 3] and refb[1][3, 0] == 128


@pytest.mark.parametrize("law", ["uniform(-1,1)", "wide-exp"])
def test_products_with_either_split_are_bit_identical(law, monkeypatch):
    """The split kernel gives the MixPert kernel XLA's integers and masks:
    the same product bit for bit ($JAXEMU_CUDA_MIXPERT_SPLIT=0: XLA's)."""
    a, b = T.operands(law, 300, 1100, 200, seed=21)
    text = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme="int8_l4", backend="cuda")).lower(a, b).as_text()
    assert "jaxemu_mixpert_split" in text
    got = cuda_dot(a, b, "int8_l4")
    monkeypatch.setenv("JAXEMU_CUDA_MIXPERT_SPLIT", "0")
    np.testing.assert_array_equal(got, cuda_dot(a, b, "int8_l4"))
