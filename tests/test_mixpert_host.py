"""The cuda backend's MixPert path checked without a GPU: pack's layout and
scale factors (jaxemu/backends/cuda_mixpert.py) reproduce the xla
backend's fixed-point sum through packed_sum, the kernel's arithmetic in
float64 (ffi/mixpert/mainloop.cuh); the range rule; which schemes the
kernel takes. The kernel itself runs in test_cuda_mixpert.py (GPU)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxemu import testing as T
from jaxemu.backends import cuda_lowering, cuda_mixpert as CM, switches
from jaxemu.backends import xla as X
from jaxemu.schemes import Int8Split, get_scheme

LEVELS = ("int8_l1", "int8_l2", "int8_l3", "int8_l4")


def tile_stats(a, b, s):
    a, b = X.pad_k(jnp.asarray(a)[None], jnp.asarray(b)[None], CM.TILE_K)
    return X.int8_tile_stats(a, b, s)[2:]


@pytest.mark.parametrize("name", LEVELS)
@pytest.mark.parametrize("law", ["uniform(-1,1)", "normal(0,1)", "wide-exp"])
def test_packed_sum_is_the_xla_fixed_point_sum(name, law):
    """Odd M and N, K not a multiple of 128; on wide-exponent data some tiles
    fall back (scale 0 in the kernel, masked in the xla sum)."""
    s = get_scheme(name)
    a, b = T.operands(law, 37, 300, 23, seed=3)
    stats = tile_stats(a, b, s)
    a_sl, ea, oka, b_sl, eb, okb = stats
    a_p, b_p, sa, sb = CM.pack(*stats, s)
    assert a_p.shape == (1, 37, 3, s.a_slices, 128) and b_p.shape == (1, 23, 3, s.b_slices, 128)
    assert sa.shape == (1, 12, 40) and sb.shape == (1, 12, 24)
    assert bool(CM.in_range(ea, oka, eb, okb))
    ref = np.asarray(X.int8_tile_products(*stats, s), np.float64)[0]
    got = CM.packed_sum(a_p, b_p, sa, sb, max(s.level) + 1)[0]
    scale = np.abs(a) @ np.abs(b)
    # Both are the same exact integers scaled; they differ by FP32 roundings
    # of the xla sum (12 K-tiles, 3 levels: a few units of 2^-24).
    assert np.max(np.abs(got - ref) / scale) < 40 * 2.0 ** -24
    if law == "wide-exp":
        assert not bool(jnp.all(oka)) and float(jnp.min(sa)) == 0.0
    else:  # no fallback: the fixed-point sum is the scheme's whole product
        err = np.max(np.abs(got - T.reference(a, b)) / scale)
        assert err < 4 * s.unit_roundoff


def test_padding_rows_and_k_are_zero():
    s = get_scheme("int8_l4")
    a, b = T.operands("uniform(-1,1)", 5, 40, 6, seed=1)
    a_p, b_p, sa, sb = CM.pack(*tile_stats(a, b, s), s)
    assert np.all(np.asarray(a_p).reshape(5, s.a_slices, 128)[:, :, 40:] == 0)
    assert np.all(np.asarray(b_p).reshape(6, s.b_slices, 128)[:, :, 40:] == 0)
    assert np.all(np.asarray(sa)[0, :, 5:] == 0) and np.all(np.asarray(sb)[0, :, 6:] == 0)


def test_scale_factors_are_the_tile_weights():
    """scale_a scale_b = 2^(e_A + e_B - 12 - 7 (levels - 1)), the weight of the
    combined levels' unit (xla.int8_tile_products: level L weighs 2^-(12 + 7 L))."""
    for name in LEVELS:
        s = get_scheme(name)
        ca, cb = CM.scale_bits(s)
        assert ca + cb == 12 + 7 * max(s.level) == s.level_shift(max(s.level))
        a, b = T.operands("normal(0,1)", 8, 64, 8, seed=2)
        a_sl, ea, oka, b_sl, eb, okb = tile_stats(a, b, s)
        _, _, sa, sb = CM.pack(a_sl, ea, oka, b_sl, eb, okb, s)
        np.testing.assert_array_equal(np.log2(np.asarray(sa)[0, :2, :8]),
                                      np.asarray(ea)[0, :, :2, 0].T - ca)
        np.testing.assert_array_equal(np.log2(np.asarray(sb)[0, :2, :8]), np.asarray(eb)[0, :2, 0, :] - cb)


