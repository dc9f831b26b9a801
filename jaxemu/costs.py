"""Per-device cost model for ``auto`` (APE §5's light-weight strategy decider).

``auto`` must know, for a product of a given shape on the device it runs on,
how long native FP32, fp16x3 and bf16x6 take: to run FP32 where emulation
does not pay, and to choose between a pure and a hybrid run. The model, per
scheme s, is

    t_s(B, M, N, K) = B * 2MNK / rate_s + B * MN * per_output_s + B * (MK + KN) * per_input_s + fixed_s

(tensor-core work + the passes over C + the passes over the operands
(splitting them) + launch costs; a batch runs in the same launches), four
non-negative coefficients fit by least squares on relative error to timed
products. Outputs and inputs cost apart: the k-means distances (1M x 1024
outputs, K = 256) and the centre update (1024 x 256 outputs, K = 1M) have
the same FLOPs and the same element count, yet fp16x3 measured 1.66x and
0.81x SGEMM on them (H100, docs/performance.md). Where a backend runs one scheme on two kernels whose costs differ in kind,
each has its own coefficients (``path_of``): the cuda backend's bf16
schemes run on the FP32-operand kernel on outputs of up to two waves of
tiles, with no operand passes but a slower GEMM (backends/cuda_fused.py:
f32_pays), and on the slice path elsewhere; fp16x3 where M N / (M + N) <=
384 (f32_fp16_pays: since 2026-11-28, after the shipped H200 points, so
its main fit prices that path until a calibration measures it). Where a path has no fit of its
own (too few calibrated shapes, or shipped points that predate it), the
scheme's main fit prices it. Where the coefficients come from, in order:

1. a calibration measured on this device and backend with
   ``jaxemu.calibrate()`` (``python -m jaxemu calibrate``), cached on disk
   (``$JAXEMU_CACHE_DIR``, default ``~/.cache/jaxemu``);
2. measurements shipped with jaxemu for a GPU model (the H200, cuda backend:
   docs/performance.md);
3. none: ``auto`` then falls back to its size thresholds (``min_flops``,
   ``min_dim``) and slice-product counts, and says so in ``explain``.
"""
from __future__ import annotations

import dataclasses
import json
import os
import warnings
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

Shape = Tuple[int, int, int, int]  # (B, M, N, K)
SCHEMES = ("fp32", "fp16x3", "bf16x6")

# H200 (driver 580.159.04, jax 0.11.2), cuda backend, 2026-11-30, inputs
# uniform(-1, 1): milliseconds (SGEMM) and speedups over SGEMM measured in the
# same run, from one `python scripts/cost_points.py --repeats 5
# --extra 1x512x512x65536,1x4096x256x262144,1x512x1024x131072` at stop 55's
# kernels (fp16x3 on the FP32-operand kernel with its exponents found in the
# kernel: the k-means update (10th) 2.48x where stop 36's points had 1.11x;
# its split finding its row exponents: the distances (9th) 2.90x against
# 2.71x). Both schemes take the FP32-operand kernel on the 7th, 10th and
# 12th-14th shapes (the last two were added so that fp16x3's is fit apart:
# one fit of all its points priced bf16x6 below it at 256 x 8192 x 8192,
# measured 2.09x against 1.88x), bf16x6 also on the 1st and 2nd; the
# 9th-11th: k-means distances and update, kNN; docs/performance.md, "H200,
# 2026-11-30 (stop 55)". But 1024^3 (a ~0.1 ms product, timed one call at a
# time) is the same day's first run (call 1: fp16x3 0.70x, bf16x6 1.15x, its
# split finding no exponents yet); the run above measured 0.53x and 1.26x
# there, and fp16x3's 0.53 bent its fit so that it priced 2048^3 at bf16x6's
# time (0.188 ms both; measured 0.176 and 0.186). Earlier runs swung as much
# (fp16x3 0.34-0.63, stops 34-36).
_H200_SGEMM = {(1, 1024, 1024, 1024): 0.059, (1, 2048, 2048, 2048): 0.349, (1, 4096, 4096, 4096): 2.716,
               (1, 8192, 8192, 8192): 22.124, (1, 16384, 16384, 16384): 165.959, (1, 8192, 8192, 256): 0.762,
               (1, 256, 8192, 8192): 0.707, (8, 2048, 2048, 2048): 2.666, (1, 1048576, 1024, 256): 12.247,
               (1, 1024, 256, 1048576): 10.950, (1, 8192, 262144, 128): 13.248, (1, 512, 512, 65536): 0.728,
               (1, 4096, 256, 262144): 11.179, (1, 512, 1024, 131072): 2.733}
