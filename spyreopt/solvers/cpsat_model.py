"""The CP-SAT model of a Formulation: exact reductions first, then a compact model.

Reductions (``reduce_formulation``). Each one keeps at least one optimal
assignment, so the reduced model's optimum and bound are those of ``f``:

1. Memory: a node candidate (or edge pair) whose own usage exceeds the memory
   limit (``min(usage_limit, placement.capacity)``) while live cannot occur.
2. Arc consistency: a candidate with no allowed pair on some edge, against the
   candidates still possible at the other end, cannot occur.
3. Sentinel costs (IOPDDL's 1e18): per cost term (node vector, edge table) take
   the excess over the term's minimum. If a threshold ``T`` satisfies
   ``T > 1024 * (S(T) + M) > 0``, where ``S(T)`` sums each term's largest
   excess below ``T`` and ``M`` sums the spans of the max terms (the factor
   keeps the rule to genuine sentinels), then any assignment
   that uses an excess ``>= T`` costs more than every assignment that uses none,
   so such entries are forbidden. Exact whenever the reduced problem is feasible;
   when it is not, the caller re-solves without this reduction (the objective of
   that model may then be capped to fit int64, see ``build_model``).
4. Dominance: candidate ``s'`` of node ``i`` is dropped when a kept ``s`` is no
   worse in every table that reads node ``i``: its cost, its usage (when memory
   is constrained and the node is live), and for every incident edge, pair by
   pair against the other end's possible candidates, the pair cost, the pair
   usage and every max-term table on that edge (a pair allowed for ``s'`` must
   be allowed for ``s``), and the unary of every max term of ``i`` (``max`` is
   monotone, so max terms cannot increase). Replacing ``s'`` by ``s`` keeps an
   assignment feasible (every buffer keeps its offset and shrinks or vanishes)
   and no worse. Identical candidates (symmetric: equal rows) keep the lowest
   index. ``Reduction.map_assignment`` applies the replacements to a hint.

Model (``build_model``):

* one Boolean per remaining candidate, ``ExactlyOne`` per node (a node with one
  candidate left is the constant 1);
* per edge, the cost tables (edge cost and max-term parts) are reparametrised
  ``t[a, b] = r[a] + c[b] + res[a, b]`` (row then column minima, over allowed
  pairs), ``r``/``c`` go onto the endpoint literals; a pair literal ``y[a, b]``
  is needed only for allowed pairs with a non-zero residual or a usage. Two
  encodings, chosen per edge:

  - dense (the auto-sharding form), when the edge has at most ``DENSE_FACTOR``
    times as many allowed pairs as needed ones (or as endpoint candidates): a
    literal for every allowed pair, ``sum_b y[a, b] == x_u[a]`` per row and
    ``sum_a y[a, b] == x_v[b]`` per column. Its LP relaxation is the local
    marginal polytope, far tighter than the sparse one: on IOPDDL B the sparse
    form's root bound is about 31k, the dense form's proves the optimum 532,843;
  - sparse, otherwise: literals only for needed pairs, linked per row by
    ``sum_b y[a, b] <= x_u[a]`` and ``sum_b y[a, b] >= x_u[a] + sum_b x_v[b] - 1``
    (over the row's needed pairs) and likewise per column, which makes
    ``y[a, b] == x_u[a] and x_v[b]`` exact; forbidden pairs are excluded by
    ``x_u[a] + sum_{b forbidden} x_v[b] <= 1`` (or the support form
    ``sum_{b allowed} x_v[b] >= x_u[a]``, whichever is shorter).

  With one end fixed the pair literal is the other end's literal;
* a max term is an integer epigraph ``z >= alternative`` (minimised);
* capacity: one linear constraint per maximal set of simultaneously live
  buffers (where a buffer starts and the next event is an end), skipped when
  it cannot bind;
* placement: every buffer that may exist gets optional intervals (time x
  address), one per distinct size, present when a candidate (pair) of that
  size is chosen, sharing one offset ``alignment * q`` per buffer key, all in
  one ``AddNoOverlap2D``.

The model's objective plus ``Built.offset`` equals ``Formulation.evaluate``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np
from ortools.sat.python import cp_model

from spyreopt.model.formulation import BufferKey, Formulation, affine_value

BIG = np.iinfo(np.int64).max
SENTINEL_RATIO = 1024
DENSE_FACTOR = 4  # an edge gets every allowed pair when that is at most this many times the needed ones
INT64_SAFE = 2**62


def memory_limit(f: Formulation) -> int | None:
    """The byte budget every time step must respect (usage limit and placement capacity)."""
    limits = [x for x in (f.usage_limit, f.placement.capacity if f.placement else None) if x is not None]
    return min(limits) if limits else None


def _live(interval: tuple[int, int]) -> bool:
    return interval[1] > interval[0]


# ============================================================================ reductions
@dataclass
class Reduction:
    """Candidate domains and allowed pairs left after the exact reductions."""

    masks: list[np.ndarray]  # per node: bool over its original candidates
    allowed: list[np.ndarray]  # per edge: bool [S_u, S_v] (huge or impossible pairs removed)
    replaced: list[dict[int, int]]  # per node: candidate dropped by dominance -> candidate no worse
    threshold: int | None = None
    counts: dict[str, int] = field(default_factory=dict)
    conflict: str | None = None  # why no assignment exists, when a domain became empty

    def domain(self, i: int) -> np.ndarray:
        return np.flatnonzero(self.masks[i])

    def map_assignment(self, assignment) -> list[int]:
        """Replace dropped candidates by their dominators (no worse, still feasible)."""
        out = [int(s) for s in assignment]
        for i, rep in enumerate(self.replaced):
            while out[i] in rep:
                out[i] = rep[out[i]]
        return out


def reduce_formulation(
    f: Formulation, masks: list[np.ndarray] | None = None, *, forbid_huge: bool = True, prune: bool = True
) -> Reduction:
    """Apply the reductions of the module docstring to ``f`` (optionally within given domains)."""
    masks = [np.ones(n.num_candidates, bool) for n in f.nodes] if masks is None else [m.copy() for m in masks]
    allowed = [np.ones(e.costs.shape, bool) if e.allowed is None else e.allowed.astype(bool) for e in f.edges]
    red = Reduction(masks, allowed, [{} for _ in f.nodes])
    counts = {"over_limit": 0, "unsupported": 0, "sentinel": 0, "dominated": 0, "merged": 0}
    red.counts = counts
    limit = memory_limit(f)
    if limit is not None:
        for i, n in enumerate(f.nodes):
            if _live(n.interval):
                over = masks[i] & (n.usages > limit)
                counts["over_limit"] += int(over.sum())
                masks[i] &= ~over
                if not masks[i].any():
                    red.conflict = f"node {i} ({n.name}): every candidate uses more than the memory limit {limit}"
                    return red
        for k, e in enumerate(f.edges):
            if e.usages is not None and _live(e.interval):
                allowed[k] &= ~(e.usages > limit)
    red.conflict = _arc_consistency(f, red, range(len(f.nodes)))
    if red.conflict is None and forbid_huge:
        red.threshold = _forbid_sentinels(f, red)
        if red.threshold is not None:
            red.conflict = _arc_consistency(f, red, range(len(f.nodes)))
    if red.conflict is None and prune:
        red.conflict = _prune_dominated(f, red, limit is not None)
    return red


def _effective(red: Reduction, f: Formulation, k: int) -> np.ndarray:
    e = f.edges[k]
    return red.allowed[k] & red.masks[e.u][:, None] & red.masks[e.v][None, :]


def _arc_consistency(f: Formulation, red: Reduction, start, changed: set[int] | None = None) -> str | None:
    """Drop candidates without an allowed pair on some edge; a conflict message if a domain empties.

    Nodes whose domain shrank are added to ``changed`` when given.
    """
    queue = deque(sorted({k for i in start for k in f.incident_edges(i)}))
    queued = set(queue)
    while queue:
        k = queue.popleft()
        queued.discard(k)
        e = f.edges[k]
        eff = _effective(red, f, k)
        if e.u == e.v:
            news = {e.u: red.masks[e.u] & np.diagonal(eff)}
        else:
            news = {e.u: red.masks[e.u] & eff.any(axis=1), e.v: red.masks[e.v] & eff.any(axis=0)}
        for i, new in news.items():
            removed = int(red.masks[i].sum() - new.sum())
            if not removed:
                continue
            red.counts["unsupported"] += removed
            red.masks[i] = new
            if changed is not None:
                changed.add(i)
            if not new.any():
                return (
                    f"node {i} ({f.nodes[i].name}): no candidate has an allowed pair on edge {k} "
                    f"({f.nodes[e.u].name} -> {f.nodes[e.v].name}) among the remaining candidates"
                )
            for k2 in f.incident_edges(i):
                if k2 not in queued:
                    queued.add(k2)
                    queue.append(k2)
    return None


def _max_term_span(f: Formulation, red: Reduction) -> int:
    """Sum over max terms of (upper bound - lower bound) of their value over the domains."""
    total = 0
    for m in f.max_terms:
        los, his = [], []
        for alt in m.alternatives:
            u = alt.unary[red.masks[m.node]]
            lo, hi = int(u.min()), int(u.max())
            for k, table in alt.edge_parts:
                vals = table[_effective(red, f, k)]
                lo, hi = lo + int(vals.min()), hi + int(vals.max())
            los.append(lo)
            his.append(hi)
        total += max(his) - max(los)
    return total


def term_minima_bound(f: Formulation, red: Reduction) -> int:
    """A valid lower bound on the optimum: every cost term at its minimum over the reduced domains."""
    total = sum(int(n.costs[red.masks[i]].min()) for i, n in enumerate(f.nodes))
    total += sum(int(e.costs[_effective(red, f, k)].min()) for k, e in enumerate(f.edges))
    for m in f.max_terms:
        total += max(
            int(alt.unary[red.masks[m.node]].min())
            + sum(int(table[_effective(red, f, k)].min()) for k, table in alt.edge_parts)
            for alt in m.alternatives
        )
    return total


def _forbid_sentinels(f: Formulation, red: Reduction) -> int | None:
    """Find the sentinel threshold (module docstring, rule 3) and forbid entries at or above it."""
    excess: list[np.ndarray] = []
    for i, n in enumerate(f.nodes):
        c = n.costs[red.masks[i]]
        excess.append(n.costs - c.min())
    for k, e in enumerate(f.edges):
        eff = _effective(red, f, k)
        excess.append(e.costs - e.costs[eff].min())
    values, terms = [], []
    for t, ex in enumerate(excess):
        valid = red.masks[t] if t < len(f.nodes) else _effective(red, f, t - len(f.nodes))
        u = np.unique(ex[valid])
        u = u[u > 0]
        values.append(u)
        terms.append(np.full(len(u), t))
    if not values:
        return None
    vals, owners = np.concatenate(values), np.concatenate(terms)
    order = np.argsort(vals, kind="stable")
    vals, owners = vals[order], owners[order]
    span = _max_term_span(f, red)
    current = [0] * len(excess)
    below = 0  # S(T): sum of each term's largest excess below the candidate threshold
    threshold = None
    j = 0
    while j < len(vals):
        v = int(vals[j])
        if below + span > 0 and v > SENTINEL_RATIO * (below + span):
            threshold = v
            break
        while j < len(vals) and vals[j] == v:
            t = int(owners[j])
            below += v - current[t]
            current[t] = v
            j += 1
    if threshold is None:
        return None
    for i in range(len(f.nodes)):
        hit = red.masks[i] & (excess[i] >= threshold)
        red.counts["sentinel"] += int(hit.sum())
        red.masks[i] &= ~hit
    for k in range(len(f.edges)):
        hit = red.allowed[k] & (excess[len(f.nodes) + k] >= threshold)
        red.counts["sentinel"] += int(hit.sum())
        red.allowed[k] &= ~hit
    return threshold


def _node_tables(f: Formulation, memory: bool) -> tuple[list[list[np.ndarray]], list[list[np.ndarray]]]:
    """Per node: max-term unaries; per edge: every table read pair by pair (cost, usage, max-term parts)."""
    unaries: list[list[np.ndarray]] = [[] for _ in f.nodes]
    tables: list[list[np.ndarray]] = []
    for e in f.edges:
        ts = [e.costs]
        if memory and e.usages is not None and _live(e.interval):
            ts.append(e.usages)
        tables.append(ts)
    for m in f.max_terms:
        for alt in m.alternatives:
            unaries[m.node].append(alt.unary)
            for k, table in alt.edge_parts:
                tables[k].append(table)
    return unaries, tables


def _profile(f: Formulation, red: Reduction, i: int, memory: bool, unaries, tables) -> tuple[np.ndarray, np.ndarray]:
    """Every value candidate choice at node i can influence, one row per candidate in the domain."""
    n = f.nodes[i]
    rows = red.domain(i)
    blocks = [n.costs[rows, None]]
    if memory and _live(n.interval):
        blocks.append(n.usages[rows, None])
    blocks.extend(u[rows, None] for u in unaries[i])
    for k in f.incident_edges(i):
        e = f.edges[k]
        if e.u == e.v:
            ok = np.diagonal(red.allowed[k])[rows]
            blocks.extend(np.where(ok, np.diagonal(t)[rows], BIG)[:, None] for t in tables[k])
            continue
        if e.u == i:
            cols = red.domain(e.v)
            ok = red.allowed[k][np.ix_(rows, cols)]
            blocks.extend(np.where(ok, t[np.ix_(rows, cols)], BIG) for t in tables[k])
        else:
            cols = red.domain(e.u)
            ok = red.allowed[k][np.ix_(cols, rows)].T
            blocks.extend(np.where(ok, t[np.ix_(cols, rows)].T, BIG) for t in tables[k])
    return rows, np.hstack(blocks).astype(np.int64)


def _prune_dominated(f: Formulation, red: Reduction, memory: bool) -> str | None:
    """Dominance to a fixpoint (module docstring, rule 4), interleaved with arc consistency."""
    unaries, tables = _node_tables(f, memory)
    neighbours = [
        sorted({f.edges[k].u for k in f.incident_edges(i)} | {f.edges[k].v for k in f.incident_edges(i)})
        for i in range(len(f.nodes))
    ]
    queue = deque(range(len(f.nodes)))
    queued = set(queue)
    budget = 20 * len(f.nodes) + 100
    while queue and budget > 0:
        budget -= 1
        i = queue.popleft()
        queued.discard(i)
        if red.masks[i].sum() < 2:
            continue
        rows, prof = _profile(f, red, i, memory, unaries, tables)
        dom = np.array([(prof[s] <= prof).all(axis=1) for s in range(len(rows))])  # dom[s, t]: s no worse than t
        equal = dom & dom.T
        order = np.arange(len(rows))
        beats = (dom & ~dom.T) | (equal & (order[:, None] < order[None, :]))
        dropped = beats.any(axis=0)
        if not dropped.any():
            continue
        kept = ~dropped
        for t in np.flatnonzero(dropped):
            s = int(np.flatnonzero(kept & dom[:, t])[0])
            red.replaced[i][int(rows[t])] = int(rows[s])
            red.counts["merged" if equal[s, t] else "dominated"] += 1
        red.masks[i][rows[dropped]] = False
        changed = {i}
        conflict = _arc_consistency(f, red, [i], changed)
        if conflict:
            return conflict
        for j in sorted(changed):
            for nb in neighbours[j]:
                if nb not in queued:
                    queued.add(nb)
                    queue.append(nb)
    return None


# ============================================================================ model
def estimate_size(f: Formulation, red: Reduction) -> int:
    """Variables plus constraints of the whole model, without building it (dense links assumed)."""
    size = sum(int(m.sum()) for m in red.masks) + len(f.nodes)
    for k, e in enumerate(f.edges):
        du, dv = int(red.masks[e.u].sum()), int(red.masks[e.v].sum())
        if e.u != e.v and du > 1 and dv > 1:
            size += int(_effective(red, f, k).sum()) + du + dv
    return size


@dataclass
class Built:
    """A CP-SAT model of a reduced Formulation and the maps back to the Formulation."""

    model: cp_model.CpModel
    x: list[dict[int, object]]  # node -> candidate -> literal (or the constant 1)
    pairs: list[dict[tuple[int, int], object]]  # edge -> pair -> new literal (only pairs with their own variable)
    groups: list[tuple[object, str, int, frozenset]]  # new presence literal, "node"/"edge", index, members
    epigraphs: list[tuple[object, int]]  # (z, max-term index)
    addresses: dict[BufferKey, object]  # buffer key -> q (offset = alignment * q)
    offset: int  # the Formulation objective = model objective + offset
    capped: bool = False  # cost excess capped to fit int64: the model objective is a surrogate
    counts: dict[str, int] = field(default_factory=dict)

    def hint(self, f: Formulation, assignment, offsets: dict[BufferKey, int] | None) -> None:
        """A complete hint: every variable, auxiliary ones included, at the assignment's value."""
        m = self.model
        m.clear_hints()
        for i, lits in enumerate(self.x):
            for s, lit in lits.items():
                if not isinstance(lit, int):
                    m.add_hint(lit, int(assignment[i] == s))
        for k, lits in enumerate(self.pairs):
            e = f.edges[k]
            chosen = (assignment[e.u], assignment[e.v])
            for pair, lit in lits.items():
                m.add_hint(lit, int(pair == chosen))
        for lit, kind, idx, members in self.groups:
            if kind == "node":
                m.add_hint(lit, int(assignment[idx] in members))
            else:
                e = f.edges[idx]
                m.add_hint(lit, int((assignment[e.u], assignment[e.v]) in members))
        for z, t in self.epigraphs:
            term = f.max_terms[t]
            m.add_hint(z, max(affine_value(a, term.node, f.edges, assignment) for a in term.alternatives))
        align = f.placement.alignment if f.placement else 1
        for key, q in self.addresses.items():
            if offsets and key in offsets:
                m.add_hint(q, offsets[key] // align)

    def decode(self, f: Formulation, solver: cp_model.CpSolver, fixed: dict[BufferKey, int] | None = None):
        """(assignment, offsets) of the solver's solution."""
        assignment = []
        for lits in self.x:
            chosen = [s for s, lit in lits.items() if isinstance(lit, int) or solver.boolean_value(lit)]
            assignment.append(chosen[0])
        offsets: dict[BufferKey, int] = {}
        if f.placement is not None:
            align = f.placement.alignment
            for b in f.buffers(assignment):
                if b.key in self.addresses:
                    offsets[b.key] = align * int(solver.value(self.addresses[b.key]))
                elif fixed and b.key in fixed:
                    offsets[b.key] = fixed[b.key]
        return tuple(assignment), offsets


def _reparam(table: np.ndarray, ok: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``table = r[:, None] + c[None, :] + res`` on allowed pairs, keeping whichever form has more zeros."""
    big = np.where(ok, table, BIG)
    r = big.min(axis=1)
    r = np.where(r == BIG, 0, r)
    rest = np.where(ok, table - r[:, None], BIG)
    c = rest.min(axis=0)
    c = np.where(c == BIG, 0, c)
    res = np.where(ok, table - r[:, None] - c[None, :], 0)
    if np.count_nonzero(res) <= np.count_nonzero(np.where(ok, table, 0)):
        return r, c, res
    return np.zeros(len(r), np.int64), np.zeros(len(c), np.int64), np.where(ok, table, 0)


class _Lin:
    """A linear expression collected as (literal, coefficient) lists and a Python-int constant."""

    def __init__(self) -> None:
        self.vars: list = []
        self.coefs: list[int] = []
        self.const = 0

    def add(self, lit, coef: int) -> None:
        coef = int(coef)
        if coef == 0:
            return
        if isinstance(lit, int):
            self.const += coef * lit
        else:
            self.vars.append(lit)
            self.coefs.append(coef)

    def expr(self):
        return cp_model.LinearExpr.weighted_sum(self.vars, self.coefs)

    def bounds(self) -> tuple[int, int]:
        """Loose bounds for 0/1 literals."""
        lo = self.const + sum(c for c in self.coefs if c < 0)
        hi = self.const + sum(c for c in self.coefs if c > 0)
        return lo, hi


def build_model(
    f: Formulation,
    red: Reduction,
    *,
    fixed_offsets: dict[BufferKey, int] | None = None,
    cap: int | None = None,
) -> Built:
    """The CP-SAT model of the reduced Formulation (module docstring).

    ``fixed_offsets``: buffers whose address is kept (an LNS window): they stay
    in the address model as fixed boxes where they are live with a free buffer
    and are left out elsewhere; ``decode`` copies their offsets. ``cap``:
    clip every node and edge cost excess at ``cap`` (a surrogate objective that
    fits int64; solutions are still evaluated exactly).
    """
    m = cp_model.CpModel()
    n_nodes = len(f.nodes)
    objective = _Lin()
    x: list[dict[int, object]] = []
    node_w: list[dict[int, int]] = []  # unary objective coefficient per candidate (before per-node shift)
    for i, n in enumerate(f.nodes):
        dom = red.domain(i)
        if len(dom) == 1:
            x.append({int(dom[0]): 1})
        else:
            lits = {int(s): m.new_bool_var(f"x{i}_{s}") for s in dom}
            m.add_exactly_one(lits.values())
            x.append(lits)
        base = int(n.costs[dom].min())
        objective.const += base
        ex = n.costs - base
        if cap is not None:
            ex = np.minimum(ex, cap)
        node_w.append({int(s): int(ex[s]) for s in dom})

    # max-term parts grouped by edge, so their residuals decide which pair literals exist
    parts: dict[int, list[tuple[int, int, np.ndarray]]] = {}
    for t, term in enumerate(f.max_terms):
        for a, alt in enumerate(term.alternatives):
            for k, table in alt.edge_parts:
                parts.setdefault(k, []).append((t, a, table))
    alt_lin = [[_Lin() for _ in term.alternatives] for term in f.max_terms]
    for t, term in enumerate(f.max_terms):
        for a, alt in enumerate(term.alternatives):
            for s, lit in x[term.node].items():
                alt_lin[t][a].add(lit, alt.unary[s])

    memory = memory_limit(f) is not None
    pairs: list[dict[tuple[int, int], object]] = []
    pair_lit: list[dict[tuple[int, int], object]] = []  # every pair literal of the edge, new or endpoint
    edge_use: list[dict[tuple[int, int], int]] = []
    n_links = 0
    for k in range(len(f.edges)):
        lits, all_lits, use, links = _edge(m, f, red, k, x, node_w, objective, alt_lin, parts.get(k, []), memory, cap)
        pairs.append(lits)
        pair_lit.append(all_lits)
        edge_use.append(use)
        n_links += links

    for i in range(n_nodes):  # per-node shift keeps coefficients small and non-negative
        shift = min(node_w[i].values())
        objective.const += shift
        for s, lit in x[i].items():
            objective.add(lit, node_w[i][s] - shift)

    epigraphs = []
    z_range = [0, 0]  # the epigraph variables' contribution to the objective's range
    for t, lins in enumerate(alt_lin):
        if len(lins) == 1 or all(not lin.vars for lin in lins):
            best = lins[0] if len(lins) == 1 else max(lins, key=lambda lin: lin.const)
            objective.vars.extend(best.vars)
            objective.coefs.extend(best.coefs)
            objective.const += best.const
            continue
        bounds = [lin.bounds() for lin in lins]
        lo, hi = max(b[0] for b in bounds), max(b[1] for b in bounds)
        _check_range(lo, hi, f"max term {t}")
        z = m.new_int_var(lo, hi, f"z{t}")
        for lin in lins:
            m.add(z >= lin.expr() + lin.const)
        objective.add(z, 1)
        z_range[0] += lo
        z_range[1] += hi
        epigraphs.append((z, t))

    counts = {"pair_literals": sum(len(p) for p in pairs), "links": n_links}
    groups: list[tuple[object, str, int, frozenset]] = []
    addresses: dict[BufferKey, object] = {}
    if memory:
        counts["capacity_constraints"] = _capacity(m, f, red, x, pair_lit, edge_use)
    if f.placement is not None:
        groups, addresses = _placement(m, f, red, x, pair_lit, edge_use, fixed_offsets or {})
        counts["buffers_modelled"] = len(addresses)

    z_vars = {id(z) for z, _ in epigraphs}
    lo = sum(c for v, c in zip(objective.vars, objective.coefs) if c < 0 and id(v) not in z_vars) + z_range[0]
    hi = sum(c for v, c in zip(objective.vars, objective.coefs) if c > 0 and id(v) not in z_vars) + z_range[1]
    _check_range(lo, hi, "objective")
    m.minimize(objective.expr())
    return Built(m, x, pairs, groups, epigraphs, addresses, objective.const, cap is not None, counts)


def _check_range(lo: int, hi: int, what: str) -> None:
    if max(abs(lo), abs(hi)) >= INT64_SAFE:
        raise OverflowError(f"{what}: range [{lo}, {hi}] exceeds int64")


def _edge(m, f, red, k, x, node_w, objective, alt_lin, parts, memory, cap):
    """Pair literals, links and objective/max-term terms of edge k.

    Returns (new pair literals, every pair literal, pair usages, number of link constraints).
    """
    e = f.edges[k]
    du, dv = red.domain(e.u), red.domain(e.v)
    if e.u == e.v:  # a self-loop reads the diagonal: a unary term on the node
        d = du
        ex = e.costs[d, d] - int(e.costs[d, d].min())
        objective.const += int(e.costs[d, d].min())
        if cap is not None:
            ex = np.minimum(ex, cap)
        for s, w in zip(d, ex):
            node_w[e.u][int(s)] += int(w)
        for t, a, table in parts:
            for s in d:
                alt_lin[t][a].add(x[e.u][int(s)], table[s, s])
        lits = {(int(s), int(s)): x[e.u][int(s)] for s in d}
        use = {}
        if memory and e.usages is not None and _live(e.interval):
            use = {(int(s), int(s)): int(e.usages[s, s]) for s in d if e.usages[s, s] > 0}
        return {}, {p: lits[p] for p in use}, use, 0

    if len(du) == 1 or len(dv) == 1:
        return _edge_unary(f, red, k, x, node_w, objective, alt_lin, parts, memory, cap)
    ok = red.allowed[k][np.ix_(du, dv)]
    cost = e.costs[np.ix_(du, dv)]
    base = int(cost[ok].min())
    objective.const += base
    cost = cost - base
    if cap is not None:
        cost = np.minimum(cost, cap)
    r, c, res = _reparam(cost, ok)
    for a, s in enumerate(du):
        node_w[e.u][int(s)] += int(r[a])
    for b, s in enumerate(dv):
        node_w[e.v][int(s)] += int(c[b])
    part_res = []
    for t, alt, table in parts:
        pr, pc, pres = _reparam(table[np.ix_(du, dv)], ok)
        for a, s in enumerate(du):
            alt_lin[t][alt].add(x[e.u][int(s)], pr[a])
        for b, s in enumerate(dv):
            alt_lin[t][alt].add(x[e.v][int(s)], pc[b])
        part_res.append((t, alt, pres))
    need = ok & (res != 0)
    for _, _, pres in part_res:
        need |= ok & (pres != 0)
    usage = np.zeros_like(cost)
    if memory and e.usages is not None and _live(e.interval):
        usage = np.where(ok, e.usages[np.ix_(du, dv)], 0)
        need |= usage > 0

    new: dict[tuple[int, int], object] = {}
    every: dict[tuple[int, int], object] = {}
    links = 0
    free_u, free_v = len(du) > 1, len(dv) > 1
    dense = free_u and free_v and ok.sum() <= DENSE_FACTOR * max(need.sum(), len(du) + len(dv))
    if dense:
        need = ok.copy()
    for a, b in zip(*np.nonzero(need)):
        key = (int(du[a]), int(dv[b]))
        if free_u and free_v:
            lit = m.new_bool_var(f"y{k}_{key[0]}_{key[1]}")
            new[key] = lit
        elif free_u:
            lit = x[e.u][key[0]]
        elif free_v:
            lit = x[e.v][key[1]]
        else:
            lit = 1
        every[key] = lit
    if dense:
        links += _link_dense(m, x[e.u], x[e.v], du, dv, new)
    elif free_u and free_v:
        links += _link(m, x[e.u], x[e.v], du, dv, need, new, ok)
    for (a, b), lit in zip(zip(*np.nonzero(need)), every.values()):
        objective.add(lit, res[a, b])
        for t, alt, pres in part_res:
            alt_lin[t][alt].add(lit, pres[a, b])
    use = {key: int(usage[a, b]) for (a, b), key in zip(zip(*np.nonzero(need)), every) if usage[a, b] > 0}
    return new, every, use, links


def _edge_unary(f, red, k, x, node_w, objective, alt_lin, parts, memory, cap):
    """An edge with a fixed end is a unary term on the other end: its pair literal is that end's literal."""
    e = f.edges[k]
    du, dv = red.domain(e.u), red.domain(e.v)
    if len(du) == 1:
        owner, own = e.v, dv
        keys = [(int(du[0]), int(b)) for b in dv]

        def row(table):
            return table[du[0], dv]
    else:
        owner, own = e.u, du
        keys = [(int(a), int(dv[0])) for a in du]

        def row(table):
            return table[du, dv[0]]

    lits = [x[owner][int(s)] for s in own]
    cost = row(e.costs)
    base = int(cost.min())
    objective.const += base
    cost = cost - base if cap is None else np.minimum(cost - base, cap)
    weights = node_w[owner]
    for s, c in zip(own.tolist(), cost.tolist()):
        weights[s] += c
    for t, alt, table in parts:
        for lit, c in zip(lits, row(table).tolist()):
            alt_lin[t][alt].add(lit, c)
    use: dict[tuple[int, int], int] = {}
    every: dict[tuple[int, int], object] = {}
    if memory and e.usages is not None and _live(e.interval):
        for key, lit, size in zip(keys, lits, row(e.usages).tolist()):
            if size > 0:
                use[key] = size
                every[key] = lit
    return {}, every, use, 0


def _link_dense(m, xu, xv, du, dv, new) -> int:
    """The auto-sharding form: each row of pair literals sums to its u literal, each column to its v literal."""
    rows: dict[int, list] = {}
    cols: dict[int, list] = {}
    for (a, b), lit in new.items():
        rows.setdefault(a, []).append(lit)
        cols.setdefault(b, []).append(lit)
    for a, lits in rows.items():
        m.add(sum(lits) == xu[a])
    for b, lits in cols.items():
        m.add(sum(lits) == xv[b])
    return len(rows) + len(cols)


def _link(m, xu, xv, du, dv, need, new, ok) -> int:
    """Row and column links making each pair literal the AND of its endpoints; forbidden pairs excluded."""
    count = 0
    for axis, (d_this, d_other, x_this, x_other) in enumerate(((du, dv, xu, xv), (dv, du, xv, xu))):
        nz = need if axis == 0 else need.T
        allow = ok if axis == 0 else ok.T
        for a in range(len(d_this)):
            own = int(d_this[a])
            cols = np.flatnonzero(nz[a])
            if len(cols):
                ys = [new[(own, int(d_other[b])) if axis == 0 else (int(d_other[b]), own)] for b in cols]
                m.add(sum(ys) <= x_this[own])
                m.add(sum(ys) >= x_this[own] + sum(x_other[int(d_other[b])] for b in cols) - 1)
                count += 2
            if axis == 0 and not allow[a].all():  # forbidden pairs of this row
                bad, good = np.flatnonzero(~allow[a]), np.flatnonzero(allow[a])
                if len(bad) <= len(good):
                    m.add(x_this[own] + sum(x_other[int(d_other[b])] for b in bad) <= 1)
                else:
                    m.add(sum(x_other[int(d_other[b])] for b in good) >= x_this[own])
                count += 1
    return count


def _buffer_items(f, red, x, pair_lit, edge_use):
    """Every buffer that may exist: (key, lower, upper, {size: [(candidate or pair, literal)]})."""
    items = []
    for i, n in enumerate(f.nodes):
        if not _live(n.interval):
            continue
        sizes: dict[int, list] = {}
        for s, lit in x[i].items():
            if n.usages[s] > 0:
                sizes.setdefault(int(n.usages[s]), []).append((s, lit))
        if sizes:
            items.append((("node", i), n.interval[0], n.interval[1], sizes))
    for k, e in enumerate(f.edges):
        if not edge_use[k]:
            continue
        sizes = {}
        for pair, size in edge_use[k].items():
            sizes.setdefault(size, []).append((pair, pair_lit[k][pair]))
        items.append((("edge", k), e.interval[0], e.interval[1], sizes))
    return items


def _usage_lin(sizes: dict[int, list], exactly_one: bool) -> _Lin:
    """The buffer's live bytes; when one option is always chosen, the smallest size is a constant."""
    lin = _Lin()
    options = [(lit, size) for size, group in sizes.items() for _, lit in group]
    base = min(size for _, size in options) if exactly_one else 0
    lin.const += base
    for lit, size in options:
        lin.add(lit, size - base)
    return lin


def _capacity(m, f, red, x, pair_lit, edge_use) -> int:
    """Linear capacity constraints at the maximal sets of simultaneously live buffers."""
    limit = memory_limit(f)
    items = _buffer_items(f, red, x, pair_lit, edge_use)
    lins = []
    for key, _, _, sizes in items:
        covers = key[0] == "node" and sum(len(g) for g in sizes.values()) == len(x[key[1]])
        lins.append(_usage_lin(sizes, covers))
    starts: dict[int, list[int]] = {}
    ends: dict[int, list[int]] = {}
    for j, (_, lo, hi, _) in enumerate(items):
        starts.setdefault(lo, []).append(j)
        ends.setdefault(hi, []).append(j)
    points = sorted(set(starts) | set(ends))
    live: set[int] = set()
    count = 0
    for p_idx, p in enumerate(points):
        live -= set(ends.get(p, []))
        live |= set(starts.get(p, []))
        nxt = points[p_idx + 1] if p_idx + 1 < len(points) else None
        if not starts.get(p) or nxt is None or not ends.get(nxt):
            continue  # not a maximal live set: the next segment holds a superset
        total = _Lin()
        for j in sorted(live):
            total.vars.extend(lins[j].vars)
            total.coefs.extend(lins[j].coefs)
            total.const += lins[j].const
        if total.bounds()[1] <= limit:
            continue
        m.add(total.expr() <= limit - total.const)
        count += 1
    return count


def _placement(m, f, red, x, pair_lit, edge_use, fixed):
    """Optional time x address intervals of every buffer that may exist, in one NoOverlap2D."""
    cap, align = f.placement.capacity, f.placement.alignment
    groups: list[tuple[object, str, int, frozenset]] = []
    addresses: dict[BufferKey, object] = {}
    xs, ys = [], []
    items = _buffer_items(f, red, x, pair_lit, edge_use)
    free = [(lo, hi) for key, lo, hi, _ in items if key not in fixed]
    for key, lo, hi, sizes in items:
        if key in fixed:
            if not any(flo < hi and lo < fhi for flo, fhi in free):
                continue
            q = m.new_constant(fixed[key] // align)
        else:
            q = m.new_int_var(0, (cap - min(sizes)) // align, f"q_{key[0]}{key[1]}")
            addresses[key] = q
        smallest = min(sizes)
        for size, group in sorted(sizes.items()):
            lits = [lit for _, lit in group]
            members = frozenset(member for member, _ in group)
            if len(lits) == 1:
                present = lits[0]
            else:
                present = m.new_bool_var(f"p_{key[0]}{key[1]}_{size}")
                m.add(present == sum(lits))
                groups.append((present, key[0], key[1], members))
            if size > smallest:
                if isinstance(present, int):
                    m.add(align * q + size <= cap)
                else:
                    m.add(align * q + size <= cap).only_enforce_if(present)
            if isinstance(present, int):
                xs.append(m.new_fixed_size_interval_var(lo, hi - lo, f"t_{key[0]}{key[1]}_{size}"))
                ys.append(m.new_fixed_size_interval_var(align * q, size, f"a_{key[0]}{key[1]}_{size}"))
            else:
                xs.append(m.new_optional_fixed_size_interval_var(lo, hi - lo, present, f"t_{key[0]}{key[1]}_{size}"))
                ys.append(
                    m.new_optional_fixed_size_interval_var(align * q, size, present, f"a_{key[0]}{key[1]}_{size}")
                )
    if len(xs) > 1:
        m.add_no_overlap_2d(xs, ys)
    return groups, addresses
