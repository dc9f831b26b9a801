"""The GPU timeline of one call of an emulated product, from JAX's own
profiler (CUPTI; no ncu replay, so XLA's autotuning costs nothing):

    JAX_PLATFORMS=cuda python scripts/kernel_timeline.py [--cases sq8192,update,distances]  (also sq2048, sq4096, b8sq2048, knn, knn_search;
        scheme fp32: precision highest, not emulated)
        [--schemes fp16x3,auto] [--env JAXEMU_CUDA_STATS=1] [--summary] [--calls N]

Per case and scheme: every kernel of the (warm) call in stream order with its
start, duration and the idle gap before it, then the totals: busy time, gap
time and wall time from the first kernel's start to the last one's end. Gaps
are where the host waits (a conditional's predicate copied back) or launches.
--calls N traces N calls made back to back (each dispatched as soon as the
last returns, as jaxemu.bench times them): a conditional's host round trip
then shows as idle time that dispatching ahead would have hidden.
--host also lists the host threads' events of the traced calls (XLA's
thunks, the FFI handlers' launches: where the GPU's gaps come from when the
call is bound by its launches, stop 60) and their totals per name.
"""
from __future__ import annotations

import argparse
import glob
import os
import tempfile

import jax
import numpy as np

import jaxemu
from jaxemu import testing as T


def cases():
    """name: (product as a user writes it, its arguments)."""
    rng = np.random.default_rng(0)
    out = {}

    def square(n, batch=0):
        a, b = (jax.device_put(v) for v in T.operands("normal(0,1)", n, n, n, 0, batch=batch))
        return (lambda a, b: a @ b), (a, b)

    def kmeans(which):
        n, d, k = 1 << 20, 256, 1024
        x = jax.device_put(rng.normal(size=(n, d)).astype(np.float32))
        if which == "distances":
            c = jax.device_put(rng.normal(size=(k, d)).astype(np.float32))
            return (lambda x, c: x @ c.T), (x, c)
        lab = jax.device_put(rng.integers(0, k, size=n).astype(np.int32))
        return (lambda lab, x: jax.nn.one_hot(lab, k, dtype=x.dtype).T @ x), (lab, x)

    for n in (2048, 4096, 8192):
        out[f"sq{n}"] = lambda n=n: square(n)
    out["b8sq2048"] = lambda: square(2048, batch=8)
    out["distances"] = lambda: kmeans("distances")

    def knn_chunk():  # one chunk of examples/knn.py's search at the runner's size
        from examples import knn as kn
        q, db = (jax.device_put(v) for v in kn.make_data(1 << 20, 2048, 128))
        return (lambda q, db: kn.knn(q, db, 10)), (q, db)
    out["knn"] = knn_chunk

    def knn_search():  # the runner's whole search: 8192 queries in chunks of 2048 (lax.map)
        from examples import knn as kn
        q, db = (jax.device_put(v) for v in kn.make_data(1 << 20, 8192, 128))
        return (lambda q, db: kn.knn_chunked(q, db, 10, 2048)), (q, db)
    out["knn_search"] = knn_search
    out["update"] = lambda: kmeans("update")
    return out


def gpu_events(path):
    """(name, start_ns, duration_ns) of the kernels and copies on the GPU's
    streams, in start order."""
    pd = jax.profiler.ProfileData.from_file(path)
    ev = []
    for plane in pd.planes:
        if not plane.name.startswith("/device:GPU"):
            continue
        for line in plane.lines:
            if "Stream" not in line.name:
                continue
            ev += [(e.name, e.start_ns, e.duration_ns) for e in line.events]
    return sorted(ev, key=lambda e: e[1])


def host_events(path):
    """(thread, name, start_ns, duration_ns) of the host's events outside
    the Python thread (XLA's thunk executor and the handlers it calls), in
    start order."""
    pd = jax.profiler.ProfileData.from_file(path)
    ev = []
    for plane in pd.planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            if line.name != "python":
                ev += [(line.name, e.name, e.start_ns, e.duration_ns) for e in line.events]
    return sorted(ev, key=lambda e: e[2])