_H200_SPEEDUP = {  # x SGEMM, same order as _H200_SGEMM
    "fp16x3": (0.70, 1.98, 3.41, 3.93, 3.91, 2.88, 2.09, 2.51, 2.90, 2.48, 2.38, 2.17, 2.51, 2.21),
    "bf16x6": (1.15, 1.88, 2.05, 2.29, 2.03, 1.99, 1.88, 1.82, 1.95, 1.84, 2.04, 1.94, 1.84, 1.86),
}
# Not in the fit: bf16x6's slice path timed with the FP32-operand kernel
# switched off where that kernel is the default (scripts/f32_ab.py, same
# day: the k-means update 0.93x, 2048^3 1.62x). Stop 34 fit them to the
# slice path; they bent it so that it priced bf16x6 below fp16x3 at
# 8192 x 8192 x 256 (0.372 vs 0.378 ms; measured 0.390 vs 0.351), and auto's
# plan there is bf16x6 alone (auto.plan). Without them the fit orders
# fp16x3 and bf16x6 as measured on all twelve shapes (tests/test_costs.py);
# it prices the slice path's update at 9.6 ms (measured 11.6), which only
# JAXEMU_CUDA_F32_OPERANDS=0 and the hybrids' parts there would run.

# H100 80GB HBM3 (driver 580.159.04, jax 0.11.2), cuda backend (fused kernels,
# kc = 64), 2026-11-24, same shapes and law, `python scripts/cost_points.py
# --repeats 5` (docs/performance.md, "H100"). Two runs agreed within 0.17x on
# every shape but the smallest; fp16x3 at 16384^3 measured 1.87x both times.
# 8192^3 and the application shapes (the last three: k-means distances and
# update, kNN) are from 2026-11-25 (commit 3df6e11: special values decided before the
# GEMM), `python -m jaxemu.bench --suite shapes` (docs/performance.md, "H100,
# 2026-11-25"); that run measured 2048^3 faster than the points above
# (fp16x3 1.65x, bf16x6 1.36x: the tile-width rule of 6e80506), kept out
# until the whole set is re-measured with one commit (scripts/cost_points.py).
_H100_SGEMM = {(1, 1024, 1024, 1024): 0.060, (1, 2048, 2048, 2048): 0.344, (1, 4096, 4096, 4096): 2.695,
               (1, 8192, 8192, 8192): 22.007, (1, 16384, 16384, 16384): 166.626, (1, 8192, 8192, 256): 0.759,
               (1, 256, 8192, 8192): 0.710, (8, 2048, 2048, 2048): 2.657, (1, 1048576, 1024, 256): 11.858,
               (1, 1024, 256, 1048576): 10.879, (1, 8192, 262144, 128): 13.130}
_H100_SPEEDUP = {
    "fp16x3": (0.45, 1.19, 2.01, 2.54, 1.87, 0.97, 0.48, 1.60, 1.66, 0.81, 1.17),
    "bf16x6": (0.33, 0.85, 1.27, 1.37, 0.93, 1.15, 0.43, 1.05, 1.61, 0.60, 1.57),
}


def _points(sgemm_ms, speedups) -> Dict[str, Dict[Shape, float]]:
    """Seconds per scheme and shape from SGEMM's milliseconds and the
    schemes' speedups over it measured in the same run."""
    pts = {"fp32": {s: ms * 1e-3 for s, ms in sgemm_ms.items()}}
    for name, xs in speedups.items():
        pts[name] = {s: ms * 1e-3 / x for (s, ms), x in zip(sgemm_ms.items(), xs)}
    return pts


