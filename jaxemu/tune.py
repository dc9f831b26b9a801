"""tune(f): choose a scheme per dot under an error tolerance (MixPert's tuner).

MixPert (LCTES 2024, sec. 3.4) tunes an application's GEMMs by their time
share: profile each GEMM, then lower the precision of the most expensive ones
first, as long as the application's error stays under the user's threshold;
where lowering one GEMM breaks the threshold, raise the precision of the
GEMMs lowered before it (its "predecessors") again. ``tune`` does this for a
JAX function, over jaxemu's schemes:

  1. list f's dots with ``jaxemu.explain`` (only those emulate would rewrite);
  2. compute the reference output (f in float64, or f in FP32), and check
     that the all-most-accurate plan meets the tolerance;
  3. time each dot alone (a jitted ``jaxemu.dot_general`` on random operands
     of its shapes) under every candidate scheme; a plan's estimated time is
     the sum of its dots' times;
  4. start with every dot at the most accurate candidate, then visit the dots
     by decreasing time share and lower each as far as the error allows
     (``_greedy`` below has the exact rule).

The result is a ``Plan``: an immutable {dot index: scheme name} mapping with
the tolerance, the measured error and the estimated time, which
``jaxemu.emulate(f, plan=plan)`` applies and which round-trips through JSON.
"""
from __future__ import annotations

import functools
import json
import logging
import math
import numbers
import operator
import re
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from .api import dot_general
from .costs import product_weight
from .emulate import emulate, explain
from .schemes import Scheme, get_scheme
from .testing import median_time

__all__ = ["Plan", "tune", "relative_error"]

log = logging.getLogger(__name__)

_FORMAT = "jaxemu.Plan/1"
_JSON_KEYS = ("format", "schemes", "tolerance", "error", "time", "dot_times", "shapes")


# ---------------------------------------------------------------------------
# Validation helpers (shared by Plan and tune).

def _index(k, where: str) -> int:
    """A dot index: a non-negative int (numpy ints accepted, bools not)."""
    if isinstance(k, bool):
        raise ValueError(f"{where}: dot indices must be non-negative ints, got {k!r}")
    try:
        i = operator.index(k)
    except TypeError:
        raise ValueError(f"{where}: dot indices must be non-negative ints, got {k!r}") from None
    if i < 0:
        raise ValueError(f"{where}: dot indices must be non-negative ints, got {i}")
    return i


def _scheme_name(s, where: str) -> str:
    """The catalogue name of a scheme name or catalogue Scheme (ValueError otherwise)."""
    if not isinstance(s, (str, Scheme)):
        raise ValueError(f"{where}: schemes must be scheme names (str), got {type(s).__name__}: {s!r}")
    try:
        resolved = get_scheme(s)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    if isinstance(s, Scheme):
        try:
            base = get_scheme(s.name)
        except ValueError:
            base = None
        if base != s:
            raise ValueError(f"{where}: {s!r} is not a catalogue scheme; plans store scheme names, "
                             "so only catalogue schemes (jaxemu.schemes()) can be used")
    return resolved.name


