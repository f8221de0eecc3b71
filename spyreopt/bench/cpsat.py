"""CP-SAT backend on three kinds of instance; prints objective, bound, gap, status, seconds and model size.

- ``synthetic``: a generated decode-layer stack (22 ops per layer, 14 layers: 308
  nodes) shaped like the Spyre compiler's problem: per op, work division x stick
  x residency candidates; per edge, in place / restickify / relayout / device-
  memory read, where a relayout holds a copy in scratchpad (a pair usage) and a
  fan-in above 8 is forbidden; matmul time is an exact max(compute, memory)
  term; placement with 1,625,344 bytes and 128-byte alignment.
- ``spyre``: the real Spyre formulation of ``workloads.layer_stack(layers=12)``
  (360 ops) through ``Problem``.
- ``iopddl-B``, ``iopddl-G``: the ASPLOS 2025 contest instances (best known
  532,843 and 217,039).

Each line also gives the greedy plan's objective (the warm start).

    python benchmarks/bench_cpsat.py --time-limit 60 --data tests/data
    python benchmarks/bench_cpsat.py --instances synthetic --time-limit 20 --workers 2
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from spyreopt.bench.data import data_dir
from spyreopt.model.formulation import Formulation
from spyreopt.solvers import cpsat, greedy
from spyreopt.testing.synthetic import decode_stack


def spyre_stack(layers: int = 12) -> Formulation:
    import spyreopt as so
    from spyreopt.workloads import layer_stack

    return so.Problem(layer_stack(layers=layers)).formulation


def iopddl(name: str, data: str | None) -> Formulation:
    from spyreopt.formats.iopddl import load_iopddl

    return load_iopddl(data_dir(data, "iopddl") / f"asplos-2025-iopddl-{name}.json.gz")


INSTANCES = {
    "synthetic": lambda data: decode_stack(),
    "spyre": lambda data: spyre_stack(),
    "iopddl-B": lambda data: iopddl("B", data),
    "iopddl-G": lambda data: iopddl("G", data),
}


def describe(f: Formulation) -> str:
    copies = sum(int(np.count_nonzero(e.usages)) for e in f.edges if e.usages is not None)
    cands = sum(n.num_candidates for n in f.nodes)
    return f"{len(f.nodes)} nodes, {len(f.edges)} edges, {cands} candidates, {copies} pair usages"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", default=",".join(INSTANCES))
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--data", help="directory with iopddl/*.json.gz (default: $SPYREOPT_DATA)")
    args = ap.parse_args(argv)
    for name in args.instances.split(","):
        f = INSTANCES[name](args.data)
        print(f"== {name}: {describe(f)}", flush=True)
        g = greedy.solve(f, time_limit=args.time_limit, seed=args.seed)
        start = time.perf_counter()
        sol = cpsat.solve(f, time_limit=args.time_limit, seed=args.seed, workers=args.workers)
        seconds = time.perf_counter() - start
        assert sol.objective == f.evaluate(sol.assignment)
        assert f.violations(sol.assignment, sol.offsets if f.placement else None) == []
        st = sol.stats
        size = (
            f"{st['variables']} variables, {st['constraints']} constraints"
            if st.get("mode") == "full"
            else f"full model ~{st['full_model_estimate']} (vars+constraints), largest window {st.get('largest_window_model')}"
            f", {st.get('windows')} windows, {st.get('improvements')} improvements"
        )
        gap = f"{st['gap']:.4%}" if "gap" in st else "n/a"
        print(
            f"   greedy {g.objective}  cpsat {sol.objective} ({(g.objective - sol.objective) / g.objective:+.3%} vs greedy)"
        )
        print(f"   bound {sol.bound}  gap {gap}  status {sol.status}  source {st['source']}  {seconds:.1f} s")
        print(
            f"   mode {st.get('mode')}: {size}; dtime {st.get('deterministic_time', 0):.2f}, wall limit hit {st.get('wall_limit_hit')}"
        )
        print(f"   reductions {st['reductions']}", flush=True)
