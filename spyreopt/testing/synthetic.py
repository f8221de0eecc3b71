"""Synthetic formulations shaped like real planning problems, for benchmarks and tests.

Seeded numpy generators, each exercising every feature of the standard form:

* ``layered_dag``: a layered, transformer-like DAG with 4-16 candidates per node;
* ``decode_stack``: decode layers as the Spyre compiler sees them (relayout copies
  on most edges, matmul max terms, placement);
* ``residual_stack``: chains of ops with a residual edge per layer and forbidden
  relayout-plus-restickify pairs.

``formulations.random_formulation`` makes the small random instances of the tests.
"""

from __future__ import annotations

import numpy as np

from spyreopt.model.formulation import Affine, Edge, Formulation, MaxTerm, Node, Placement

STICK_BYTES = 128


def layered_dag(seed: int = 0, num_nodes: int = 300, placement: bool = False) -> Formulation:
    """A layered, transformer-like DAG: local edges plus a few skips, 4-16 candidates per node.

    Edges cost nothing when both ends pick "compatible" candidates (same index
    modulo 4, a stand-in for matching layouts) and a relayout otherwise, which
    also holds memory over the consumer's step; a third of the nodes carry a
    compute-versus-memory max term; memory is tight (35% of the all-resident peak).
    """
    rng = np.random.default_rng(seed)
    sizes = rng.integers(4, 17, size=num_nodes)
    pairs = set()
    for v in range(1, num_nodes):
        for _ in range(int(rng.integers(1, 3))):
            pairs.add((int(rng.integers(max(0, v - 6), v)), v))
        if rng.random() < 0.05 and v > 20:
            pairs.add((int(rng.integers(v - 40 if v > 40 else 0, v - 10)), v))
    pairs = sorted(pairs)
    last_use = list(range(1, num_nodes + 1))
    for u, v in pairs:
        last_use[u] = max(last_use[u], v + 1)
    nodes = []
    for i, s in enumerate(sizes):
        usages = rng.integers(0, 9, size=s) * 128
        usages[0] = 0
        costs = rng.integers(100, 1000, size=s) + (usages // 128) * rng.integers(-40, 0)  # resident: cheaper
        nodes.append(Node(f"op{i}", np.maximum(costs, 0).astype(np.int64), usages.astype(np.int64), (i, last_use[i])))
    edges = []
    for u, v in pairs:
        su, sv = int(sizes[u]), int(sizes[v])
        same = (np.arange(su)[:, None] % 4) == (np.arange(sv)[None, :] % 4)
        relayout = rng.integers(50, 400, size=(su, sv))
        costs = np.where(same, 0, relayout).astype(np.int64)
        usages = np.where(same, 0, rng.integers(0, 3, size=(su, sv)) * 128).astype(np.int64)
        usages[0, :] = 0
        usages[:, 0] = 0
        allowed = rng.random((su, sv)) > 0.1
        allowed[0, :] = True
        allowed[:, 0] = True
        edges.append(Edge(u, v, costs, allowed, usages, (v, v + 1)))
    terms = []
    for i in range(num_nodes):
        if rng.random() < 1 / 3:
            incoming = [k for k, e in enumerate(edges) if e.v == i]
            compute = Affine(rng.integers(200, 800, size=sizes[i]).astype(np.int64))
            memory = Affine(
                rng.integers(0, 400, size=sizes[i]).astype(np.int64),
                tuple((k, rng.integers(0, 300, size=edges[k].costs.shape).astype(np.int64)) for k in incoming),
            )
            terms.append(MaxTerm(i, (compute, memory)))
    peak = sum(int(n.usages.max()) for n in nodes) + sum(int(e.usages.max()) for e in edges)
    limit = int(peak * 0.35) // 128 * 128
    return Formulation(
        tuple(nodes),
        tuple(edges),
        usage_limit=limit,
        max_terms=tuple(terms),
        placement=Placement(limit, 128) if placement else None,
        name=f"synthetic-{num_nodes}{'-placed' if placement else ''}",
    )


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
    """A synthetic decode-layer stack (22 ops per layer) shaped like the Spyre compiler's problem.

    Per op, work division x stick x residency candidates; per edge, in place /
    restickify / relayout / device-memory read, where a relayout holds a copy in
    scratchpad (a pair usage) and a fan-in above 8 is forbidden; matmul time is an
    exact max(compute, memory) term; placement with 1,625,344 bytes and 128-byte
    alignment.
    """
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


def residual_stack(layers: int = 32, ops: int = 10, seed: int = 0, tight: float = 0.35) -> Formulation:
    """A stack of layers, each a chain of ops with a residual edge from its first to its last op.

    Candidates are division (4) x stick dim (2) x residency (2). Costs in ns:
    compute per division; an op's time is max(compute, device-memory traffic)
    (a max term: the memory alternative reads every non-resident input); a
    stick mismatch costs a restickify, a division mismatch between resident
    ends a relayout whose copy holds memory while it runs, and a resident
    producer cannot be both relaid out and restickified (forbidden pair).
    """
    rng = np.random.default_rng(seed)
    n = layers * ops
    cands = [(d, s, r) for d in range(4) for s in range(2) for r in range(2)]
    size = len(cands)
    bytes_ = (rng.integers(2, 16, size=n) * 64 * 1024).astype(np.int64)
    cores = np.array([32, 16, 8, 4])
    edges_uv = [(i, i + 1) for i in range(n - 1)]
    edges_uv += [(layer * ops, layer * ops + ops - 1) for layer in range(layers)]
    last_use = np.arange(1, n + 1)
    for u, v in edges_uv:
        last_use[u] = max(last_use[u], v + 1)
    nodes, compute, write = [], [], []
    for i in range(n):
        base = float(rng.uniform(200, 4000))
        eff = rng.uniform(0.6, 1.0, size=4) * np.array([1.0, 0.95, 0.9, 0.8])
        comp = np.array([base * 32 / cores[d] / eff[d] / 8 for d, _, _ in cands])
        stick_pen = np.array([0.0 if s == i % 2 else 0.15 * base for _, s, _ in cands])
        spill = np.array([0.0 if r else bytes_[i] / 150.0 for _, _, r in cands])
        usage = np.array([-(-int(bytes_[i] // cores[d]) // STICK_BYTES) * STICK_BYTES if r else 0 for d, _, r in cands])
        nodes.append(Node(f"op{i}", stick_pen.astype(np.int64), usage.astype(np.int64), (i, int(last_use[i]))))
        compute.append(comp.astype(np.int64))
        write.append(spill.astype(np.int64))
    edges = []
    for u, v in edges_uv:
        cost = np.zeros((size, size), dtype=np.int64)
        allowed = np.ones((size, size), dtype=bool)
        use = np.zeros((size, size), dtype=np.int64)
        for a, (du, su, ru) in enumerate(cands):
            for b, (dv, sv, _) in enumerate(cands):
                if su != sv:
                    cost[a, b] += int(bytes_[u] / 116.0)
                if ru and du != dv:
                    cost[a, b] += int(800 + bytes_[u] / cores[du] / 547.0)
                    use[a, b] = -(-int(bytes_[u] // cores[dv]) // STICK_BYTES) * STICK_BYTES
                    allowed[a, b] = su == sv
        edges.append(Edge(u, v, cost, allowed, use, (v, v + 1)))
    terms = []
    for v in range(n):
        incoming = [k for k, (_, w) in enumerate(edges_uv) if w == v]
        reads = []
        for k in incoming:
            u = edges_uv[k][0]
            table = np.array([[0 if cands[a][2] else int(bytes_[u] / 150.0) for _ in cands] for a in range(size)])
            reads.append((k, table.astype(np.int64)))
        terms.append(MaxTerm(v, (Affine(compute[v]), Affine(write[v], tuple(reads)))))
    profile = np.zeros(n + 1, dtype=np.int64)
    for nd in nodes:
        profile[nd.interval[0] : nd.interval[1]] += nd.usages.max()
    limit = int(profile.max() * tight) // STICK_BYTES * STICK_BYTES
    return Formulation(
        tuple(nodes), tuple(edges), limit, tuple(terms), Placement(limit, STICK_BYTES), 1e-3, "layer-stack"
    )