def _number(x, name: str, *, positive: bool = False) -> float:
    """A finite real number (>= 0, or > 0 with positive=True); TypeError for non-numbers."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(x).__name__}: {x!r}")
    v = float(x)
    if not math.isfinite(v) or v < 0 or (positive and v == 0):
        raise ValueError(f"{name} must be a finite {'positive' if positive else 'non-negative'} "
                         f"number, got {x!r}")
    return v


# ---------------------------------------------------------------------------
# Plan.

class Plan(Mapping):
    """An immutable per-dot plan: {dot index: scheme name}, plus what tune measured.

    The indices are the ``DotInfo.index`` values that ``jaxemu.explain`` and
    ``jaxemu.emulate`` assign (program order); "fp32" means native FP32.
    ``jaxemu.emulate(f, plan=plan)`` runs f with these schemes; dots not in
    the plan get emulate's default scheme.

    Arguments:
      schemes: mapping {index: scheme name} (catalogue names or aliases, which
        are stored under their catalogue name; catalogue Scheme objects too).
      tolerance: the error tolerance the plan was tuned for (optional).
      error: its measured error against the reference (optional).
      time: its estimated time in seconds, the sum of ``dot_times`` (optional).
      dot_times: {index: estimated seconds of that dot under its scheme} (optional).
      shapes: {index: (lhs shape, rhs shape)} of the dots (optional).

    Raises:
      ValueError: negative or non-integer indices, unknown scheme names, bad metadata.

    Example:
      >>> p = Plan({0: "bf16", 1: "bf16x6"}, tolerance=1e-3)
      >>> y = jaxemu.emulate(f, plan=p)(x)
      >>> Plan.from_json(p.to_json()) == p
      True
    """

    __slots__ = ("_schemes", "_tolerance", "_error", "_time", "_dot_times", "_shapes")

    def __init__(self, schemes: Mapping[int, Any], *, tolerance: Optional[float] = None,
                 error: Optional[float] = None, time: Optional[float] = None,
                 dot_times: Optional[Mapping[int, float]] = None,
                 shapes: Optional[Mapping[int, Tuple[Sequence[int], Sequence[int]]]] = None):
        if not isinstance(schemes, Mapping):
            raise TypeError(f"Plan: schemes must be a mapping {{dot index: scheme name}}, "
                            f"got {type(schemes).__name__}")
        sch = {}
        for k, v in schemes.items():
            i = _index(k, "Plan")
            if i in sch:
                raise ValueError(f"Plan: dot index {i} given twice")
            sch[i] = _scheme_name(v, f"Plan: dot {i}")
        set_ = functools.partial(object.__setattr__, self)
        set_("_schemes", dict(sorted(sch.items())))
        set_("_tolerance", None if tolerance is None else _number(tolerance, "Plan: tolerance", positive=True))
        set_("_error", None if error is None else _number(error, "Plan: error"))
        set_("_time", None if time is None else _number(time, "Plan: time"))
        set_("_dot_times", None if dot_times is None else self._per_dot(dot_times, "dot_times", _number))
        set_("_shapes", None if shapes is None else self._per_dot(shapes, "shapes", _shape_pair))

    @staticmethod
    def _per_dot(m, name, convert):
        if not isinstance(m, Mapping):
            raise TypeError(f"Plan: {name} must be a mapping {{dot index: ...}}, got {type(m).__name__}")
        return dict(sorted((_index(k, f"Plan: {name}"), convert(v, f"Plan: {name}[{k}]"))
                           for k, v in m.items()))

    def __setattr__(self, name, value):
        raise AttributeError("Plan is immutable")

    __delattr__ = __setattr__

    # -- mapping -----------------------------------------------------------
    def __getitem__(self, index: int) -> str:
        return self._schemes[index]

    def __iter__(self):
        return iter(self._schemes)

    def __len__(self) -> int:
        return len(self._schemes)

    def as_per_dot(self) -> Dict[int, str]:
        """The plan as a plain dict {dot index: scheme name}, for ``emulate(per_dot=...)``."""
        return dict(self._schemes)

    # -- metadata ----------------------------------------------------------
    tolerance = property(lambda self: self._tolerance, doc="The tolerance tuned for, or None.")
    error = property(lambda self: self._error, doc="The measured error, or None.")
    time = property(lambda self: self._time, doc="Estimated time in seconds (sum over dots), or None.")
    dot_times = property(lambda self: None if self._dot_times is None else dict(self._dot_times),
                         doc="{index: estimated seconds} or None.")
    shapes = property(lambda self: None if self._shapes is None else dict(self._shapes),
                      doc="{index: (lhs shape, rhs shape)} or None.")

    def _fields(self):
        return (self._schemes, self._tolerance, self._error, self._time, self._dot_times, self._shapes)

    def __eq__(self, other):
        # Equal plans have the same schemes *and* metadata; compare
        # ``as_per_dot()`` to compare schemes alone.
        if not isinstance(other, Plan):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self):
        return hash(tuple(None if d is None else tuple(d.items()) if isinstance(d, dict) else d
                          for d in self._fields()))

    # -- JSON --------------------------------------------------------------
    def to_json(self, indent: Optional[int] = None) -> str:
        """The plan as a JSON string (``Plan.from_json`` reads it back exactly).

        Example:
          >>> open("plan.json", "w").write(plan.to_json(indent=2))
        """
        d: Dict[str, Any] = {"format": _FORMAT, "schemes": {str(i): s for i, s in self._schemes.items()}}
        for key in ("tolerance", "error", "time"):
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        if self._dot_times is not None:
            d["dot_times"] = {str(i): t for i, t in self._dot_times.items()}
        if self._shapes is not None:
            d["shapes"] = {str(i): [list(l), list(r)] for i, (l, r) in self._shapes.items()}
        return json.dumps(d, indent=indent, allow_nan=False)

    @classmethod
    def from_json(cls, s) -> "Plan":
        """Read a plan written by ``to_json``.

        Raises:
          TypeError: s is not a str/bytes.
          ValueError: not JSON, not a plan, bad indices, unknown scheme names.

        Example:
          >>> plan = jaxemu.Plan.from_json(open("plan.json").read())
        """
        if not isinstance(s, (str, bytes, bytearray)):
            raise TypeError(f"Plan.from_json needs a JSON string, got {type(s).__name__}")
        try:
            d = json.loads(s)
        except json.JSONDecodeError as e:
            raise ValueError(f"Plan.from_json: not valid JSON ({e})") from None
        if not isinstance(d, dict) or not isinstance(d.get("schemes"), dict):
            raise ValueError("Plan.from_json: expected a JSON object with a 'schemes' object "
                             "{\"<dot index>\": \"<scheme name>\"}")
        if d.get("format", _FORMAT) != _FORMAT:
            raise ValueError(f"Plan.from_json: unknown format {d.get('format')!r}, expected {_FORMAT!r}")
        extra = sorted(set(d) - set(_JSON_KEYS))
        if extra:
            raise ValueError(f"Plan.from_json: unknown keys {extra}; known: {list(_JSON_KEYS)}")

        def keyed(name):
            m = d.get(name)
            if m is None:
                return None
            if not isinstance(m, dict):
                raise ValueError(f"Plan.from_json: {name!r} must be an object keyed by dot index")
            out = {}
            for k, v in m.items():
                if not re.fullmatch(r"0|[1-9][0-9]*", k):
                    raise ValueError(f"Plan.from_json: {name}: dot indices must be non-negative ints, got {k!r}")
                out[int(k)] = v
            return out

        return cls(keyed("schemes"), tolerance=d.get("tolerance"), error=d.get("error"),
                   time=d.get("time"), dot_times=keyed("dot_times"), shapes=keyed("shapes"))

    # -- display -----------------------------------------------------------
    def __str__(self) -> str:
        head = [f"Plan for {len(self)} dot{'s' if len(self) != 1 else ''}"]
        if self._tolerance is not None:
            head.append(f"tolerance {self._tolerance:.3g}")
        if self._error is not None:
            head.append(f"error {self._error:.3g}")
        if self._time is not None:
            head.append(f"estimated time {_fmt_time(self._time)}")
        lines = [", ".join(head)]
        if not self._schemes:
            return lines[0]
        cols = ["#"] + (["lhs x rhs"] if self._shapes else []) + \
               (["time", "share"] if self._dot_times else []) + ["scheme"]
        rows = [cols]
        total = sum(self._dot_times.values()) if self._dot_times else 0.0
        for i, s in self._schemes.items():
            r = [str(i)]
            if self._shapes:
                sh = self._shapes.get(i)
                r.append(f"{list(sh[0])} x {list(sh[1])}" if sh else "?")
            if self._dot_times:
                t = self._dot_times.get(i)
                r += [_fmt_time(t) if t is not None else "?",
                      f"{100 * t / total:.0f}%" if t is not None and total > 0 else "?"]
            r.append(s)
            rows.append(r)
        w = [max(len(r[c]) for r in rows) for c in range(len(cols))]
        lines += ["  ".join(r[c].ljust(w[c]) for c in range(len(r))).rstrip() for r in rows]
        return "\n".join(lines)

    __repr__ = __str__


def _shape_pair(v, where):
    try:
        lhs, rhs = v
        pair = (tuple(operator.index(n) for n in lhs), tuple(operator.index(n) for n in rhs))
    except (TypeError, ValueError):
        raise ValueError(f"{where}: expected (lhs shape, rhs shape), got {v!r}") from None
    if any(n < 0 for n in pair[0] + pair[1]):
        raise ValueError(f"{where}: negative dimension in {v!r}")
    return pair


def _fmt_time(t: float) -> str:
    if t >= 1:
        return f"{t:.3g} s"
    if t >= 1e-3:
        return f"{t * 1e3:.3g} ms"
    return f"{t * 1e6:.3g} us"


# ---------------------------------------------------------------------------
# Error metric and reference.

def relative_error(out, ref) -> float:
    """Relative Frobenius error of ``out`` against ``ref``: all pytree leaves
    flattened and concatenated, ||out - ref|| / ||ref|| (the absolute norm
    where ref is all zeros). Non-finite values count as exact where ref has the
    same value there (NaN where ref is NaN, Inf of the same sign), else the
    error is inf. tune's default metric.

    Example:
      >>> relative_error(jaxemu.emulate(f, plan=p)(x), f64_output)
    """
    o_leaves, r_leaves = jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(ref)
    if len(o_leaves) != len(r_leaves):
        raise ValueError(f"relative_error: out has {len(o_leaves)} leaves, ref has {len(r_leaves)}")
    o, r = _flat64(o_leaves), _flat64(r_leaves)
    if o.shape != r.shape:
        raise ValueError(f"relative_error: out has {o.size} values, ref has {r.size}")
    bad = ~(np.isfinite(o) & np.isfinite(r))
    if bad.any():
        same = (o[bad] == r[bad]) | (np.isnan(o[bad]) & np.isnan(r[bad]))
        if not same.all():
            return math.inf
        o, r = o[~bad], r[~bad]
    den = np.linalg.norm(r)
    num = np.linalg.norm(o - r)
    return float(num / den) if den > 0 else float(num)


def _flat64(leaves) -> np.ndarray:
    """All leaves as one float64 vector."""
    return np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in leaves]) if leaves else np.zeros(0)


def _is_float(x) -> bool:
    return hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.floating)


def _to_numpy(tree):
    return jax.tree_util.tree_map(np.asarray, tree)


def _reference(f, args, kwargs, reference: str):
    """f's output to measure plans against, as numpy arrays."""
    if reference == "fp32":
        return _to_numpy(emulate(f, per_dot=lambda info: "fp32")(*args, **kwargs))
    try:
        with jax.enable_x64(True):
            a64, k64 = jax.tree_util.tree_map(
                lambda x: jnp.asarray(np.asarray(x, np.float64)) if _is_float(x) else x, (args, kwargs))
            return _to_numpy(f(*a64, **k64))
    except Exception as e:  # e.g. f calls jaxemu.dot itself, which refuses float64
        raise ValueError(f"tune: running f in float64 for the reference failed ({type(e).__name__}: {e}); "
                         "pass reference='fp32' to measure against f's FP32 output instead") from e