def _h200_points() -> Dict[str, Dict[Shape, float]]:
    return _points(_H200_SGEMM, _H200_SPEEDUP)


def _h100_points() -> Dict[str, Dict[Shape, float]]:
    return _points(_H100_SGEMM, _H100_SPEEDUP)


# (device kind substring, backend) -> (source, measured points, whether to fit
# each kernel path apart). The H100's predate the FP32-operand kernel's
# default (2026-11-27): every point is the slice path's, so one fit per scheme.
SHIPPED = {("H200", "cuda"): ("shipped: H200 measurements of 2026-11-30 (docs/performance.md)", _h200_points, True),
           ("H100", "cuda"): ("shipped: H100 measurements of 2026-11-24 (docs/performance.md)", _h100_points, False)}


def path_of(backend: str, scheme: str, shape: Shape, exact=(False, False)) -> str:
    """The kernel path ``backend`` takes for ``scheme`` at ``shape`` where it
    has two whose costs differ in kind: "f32" for the cuda backend's
    FP32-operand kernel (backends/cuda_fused.py: f32_kernel, which reads the
    same switch), "" for the backend's main path; ``exact``: which operands
    hold small integers (FloatSplit.with_exact)."""
    if backend != "cuda" or scheme == "fp32":
        return ""
    from .backends import cuda_fused
    from .schemes import get_scheme
    b, m, n, k = shape
    s = get_scheme(scheme)
    if any(exact):
        s = s.with_exact(*exact)
    return "f32" if cuda_fused.f32_kernel(s, m, k, n, b) else ""


# auto's data test, priced on top of every emulated candidate (auto.plan):
# one pass over A and B (fp16x3's normwise probe among it, or the exponent
# ranges alone), then a conditional whose predicate crosses to the host.
# H200, stop 55 (docs/performance.md), auto's time less that of the scheme it
# ran, same run: 0.069 ms at 2048^3 (32 MiB read), 0.35 at 8192^3 (0.54 GB),
# 0.64 on the k-means distances (1.07 GB), 1.86 on the update (5.4 GB); on
# kNN and 8 x 2048^3 none (its maxima replace fp16x3's exponent passes).
# A fixed part and a rate through the first and last: an estimate for the
# decision between emulation and FP32 (all emulated candidates pay it alike),
# not a prediction of auto's overhead on every shape.
DATA_TEST_FIXED_S = 50e-6
DATA_TEST_BYTES_PER_S = 2.9e12


def data_test_time(shape: Shape, exact=(False, False), ranges_only: bool = False) -> float:
    """Seconds of auto's data test for a (B, M, N, K) product: the
    conditional (DATA_TEST_FIXED_S) and a read of each operand at
    DATA_TEST_BYTES_PER_S, in float32, but an ``exact`` one (small integers:
    auto.auto_dot) in 16 bits, or not at all by a test of the exponent
    ranges alone (``ranges_only``: its bounds stand in, auto.operand_stats)."""
    b, m, n, k = shape

    def size(side, count):
        return 0.0 if exact[side] and ranges_only else (2.0 if exact[side] else 4.0) * count
    return DATA_TEST_FIXED_S + b * (size(0, m * k) + size(1, k * n)) / DATA_TEST_BYTES_PER_S


# Relative cost of one FLOP per slice product on Hopper, for when no model is
# at hand: a bf16/fp16 tensor-core product ~1, tf32 ~2, FP32 (SGEMM) ~14
# (H200: 700 vs 50 TFLOP/s), an int8 product of Ozaki II's kernels ~0.5
# (H200, same run: the int8 GEMM 1337 TOP/s, cuBLAS's fp16 655 TFLOP/s;
# docs/performance.md, stop 29). MixPert's int8 levels on the MixPert
# kernel (cuda backend): a fixed part (split, fallback, the per-tile fold)
# plus a share per slice product, fitted to int8_l1 (3 products, 5.96 ms)
# and int8_l4 (6 products, 8.90 ms) against SGEMM's 22.12 ms at 8192^3,
# H200, same run (docs/performance.md, stop 51): 3.8 and 5.6 units (the
# xla backend's K-tile products, 240 ms for int8_l4, cost ~25x that).
_FP32_PRODUCT_WEIGHT = 14.0
_INT8_KERNEL_PRODUCT_WEIGHT = 0.5
_MIXPERT_FIXED_WEIGHT = 1.90
_MIXPERT_PRODUCT_WEIGHT = 0.624