def test_out_of_range_exponents_take_the_reference():
    s = get_scheme("int8_l4")
    for factor, fine in ((1.0, True), (2.0 ** -110, False), (2.0 ** 70, False)):
        a, b = T.operands("uniform(-1,1)", 4, 64, 4, seed=5)
        a = (a * np.float32(factor)).astype(np.float32)
        a_sl, ea, oka, b_sl, eb, okb = tile_stats(a, b, s)
        assert bool(CM.in_range(ea, oka, eb, okb)) == fine


def test_which_schemes_the_kernel_takes(monkeypatch):
    fams = ("fused", "int8", "mixpert")
    for name in LEVELS:
        assert cuda_lowering.handles(get_scheme(name), fams)
        assert not cuda_lowering.handles(get_scheme(name), ("fused", "int8"))
    assert not cuda_lowering.handles(Int8Split("int8_t16", (2, 2), ktile=16), fams)
    # On by default since tests/test_cuda_mixpert.py passed on an H200 (switches.py).
    monkeypatch.delenv("JAXEMU_CUDA_MIXPERT", raising=False)
    assert switches.enabled("mixpert") and switches.enabled("mixpert_split")
    monkeypatch.delenv("JAXEMU_CUDA_MIXPERT_SPARSE", raising=False)
    assert switches.enabled("mixpert_sparse")  # since stop 46's H200 run
    monkeypatch.setenv("JAXEMU_CUDA_MIXPERT", "0")
    assert not switches.enabled("mixpert")


def test_pack_refuses_other_tiles():
    s = Int8Split("int8_t16", (2, 2), ktile=16)
    a, b = T.operands("uniform(-1,1)", 4, 128, 4, seed=5)
    with pytest.raises(ValueError, match="K-tiles of 32"):
        CM.pack(*tile_stats(a, b, s), s)


def _with_bad_tiles(a, b, rows, cols):
    """Values 2^-20 below their tile's maximum in the first K-tile of the
    given rows of A and columns of B: those tiles fall back (max_spread 16)."""
    a, b = a.copy(), b.copy()
    a[rows, 1] = a[rows, 0] * np.float32(2.0 ** -20)
    b[1, cols] = b[0, cols] * np.float32(2.0 ** -20)
    return a, b