# ---------------------------------------------------------------------------
# Profiling.

# Each timing run lasts at least this long (calls are looped), so that the
# timer's resolution does not dominate tiny dots.
_TIMING_TARGET_S = 2e-3


@functools.lru_cache(maxsize=256)
def _jitted_dot(dimension_numbers, scheme: str):
    """A jitted ``jaxemu.dot_general``, kept so that tuning again (another
    tolerance, another function with the same dots) does not recompile."""
    return jax.jit(functools.partial(dot_general, dimension_numbers=dimension_numbers, scheme=scheme))


def _time_dot(lhs_shape, rhs_shape, dimension_numbers, scheme: str, repeats: int, seed: int = 0) -> float:
    """Seconds for one jitted ``jaxemu.dot_general`` of these shapes on random
    normal operands: the median of ``repeats`` runs, each looping the call for
    about ``_TIMING_TARGET_S``."""
    rng = np.random.default_rng(seed)
    a = jnp.asarray(rng.standard_normal(lhs_shape, dtype=np.float32))
    b = jnp.asarray(rng.standard_normal(rhs_shape, dtype=np.float32))
    fn = _jitted_dot(dimension_numbers, scheme)
    return median_time(lambda: fn(a, b), repeats, _TIMING_TARGET_S)


# ---------------------------------------------------------------------------
# The greedy search.