def product_weight(scheme) -> float:
    """Cost per FLOP of ``scheme`` in units of one bf16 tensor-core product."""
    from .schemes import FloatSplit, Int8Split, NativeFP32, Ozaki2, get_scheme
    s = get_scheme(scheme)
    if isinstance(s, NativeFP32):
        return _FP32_PRODUCT_WEIGHT
    if isinstance(s, Int8Split):
        return _MIXPERT_FIXED_WEIGHT + _MIXPERT_PRODUCT_WEIGHT * s.num_products
    per = 2.0 if isinstance(s, FloatSplit) and s.fmt == "tf32" else 1.0
    if isinstance(s, Ozaki2):
        per = _INT8_KERNEL_PRODUCT_WEIGHT
    return per * max(s.num_products, 1)


def _features(shape: Shape) -> np.ndarray:
    b, m, n, k = shape
    return np.array([2.0 * b * m * n * k, float(b * m * n), float(b * (m * k + k * n)), 1.0])


N_COEFFICIENTS = 4  # (1/rate, per_output, per_input, fixed)


def _fit(points: Dict[Shape, float]) -> Tuple[float, ...]:
    """Non-negative (1/rate, per_output, per_input, fixed), least squares on relative error."""
    from scipy.optimize import nnls
    shapes = list(points)
    t = np.array([points[s] for s in shapes])
    x = np.stack([_features(s) for s in shapes]) / t[:, None]
    coef, _ = nnls(x, np.ones(len(shapes)))
    return tuple(float(c) for c in coef)


@dataclasses.dataclass(frozen=True)
class CostModel:
    """Predicted seconds of a product per scheme, on one device and backend."""

    device: str
    backend: str
    source: str
    coefficients: Tuple[Tuple[str, Tuple[float, ...]], ...]  # (scheme, (1/rate, per_output, per_input, fixed))
    # (scheme, path, coefficients) of the kernel paths fit apart (path_of)
    paths: Tuple[Tuple[str, str, Tuple[float, ...]], ...] = ()

    @classmethod
    def from_points(cls, device: str, backend: str, source: str,
                    points: Dict[str, Dict[Shape, float]], by_path: bool = True) -> "CostModel":
        """The fit of timed points; ``by_path``: the shapes a backend runs on
        another kernel path (``path_of``) are fit apart where each path has at
        least N_COEFFICIENTS of them (else one fit of all the scheme's points)."""
        main, paths = [], []
        for s in SCHEMES:
            pts = points.get(s, {})
            if len(pts) < N_COEFFICIENTS:
                raise ValueError(f"a cost model needs >= {N_COEFFICIENTS} timed shapes for each of {SCHEMES}; "
                                 f"{s} has {len(pts)}")
            groups: Dict[str, Dict[Shape, float]] = {}
            for shape, t in pts.items():
                groups.setdefault(path_of(backend, s, shape) if by_path else "", {})[shape] = t
            if len(groups.get("", {})) < N_COEFFICIENTS:
                groups = {"": pts}
            main.append((s, _fit(groups.pop(""))))
            paths += [(s, p, _fit(g)) for p, g in sorted(groups.items()) if len(g) >= N_COEFFICIENTS]
        return cls(device, backend, source, tuple(main), tuple(paths))

    def priced_path(self, scheme: str, shape: Shape, path: Optional[str] = None, exact=(False, False)) -> str:
        """The kernel path whose fit prices ``scheme`` at ``shape``: the one
        the backend takes there with operands ``exact`` or not (``path``:
        that one), where this model has a fit of it, else "" (the main fit)."""
        p = path_of(self.backend, scheme, shape, exact) if path is None else path
        return p if any(s == scheme and q == p for s, q, _ in self.paths) else ""

    def time(self, scheme: str, shape: Shape, path: Optional[str] = None, exact=(False, False)) -> float:
        """Seconds of ``scheme`` at ``shape`` (B, M, N, K) on the path the
        backend takes there with operands ``exact`` or not (``path``: on that
        one; "" the main path, e.g. for products that share a split, which
        always take it), in full: auto scales it for exact operands."""
        coef = dict(self.coefficients)
        if scheme not in coef:
            raise ValueError(f"the cost model knows {SCHEMES}, not {scheme!r}")
        p = self.priced_path(scheme, shape, path, exact)
        coef.update({s: c for s, q, c in self.paths if q == p and p})
        return float(_features(shape) @ np.array(coef[scheme]))

    def gather_time(self, shape: Shape, rows: bool = True, cols: bool = False) -> float:
        """Permuting A's rows (``rows``) and/or B's columns (``cols``), and C's
        back: a read and a write of B*MK (B*KN) elements and of B*MN per side,
        costed at the memory term of fp32's fit (fp16x3's, bf16x6's where
        that came out zero)."""
        b, m, n, k = shape
        coef = dict(self.coefficients)

        def per(i):  # fp32's memory terms, else an emulated scheme's where those came out zero
            return coef["fp32"][i] or coef["fp16x3"][i] or coef["bf16x6"][i]
        return b * ((m * k * per(2) + 2 * m * n * per(1)) * rows + (k * n * per(2) + 2 * m * n * per(1)) * cols)

    def to_json(self) -> dict:
        return dict(device=self.device, backend=self.backend, source=self.source,
                    coefficients={s: list(c) for s, c in self.coefficients},
                    paths=[[s, p, list(c)] for s, p, c in self.paths])

    @classmethod
    def from_json(cls, d: dict) -> "CostModel":
        coef = tuple((s, tuple(float(x) for x in d["coefficients"][s])) for s in SCHEMES)
        paths = tuple((str(s), str(p), tuple(float(x) for x in c)) for s, p, c in d.get("paths", []))
        if any(len(c) != N_COEFFICIENTS for _, c in coef) or any(len(c) != N_COEFFICIENTS for *_, c in paths):
            raise ValueError(f"expected {N_COEFFICIENTS} coefficients per scheme")  # e.g. cached by a jaxemu of 3
        return cls(d["device"], d["backend"], d["source"], coef, paths)