def timeline(f, xs, reps=3, calls=1):
    """The GPU's and the host's events of ``calls`` warm calls."""
    for _ in range(reps):
        jax.block_until_ready(f(*xs))
    d = tempfile.mkdtemp()
    with jax.profiler.trace(d):
        jax.block_until_ready([f(*xs) for _ in range(calls)])
    path = glob.glob(os.path.join(d, "**", "*.xplane.pb"), recursive=True)[0]
    return gpu_events(path), host_events(path)


def report_host(ev, t0, min_us=3.0, rows=80):
    """The host events of at least ``min_us`` (start relative to ``t0``,
    the first GPU event's), then the totals per name."""
    shown = [e for e in ev if e[3] / 1e3 >= min_us][:rows]
    for thread, name, s, dur in shown:
        print(f"  host {(s - t0) / 1e3:9.1f} us  {dur / 1e3:8.1f} us  {thread[:16]:16s}  {name[:80]}")
    by_name([(name, s, dur) for _, name, s, dur in ev], rows=15, prefix="host total ")


def by_name(ev, rows=25, prefix=""):
    """Per name: events and total time, largest total first (a loop's body
    shows as a count per iteration)."""
    tot = {}
    for name, _, dur in ev:
        c, t = tot.get(name, (0, 0.0))
        tot[name] = (c + 1, t + dur)
    for name, (c, t) in sorted(tot.items(), key=lambda kv: -kv[1][1])[:rows]:
        print(f"  {prefix}{c:4d} x  {t / 1e3:9.1f} us  {name[:88]}")


def report(ev, min_us=5.0, summary=False):
    if summary:
        by_name(ev)
    if not ev:
        print("  (no GPU events)")
        return
    t0, end, busy, gaps = ev[0][1], ev[0][1], 0.0, 0.0
    for name, s, dur in ev:
        gap = max(0.0, s - end)
        busy += dur
        gaps += gap
        if not summary and (dur / 1e3 >= min_us or gap / 1e3 >= min_us):
            print(f"  {(s - t0) / 1e3:9.1f} us  {dur / 1e3:8.1f} us  gap {gap / 1e3:7.1f}  {name[:88]}")
        end = max(end, s + dur)
    print(f"  busy {busy / 1e3:.1f} us, gaps {gaps / 1e3:.1f} us, wall {(end - t0) / 1e3:.1f} us, {len(ev)} events")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", default="sq8192,distances,update")
    p.add_argument("--schemes", default="fp16x3,auto")
    p.add_argument("--summary", action="store_true", help="per kernel name, not every event")
    p.add_argument("--calls", type=int, default=1, help="back-to-back calls traced (the totals cover all)")
    p.add_argument("--env", action="append", default=[], help="NAME=VALUE set before tracing a scheme")
    p.add_argument("--host", action="store_true", help="also the host threads' events and their totals")
    args = p.parse_args(argv)
    for kv in args.env:
        k, v = kv.split("=", 1)
        os.environ[k] = v
    all_cases = cases()
    print(f"{jax.devices()[0].device_kind}, jax {jax.__version__}")
    for case in args.cases.split(","):
        prod, xs = all_cases[case]()
        for scheme in args.schemes.split(","):
            print(f"== {case}, {scheme}")
            if scheme == "fp32":  # FP32 as its users ask for it, not emulated
                with jax.default_matmul_precision("highest"):
                    gpu, host = timeline(jax.jit(lambda *xs, prod=prod: prod(*xs)), xs, calls=args.calls)
            else:
                gpu, host = timeline(jax.jit(jaxemu.emulate(lambda *xs, prod=prod: prod(*xs), scheme=scheme)), xs,
                                     calls=args.calls)
            report(gpu, summary=args.summary)
            if args.host and host:
                report_host(host, gpu[0][1] if gpu else host[0][2])
        del xs


if __name__ == "__main__":
    main()
