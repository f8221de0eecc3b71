"""Plan cache and repeated-layer decomposition on a stack of identical transformer layers.

For each backend it plans ``layer_stack(layers=N)`` six ways and prints wall
time, predicted cost and how many segments the backend actually solved:

- whole graph, no cache; then through a fresh cache (miss) and again (hit);
- ``decompose="layers"`` without a cache, then through a fresh cache (cold)
  and again (warm);
- a deeper stack (N + 4 layers) through that warm cache: its layers are the
  same kernels, so nothing is solved.

Every plan returned has passed ``Plan.validate``.

    python benchmarks/bench_cache.py --layers 8 --backends greedy,cpsat --time-limit 20
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import spyreopt as so
from spyreopt.cache import PlanCache


def run(label: str, graph: so.Graph, backend: str, **kw) -> dict:
    start = time.perf_counter()
    plan = so.solve(graph, backend, **kw)
    seconds = time.perf_counter() - start
    timing = plan.stats.get("timing", {})
    dec = plan.stats.get("decomposition", {})
    if "decomposition" in timing:
        solved, hits = timing["decomposition"]["solved"], timing["decomposition"]["cache_hits"]
    elif "cache" in timing:
        solved, hits = int(not timing["cache"]["hit"]), int(timing["cache"]["hit"])
    else:
        solved, hits = 1, 0
    return {
        "case": label,
        "graph": graph.name,
        "backend": backend,
        "seconds": round(seconds, 3),
        "cost_us": round(plan.cost_us, 3),
        "status": plan.status,
        "segments": dec.get("segments", 1),
        "distinct": dec.get("distinct", 1),
        "solved": solved,
        "cache_hits": hits,
    }


def bench(layers: int, backend: str, time_limit: float, seed: int) -> list[dict]:
    g = so.workloads.get("layer_stack", layers=layers)
    deeper = so.workloads.get("layer_stack", layers=layers + 4)
    kw = {"time_limit": time_limit, "seed": seed}
    rows = [run("whole graph, no cache", g, backend, **kw)]
    with tempfile.TemporaryDirectory() as d, PlanCache(d) as cache:
        rows.append(run("whole graph, cache miss", g, backend, cache=cache, **kw))
        rows.append(run("whole graph, cache hit", g, backend, cache=cache, **kw))
    rows.append(run("decompose, no cache", g, backend, decompose="layers", **kw))
    with tempfile.TemporaryDirectory() as d, PlanCache(d) as cache:
        rows.append(run("decompose, cold cache", g, backend, decompose="layers", cache=cache, **kw))
        rows.append(run("decompose, warm cache", g, backend, decompose="layers", cache=cache, **kw))
        rows.append(
            run(f"decompose, warm cache, {layers + 4} layers", deeper, backend, decompose="layers", cache=cache, **kw)
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--backends", default="greedy")
    p.add_argument("--time-limit", type=float, default=20.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="also write the rows here")
    args = p.parse_args(argv)
    rows = []
    print("| case | backend | seconds | cost_us | status | segments | distinct | solved | cache hits |")
    print("| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for backend in args.backends.split(","):
        for r in bench(args.layers, backend, args.time_limit, args.seed):
            rows.append(r)
            print(
                f"| {r['case']} | {r['backend']} | {r['seconds']:.2f} | {r['cost_us']:.3f} | {r['status']} "
                f"| {r['segments']} | {r['distinct']} | {r['solved']} | {r['cache_hits']} |",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0