def cache_path() -> Path:
    root = os.environ.get("JAXEMU_CACHE_DIR") or Path.home() / ".cache" / "jaxemu"
    return Path(root) / "costs.json"


def _cache_key(device: str, backend: str) -> str:
    import jax

    from ._version import __version__
    return f"{device}|{backend}|jax {jax.__version__}|jaxemu {__version__}"


_CACHE_MEMO: Dict[str, Tuple[Tuple[int, int], dict]] = {}


def _read_cache() -> dict:
    """The cache file's contents, re-read only when its modification time or
    size changes (auto consults it every time it traces a product). A file
    that is not a JSON object is ignored with a warning naming it."""
    path = cache_path()
    try:
        st = path.stat()
    except OSError:
        return {}
    stamp = (st.st_mtime_ns, st.st_size)
    memo = _CACHE_MEMO.get(str(path))
    if memo is None or memo[0] != stamp:
        try:
            data = json.loads(path.read_text())
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as e:
            warnings.warn(f"jaxemu: ignoring the cost-model cache {path} ({e}); delete it or rerun "
                          "jaxemu.calibrate()", stacklevel=3)
            data = {}
        memo = _CACHE_MEMO[str(path)] = (stamp, data)
    return memo[1]


def model_for(device: str, backend: str) -> Optional[CostModel]:
    """The calibrated model cached for (device, backend), else the shipped one, else None."""
    key = _cache_key(device, backend)
    cached = _read_cache().get(key)
    if cached is not None:
        try:
            return CostModel.from_json(cached)
        except (KeyError, TypeError, ValueError) as e:
            warnings.warn(f"jaxemu: ignoring the malformed entry {key!r} of {cache_path()} ({e!r}); "
                          "rerun jaxemu.calibrate()", stacklevel=2)
    for (kind, be), (source, points, by_path) in SHIPPED.items():
        if kind in device and be == backend:
            return _shipped(kind, be, device, source, points, by_path)
    return None


