"""The examples at GPU scale (docs/applications.md): each application with
FP32 and emulated schemes, its accuracy metric and time. Writes JSON.

    python3 scripts/apps_gpu.py OUT.json [budget_seconds]
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))

import cholesky  # noqa: E402
import hpl_ai  # noqa: E402
import kmeans  # noqa: E402
import knn  # noqa: E402
import mlp  # noqa: E402

SCHEMES = ["fp32", "bf16x6", "fp16x3", "bf16x3"]


def clean(d):
    return {k: v for k, v in d.items() if not k.startswith("_") and k != "curve"}


def main():
    out_path = sys.argv[1]
    budget = float(sys.argv[2]) if len(sys.argv) > 2 else 240
    t_start = time.time()
    results = []
    def over():
        return time.time() - t_start > budget

    def record(app, s, fn):
        if over():
            print(f"{app} {s}: skipped (time budget)", flush=True)
            return None
        t0 = time.time()
        try:
            r = fn()
        except Exception as e:  # report, don't hide
            print(f"{app} {s}: FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
            return None
        row = dict(clean(r), app=app, scheme=s, wall_s=time.time() - t0)
        results.append(row)
        print(json.dumps(row, default=float), flush=True)
        return r

    app = "kmeans n=1048576 d=256 k=1024, 20 iterations"
    data, ref = kmeans.make_data(1 << 20, 256, 1024, 0, 8.0), None
    for s in SCHEMES:
        r = record(app, s, lambda: kmeans.run(n=1 << 20, d=256, k=1024, scheme=s, max_iter=20, repeats=2,
                                              with_sklearn=False, data=data, reference=ref))
        ref = r["_ref"] if r else ref

    app = "knn db=262144 queries=4096 d=128 k=10"
    data, truth = None, None
    for s in SCHEMES:
        r = record(app, s, lambda: knn.run(n=1 << 18, m=4096, d=128, k=10, scheme=s, repeats=3, data=data,
                                           truth=truth))
        if r:
            data, truth = r["_data"], r["_truth"]

    app = "mlp 1024-8192-8192-1, batch 1024, 60 SGD steps"
    ref = None
    for s in SCHEMES:
        r = record(app, s, lambda: mlp.run(scheme=s, n=16384, d_in=1024, hidden=8192, steps=60, batch=1024,
                                           reference=ref))
        ref = r["_ref"] if r else ref

    app = "cholesky n=4096 block 512, cond 1e3"
    data, ref = None, None
    for s in SCHEMES:
        r = record(app, s, lambda: cholesky.run(n=4096, block=512, scheme=s, repeats=3, data=data, reference=ref))
        if r:
            data, ref = r["_data"], r["_ref"]

    app = "hpl-ai n=8192 block 512, uniform"
    data = hpl_ai.make_system(8192, "uniform", 0)
    for s in ["bf16", "fp16"] + SCHEMES:
        record(app, s, lambda: hpl_ai.run(n=8192, block=512, scheme=s, matrix="uniform", repeats=1, data=data,
                                          time64=(s == "bf16")))
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1, default=float)


if __name__ == "__main__":
    main()
