"""The catalogue of emulation schemes: *what* to compute.

A scheme says how each f32 operand is split into low-precision slices, which
slice products are computed, how they are scaled and how partial sums are
accumulated. *How* it runs (plain JAX, CUDA kernels) is the backends' business.

Schemes are frozen, hashable dataclasses, so they can be primitive parameters
and jit cache keys. Every scheme has a string name; ``get_scheme("bf16x6")``
returns the catalogue entry and ``scheme.replace(kc=256)`` a variant.

Sources (facts and figures only; see README.md for the full references):
  APE      -- Ma et al., "Efficiently emulating high-bitwidth computation with
              low-bitwidth hardware", ICS 2022 (FP32-B / FP32-T / FP32-F, adapter).
  MixPert  -- LCTES 2024 (FP32 on INT8 tensor cores, levels I-IV, per-tile
              exponents, tuner).
  LE-GEMM  -- bit-cut FP16 split (hi by truncation, lo = RZ((x - hi) 2^10)).
  cube     -- SGEMM-cube, arXiv 2507.23387 (scaled FP16 residual, termwise sums).
  Ootomo   -- Ootomo & Yokota, IJHPCA 2022 (FP16 residual scaled by 2^11).
  XLA      -- jax.lax.DotAlgorithmPreset BF16_BF16_F32_X3/X6/X9 (Henry et al.).
  Ozaki II -- Ozaki, Uchino & Imamura, "Ozaki Scheme II: A GEMM-oriented
              emulation of floating-point matrix multiplication using an
              integer modular technique" (2024/2025); GEMMul8 (Uchino).
"""
from __future__ import annotations

import dataclasses
from typing import ClassVar, Optional, Tuple, Union

__all__ = [
    "Scheme", "NativeFP32", "FloatSplit", "Int8Split", "Ozaki2", "Auto",
    "get_scheme", "schemes", "SchemeLike",
]

# Significand bits (including the implicit one) of the slice formats.
FORMAT_BITS = {"bf16": 8, "fp16": 11, "tf32": 11}
FP32_BITS = 24