@pytest.mark.parametrize("bad_rows,bad_cols", [(0, 0), (40, 0), (0, 30), (40, 30), (200, 3), (3, 200)])
def test_gathered_fallback_is_the_whole_fallback(bad_rows, bad_cols):
    """Fewer bad rows and columns than the cap (512 / 4 = 128): the gathered
    products; more: the whole ones; none: nothing added. Each against
    xla.int8_fallback, on the CPU (the xla product runs bf16x6 either way)."""
    s = get_scheme("int8_l4")
    a, b = T.operands("uniform(-1,1)", 512, 128, 512, seed=9)
    a = np.where(np.abs(a) < 2.0 ** -12, np.float32(0.5), a)  # no accidental fallback
    b = np.where(np.abs(b) < 2.0 ** -12, np.float32(0.5), b)
    a, b = _with_bad_tiles(a, b, np.arange(0, 512, 512 // max(bad_rows, 1))[:bad_rows],
                           np.arange(0, 512, 512 // max(bad_cols, 1))[:bad_cols])
    a3, b3 = jnp.asarray(a)[None], jnp.asarray(b)[None]
    _, _, _, _, oka, _, _, okb = X.int8_tile_stats(a3, b3, s)
    assert int(jnp.sum(jnp.any(~oka[0, :, :, 0], axis=1))) == bad_rows
    assert int(jnp.sum(jnp.any(~okb[0, :, 0, :], axis=0))) == bad_cols
    c = jnp.asarray(np.random.default_rng(1).standard_normal((1, 512, 512)), jnp.float32)
    want = np.asarray(X.int8_fallback(c, a3, b3, oka, okb, s, "cpu"), np.float64)
    got = np.asarray(CM.gathered_fallback(c, a3, b3, oka, okb, s, "cpu"), np.float64)
    scale = np.abs(a) @ np.abs(b) + np.abs(np.asarray(c[0]))
    assert np.max(np.abs(got - want)[0] / scale) < 2.0 ** -22
    if bad_rows == bad_cols == 0:
        np.testing.assert_array_equal(got, np.asarray(c))
    again = np.asarray(CM.gathered_fallback(c, a3, b3, oka, okb, s, "cpu"), np.float64)
    np.testing.assert_array_equal(got, again)


def test_gathered_fallback_batches():
    s = get_scheme("int8_l4")
    pairs = [_with_bad_tiles(*T.operands("normal(0,1)", 512, 64, 512, seed=i), np.arange(i, 20 + i), np.arange(5))
             for i in range(2)]
    a3 = jnp.asarray(np.stack([p[0] for p in pairs]))
    b3 = jnp.asarray(np.stack([p[1] for p in pairs]))
    _, _, _, _, oka, _, _, okb = X.int8_tile_stats(a3, b3, s)
    c = jnp.zeros((2, 512, 512), jnp.float32)
    want = np.asarray(X.int8_fallback(c, a3, b3, oka, okb, s, "cpu"))
    got = np.asarray(CM.gathered_fallback(c, a3, b3, oka, okb, s, "cpu"))
    scale = np.abs(np.asarray(a3)) @ np.abs(np.asarray(b3))
    assert np.max(np.abs(got - want) / scale) < 2.0 ** -22
    assert np.count_nonzero(got) > 0


def _scattered_bad_tiles(a, b, n_a, n_b, seed, overlap=0):
    """n_a tiles of A and n_b of B, at random (line, K-tile) places, made to
    fall back (one value 2^-20 below the tile's first); ``overlap`` more
    pairs where a tile of A and a tile of B of the same K-tile both fall
    back (counted by both sides of a_bad b + a_good b_bad)."""
    rng = np.random.default_rng(seed)
    a, b = a.copy(), b.copy()
    m, k = a.shape
    n, nt = b.shape[1], k // 32
    places = [(rng.integers(m), rng.integers(nt), rng.integers(n)) for _ in range(max(n_a, n_b, overlap))]
    for q, (i, t, j) in enumerate(places):
        if q < n_a or q < overlap:
            a[i, 32 * t + 1] = a[i, 32 * t] * np.float32(2.0 ** -20)
        if q < n_b or q < overlap:
            tb = t if q < overlap else rng.integers(nt)
            b[32 * tb + 1, j] = b[32 * tb, j] * np.float32(2.0 ** -20)
    return a, b


def _route(oka, okb, s, kernel=False):
    return int(CM.fallback_route(~oka[..., 0], ~okb[:, :, 0, :], s, kernel))


@pytest.mark.parametrize("m,k,n,n_a,n_b,overlap,batch", [
    (512, 1024, 384, 30, 20, 0, 1), (300, 4096, 200, 50, 40, 6, 1), (64, 256, 96, 5, 7, 3, 2),
    (40, 8192, 24, 60, 0, 0, 1), (40, 8192, 24, 0, 60, 0, 1)])
def test_sparse_fallback_is_the_whole_fallback(m, k, n, n_a, n_b, overlap, batch, monkeypatch):
    """Tiles that fall back, scattered over K: few per K-tile and per line,
    so gathered_fallback takes them tile by tile (sparse_fallback), also
    where a tile of A and one of B fall back in the same K-tile (both sides
    of a_bad b + a_good b_bad count such a pair once). Against
    xla.int8_fallback (whole products over masked operands), deterministic."""
    s = get_scheme("int8_l4")
    pairs = []
    for i in range(batch):
        a, b = T.operands("uniform(-1,1)", m, k, n, seed=20 + i)
        a = np.where(np.abs(a) < 2.0 ** -12, np.float32(0.5), a)  # no accidental fallback
        b = np.where(np.abs(b) < 2.0 ** -12, np.float32(0.5), b)
        pairs.append(_scattered_bad_tiles(a, b, n_a, n_b, seed=i, overlap=overlap))
    a3 = jnp.asarray(np.stack([p[0] for p in pairs]))
    b3 = jnp.asarray(np.stack([p[1] for p in pairs]))
    _, _, _, _, oka, _, _, okb = X.int8_tile_stats(a3, b3, s)
    assert int(jnp.sum(~oka)) >= min(n_a, 1) and int(jnp.sum(~okb)) >= min(n_b, 1)
    assert _route(oka, okb, s) == 2
    assert _route(oka, okb, s, kernel=True) == 1  # (on the GPU: the fallback kernel, tests/test_cuda_mixpert.py)
    monkeypatch.setenv(switches.variable("mixpert_sparse"), "1")
    c = jnp.asarray(np.random.default_rng(1).standard_normal((batch, m, n)), jnp.float32)
    fallback = jax.jit(lambda *x: CM.gathered_fallback(*x, s, "cpu"))
    got = np.asarray(fallback(c, a3, b3, oka, okb), np.float64)
    want = np.asarray(X.int8_fallback(c, a3, b3, oka, okb, s, "cpu"), np.float64)
    scale = np.abs(np.asarray(a3, np.float64)) @ np.abs(np.asarray(b3, np.float64)) + np.abs(np.asarray(c))
    assert np.max(np.abs(got - want) / scale) < 2.0 ** -22
    assert np.max(np.abs(got - np.asarray(c))) > 0  # the fallback added something
    np.testing.assert_array_equal(got, np.asarray(fallback(c, a3, b3, oka, okb)))


@pytest.mark.parametrize("law", ["wide-exp", "normal(0,1)"])
def test_sparse_fallback_is_as_accurate_as_the_fallback_scheme(law):
    """The tile-by-tile products run in FP32 where the whole products run
    the scheme's fallback (bf16x6): against the float64 value of a_bad b +
    a_good b_bad, on wide-exponent data (every tile falls back) and on
    normal data with every tile of A falling back, their componentwise
    errors are of one size."""
    s = get_scheme("int8_l4")
    a, b = T.operands(law, 200, 1024, 100, seed=3)
    if law != "wide-exp":
        a[:, 1::32] *= np.float32(2.0 ** -20)
    a3, b3 = jnp.asarray(a)[None], jnp.asarray(b)[None]
    _, _, _, _, oka, _, _, okb = X.int8_tile_stats(a3, b3, s)
    bad_a, bad_b = ~oka[..., 0], ~okb[:, :, 0, :]
    c = jnp.zeros((1, 200, 100), jnp.float32)
    sparse = np.asarray(CM.sparse_fallback(c, a3, b3, bad_a, bad_b, (512, 32, 200), (512, 32, 100), 32))[0]
    whole = np.asarray(X.int8_fallback(c, a3, b3, oka, okb, s, "cpu"))[0]
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ma = np.repeat(np.asarray(bad_a[0]), 32, axis=1)
    mb = np.repeat(np.asarray(bad_b[0]), 32, axis=0)
    ref = np.where(ma, a64, 0) @ b64 + np.where(ma, 0, a64) @ np.where(mb, b64, 0)
    assert np.all(ma) or np.any(mb)
    err_sparse = T.componentwise_err(sparse, a, b, ref)
    err_whole = T.componentwise_err(whole, a, b, ref)
    assert err_sparse <= 2 * err_whole + 2.0 ** -24
    assert err_sparse < 8 * 2.0 ** -24


def test_fallback_routes():
    """none; the fallback kernel (on the cuda platform); tile by tile; many
    tiles of one K-tile: the gathered rows; most rows: the whole products;
    the kernel only where few tiles fall back in all and per line."""
    s = get_scheme("int8_l4")
    a, b = T.operands("uniform(-1,1)", 512, 1024, 512, seed=9)
    a = np.where(np.abs(a) < 2.0 ** -12, np.float32(0.5), a)
    b = np.where(np.abs(b) < 2.0 ** -12, np.float32(0.5), b)

    def route(a, b, kernel=False):
        a3, b3 = jnp.asarray(a)[None], jnp.asarray(b)[None]
        _, _, _, _, oka, _, _, okb = X.int8_tile_stats(a3, b3, s)
        return _route(oka, okb, s, kernel)

    assert route(a, b) == 0 and route(a, b, kernel=True) == 0
    assert route(*_scattered_bad_tiles(a, b, 20, 20, seed=3)) == 2
    assert route(*_scattered_bad_tiles(a, b, 20, 20, seed=3), kernel=True) == 1
    assert route(*_with_bad_tiles(a, b, np.arange(40), [])) == 3  # 40 rows in one K-tile: more than 8
    assert route(*_with_bad_tiles(a, b, np.arange(40), []), kernel=True) == 1  # 40 of 16384 tiles
    assert route(*_with_bad_tiles(a, b, np.arange(300), [])) == 4  # more than a quarter of the rows
    assert route(*_with_bad_tiles(a, b, np.arange(250), []), kernel=True) == 1  # 250 of 16384 tiles
    assert route(*_with_bad_tiles(a, b, np.arange(300), []), kernel=True) == 4  # over 1/64 (256)
    a_hot = a.copy()
    a_hot[7, 1::32] = a_hot[7, 0::32] * np.float32(2.0 ** -20)  # all 32 tiles of row 7: under 64 per line
    assert route(a_hot, b, kernel=True) == 1
    a_many = a.copy()
    a_many[:, 1::32] = a_many[:, 0::32] * np.float32(2.0 ** -20)  # every tile of A: over 1/64
    assert route(a_many, b, kernel=True) == 4


def test_kernel_fits_bounds_the_total_and_each_line():
    """The fallback kernel takes at most 1/64 of the tiles and max(64, nt /
    64) per line (one warp walks a line)."""
    for nt, per_line in ((256, 64), (32768, 512)):
        bad = np.zeros((2, 1024, nt), bool)
        bad[1, 5, :per_line] = True
        assert bool(CM.kernel_fits(jnp.asarray(bad), nt))
        bad[1, 5, per_line] = True
        assert not bool(CM.kernel_fits(jnp.asarray(bad), nt))
    bad = np.zeros((1, 1024, 256), bool)
    bad[0, :, :4] = True  # 4 per line, 1/64 in all
    assert bool(CM.kernel_fits(jnp.asarray(bad), 256))
    bad[0, 0, 4] = True
    assert not bool(CM.kernel_fits(jnp.asarray(bad), 256))


def _ffi_calls(jaxpr):
    """The FFI targets a jaxpr calls, its conditionals' branches included."""
    names = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "ffi_call":
            names.append(eqn.params["target_name"])
        for branch in eqn.params.get("branches", ()):
            names += _ffi_calls(branch.jaxpr)
    return names


def test_common_case_is_one_conditional_around_both_kernels(monkeypatch):
    """mixpert_finite's trace (no GPU needed): the MixPert kernel and the
    fallback kernel share one conditional's branch, where C is made and
    added to in place (no copy of C into the conditional's result: stop 48);
    the other branch holds the general path. With
    $JAXEMU_CUDA_MIXPERT_FALLBACK=0, no fallback kernel."""
    s = get_scheme("int8_l4")
    a, b = jnp.zeros((1, 64, 256), jnp.float32), jnp.zeros((1, 256, 48), jnp.float32)
    jaxpr = jax.make_jaxpr(lambda a, b: CM.mixpert_finite(a, b, s))(a, b).jaxpr
    conds = [e for e in jaxpr.eqns if e.primitive.name == "cond"]
    assert len(conds) == 1
    general, common = (_ffi_calls(br.jaxpr) for br in conds[0].params["branches"])
    assert common == ["jaxemu_mixpert", "jaxemu_mixpert_fallback"]
    assert "jaxemu_mixpert" in general
    assert _ffi_calls(jaxpr).count("jaxemu_mixpert_split") == 2
    monkeypatch.setenv("JAXEMU_CUDA_MIXPERT_FALLBACK", "0")
    calls = _ffi_calls(jax.make_jaxpr(lambda a, b: CM.mixpert_finite(a, b, s))(a, b).jaxpr)
    assert "jaxemu_mixpert" in calls and "jaxemu_mixpert_fallback" not in calls


def test_fallback_tiles_policy_and_operands(monkeypatch):
    """fallback_tiles (no GPU needed): by default both sides where M and N
    are at least TILES_MIN_LINES and K at most TILES_MAX_NT K-tiles, both
    everywhere with the switch at "1", neither at "0"; the fallback's FFI
    call gets A's flags
    transposed and B's flags, padded with 1 to FLAG_PAD lines, only for the
    sides that go tile by tile (an unread placeholder otherwise). (A fresh
    function per trace: the switch is read while tracing.)"""
    monkeypatch.delenv("JAXEMU_CUDA_MIXPERT_FALLBACK_TILES", raising=False)
    assert CM.fallback_tiles(8192, 8192, 256) == (True, True)
    assert CM.fallback_tiles(8192, 262144, 4) == (True, True)  # kNN's distances
    assert CM.fallback_tiles(1024, 256, 32768) == (False, False)  # the k-means update
    assert CM.fallback_tiles(1 << 20, 1024, 8) == (True, True)  # its distances
    assert CM.fallback_tiles(300, 200, 8) == (False, False)
    assert CM.fallback_tiles(8192, 8192, CM.TILES_MAX_NT + 4) == (False, False)
    monkeypatch.setenv("JAXEMU_CUDA_MIXPERT_FALLBACK_TILES", "1")
    assert CM.fallback_tiles(3, 5, 1 << 15) == (True, True)
    c, a, b = jnp.zeros((2, 37, 23)), jnp.zeros((2, 37, 256)), jnp.zeros((2, 256, 23))
    oka, okb = jnp.ones((2, 37, 8), bool), jnp.ones((2, 8, 23), bool)
    eqn, = [e for e in jax.make_jaxpr(lambda *x: CM.kernel_fallback(*x))(c, a, b, oka, okb).jaxpr.eqns
            if e.primitive.name == "ffi_call"]
    shapes = [v.aval.shape for v in eqn.invars]
    assert shapes[5:] == [(2, 8, 48), (2, 8, 32)]
    assert dict(eqn.params["attributes"]) == {"rows_tiles": 1, "columns_tiles": 1}
    monkeypatch.setenv("JAXEMU_CUDA_MIXPERT_FALLBACK_TILES", "0")
    assert CM.fallback_tiles(8192, 8192, 256) == (False, False)
    eqn, = [e for e in jax.make_jaxpr(lambda *x: CM.kernel_fallback(*x))(c, a, b, oka, okb).jaxpr.eqns
            if e.primitive.name == "ffi_call"]
    assert [v.aval.shape for v in eqn.invars][5:] == [(1,), (1,)]
    assert dict(eqn.params["attributes"]) == {"rows_tiles": 0, "columns_tiles": 0}


def test_product_decides_special_values_from_the_split(monkeypatch):
    """mixpert_product's trace: the two splits, then one conditional (no
    reduction over A or B of its own for the special values); its common
    branch is the two kernels; the general branch holds the special-value
    rules (a conditional on FP32's rule, from the maxima of A and B) and
    reuses the splits where it holds. With the
    fallback kernel off, canonical_dot's special-value conditional."""
    s = get_scheme("int8_l4")
    a, b = jnp.zeros((1, 64, 200), jnp.float32), jnp.zeros((1, 200, 48), jnp.float32)
    jaxpr = jax.make_jaxpr(lambda a, b: CM.mixpert_product(a, b, s))(a, b).jaxpr
    top = [e.primitive.name for e in jaxpr.eqns]
    reduced = [int(np.prod(v.aval.shape)) for e in jaxpr.eqns if e.primitive.name.startswith("reduce")
               for v in e.invars]
    assert top.count("cond") == 1 and "abs" not in top
    assert reduced and max(reduced) <= a.size // 16  # the tiles' exponents and flags (32 values each) only
    assert [e.params["target_name"] for e in jaxpr.eqns if e.primitive.name == "ffi_call"] == [
        "jaxemu_mixpert_split"] * 2
    general, common = jaxpr.eqns[top.index("cond")].params["branches"]
    assert _ffi_calls(common.jaxpr) == ["jaxemu_mixpert", "jaxemu_mixpert_fallback"]
    inner = [e for e in general.jaxpr.eqns if e.primitive.name == "cond"]
    assert len(inner) == 1  # fp32_special_values' rule, on max |A| and max |B|
    assert "abs" in [e.primitive.name for e in general.jaxpr.eqns]
    with_specials, plain = (_ffi_calls(br.jaxpr) for br in inner[0].params["branches"])
    assert with_specials.count("jaxemu_mixpert_split") == 2  # the finite parts, split again
    assert "jaxemu_mixpert_split" not in plain and "jaxemu_mixpert" in plain  # the splits reused
    monkeypatch.setenv("JAXEMU_CUDA_MIXPERT_FALLBACK", "0")
    top = [e.primitive.name for e in jax.make_jaxpr(lambda a, b: CM.mixpert_product(a, b, s))(a, b).jaxpr.eqns]
    assert "abs" in top and "ffi_call" not in top  # canonical_dot's max |A| first, the split in its branch


@pytest.mark.parametrize("bsz,m,k,n,limit", [
    (2, 5, 16, 37, 80),  # columns: blocks of 8, the last overlapping by 3
    (1, 41, 9, 6, 70),  # rows (M > N): 4 blocks of 11 (of columns it would be 6 of 1)
    (3, 41, 9, 6, 200),  # rows of a batch: blocks of 11
    (1, 3, 4, 2, 1),  # one row per block
    (3, 4, 8, 4, 1000),  # under the limit: the product itself
])
def test_in_blocks_is_the_whole_product(bsz, m, k, n, limit):
    """cuda_mixpert.in_blocks on integer operands (every sum exact, so any
    order gives the same bits): the blocks assemble the whole product,
    through one loop where the output exceeds the limit, blocks of A's
    rows where M > N."""
    rng = np.random.default_rng(5)
    a = rng.integers(-8, 9, (bsz, m, k)).astype(np.float32)
    b = rng.integers(-8, 9, (bsz, k, n)).astype(np.float32)
    product = lambda x, y: jnp.matmul(x, y, precision="highest")
    got = jax.jit(lambda a, b: CM.in_blocks(product, a, b, limit))(a, b)
    np.testing.assert_array_equal(np.asarray(got), a.astype(np.float64) @ b)
    loops = [e for e in jax.make_jaxpr(lambda a, b: CM.in_blocks(product, a, b, limit))(a, b).jaxpr.eqns
             if e.primitive.name == "scan"]
    assert len(loops) == (bsz * m * n > limit)
    if loops:
        width = max(1, limit // (bsz * min(m, n)))
        assert loops[0].params["length"] == -(-max(m, n) // width)


def test_general_branch_goes_block_by_block_over_the_limit(monkeypatch):
    """mixpert_product's trace: where C exceeds GENERAL_BLOCK_ELEMENTS, the
    general branch runs general_product block by block (a loop that splits
    each block again), so that XLA sizes its buffers for one block (kNN's
    distances asked for 165 GiB on an H200, stop 50); the common branch
    keeps the whole product (the two kernels, no loop). Under the limit,
    no loop."""
    s = get_scheme("int8_l4")
    a, b = jnp.zeros((1, 64, 200), jnp.float32), jnp.zeros((1, 200, 48), jnp.float32)

    def branches():
        jaxpr = jax.make_jaxpr(lambda a, b: CM.mixpert_product(a, b, s))(a, b).jaxpr
        cond, = [e for e in jaxpr.eqns if e.primitive.name == "cond"]
        return cond.params["branches"]

    general, common = branches()
    assert not [e for e in general.jaxpr.eqns if e.primitive.name == "scan"]
    monkeypatch.setattr(CM, "GENERAL_BLOCK_ELEMENTS", 64 * 16)
    general, common = branches()
    loops = [e for e in general.jaxpr.eqns if e.primitive.name == "scan"]
    assert len(loops) == 1 and loops[0].params["length"] == 4  # M = 64 > N: 4 blocks of 16 rows
    assert _ffi_calls(loops[0].params["jaxpr"].jaxpr).count("jaxemu_mixpert_split") >= 2
    assert _ffi_calls(common.jaxpr) == ["jaxemu_mixpert", "jaxemu_mixpert_fallback"]
    assert not [e for e in common.jaxpr.eqns if e.primitive.name == "scan"]


def test_exponent_bound_bounds_the_maximum_and_flags_specials():
    """2^max(E) >= max |x| for the split's exponents (xla.int8_tile_stats'
    E, the split kernel's bit for bit on finite data), and E = 129 (a tile
    with NaN or Inf in the split kernel) gives Inf, which fails
    product_fits."""
    s = get_scheme("int8_l4")
    for law in ("uniform(-1,1)", "normal(0,1)", "wide-exp"):
        a, b = T.operands(law, 16, 256, 8, seed=3)
        _, ea, oka, _, eb, okb = tile_stats(a, b, s)
        for x, e in ((a, ea), (b, eb)):
            bound = float(CM.exponent_bound(e))
            assert np.max(np.abs(x)) < bound <= 2 * np.max(np.abs(x))
    assert np.isinf(CM.exponent_bound(jnp.array([[3, 129, 0]], jnp.int32)))
    assert not bool(X.product_fits(CM.exponent_bound(jnp.array([129])), np.float32(1), 256))
    assert bool(X.product_fits(CM.exponent_bound(jnp.array([40])), CM.exponent_bound(jnp.array([40])), 256))
    assert not bool(X.product_fits(CM.exponent_bound(jnp.array([46])), CM.exponent_bound(jnp.array([46])), 256))


@pytest.mark.parametrize("shape,size", [((5, 37), 4), ((3, 2, 50), 10), ((100,), 7), ((4, 9), 20), ((2, 1), 3)])
def test_first_indices_is_nonzero_per_row(shape, size):
    rng = np.random.default_rng(sum(shape))
    mask = rng.random(shape) < 0.2
    got = np.asarray(CM.first_indices(jnp.asarray(mask), size, 99)).reshape(-1, size)
    for row, out in zip(mask.reshape(-1, shape[-1]), got):
        want = np.nonzero(row)[0][:size]
        np.testing.assert_array_equal(out, np.concatenate([want, np.full(size - len(want), 99)]))


@pytest.mark.parametrize("lines,nt,other,batch", [
    (8192, 256, 8192, 1), (1024, 32768, 256, 1), (256, 32768, 1024, 1), (65536, 256, 65536, 1),
    (512, 16, 512, 64), (16, 4, 16, 1), (1 << 20, 32768, 1 << 20, 1)])
def test_sparse_caps_bound_the_intermediates(lines, nt, other, batch):
    caps = CM.sparse_caps(lines, nt, other, batch)
    if caps is None:
        assert batch * nt * 4 * other > CM.SPARSE_ELEMENTS or batch * 16 * 8 * other > CM.SPARSE_ELEMENTS
        return
    per_tile, per_line, n_lines = caps
    assert 4 <= per_tile and min(8, nt) <= per_line <= min(256, nt) and n_lines <= lines
    assert batch * nt * per_tile * other <= CM.SPARSE_ELEMENTS
    assert batch * n_lines * per_line * other <= CM.SPARSE_ELEMENTS
    if (lines, nt) == (8192, 256):  # 8192^3: ~0.1 % of tiles flagged leaves 16x margin per K-tile
        assert per_tile == 32 and n_lines == 2048


def _tiles_with_spreads(rng, rows, k):
    """Uniform values with zero tiles, tiles of one value, and tiles whose
    spread straddles max_spread (16): what the split's flags decide."""
    x = rng.uniform(-1, 1, (rows, k)).astype(np.float32)
    x[0, :32] = 0.0
    x[1, :32] = 0.75
    x[2, 32:64] *= np.float32(2.0 ** -17)
    x[2, 40] = 1.0  # spread 17 at least: falls back
    x[3, 64:96] = np.float32(2.0 ** -16)
    x[3, 70] = 1.5  # spread 16: stays
    x[4, :32] *= np.float32(2.0 ** 60)  # large exponents
    x[5, 32:64] *= np.float32(2.0 ** -90)
    return x


@pytest.mark.parametrize("n_slices", [2, 3])
def test_split_reference_is_xla_split(n_slices):
    """jaxemu.testing.int8_split_reference (the GPU split kernel's test
    oracle, numpy) is xla.split_int8 on normal floats (XLA's CPU flushes
    subnormals, so they are left out here; tests/test_cuda_mixpert.py
    checks them against the definition)."""
    s = get_scheme("int8_l4")
    x = _tiles_with_spreads(np.random.default_rng(2), 9, 128)
    sl, e, ok = X.split_int8(jnp.asarray(x).reshape(9, 4, 32), s, n_slices, tile_axis=2)
    rsl, re, rok = T.int8_split_reference(x.reshape(9, 4, 32), n_slices, s.max_spread)
    for i in range(n_slices):
        np.testing.assert_array_equal(np.asarray(sl[i]), rsl[i])
    np.testing.assert_array_equal(np.asarray(e)[..., 0], re)
    np.testing.assert_array_equal(np.asarray(ok)[..., 0], rok)
    assert not rok[2, 1] and rok[3, 2] and rok[0, 0] and re[0, 0] == 0


def test_unpack_inverts_pack():
    """The reference branch of the split kernel's path reads the kernel's
    slices back in xla.int8_tile_stats' layout (cuda_mixpert.unpack)."""
    s = get_scheme("int8_l3")
    a, b = T.operands("normal(0,1)", 7, 256, 5, seed=4)
    a_sl, ea, oka, b_sl, eb, okb = tile_stats(a, b, s)
    a_p, b_p, _, _ = CM.pack(a_sl, ea, oka, b_sl, eb, okb, s)
    ua, ub = CM.unpack(a_p, b_p)
    assert len(ua) == s.a_slices and len(ub) == s.b_slices
    for x, y in zip(ua + ub, a_sl + b_sl):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))



def test_instantiation_files_are_the_generated_ones():
    """ffi/mixpert/inst/*.cu are what ffi/mixpert/generate.py writes, and
    ffi/mixpert_dispatch.cu declares a runner for each (no GPU needed)."""
    import importlib.util
    from pathlib import Path
    ffi = Path(__file__).resolve().parents[1] / "ffi"
    spec = importlib.util.spec_from_file_location("mixpert_generate", ffi / "mixpert" / "generate.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    want = gen.files()
    assert sorted(p.name for p in (ffi / "mixpert" / "inst").glob("*.cu")) == sorted(want)
    for name, text in want.items():
        assert (ffi / "mixpert" / "inst" / name).read_text() == text, name
    dispatch = (ffi / "mixpert_dispatch.cu").read_text()
    for name in want:
        runner = "run_" + name[len("mixpert_"):-len(".cu")]  # mixpert_l4_wg3.cu: run_l4_wg3
        assert f"std::string {runner}(const Problem&, int, cudaStream_t);" in dispatch, name
