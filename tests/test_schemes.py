"""The scheme catalogue: names, parameters, validation."""
import dataclasses

import pytest

import jaxemu
from jaxemu.schemes import FloatSplit, Int8Split

EXPECTED = {"fp32", "tf32", "bf16", "fp16", "bf16x3", "bf16x6", "bf16x9", "tf32x3", "fp16x3",
            "fp16x3_bitcut", "int8_l1", "int8_l2", "int8_l3", "int8_l4", "ozaki2_f32", "ozaki2_f64", "auto"}


def test_catalogue_lists_every_scheme():
    assert set(jaxemu.schemes()) == EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_schemes_are_hashable_and_resolve_by_name(name):
    s = jaxemu.get_scheme(name)
    assert s.name == name
    assert hash(s) == hash(jaxemu.get_scheme(name))
    assert jaxemu.get_scheme(s) is s
    assert dataclasses.is_dataclass(s)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.name = "x"


def test_names_are_case_and_dash_insensitive_and_roman_aliases():
    assert jaxemu.get_scheme("BF16X6").name == "bf16x6"
    assert jaxemu.get_scheme("fp16x3-bitcut").name == "fp16x3_bitcut"
    assert jaxemu.get_scheme("int8_iv").level == (2, 2)


def test_product_sets_match_the_papers():
    assert jaxemu.get_scheme("bf16x6").products == ((0, 0), (0, 1), (1, 0), (0, 2), (1, 1), (2, 0))
    assert len(jaxemu.get_scheme("bf16x9").products) == 9
    assert set(jaxemu.get_scheme("bf16x3").products) == {(0, 0), (0, 1), (1, 0)}
    # MixPert levels: (l+1)(r+1) products minus those with i + j > max(l, r).
    counts = {"int8_l1": 3, "int8_l2": 5, "int8_l3": 5, "int8_l4": 6}
    for n, c in counts.items():
        assert jaxemu.get_scheme(n).num_products == c


def test_levels_are_ordered_smallest_terms_first():
    lv = jaxemu.get_scheme("bf16x6").levels
    assert [l for l, _ in lv] == [2, 1, 0]
    assert lv[-1][1] == ((0, 0),)


def test_replace_makes_validated_variants():
    s = jaxemu.get_scheme("bf16x6").replace(kc=256)
    assert s.kc == 256 and s != jaxemu.get_scheme("bf16x6")
    assert repr(s) == "bf16x6(kc=256)"
    assert repr(jaxemu.get_scheme("bf16x6")) == "bf16x6"


@pytest.mark.parametrize("bad", [dict(kc=0), dict(kc=-3), dict(kc=2.5), dict(kc=True)])
def test_invalid_kc_is_rejected(bad):
    with pytest.raises(ValueError, match="kc"):
        jaxemu.get_scheme("bf16x6").replace(**bad)


def test_invalid_parameters_are_rejected_by_name():
    with pytest.raises(ValueError, match="fmt"):
        FloatSplit("x", "fp8", 1, ((0, 0),))
    with pytest.raises(ValueError, match="products"):
        FloatSplit("x", "bf16", 2, ((0, 1),))
    with pytest.raises(ValueError, match="beyond"):
        FloatSplit("x", "bf16", 2, ((0, 0), (2, 0)))
    with pytest.raises(ValueError, match="scaling"):
        FloatSplit("x", "fp16", 2, ((0, 0),))  # fp16 without range scaling
    with pytest.raises(ValueError, match="level"):
        Int8Split("x", (3, 3))
    with pytest.raises(ValueError, match="ktile"):
        jaxemu.get_scheme("int8_l4").replace(ktile=0)
    with pytest.raises(ValueError, match="fallback"):
        jaxemu.get_scheme("int8_l4").replace(fallback="tf32")


def test_unknown_scheme_names_are_listed_in_the_error():
    with pytest.raises(ValueError, match="unknown scheme 'bf17'.*bf16x6"):
        jaxemu.get_scheme("bf17")
    with pytest.raises(TypeError, match="scheme must be"):
        jaxemu.get_scheme(3)


def test_fp32_class_flags():
    fp32_class = {n for n in jaxemu.schemes() if jaxemu.get_scheme(n).fp32_class}
    assert {"fp32", "bf16x6", "bf16x9", "tf32x3", "fp16x3", "ozaki2_f32"} <= fp32_class
    for reduced in ("bf16", "tf32", "fp16", "bf16x3", "int8_l1", "int8_l2", "int8_l3"):
        s = jaxemu.get_scheme(reduced)
        assert not s.fp32_class and 0 < s.error_bound() < 0.1