class Scheme:
    """Base class of all schemes. Subclasses are frozen dataclasses."""

    name: str
    family: ClassVar[str] = "?"

    @property
    def unit_roundoff(self) -> float:
        """Largest relative error of one emulated elementwise product a*b,
        from the slices' representation error and the dropped slice products
        (derived from the scheme's parameters, not measured)."""
        raise NotImplementedError

    @property
    def fp32_class(self) -> bool:
        """Meant to match FP32: its elementwise products are within 4 units of
        FP32's rounding (2^-22), so errors are dominated by the accumulation."""
        return self.unit_roundoff <= 2.0 ** -22

    def error_bound(self) -> Optional[float]:
        """Bound on the relative Frobenius error against the float64 product
        for well-scaled random data, for schemes below FP32 accuracy.

        None for FP32-class schemes: their bound is relative to FP32's own
        error on the same inputs (at most 2x), not an absolute number.
        Otherwise 4 * unit_roundoff: product errors of relative size u
        give a relative Frobenius error of about u on random data.
        """
        if self.fp32_class:
            return None
        return 4.0 * self.unit_roundoff

    #: dtype of the operands and result: "float32" for every scheme but the
    #: FP64 emulation (ozaki2_f64).
    operand_dtype: ClassVar[str] = "float32"

    def __repr__(self) -> str:
        # Short and stable (it shows in printed jaxprs): the name, plus the
        # fields that differ from the catalogue entry of that name.
        base = _CATALOGUE.get(self.name)
        if base is None or type(base) is not type(self):
            fields = [f.name for f in dataclasses.fields(self) if f.name != "name"]
            diff = {f: getattr(self, f) for f in fields}
        else:
            diff = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                    if getattr(self, f.name) != getattr(base, f.name)}
        inner = ", ".join(f"{k}={v!r}" for k, v in diff.items())
        return f"{self.name}({inner})" if inner else self.name

    def replace(self, **changes) -> "Scheme":
        """A copy with some parameters changed (validated)."""
        return dataclasses.replace(self, **changes)

    products: Tuple[Tuple[int, int], ...] = ()

    @property
    def levels(self) -> Tuple[Tuple[int, Tuple[Tuple[int, int], ...]], ...]:
        """Slice products grouped by magnitude level i + j, smallest terms
        (highest level) first: the order in which they are accumulated."""
        by = {}
        for i, j in self.products:
            by.setdefault(i + j, []).append((i, j))
        return tuple((lvl, tuple(by[lvl])) for lvl in sorted(by, reverse=True))

    @property
    def num_products(self) -> int:
        return len(self.products)

    @property
    def parts(self) -> Tuple["Scheme", ...]:
        """The concrete schemes whose products a backend runs for this one:
        itself, except for composite schemes (auto)."""
        return (self,)

    def describe(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError


def _check_kc(kc, name):
    if kc is not None and (not isinstance(kc, int) or isinstance(kc, bool) or kc <= 0):
        raise ValueError(f"scheme {name!r}: kc must be a positive int or None, got {kc!r}")


@dataclasses.dataclass(frozen=True, repr=False)
class NativeFP32(Scheme):
    """The FP32 product itself (cuBLAS SGEMM on a GPU): the baseline."""

    name: str = "fp32"
    source: str = "cuBLAS SGEMM / lax.Precision.HIGHEST"
    family: ClassVar[str] = "native"

    @property
    def unit_roundoff(self) -> float:
        return 2.0 ** -24

    @property
    def num_products(self) -> int:
        return 1

    def describe(self) -> str:
        return "native FP32 (precision=HIGHEST)"


# The largest |value| of an exact operand (FloatSplit.exact: small integers,
# converted from bool, int8 or uint8): the bound the kernels' special-value
# decision and auto's range test take for it, without a pass over it.
EXACT_MAX = 256.0


@dataclasses.dataclass(frozen=True, repr=False)
class FloatSplit(Scheme):
    """x = s_0 + s_1 2^-sb + s_2 2^-2sb + ... with s_i in a low-precision float format.

    Attributes:
      name: catalogue name.
      fmt: slice format, "bf16", "fp16" or "tf32".
      slices: number of slices per operand.
      products: the (i, j) slice pairs whose products are summed; (0, 0) is hi*hi.
      split: "rn" (each slice is the round-to-nearest of the remaining residual)
        or "bitcut" (LE-GEMM: hi truncated, residual slices rounded toward zero).
      lo_scale_bits: sb; residual slices are stored multiplied by 2^(i*sb) so that
        they stay in the normal range of a narrow format (fp16). 0 for bf16/tf32,
        which have the f32 exponent range.
      scaling: "none", or "row": each row of A and column of B is multiplied by a
        power of two (exact) so that its largest finite value sits just below the
        top of the fp16 range (SGEMM-cube, cuMpSGEMM).
      kc: promotion interval. Partial sums leave the tensor-core accumulator every
        kc K-steps and are added in FP32 round-to-nearest (DESIGN.md 2.1: Hopper's
        tensor-core accumulation is not RN). None: one accumulation over all of K.
        The cuda backend's fused kernel adds the terms of equal weight into one
        partial, smallest first in each K-tile of 64 (tf32: 32) K-steps: at a kc
        of one K-tile each term's truncation is at its own scale; beyond it, the
        small terms of later K-tiles are truncated at hi*hi's scale too, so a
        longer kc costs more accuracy there than on the xla backend. Below one
        K-tile it promotes hi*hi every half K-tile (fp16 and tf32 slices), and
        at K <= 256 it halves the kc of fp16 and tf32 slices by itself
        (backends/cuda_fused.py: kernel_kc; docs/accuracy.md, "Promotion on
        the GPU, and short K").
      termwise: accumulate products of each magnitude level (i + j) separately and
        add the levels smallest first, hi*hi last (SGEMM-cube).
      exact: (lhs, rhs): the operand is known to hold small integers (|x| <= 256:
        a one-hot or 0/1 matrix, int8/uint8 data converted to float32), exact in
        every slice format, so it is one slice, unscaled, and its lo slices'
        products (all zero) are not computed: the same result for fewer
        products (``with_exact``). Set by jaxemu.emulate from the program
        (values converted from bool/int8/uint8), never guessed from data.
    """

    name: str
    fmt: str
    slices: int
    products: Tuple[Tuple[int, int], ...]
    split: str = "rn"
    lo_scale_bits: int = 0
    scaling: str = "none"
    kc: Optional[int] = None
    termwise: bool = True
    source: str = ""
    exact: Tuple[bool, bool] = (False, False)
    family: ClassVar[str] = "float"

    def __post_init__(self):
        if self.fmt not in FORMAT_BITS:
            raise ValueError(f"scheme {self.name!r}: fmt must be one of {sorted(FORMAT_BITS)}, got {self.fmt!r}")
        if not isinstance(self.slices, int) or not 1 <= self.slices <= 4:
            raise ValueError(f"scheme {self.name!r}: slices must be an int in 1..4, got {self.slices!r}")
        prods = tuple(tuple(p) for p in self.products)
        if not prods or (0, 0) not in prods:
            raise ValueError(f"scheme {self.name!r}: products must contain (0, 0), got {self.products!r}")
        for i, j in prods:
            if not (0 <= i < self.slices and 0 <= j < self.slices):
                raise ValueError(f"scheme {self.name!r}: product {(i, j)} names a slice beyond slices={self.slices}")
        if len(set(prods)) != len(prods):
            raise ValueError(f"scheme {self.name!r}: repeated products in {self.products!r}")
        object.__setattr__(self, "products", prods)
        if self.split not in ("rn", "bitcut"):
            raise ValueError(f"scheme {self.name!r}: split must be 'rn' or 'bitcut', got {self.split!r}")
        if self.split == "bitcut" and self.fmt != "fp16":
            raise ValueError(f"scheme {self.name!r}: split='bitcut' is defined for fmt='fp16' only")
        if not isinstance(self.lo_scale_bits, int) or not 0 <= self.lo_scale_bits <= 14:
            raise ValueError(f"scheme {self.name!r}: lo_scale_bits must be an int in 0..14, got {self.lo_scale_bits!r}")
        if self.scaling not in ("none", "row"):
            raise ValueError(f"scheme {self.name!r}: scaling must be 'none' or 'row', got {self.scaling!r}")
        if self.fmt == "fp16" and self.scaling != "row":
            # fp16's range (6e-8 .. 65504) cannot hold f32 data without scaling:
            # without it, |x| > 65504 would silently become Inf.
            raise ValueError(f"scheme {self.name!r}: fp16 slices need scaling='row'")
        _check_kc(self.kc, self.name)
        ex = tuple(self.exact)
        if len(ex) != 2 or not all(isinstance(x, bool) for x in ex):
            raise ValueError(f"scheme {self.name!r}: exact must be two bools (lhs, rhs), got {self.exact!r}")
        object.__setattr__(self, "exact", ex)
        for side, name in ((0, "lhs"), (1, "rhs")):
            if ex[side] and any(p[side] for p in prods):
                raise ValueError(f"scheme {self.name!r}: the {name} is exact (one slice), but products "
                                 f"{prods!r} name its slice 1 or 2")

    def slices_of(self, side: int) -> int:
        """Slices of the lhs (side 0) or rhs (side 1): one where it is exact."""
        return 1 if self.exact[side] else self.slices

    def with_exact(self, lhs: bool, rhs: bool) -> "FloatSplit":
        """This scheme for operands of which ``lhs`` / ``rhs`` hold small
        integers (``exact``): one slice for such an operand, and only the
        products of its slice 0 (the others multiply its lo slices, which are
        zero). The result is the full scheme's on those operands, without the
        zero products: fewer slice products, no split of the exact operand.
        Unchanged when neither is exact."""
        lhs, rhs = bool(lhs) or self.exact[0], bool(rhs) or self.exact[1]
        if (lhs, rhs) == self.exact:
            return self
        prods = tuple((i, j) for i, j in self.products if not (lhs and i) and not (rhs and j))
        return dataclasses.replace(self, products=prods, exact=(lhs, rhs))

    @property
    def unit_roundoff(self) -> float:
        # Each slice holds p significand bits; a round-to-nearest split leaves a
        # residual below 2^-(p+1) of the value, a truncating (bit-cut) one below
        # 2^-(p-1). Level L products are then ~2^(-L*q) of hi*hi. An exact
        # operand has no representation error and no lo slices.
        p = FORMAT_BITS[self.fmt]
        q = p + 1 if self.split == "rn" else p - 1
        repr_err = 2.0 ** (-q * self.slices)
        if q * self.slices >= FP32_BITS + 2:
            repr_err = 0.0  # the slices hold all 24 bits of an f32 exactly
        inexact = 2 - sum(self.exact)
        dropped = sum(2.0 ** (-q * (i + j)) for i in range(self.slices_of(0))
                      for j in range(self.slices_of(1)) if (i, j) not in self.products)
        return max(2.0 ** -24, inexact * repr_err + dropped)

    def describe(self) -> str:
        p = " + ".join(f"{i}{j}" for i, j in self.products)
        ex = [side for side, e in zip(("lhs", "rhs"), self.exact) if e]
        tail = f", {' and '.join(ex)} exact (one slice)" if ex else ""
        return f"{self.slices} x {self.fmt} ({self.split}), products {p}, kc={self.kc}{tail}"


def exact_variant(scheme: "Scheme", exact) -> "Scheme":
    """``scheme`` for operands flagged ``exact`` (lhs, rhs): a float scheme's
    one-slice variant (FloatSplit.with_exact); any other scheme unchanged."""
    return scheme.with_exact(*exact) if any(exact) and isinstance(scheme, FloatSplit) else scheme


@dataclasses.dataclass(frozen=True, repr=False)
class Int8Split(Scheme):
    """MixPert: fixed-point int8 slices under a shared exponent per tile.

    Each row of A (and column of B) is cut into K-tiles of ``ktile`` elements;
    each tile shares the exponent of its largest finite value, and the aligned
    mantissas are cut into int8 slices of 6, 7, 7 significant bits (the leading
    one stored explicitly). Slice products accumulate exactly in int32 per tile,
    are converted to FP32 and scaled by 2^(e_A + e_B).

    Level (l, r): A keeps l + 1 slices, B keeps r + 1; products (i, j) with
    i <= l, j <= r and i + j <= max(l, r) (levels I-IV: (1,1), (1,2), (2,1), (2,2)).

    Tiles that the fixed-point format cannot represent well -- a spread of
    nonzero exponents wider than ``max_spread`` binades -- fall back to the
    ``fallback`` float scheme (MixPert's fallback; the bound here is ours,
    chosen by measurement); ``jaxemu.int8_fallback_stats`` reports how many.
    On the cuda backend, where few tiles fall back (the usual case), their
    products run in FP32 instead (a kernel on the CUDA cores, or XLA's thin
    products tile by tile), work on which an emulated scheme's tiles would
    waste most of theirs (the same size of error:
    tests/test_mixpert_host.py, tests/test_cuda_mixpert.py);
    ``JAXEMU_CUDA_MIXPERT_FALLBACK=0 JAXEMU_CUDA_MIXPERT_SPARSE=0`` keeps
    the ``fallback`` scheme for them (backends/cuda_mixpert.py).
    NaN/Inf follow FP32 semantics like every scheme (see backends/xla.py).
    """

    name: str
    level: Tuple[int, int]
    ktile: int = 32
    # A tile whose nonzero exponents span more than max_spread binades falls
    # back. 16, measured (report.py, K=1024): on uniform and normal data only
    # ~0.1% of tile pairs fall back and the error is what it is with no
    # fallback at all; on wide-exponent data (u 2^U[-16,16)) every tile falls
    # back, giving bf16x6's error instead of 15x FP32's.
    max_spread: int = 16
    fallback: str = "bf16x6"
    source: str = "MixPert (LCTES 2024)"
    family: ClassVar[str] = "int8"

    SLICE_BITS: ClassVar[Tuple[int, ...]] = (6, 7, 7)

    def __post_init__(self):
        lv = tuple(self.level)
        if lv not in ((1, 1), (1, 2), (2, 1), (2, 2)):
            raise ValueError(f"scheme {self.name!r}: level must be one of (1,1), (1,2), (2,1), (2,2), got {self.level!r}")
        object.__setattr__(self, "level", lv)
        if not isinstance(self.ktile, int) or isinstance(self.ktile, bool) or not 1 <= self.ktile <= 65536:
            raise ValueError(f"scheme {self.name!r}: ktile must be an int in 1..65536, got {self.ktile!r}")
        if not isinstance(self.max_spread, int) or not 0 <= self.max_spread <= 40:
            raise ValueError(f"scheme {self.name!r}: max_spread must be an int in 0..40, got {self.max_spread!r}")
        if self.fallback not in ("bf16x6", "bf16x9", "fp32"):
            raise ValueError(f"scheme {self.name!r}: fallback must be 'bf16x6', 'bf16x9' or 'fp32', got {self.fallback!r}")

    @property
    def a_slices(self) -> int:
        return self.level[0] + 1

    @property
    def b_slices(self) -> int:
        return self.level[1] + 1

    @property
    def products(self) -> Tuple[Tuple[int, int], ...]:
        l, r = self.level
        top = max(l, r)
        return tuple((i, j) for i in range(l + 1) for j in range(r + 1) if i + j <= top)

    @property
    def unit_roundoff(self) -> float:
        # Fixed point relative to the tile maximum: after slice n the residual is
        # below 2^-(w_n + 1) of it (w = 6, 13, 20; round-to-nearest slicing).
        # A typical element is half its tile maximum: one more bit.
        w = [sum(self.SLICE_BITS[: n + 1]) for n in range(3)]
        ra = 2.0 ** -(w[self.a_slices - 1] + 1)
        rb = 2.0 ** -(w[self.b_slices - 1] + 1)
        dropped = sum(2.0 ** -(w[i] - 6 + w[j] - 6 + 2) for i in range(self.a_slices)
                      for j in range(self.b_slices) if (i, j) not in self.products)
        return 2.0 * (ra + rb + dropped)

    @staticmethod
    def level_shift(lvl: int) -> int:
        """The products of slices (i, j) with i + j = lvl weigh 2^-level_shift
        against the tile exponents: slice i weighs 2^-(6 + 7 i) (6, 7, 7 bits)."""
        return 12 + 7 * lvl

    def describe(self) -> str:
        return (f"int8 level {self.level}: {self.a_slices}x{self.b_slices} slices, "
                f"{self.num_products} products, tile 1x{self.ktile}, fallback {self.fallback}")


@dataclasses.dataclass(frozen=True, repr=False)
class Ozaki2(Scheme):
    """Ozaki scheme II (GEMMul8): exact integer products modulo small moduli.

    Each row of A and column of B is scaled by a power of two and rounded to
    an integer of ``bits`` bits (relative to its largest entry); the integer
    product A'B' is computed exactly from its residues modulo pairwise
    coprime moduli m_l <= 256 (one int8 x int8 -> int32 product per modulus)
    and the Chinese remainder theorem, then scaled back. Accuracy is set by
    the number of moduli: their product M must exceed 4 K 2^(pa + pb), so
    more moduli leave more bits per operand entry (jaxemu/_ozaki2.py).

    Attributes:
      name: catalogue name.
      dtype: "float32" (FP32 in and out) or "float64" (needs jax_enable_x64).
      moduli: number of moduli (int8 products), or None: the fewest that give
        every operand entry ``target_bits`` bits at the product's K
        (``moduli_for(k)``). Fewer moduli: faster and less accurate (GEMMul8's knob).
      target_bits: bits that the default moduli count guarantees the largest
        scaled entry of every row (column) under the worst case of either
        scaling rule. 24 for float32 (the significand of the row's largest
        entry; 8 moduli up to K = 8192, 9 up to 2^21; with the norm rule,
        measured on a CPU: error 0.03-0.12x FP32's on the four input laws up
        to K = 16384, docs/accuracy.md), 55 for float64.
      scaling: how each row of A (column of B) is scaled to integers. "norm"
        (default; GEMMul8's fast mode): as many bits as its 2-norm allows,
        |A'B'| <= ||A'_i|| ||B'_j|| <= M / 4 (Cauchy-Schwarz), which on
        typical data is 1-3 bits more than "max" gives; "max": the row's
        maximum keeps the bits of the worst case K max|A'| max|B'| <= M / 4
        (never more than "norm" gives).
    """

    name: str
    dtype: str = "float32"
    moduli: Optional[int] = None
    target_bits: int = 24
    scaling: str = "norm"
    source: str = "Ozaki scheme II (Ozaki, Uchino, Imamura); GEMMul8"
    family: ClassVar[str] = "ozaki2"

    # Limits of the implementation: scaled entries are int32 (float32) or
    # int64 (float64); the catalogue of pairwise coprime moduli <= 256 has 40.
    MAX_BITS: ClassVar[dict] = {"float32": 30, "float64": 62}
    MAX_MODULI: ClassVar[int] = 40
    # K at which the catalogue's metadata (num_products, unit_roundoff) is stated.
    NOMINAL_K: ClassVar[int] = 4096

    def __post_init__(self):
        if self.dtype not in self.MAX_BITS:
            raise ValueError(f"scheme {self.name!r}: dtype must be 'float32' or 'float64', got {self.dtype!r}")
        if self.moduli is not None and (not isinstance(self.moduli, int) or isinstance(self.moduli, bool)
                                        or not 2 <= self.moduli <= self.MAX_MODULI):
            raise ValueError(f"scheme {self.name!r}: moduli must be None or an int in 2..{self.MAX_MODULI}, "
                             f"got {self.moduli!r}")
        if self.scaling not in ("norm", "max"):
            raise ValueError(f"scheme {self.name!r}: scaling must be 'norm' or 'max', got {self.scaling!r}")
        if (not isinstance(self.target_bits, int) or isinstance(self.target_bits, bool)
                or not 8 <= self.target_bits <= self.MAX_BITS[self.dtype]):
            raise ValueError(f"scheme {self.name!r}: target_bits must be an int in "
                             f"8..{self.MAX_BITS[self.dtype]}, got {self.target_bits!r}")

    @property
    def operand_dtype(self) -> str:  # type: ignore[override]
        return self.dtype

    def moduli_for(self, k: int) -> int:
        """The number of moduli (int8 products) used for contraction length k."""
        if self.moduli is not None:
            return self.moduli
        from math import ceil, floor, log2
        from ._ozaki2 import MODULI
        need = 2 * self.target_bits + 2 + max(0, ceil(log2(max(k, 1))))
        total = 0.0
        for n, m in enumerate(MODULI, 1):
            total += log2(m)
            if n >= 2 and floor(total) >= need:
                return n
        return len(MODULI)

    def bits_for(self, k: int) -> Tuple[int, int]:
        """Bits (pa, pb) kept per scaled entry of A and of B at contraction length k."""
        from ._ozaki2 import operand_bits
        return operand_bits(self.moduli_for(k), k, self.MAX_BITS[self.dtype])

    @property
    def num_products(self) -> int:
        # int8 products at the nominal K (4096); moduli_for(k) for others.
        return self.moduli_for(self.NOMINAL_K)

    @property
    def unit_roundoff(self) -> float:
        # Entries are rounded to integers of pa (pb) bits relative to their
        # row's maximum: relative error 2^-pa for the largest, more for small
        # entries; the result is rounded once more (within an ulp).
        pa, pb = self.bits_for(self.NOMINAL_K)
        fmt = 2.0 ** (-24 if self.dtype == "float32" else -53)
        return max(fmt, 2.0 ** -pa + 2.0 ** -pb)

    def describe(self) -> str:
        n = "from K" if self.moduli is None else str(self.moduli)
        return (f"Ozaki II ({self.dtype}): int8 residues modulo pairwise coprime moduli <= 256, "
                f"moduli: {n} ({self.num_products} at K={self.NOMINAL_K}), exact int32 products, CRT")


@dataclasses.dataclass(frozen=True, repr=False)
class Auto(Scheme):
    """APE's adapter: per output block, the fastest scheme its input blocks allow
    (fp16x3 where its error stays within FP32's, else bf16x6, else FP32),
    and native FP32 where emulation does not pay (small or skinny products)."""

    name: str = "auto"
    block: int = 128
    # When fp16x3 may run (jaxemu/auto.py, docs/accuracy.md): "normwise"
    # (default): where the error its lost low-order bits can add is proven
    # below a quarter of FP32's unit roundoff times ||C||_F; "componentwise":
    # only where no value lies more than 2^-24 below its row's maximum, so
    # that every entry of C keeps FP32's componentwise accuracy.
    criterion: str = "normwise"
    # "device": the device's cost model (jaxemu/costs.py: calibrated with
    # jaxemu.calibrate(), or shipped for the GPU model) decides where emulation
    # pays and between pure and hybrid runs; where the device has none, and with
    # "counts", slice-product counts and the two thresholds below do.
    cost_model: str = "device"
    # Below these, native FP32 runs (without a cost model). Measured on an H200
    # (docs/performance.md): bf16x6 on the cuda backend ran at 0.33x SGEMM at
    # 1024^3, 0.81x at 2048^3, 0.95x / 0.48x with K = 256 / M = 256, 1.02x at
    # 8 x 2048^3, 1.31x at 4096^3.
    min_flops: float = 5e10
    min_dim: int = 2048
    source: str = "APE adapter (ICS 2022)"
    family: ClassVar[str] = "auto"

    def __post_init__(self):
        if not isinstance(self.block, int) or self.block <= 0:
            raise ValueError(f"scheme {self.name!r}: block must be a positive int, got {self.block!r}")
        if not isinstance(self.min_dim, int) or self.min_dim < 0:
            raise ValueError(f"scheme {self.name!r}: min_dim must be a non-negative int, got {self.min_dim!r}")
        if self.cost_model not in ("device", "counts"):
            raise ValueError(f"scheme {self.name!r}: cost_model must be 'device' or 'counts', "
                             f"got {self.cost_model!r}")
        if self.criterion not in ("normwise", "componentwise"):
            raise ValueError(f"scheme {self.name!r}: criterion must be 'normwise' or 'componentwise', "
                             f"got {self.criterion!r}")

    @property
    def unit_roundoff(self) -> float:
        return 2.0 ** -24

    @property
    def num_products(self) -> int:
        return 0

    @property
    def parts(self) -> Tuple[Scheme, ...]:
        # The emulated branches; its FP32 branch is the native product.
        return (get_scheme("fp16x3"), get_scheme("bf16x6"))

    def describe(self) -> str:
        return (f"auto: fp16x3 where safe ({self.criterion}), else bf16x6, else fp32, per row/column, "
                f"hybrids split at multiples of {self.block}; cost model: {self.cost_model}")


# --------------------------------------------------------------------------
# The catalogue.
#
# Promotion interval default, measured on an H200 (jax 0.11.2, 4096^3, cuda
# backend; error relative to cuBLAS SGEMM's on the same inputs):
#                     kc=64   128    256    512
#   bf16x6 uniform(0,1) 0.15   0.19   0.37   0.84
#   fp16x3 uniform(0,1) 0.25   0.55   1.33   3.01
#   bf16x6 normal(0,1)  0.14   0.14   0.21   0.42
# On positive data the tensor cores' truncating accumulation is biased, so the
# error grows with kc. With the fused kernels (H200, 2026-11-22, uniform(0,1),
# error / SGEMM's at kc = 128 -> 64): fp16x3 at 8192^3 1.01 -> 0.51, at
# 32768 x 1024 x 4096 1.08 -> 0.45, at 8192 x 128 x 262144 2.95 -> 1.19;
# tf32x3 at 8192^3 1.33 -> 0.64; bf16x6 on wide-exponent data at K = 128
# 1.55 -> 0.94. kc = 64 costs 13 % at 8192^3 (fp16x3 3.29x -> 2.88x SGEMM)
# and 2-6 % on the skinny shapes; FP32 accuracy comes first.
_KC = 64

_X6 = ((0, 0), (0, 1), (1, 0), (0, 2), (1, 1), (2, 0))
_X3 = ((0, 0), (0, 1), (1, 0))
_X9 = tuple((i, j) for i in range(3) for j in range(3))

_CATALOGUE = {}


def _add(s: Scheme) -> None:
    _CATALOGUE[s.name] = s


_add(NativeFP32())
_add(FloatSplit("tf32", "tf32", 1, ((0, 0),), source="native TF32 tensor cores"))
_add(FloatSplit("bf16", "bf16", 1, ((0, 0),), source="native BF16 tensor cores"))
_add(FloatSplit("fp16", "fp16", 1, ((0, 0),), scaling="row",
                source="native FP16 tensor cores (with exact power-of-two row scaling)"))
_add(FloatSplit("bf16x3", "bf16", 2, _X3, kc=_KC, source="Henry et al. 2019; XLA BF16_BF16_F32_X3"))
_add(FloatSplit("bf16x6", "bf16", 3, _X6, kc=_KC, source="APE FP32-B; XLA BF16_BF16_F32_X6"))
_add(FloatSplit("bf16x9", "bf16", 3, _X9, kc=_KC, source="cuBLAS BF16x9; XLA BF16_BF16_F32_X9"))
# tf32x3 promotes every 32 K-steps, one K-tile of the fused kernel (128 bytes
# of tf32): its three products share one partial accumulator per chunk
# (ffi/fused/mainloop.cuh), and at kc = 64 the small terms of a chunk's
# second K-tile add into a partial that already holds hi*hi, truncated at
# its scale (H100, 2026-11-25: error / SGEMM's on uniform(0,1) at 8192 x 128
# x 262144 1.68 -> 2.54 with the shared partial at kc = 64).
_add(FloatSplit("tf32x3", "tf32", 2, _X3, kc=32, source="APE FP32-T; CUTLASS 3xTF32"))
# SGEMM-cube / Ootomo: lo = fp16((x - hi) 2^sb); sb = 12 (cube's default).
_add(FloatSplit("fp16x3", "fp16", 2, _X3, lo_scale_bits=12, scaling="row", kc=_KC,
                source="APE FP32-F; Ootomo & Yokota 2022; SGEMM-cube"))
# LE-GEMM: hi by bit-cut (truncation), lo = RZ((x - hi) 2^10).
_add(FloatSplit("fp16x3_bitcut", "fp16", 2, _X3, split="bitcut", lo_scale_bits=10,
                scaling="row", kc=_KC, source="LE-GEMM"))
for _lvl, _name in (((1, 1), "int8_l1"), ((1, 2), "int8_l2"), ((2, 1), "int8_l3"), ((2, 2), "int8_l4")):
    _add(Int8Split(_name, _lvl))
_add(Ozaki2("ozaki2_f32", "float32"))
_add(Ozaki2("ozaki2_f64", "float64", target_bits=55))
_add(Auto())

SchemeLike = Union[str, Scheme]

# Friendly aliases: MixPert's roman numerals.
_ALIASES = {"int8_i": "int8_l1", "int8_ii": "int8_l2", "int8_iii": "int8_l3", "int8_iv": "int8_l4"}


def schemes() -> Tuple[str, ...]:
    """The names of all catalogue schemes."""
    return tuple(_CATALOGUE)


def get_scheme(scheme: SchemeLike) -> Scheme:
    """Resolve a scheme name (or pass a Scheme through).

    Raises:
      ValueError: unknown name, listing the known ones.
      TypeError: neither a string nor a Scheme.
    """
    if isinstance(scheme, Scheme):
        return scheme
    if isinstance(scheme, str):
        key = scheme.strip().lower().replace("-", "_")
        key = _ALIASES.get(key, key)
        if key in _CATALOGUE:
            return _CATALOGUE[key]
        raise ValueError(f"unknown scheme {scheme!r}; known schemes: {', '.join(_CATALOGUE)}")
    raise TypeError(f"scheme must be a string or a jaxemu Scheme, got {type(scheme).__name__}: {scheme!r}")

