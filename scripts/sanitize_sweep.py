"""compute-sanitizer sweep of the cuda backend's fused kernels (issue 12, GPU part).

Two parts, each a list of cases run by one Python process (which
scripts/sanitize_sweep.sh starts under compute-sanitizer's memcheck,
racecheck and initcheck):

  shapes: every float scheme the fused kernels run (bf16x3, bf16x6, bf16x9,
          tf32x3, fp16x3, fp16x3_bitcut), at its catalogue kc and at kc=128,
          on odd shapes M, N, K from {1, 7, 17, 127, 129, 1000, 4097}
          (a subset that keeps one tool run near 3 minutes), batched too;
          each result is compared with the xla backend and float64.
  random: a smaller run of the randomized property suite
          (tests/randomized.py) on the cuda backend: NaN/Inf pattern and
          error bounds against float64, and agreement with the xla backend.

  python scripts/sanitize_sweep.py --dry-run            # list the cases (CPU)
  python scripts/sanitize_sweep.py --part shapes        # run them (GPU)
  scripts/sanitize_sweep.sh                             # all tools, all parts

See docs/testing.md for the recorded GPU runs.
"""
from __future__ import annotations

import argparse
import itertools
import math
import os
import sys
import time
from typing import List, NamedTuple, Optional, Tuple

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))  # tests/randomized.py
sys.path.insert(0, ROOT)

FUSED_SCHEMES = ("bf16x3", "bf16x6", "bf16x9", "tf32x3", "fp16x3", "fp16x3_bitcut")
# The randomized part also runs Ozaki II on the int8 kernels (the cuda backend's default for it).
RANDOM_SCHEMES = FUSED_SCHEMES + ("ozaki2_f32",)
SIZES = (1, 7, 17, 127, 129, 1000, 4097)
KC_VARIANTS = (None, 128)  # None: the catalogue's kc
# Under memcheck a kernel runs ~10-100x slower: keep each product below this
# many multiply-adds so that one tool's run of the shapes part stays ~3 min.
MAX_MACS = 2.0e8


class Case(NamedTuple):
    scheme: str
    kc: Optional[int]
    batch: int
    m: int
    k: int
    n: int

    def label(self) -> str:
        kc = "kc=default" if self.kc is None else f"kc={self.kc}"
        b = f"{self.batch}x" if self.batch > 1 else ""
        return f"{self.scheme} {kc} {b}{self.m}x{self.k}x{self.n}"


def shape_cases(schemes=FUSED_SCHEMES, kcs=KC_VARIANTS, max_macs=MAX_MACS) -> List[Case]:
    """The shapes part: each of M, K and N takes every value of SIZES while
    the other two are odd partial-tile sizes ((x, 129, 7), (7, x, 17),
    (17, 129, x)), plus corner shapes and batched products; at kc=128 only
    the K edges (1, 127, 129, 4097: partial and several promotion chunks).
    Products above max_macs multiply-adds are left out (sanitizer time)."""
    grid = ([(x, 129, 7) for x in SIZES] + [(7, x, 17) for x in SIZES] + [(17, 129, x) for x in SIZES]
            + [(1, 1, 1), (129, 127, 129), (1000, 17, 1000), (127, 4097, 129)])
    grid = list(dict.fromkeys(grid))
    out = []
    for s, kc in itertools.product(schemes, kcs):
        for m, k, n in grid:
            if m * k * n > max_macs or (kc is not None and k not in (1, 127, 129, 4097)):
                continue
            out.append(Case(s, kc, 1, m, k, n))
        for b, (m, k, n) in itertools.product((2, 3), ((7, 129, 17), (127, 17, 129), (1, 4097, 7))):
            out.append(Case(s, kc, b, m, k, n))
    return out


def select(cases, shard: str):
    """'i/n': every n-th case from the i-th (0-based), to split a tool's run."""
    i, n = (int(x) for x in shard.split("/"))
    if not 0 <= i < n:
        raise ValueError(f"--shard must be i/n with 0 <= i < n, got {shard!r}")
    return cases[i::n]


def _scheme(case: Case):
    import jaxemu
    s = jaxemu.get_scheme(case.scheme)
    return s if case.kc is None else s.replace(kc=case.kc)


def run_shapes(cases, seed: int, start: int = 0) -> int:
    """Run each case from index ``start`` on the cuda backend; compare with xla
    and float64. A case's data depend only on its index (resumable)."""
    import jax
    import jaxemu
    from jaxemu import testing as T

    failures = 0
    for i, c in enumerate(cases):
        if i < start:
            continue
        rng = np.random.default_rng([seed, i])
        law = T.LAWS[i % len(T.LAWS)]
        a = T.sample(law, (c.batch, c.m, c.k), rng)
        b = T.sample(law, (c.batch, c.k, c.n), rng)
        s = _scheme(c)
        t0 = time.perf_counter()
        got = np.asarray(jax.jit(lambda x, y: jaxemu.matmul(x, y, scheme=s, backend="cuda"))(a, b))
        dt = time.perf_counter() - t0
        ref_x = np.asarray(jax.jit(lambda x, y: jaxemu.matmul(x, y, scheme=s, backend="xla"))(a, b))
        ref = T.reference(a, b)
        fp32 = np.asarray(jax.jit(lambda x, y: jax.lax.batch_matmul(x, y, precision="highest"))(a, b))
        e, ex, e32 = T.relerr(got, ref), T.relerr(ref_x, ref), T.relerr(fp32, ref)
        # The cuda backend's documented accuracy (README): FP32-class schemes
        # within 2x FP32's error (plus 2u for tiny K, see tests/randomized.py),
        # the others within the scheme's bound.
        u = max(s.unit_roundoff, 2.0 ** -24)
        lim = 2 * e32 + 2 * u if s.fp32_class else s.error_bound()
        ok = np.all(np.isfinite(got)) and (e <= lim or not np.any(ref))
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {c.label():40s} {law:14s} cuda {e:.2e} xla {ex:.2e} "
              f"fp32 {e32:.2e} bound {lim:.2e} ({dt:.2f} s)", flush=True)
    return failures