def product_cost(info, scheme: str) -> float:
    """A cost model for ``tune(timer=...)``: the dot's FLOPs times
    ``costs.product_weight(scheme)`` (slice products; FP32 counted as 14,
    tf32 slices as 2, Ozaki II's int8 products as 0.5, MixPert's levels as
    measured on the MixPert kernel: int8_l1 3.9, int8_l4 5.9), in arbitrary
    units.
    For tuning away from the target GPU."""
    return info.flops * product_weight(scheme)


def _greedy(times: Sequence[Sequence[float]], evaluate: Callable[[Tuple[int, ...]], float],
            tolerance: float) -> Tuple[Tuple[int, ...], float]:
    """MixPert's greedy lowering, on candidate levels (0 = most accurate).

    Arguments:
      times: times[d][c], the estimated time of dot d under candidate c.
      evaluate: levels -> the program's error under that plan (memoized by the caller).
      tolerance: the largest error allowed.

    Returns:
      (levels, error) of the plan found.

    Rule: start with every dot at level 0 (the caller checks it meets the
    tolerance). Visit dots by decreasing time share at level 0 (ties: program
    order). For dot d, try levels c = its level + 1, + 2, ... in turn, skipping
    a level that is not faster than d's current one:
      * error <= tolerance: keep it (d now runs at c) and try the next level;
      * error > tolerance: raise its predecessors -- the dots lowered before,
        most recently lowered first, one level at a time, each as far as level
        0 before moving to the next -- until the error is within the tolerance.
        The repaired plan is kept if it is faster than the plan before this
        attempt; the raising stops as soon as the plan would be no faster. If
        no repair pays, d stays where it was and the search moves to the next
        dot (cheaper levels are less accurate still).
    Every kept plan meets the tolerance and is faster than the one before, so
    the result is never slower than all-level-0.
    """
    n = len(times)
    cost = lambda lv: sum(times[d][c] for d, c in enumerate(lv))  # noqa: E731
    levels = (0,) * n
    err = evaluate(levels)
    order = sorted(range(n), key=lambda d: (-times[d][0], d))
    lowered: List[int] = []  # dots lowered so far, in the order first lowered

    def repair(trial, d):
        budget = cost(levels)
        trial = list(trial)
        for p in reversed(lowered):
            if p == d:
                continue
            while trial[p] > 0:
                trial[p] -= 1
                if cost(trial) >= budget:
                    return None
                e = evaluate(tuple(trial))
                log.debug("  raise predecessor dot %d to level %d: error %.3g", p, trial[p], e)
                if e <= tolerance:
                    return tuple(trial), e
        return None

    for d in order:
        for c in range(levels[d] + 1, len(times[d])):
            if times[d][c] >= times[d][levels[d]]:
                log.debug("dot %d: level %d is not faster than level %d, skipped", d, c, levels[d])
                continue
            trial = levels[:d] + (c,) + levels[d + 1:]
            e = evaluate(trial)
            log.debug("dot %d -> level %d: error %.3g", d, c, e)
            if not e <= tolerance:  # also catches NaN
                fixed = repair(trial, d)
                if fixed is None:
                    break
                trial, e = fixed
            levels, err = trial, e
            if d not in lowered:
                lowered.append(d)
    return levels, err