_SHIPPED_MODELS: Dict[Tuple[str, str], CostModel] = {}


def _shipped(kind, backend, device, source, points, by_path) -> CostModel:
    if (kind, backend) not in _SHIPPED_MODELS:
        _SHIPPED_MODELS[(kind, backend)] = CostModel.from_points(kind, backend, source, points(), by_path)
    return dataclasses.replace(_SHIPPED_MODELS[(kind, backend)], device=device)


def default_shapes(platform: str) -> Sequence[Shape]:
    if platform == "cpu":  # small, so that calibrating a CPU takes seconds
        return [(1, 128, 128, 128), (1, 256, 256, 256), (1, 384, 384, 384), (1, 512, 512, 64), (1, 64, 64, 512)]
    # The last four: outputs of at most two waves of tiles, which the cuda
    # backend's bf16 schemes run on the FP32-operand kernel (path_of: at
    # least N_COEFFICIENTS shapes on each path), two of them long-K (the
    # k-means update's kind).
    return [(1, 3072, 3072, 3072), (1, 4096, 4096, 4096), (1, 4096, 4096, 256), (4, 2048, 2048, 2048),
            (1, 1024, 1024, 1024), (1, 256, 4096, 4096), (1, 1024, 256, 262144), (1, 512, 512, 65536)]


def measure_points(shapes: Sequence[Shape], device, repeats: int = 5) -> Dict[str, Dict[Shape, float]]:
    """Median seconds of fp32, fp16x3 and bf16x6 per shape on ``device``,
    through the backend auto would use there (uniform(-1, 1) inputs)."""
    import jax

    from . import backends, testing
    from .schemes import get_scheme
    backend = backends.backend_for("auto", device.platform)
    product = backends.product_for(device.platform, backend)
    rng = np.random.default_rng(0)
    points: Dict[str, Dict[Shape, float]] = {s: {} for s in SCHEMES}
    for shape in shapes:
        b, m, n, k = shape
        x = jax.device_put(rng.uniform(-1, 1, (b, m, k)).astype(np.float32), device)
        y = jax.device_put(rng.uniform(-1, 1, (b, k, n)).astype(np.float32), device)
        for s in SCHEMES:
            f = jax.jit(lambda x, y, s=get_scheme(s): product(x, y, s))
            # Back-to-back calls of >= 50 ms per timed run: a single call of a
            # small product times the dispatch, not the GPU (seen on an H100:
            # 0.34 ms for a 0.06 ms SGEMM).
            points[s][shape] = testing.median_time(lambda: f(x, y), repeats, min_rep_s=0.05)
    return points


def calibrate(shapes: Optional[Sequence[Shape]] = None, *, device=None, repeats: int = 5,
              save: bool = True) -> CostModel:
    """Time fp32, fp16x3 and bf16x6 products on ``device`` (default: JAX's
    first device) with the backend auto would use there, fit the cost model,
    and (``save=True``) cache it on disk for ``auto``. Takes seconds to a minute.

    It times the backends' concrete products (jaxemu.backends), which are
    what auto's branches run."""
    import jax

    from . import backends
    device = device or jax.devices()[0]
    backend = backends.backend_for("auto", device.platform)
    shapes = list(shapes or default_shapes(device.platform))
    if len(shapes) < N_COEFFICIENTS:
        raise ValueError(f"calibrate needs at least {N_COEFFICIENTS} shapes ({N_COEFFICIENTS} coefficients per "
                         f"scheme), got {len(shapes)}")
    points = measure_points(shapes, device, repeats)
    model = CostModel.from_points(device.device_kind, backend,
                                  f"calibrated on this machine ({len(shapes)} shapes)", points)
    if save:
        cache_model(model)
    return model


def cache_model(model: CostModel) -> None:
    """Cache ``model`` on disk (cache_path()) for auto on its device and backend."""
    cache = dict(_read_cache())
    cache[_cache_key(model.device, model.backend)] = model.to_json()
    path = cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(cache, indent=1))
    os.replace(tmp, path)  # atomic: a reader sees the old file or the new one