def random_groups(seed: int, scale: float):
    """The randomized suite's groups this sweep runs on the cuda backend."""
    import randomized as R
    return [g for g in R.generate(seed, scale=scale)
            if g.scheme in RANDOM_SCHEMES and g.transform == "vmap" and g.api == "dot_general"]


def run_random(seed: int, scale: float) -> int:
    """The randomized property suite's float-scheme groups on the cuda backend."""
    import jax
    import jaxemu
    import randomized as R

    groups = random_groups(seed, scale)
    failures = 0
    for g in groups:
        a, b = R.make_operands(g, seed)
        run = lambda be: np.asarray(jax.jit(jax.vmap(
            lambda x, y: jaxemu.dot_general(x, y, g.dn, scheme=g.scheme, backend=be)))(a, b))
        try:
            got, ref_x = run("cuda"), run("xla")
            R.check_cases(g, a, b, got, None, None, seed)
            # cuda and xla: the same NaN/Inf pattern (the cuda backend reruns
            # non-finite results through the xla backend's rules), except where
            # FP32's own pattern depends on the summation order (|A||B| near
            # FLT_MAX): check_cases holds both to the documented rule there.
            strict = ~R.order_dependent_entries(g, a, b)
            np.testing.assert_array_equal(np.isnan(got) & strict, np.isnan(ref_x) & strict)
            np.testing.assert_array_equal(np.isposinf(got) & strict, np.isposinf(ref_x) & strict)
            np.testing.assert_array_equal(np.isneginf(got) & strict, np.isneginf(ref_x) & strict)
            print(f"ok   {g.describe()}", flush=True)
        except AssertionError as err:
            failures += 1
            print(f"FAIL {g.describe()}\n     {str(err)[:400]}", flush=True)
    print(f"random part: {len(groups)} groups, {R.num_cases(groups)} cases, {failures} failed")
    return failures


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--part", choices=("shapes", "random", "all"), default="all")
    p.add_argument("--schemes", default=",".join(FUSED_SCHEMES),
                   help="comma-separated subset of " + ",".join(FUSED_SCHEMES))
    p.add_argument("--kc", default="default,128", help="kc variants: 'default' and/or integers")
    p.add_argument("--shard", default="0/1", help="i/n: run every n-th shape case from the i-th")
    p.add_argument("--start", type=int, default=0,
                   help="skip the shard's first cases (resume after a crashed process)")
    p.add_argument("--max-macs", type=float, default=MAX_MACS)
    p.add_argument("--seed", type=int, default=12)
    p.add_argument("--random-scale", type=float, default=0.25,
                   help="fraction of the CPU suite's groups in the random part")
    p.add_argument("--dry-run", action="store_true", help="list the cases; no GPU needed")
    a = p.parse_args(argv)
    a.schemes = tuple(x.strip() for x in a.schemes.split(",") if x.strip())
    unknown = [s for s in a.schemes if s not in FUSED_SCHEMES]
    if unknown:
        p.error(f"--schemes: not fused-kernel schemes: {unknown}; known: {FUSED_SCHEMES}")
    try:
        a.kcs = tuple(None if x.strip() == "default" else int(x) for x in a.kc.split(","))
    except ValueError:
        p.error(f"--kc must be 'default' or integers, got {a.kc!r}")
    if any(k is not None and k <= 0 for k in a.kcs):
        p.error("--kc values must be positive")
    return a


def main(argv=None) -> int:
    a = parse_args(argv)
    cases = select(shape_cases(a.schemes, a.kcs, a.max_macs), a.shard) if a.part in ("shapes", "all") else []
    if a.dry_run:
        for c in cases:
            print(c.label())
        macs = sum(c.batch * c.m * c.k * c.n for c in cases)
        print(f"shapes part: {len(cases)} cases, {macs / 1e9:.2f} G multiply-adds")
        if a.part in ("random", "all"):
            import randomized as R
            groups = random_groups(a.seed, a.random_scale)
            print(f"random part: {len(groups)} groups, {R.num_cases(groups)} cases (seed {a.seed})")
        return 0
    import jaxemu
    from jaxemu.backends import cuda
    if not cuda.built():
        print(f"the CUDA extension is not available: {cuda.IMPORT_ERROR}", file=sys.stderr)
        return 2
    failures = 0
    if cases:
        failures += run_shapes(cases, a.seed, a.start)
    if a.part in ("random", "all"):
        failures += run_random(a.seed, a.random_scale)
    print(f"sanitize_sweep: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