# ---------------------------------------------------------------------------
# tune.

def tune(f: Callable, *example_args, tolerance: float, metric: Optional[Callable[[Any, Any], float]] = None,
         candidates: Sequence[str] = ("bf16x6", "fp16x3", "bf16x3", "bf16"),
         reference: str = "float64", repeats: int = 3, timer: Optional[Callable[[Any, str], float]] = None,
         **example_kwargs) -> Plan:
    """Choose a scheme per dot of ``f``, fastest first, keeping f's error within ``tolerance``.

    MixPert's tuner (LCTES 2024, sec. 3.4): every dot starts at
    ``candidates[0]``; the dots are visited by decreasing time share and each
    is lowered through the cheaper candidates while the whole program's error
    stays <= tolerance; where lowering a dot breaks the tolerance, the dots
    lowered before it are raised again if that gives a faster plan (see
    ``_greedy`` in this module for the exact rule).

    Each dot is timed alone (a jitted ``jaxemu.dot_general`` of its shapes,
    median of ``repeats``), and a plan's estimated time is the sum of its
    dots' times. Each plan tried is run as ``jaxemu.emulate(f, per_dot=...)``
    on the example arguments (unjitted; plans are memoized). Tune on the
    machine you will run on: on a CPU the timings say little about a GPU. The
    error is measured on the example arguments only; choose them
    representative of the real data.

    Arguments:
      f: the function, as for ``jaxemu.emulate``.
      *example_args, **example_kwargs: arguments to run f on (float32 arrays).
      tolerance: the largest error allowed, a finite positive number.
      metric: ``metric(out, ref) -> float``, lower is better, given f's output
        under a plan and the reference output (pytrees of numpy arrays), e.g.
        a k-means inertia difference or 1 - accuracy. Default:
        ``relative_error``, the relative Frobenius error of all outputs.
      candidates: scheme names, most accurate first; the first must meet the
        tolerance on every dot. "fp32" is native FP32; "ozaki2_f32" (int8
        tensor cores, the most accurate FP32-class scheme) may lead the list.
      reference: "float64" (f run in float64 under ``jax.enable_x64``, on the
        arguments cast to float64) or "fp32" (f with every dot in native FP32).
      repeats: timing repetitions per dot and candidate (median taken).
      timer: ``timer(dot_info, scheme) -> seconds`` used instead of timing each
        dot, e.g. ``jaxemu.product_cost`` (a cost model) when
        tuning on a machine other than the one the plan is for.

    Returns:
      A ``Plan`` {dot index: scheme name} with its tolerance, measured error,
      estimated time, per-dot times and shapes. Apply it with
      ``jaxemu.emulate(f, plan=plan)``.

    Raises:
      TypeError: f not callable, tolerance not a number, metric not callable.
      ValueError: tolerance not finite and positive, unknown or repeated
        candidates, bad reference or repeats, or the all-``candidates[0]``
        plan already misses the tolerance.

    Example:
      >>> plan = jaxemu.tune(mlp, params, x, tolerance=1e-3)
      >>> print(plan)
      >>> fast = jax.jit(jaxemu.emulate(mlp, plan=plan))
      >>> open("mlp_plan.json", "w").write(plan.to_json())
    """
    if not callable(f):
        raise TypeError(f"tune: f must be callable, got {type(f).__name__}")
    tolerance = _number(tolerance, "tune: tolerance", positive=True)
    if metric is None:
        metric = relative_error
    elif not callable(metric):
        raise TypeError(f"tune: metric must be callable (out, ref) -> float, got {type(metric).__name__}")
    if isinstance(candidates, (str, Scheme)) or not isinstance(candidates, Sequence) or not candidates:
        raise ValueError(f"tune: candidates must be a non-empty sequence of scheme names, got {candidates!r}")
    cands = [_scheme_name(c, "tune: candidates") for c in candidates]
    if len(set(cands)) != len(cands):
        raise ValueError(f"tune: candidates repeat a scheme: {cands}")
    if reference not in ("float64", "fp32"):
        raise ValueError(f"tune: reference must be 'float64' or 'fp32', got {reference!r}")
    if isinstance(repeats, bool) or not isinstance(repeats, numbers.Integral) or repeats < 1:
        raise ValueError(f"tune: repeats must be a positive int, got {repeats!r}")

    # 1. The dots emulate would rewrite.
    infos = [d.info for d in explain(f, *example_args, **example_kwargs) if d.scheme is not None]
    log.info("tune: %d dots, candidates %s", len(infos), cands)

    # 2. Reference, and the error of a plan (memoized: the search revisits
    # plans). The most accurate plan is checked first, before any profiling.
    ref = _reference(f, example_args, example_kwargs, reference)
    errors: Dict[Tuple[int, ...], float] = {}

    def evaluate(levels: Tuple[int, ...]) -> float:
        if levels not in errors:
            per_dot = {info.index: cands[c] for info, c in zip(infos, levels)}
            out = _to_numpy(emulate(f, per_dot=per_dot)(*example_args, **example_kwargs))
            e = metric(out, ref)
            try:
                errors[levels] = float(e)
            except (TypeError, ValueError):
                raise TypeError(f"tune: metric must return a number, got {type(e).__name__}: {e!r}") from None
        return errors[levels]

    top = evaluate((0,) * len(infos))
    if not top <= tolerance:
        raise ValueError(f"tune: even the most accurate candidate, {cands[0]!r} on every dot, gives error "
                         f"{top:.3g} > tolerance {tolerance:.3g}; raise the tolerance or put a more accurate "
                         "scheme (e.g. 'fp32') first in candidates")

    # 3. Profile: every dot under every candidate (identical dots timed once).
    measured: Dict[Any, float] = {}
    times = []
    for info in infos:
        row = []
        for c in cands:
            key = (info.lhs, info.rhs, info.dimension_numbers, c)
            if key not in measured:
                measured[key] = (timer(info, c) if timer is not None else
                                 _time_dot(info.lhs, info.rhs, info.dimension_numbers, c, int(repeats)))
            row.append(measured[key])
        times.append(row)

    # 4. Greedy lowering.
    levels, err = _greedy(times, evaluate, tolerance)
    log.info("tune: %d plans evaluated, error %.3g", len(errors), err)
    dot_times = {info.index: times[d][c] for d, (info, c) in enumerate(zip(infos, levels))}
    return Plan({info.index: cands[c] for info, c in zip(infos, levels)}, tolerance=tolerance, error=err,
                time=sum(dot_times.values()), dot_times=dot_times,
                shapes={info.index: (info.lhs, info.rhs) for info in infos})
