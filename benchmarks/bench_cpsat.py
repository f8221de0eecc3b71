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

    /work/venv/bin/python benchmarks/bench_cpsat.py --time-limit 60
    /work/venv/bin/python benchmarks/bench_cpsat.py --instances synthetic --time-limit 20 --workers 2
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from spyreopt.model.formulation import Affine, Edge, Formulation, MaxTerm, Node, Placement
from spyreopt.solvers import cpsat, greedy

IOPDDL = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "iopddl"

# one decode layer: (kind, producers); -1 is the layer input (previous layer's output)
LAYER = [
    ("pw", [-1]), ("red", [0]), ("pw", [-1, 1]),  # rmsnorm
    ("mm", [2]), ("mm", [2]), ("mm", [2]),  # q, k, v projections
    ("pw", [3]), ("pw", [4]),  # rope
    ("mm", [6, 7]), ("red", [8]), ("pw", [8, 9]), ("red", [10]), ("pw", [10, 11]),  # scores, softmax
    ("mm", [12, 5]), ("mm", [13]), ("pw", [-1, 14]),  # attention output, o projection, residual
    ("pw", [15]), ("mm", [16]), ("mm", [16]), ("pw", [17, 18]), ("mm", [19]), ("pw", [15, 20]),  # MLP
]  # fmt: skip
OUT_BYTES = {0: 4, 1: 0.03, 2: 4, 3: 4, 4: 1, 5: 1, 6: 4, 7: 1, 8: 16, 9: 0.25, 10: 16, 11: 0.25, 12: 16,
             13: 4, 14: 4, 15: 4, 16: 4, 17: 14, 18: 14, 19: 14, 20: 4, 21: 4}  # MiB  # fmt: skip
CORES = {"mm": [32, 32, 16, 16, 8, 32], "pw": [32, 16, 8, 32], "red": [32, 16, 8]}  # cores per division
STICKS = {"mm": 1, "pw": 2, "red": 2}
HBM_BYTES_PER_PS = 150e9 / 1e12
PS = 1_000  # picoseconds per nanosecond


def decode_stack(layers: int = 14, seed: int = 0) -> Formulation:
    """A synthetic decode-layer stack with relayout copies on most edges (module docstring)."""
    rng = np.random.default_rng(seed)
    kinds, producers, size = [], [], []
    for layer in range(layers):
        base = layer * len(LAYER)
        for j, (kind, ins) in enumerate(LAYER):
            kinds.append(kind)
            producers.append([base - 1 if p == -1 else base + p for p in ins if base + p >= 0 or p != -1])
            size.append(int(OUT_BYTES[j] * 2**20))
    n = len(kinds)
    cands = [
        [(d, s, r) for d in range(len(CORES[k])) for s in range(STICKS[k]) for r in (0, 1)] for k in kinds
    ]  # (division, stick, resident)
    last = list(range(1, n + 1))
    for v, ins in enumerate(producers):
        for u in ins:
            last[u] = max(last[u], v + 1)
    nodes, compute, write = [], [], []
    for i, k in enumerate(kinds):
        eff = rng.uniform(0.5, 1.0, size=len(CORES[k]))
        work = size[i] * (4096 if k == "mm" else 4) / 1140  # ns on one core
        comp = np.array([work / CORES[k][d] / eff[d] * PS for d, _, _ in cands[i]], dtype=np.int64)
        wr = np.array([0 if r else size[i] / HBM_BYTES_PER_PS for _, _, r in cands[i]], dtype=np.int64)
        use = np.array([size[i] // CORES[k][d] if r else 0 for d, _, r in cands[i]], dtype=np.int64)
        costs = np.zeros(len(cands[i]), np.int64) if k == "mm" else comp + wr
        nodes.append(Node(f"{k}{i}", costs, use, (i, last[i])))
        compute.append(comp)
        write.append(wr)
    edges, reads = [], {}
    for v, ins in enumerate(producers):
        for u in ins:
            cost, use, ok, read = _edge_tables(kinds, cands, size, u, v)
            reads.setdefault(v, []).append((len(edges), read))
            mm = kinds[v] == "mm"  # a matmul's reads go into its max(compute, memory) term instead
            edges.append(Edge(u, v, cost - (read if mm else 0), ok, use, (v, v + 1)))
    terms = []
    for i, k in enumerate(kinds):
        if k == "mm":
            memory = Affine(write[i], tuple(reads.get(i, ())))
            terms.append(MaxTerm(i, (Affine(compute[i]), memory)))
    cap = 1_625_344
    return Formulation(
        tuple(nodes), tuple(edges), cap, tuple(terms), Placement(cap, 128), 1e-6, f"decode-stack-{layers}"
    )


def _edge_tables(kinds, cands, size, u, v):
    """Pair tables of one producer -> consumer edge: in place, restickify, relayout (a copy), or a read."""
    cu, cv = cands[u], cands[v]
    cost = np.zeros((len(cu), len(cv)), np.int64)
    read = np.zeros_like(cost)
    use = np.zeros_like(cost)
    ok = np.ones(cost.shape, bool)
    for a, (du, su, ru) in enumerate(cu):
        for b, (dv, sv, _) in enumerate(cv):
            if not ru:
                read[a, b] = cost[a, b] = int(size[u] / HBM_BYTES_PER_PS)
                continue
            if su != sv:
                cost[a, b] += int(size[u] / 116e9 * 1e12)  # restickify
            if du != dv:
                nu, nv = CORES[kinds[u]][du], CORES[kinds[v]][dv]
                ok[a, b] = max(nu, nv) // min(nu, nv) <= 8  # relayout fan-in
                cost[a, b] += int((1.0 + size[u] / nv / 547) * PS)  # about 1 us plus the span
                use[a, b] = size[u] // nv  # the destination copy lives in scratchpad
    return cost, use, ok, read


def spyre_stack(layers: int = 12) -> Formulation:
    import spyreopt as so
    from spyreopt.workloads import layer_stack

    return so.Problem(layer_stack(layers=layers)).formulation


def iopddl(name: str) -> Formulation:
    from spyreopt.formats.iopddl import load_iopddl

    return load_iopddl(IOPDDL / f"asplos-2025-iopddl-{name}.json.gz")


INSTANCES = {
    "synthetic": decode_stack,
    "spyre": spyre_stack,
    "iopddl-B": lambda: iopddl("B"),
    "iopddl-G": lambda: iopddl("G"),
}


def describe(f: Formulation) -> str:
    copies = sum(int(np.count_nonzero(e.usages)) for e in f.edges if e.usages is not None)
    cands = sum(n.num_candidates for n in f.nodes)
    return f"{len(f.nodes)} nodes, {len(f.edges)} edges, {cands} candidates, {copies} pair usages"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", default=",".join(INSTANCES))
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    for name in args.instances.split(","):
        f = INSTANCES[name]()
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


if __name__ == "__main__":
    main()
