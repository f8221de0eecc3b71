"""The Formulation as a mixed-integer linear program (PuLP), and the domain reduction before it.

Model (the auto-sharding form, kept compact):

* ``x[i,s]`` binary, one-hot per node; a node left with one candidate has no
  variable (its literal is the constant 1);
* edges between the same two nodes share one set of pair variables ``y[a,b]``,
  continuous in [0, 1] and only for allowed pairs, tied to the endpoints by
  ``sum_b y[a,b] = x[u,a]`` and ``sum_a y[a,b] = x[v,b]`` (|S_u|+|S_v| rows, not
  3·|S_u|·|S_v|); integral ``x`` makes ``y`` integral. If one endpoint is
  fixed, the pair literal is the other endpoint's ``x``;
* max terms as an epigraph ``z >= alternative`` (exact, since ``z`` is minimised),
  each alternative shifted by its least value so its coefficients are differences;
* the objective and epigraph rows in units of ``MilpModel.unit`` picoseconds, a
  power of two chosen so no coefficient exceeds ``MAX_COEFFICIENT``: picosecond
  costs of a millisecond op (~4e9) next to 0/1 literals break the LP's
  tolerances, and HiGHS then declares a feasible model infeasible, which
  with a MIP start reads as "the start is optimal" (issue 16). Dividing integers by
  a power of two is exact in floating point;
* capacity rows only at the time steps whose live set is maximal (every other
  step's live set is a subset of one of them, and usages are non-negative).

Domain reduction removes candidates and pairs that cannot be in a better
solution than the incumbent (``LB - min_term + cost > incumbent``, exact), that
exceed the memory limit on their own, or that lost every partner on an edge.
Costs of 1e18 (IOPDDL's "never") vanish this way whenever the incumbent is
finite, which keeps the LP's coefficients small. Without a finite incumbent,
costs ``>= HUGE`` are excluded heuristically where a finite alternative exists;
``Domains.floor`` then records the least objective any excluded assignment can
have, so the caller can still prove (or refuse to claim) optimality.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pulp

from spyreopt.model.formulation import BufferSpec, Formulation, affine_value

HUGE = 2**50
"""Costs at or above this break double precision in an LP next to ordinary costs."""

MAX_COEFFICIENT = 2**20
"""Largest objective or epigraph coefficient handed to the solver, in model units (HiGHS tolerances are ~1e-7)."""

GroupKey = tuple[int, int]


def memory_limit(f: Formulation) -> int | None:
    """The per-step limit every assignment must meet: usage_limit and placement capacity, whichever is lower."""
    limits = [x for x in (f.usage_limit, f.placement and f.placement.capacity) if x is not None]
    return min(limits) if limits else None


def edge_groups(f: Formulation) -> tuple[dict[GroupKey, list[int]], list[tuple[GroupKey, bool]]]:
    """Edges grouped by their unordered node pair; per edge its group and whether it is transposed."""
    groups: dict[GroupKey, list[int]] = {}
    of_edge = []
    for k, e in enumerate(f.edges):
        key = (min(e.u, e.v), max(e.u, e.v))
        groups.setdefault(key, []).append(k)
        of_edge.append((key, e.u != key[0]))
    return groups, of_edge


def _oriented(table: np.ndarray, transposed: bool) -> np.ndarray:
    return table.T if transposed else table


@dataclass
class Domains:
    """Candidates and pairs that remain, and what the heuristic exclusion may have cost."""

    node_ok: list[np.ndarray]  # bool [S_i]
    pair_ok: list[np.ndarray]  # bool [S_u, S_v] per edge (same mask for edges of one group)
    floor: int | None  # least objective of an assignment using a heuristically excluded item
    removed: int  # candidates + pairs removed

    @property
    def feasible(self) -> bool:
        return all(ok.any() for ok in self.node_ok)


def reduce_domains(f: Formulation, incumbent: int | None) -> Domains:
    """Remove what no solution better than ``incumbent`` (or no feasible solution) can use."""
    limit = memory_limit(f)
    node_ok = []
    for n in f.nodes:
        ok = np.ones(n.num_candidates, dtype=bool)
        if limit is not None and n.interval[1] > n.interval[0]:
            ok &= n.usages <= limit
        node_ok.append(ok)
    pair_ok = []
    for e in f.edges:
        ok = np.ones(e.costs.shape, dtype=bool) if e.allowed is None else e.allowed.astype(bool).copy()
        if e.u == e.v:
            ok &= np.eye(*ok.shape, dtype=bool)
        if limit is not None and e.usages is not None and e.interval[1] > e.interval[0]:
            ok &= e.usages <= limit
        pair_ok.append(ok)
    before = sum(int(ok.sum()) for ok in node_ok + pair_ok)
    groups, of_edge = edge_groups(f)
    floor = None
    if _propagate(f, groups, of_edge, node_ok, pair_ok) and (incumbent is None or incumbent >= HUGE):
        floor = _exclude_huge(f, node_ok, pair_ok)
    while _propagate(f, groups, of_edge, node_ok, pair_ok) and incumbent is not None:
        if not _prune_by_cost(f, node_ok, pair_ok, incumbent):
            break
    after = sum(int(ok.sum()) for ok in node_ok + pair_ok)
    return Domains(node_ok, pair_ok, floor, before - after)


def _propagate(f, groups, of_edge, node_ok, pair_ok) -> bool:
    """Arc consistency over edge groups; False when some node has no candidate left."""
    changed = True
    while changed:
        changed = False
        for (u, v), members in groups.items():
            mask = np.outer(node_ok[u], node_ok[v])
            for k in members:
                mask &= _oriented(pair_ok[k], of_edge[k][1])
            if u == v:
                new_u, new_v = node_ok[u] & np.diagonal(mask), None
            else:
                new_u, new_v = node_ok[u] & mask.any(axis=1), node_ok[v] & mask.any(axis=0)
            for k in members:
                pair_ok[k] = _oriented(mask, of_edge[k][1]).copy()
            for j, new in ((u, new_u), (v, new_v)):
                if new is not None and not np.array_equal(new, node_ok[j]):
                    node_ok[j] = new
                    changed = True
    return all(ok.any() for ok in node_ok)


def _lower_bound(f: Formulation, node_ok, pair_ok) -> tuple[int, list[int], list[int]]:
    """A lower bound on every remaining assignment, with each node's and edge's minimum cost."""
    node_min = [int(n.costs[ok].min()) for n, ok in zip(f.nodes, node_ok)]
    edge_min = [int(e.costs[ok].min()) if ok.any() else 0 for e, ok in zip(f.edges, pair_ok)]
    total = sum(node_min) + sum(edge_min)
    for m in f.max_terms:
        total += max(
            int(a.unary[node_ok[m.node]].min())
            + sum(int(t[pair_ok[k]].min()) for k, t in a.edge_parts if pair_ok[k].any())
            for a in m.alternatives
        )
    return total, node_min, edge_min


def _exclude_huge(f: Formulation, node_ok, pair_ok) -> int | None:
    """Drop costs >= HUGE where a finite alternative remains; return the floor of what was dropped."""
    lb, node_min, edge_min = _lower_bound(f, node_ok, pair_ok)
    floor = None
    for costs, ok, m in [(n.costs, node_ok[i], node_min[i]) for i, n in enumerate(f.nodes)] + [
        (e.costs, pair_ok[k], edge_min[k]) for k, e in enumerate(f.edges)
    ]:
        huge = ok & (costs >= HUGE)
        if huge.any() and (ok & ~huge).any():
            least = lb - m + int(costs[huge].min())
            floor = least if floor is None else min(floor, least)
            ok &= ~huge
    return floor


def _prune_by_cost(f: Formulation, node_ok, pair_ok, incumbent: int) -> bool:
    """Remove items whose cost alone lifts the bound above the incumbent; True if any went."""
    lb, node_min, edge_min = _lower_bound(f, node_ok, pair_ok)
    slack = min(incumbent - lb, 2**62)
    removed = False
    for costs, ok, m in [(n.costs, node_ok[i], node_min[i]) for i, n in enumerate(f.nodes)] + [
        (e.costs, pair_ok[k], edge_min[k]) for k, e in enumerate(f.edges)
    ]:
        worse = ok & (costs - m > slack)
        if worse.any():
            ok &= ~worse
            removed = True
    return removed


class _Lin:
    """A linear expression over literals, with an exact integer constant."""

    __slots__ = ("terms", "const")

    def __init__(self) -> None:
        self.terms: dict[pulp.LpVariable, float] = {}
        self.const = 0

    def add(self, lit, coef: int) -> None:
        if coef == 0:
            return
        if lit is None:
            self.const += int(coef)
        else:
            self.terms[lit] = self.terms.get(lit, 0.0) + float(coef)

    def expr(self, unit: int = 1) -> pulp.LpAffineExpression:
        """The terms divided by ``unit`` (a power of two: exact)."""
        return pulp.LpAffineExpression({v: c / unit for v, c in self.terms.items()} if unit != 1 else self.terms)

    def largest(self) -> float:
        return max((abs(c) for c in self.terms.values()), default=0.0)


class ModelTimeout(Exception):
    """Building the model did not finish before the deadline."""


class MilpModel:
    """The PuLP problem of a Formulation over reduced domains, and the maps back to assignments."""

    def __init__(self, f: Formulation, dom: Domains, deadline: float | None = None):
        self.f = f
        self.dom = dom
        self.deadline = deadline
        self.prob = pulp.LpProblem(f.name.replace(" ", "_") or "problem", pulp.LpMinimize)
        self.cuts = 0
        self.infeasible: str | None = None  # why the model has no solution, when known before solving
        self._nodes()
        self._pairs()
        obj, rows = self._objective()
        self.unit = _unit(max([obj.largest()] + [max(lin.largest(), abs(lin.const)) for _, lin in rows]))
        self.offset = obj.const  # exact integer part of the objective (picoseconds), kept out of the solver
        self.prob.setObjective(obj.expr(self.unit) + pulp.lpSum(self.z))
        for t, (z, lin) in enumerate(rows):  # z >= lin (both in units of self.unit)
            self._add(
                pulp.LpConstraint(z - lin.expr(self.unit), pulp.LpConstraintGE, rhs=lin.const / self.unit), f"max_{t}"
            )
        self._capacity()

    # ---- variables ---------------------------------------------------------
    def _nodes(self) -> None:
        self.x: list[dict[int, pulp.LpVariable | None]] = []
        for i, ok in enumerate(self.dom.node_ok):
            cands = [int(s) for s in np.flatnonzero(ok)]
            if len(cands) == 1:
                self.x.append({cands[0]: None})
                continue
            lits = {s: self.prob.add_variable(f"x_{i}_{s}", 0, 1, pulp.LpInteger) for s in cands}
            self.x.append(lits)
            self._add(pulp.lpSum(lits.values()) == 1, f"one_{i}")

    def _pairs(self) -> None:
        groups, self.of_edge = edge_groups(self.f)
        self.pair_lits: dict[GroupKey, dict[tuple[int, int], pulp.LpVariable | None]] = {}
        for (u, v), members in groups.items():
            self._check_deadline()
            k = members[0]
            mask = _oriented(self.dom.pair_ok[k], self.of_edge[k][1])
            pairs = [(int(a), int(b)) for a, b in np.argwhere(mask)]
            if u == v:
                lits = {(a, b): self.x[u][a] for a, b in pairs}
            elif len(self.x[u]) == 1:
                lits = {(a, b): self.x[v][b] for a, b in pairs}
            elif len(self.x[v]) == 1:
                lits = {(a, b): self.x[u][a] for a, b in pairs}
            else:
                lits = {(a, b): self.prob.add_variable(f"y_{u}_{v}_{a}_{b}", 0, 1) for a, b in pairs}
                rows: dict[int, dict] = {a: {} for a in self.x[u]}
                cols: dict[int, dict] = {b: {} for b in self.x[v]}
                for (a, b), lit in lits.items():
                    rows[a][lit] = 1.0
                    cols[b][lit] = 1.0
                for end, sums, tag in ((u, rows, "row"), (v, cols, "col")):
                    for s, terms in sums.items():
                        terms[self.x[end][s]] = -1.0
                        self._add(pulp.LpConstraint(pulp.LpAffineExpression(terms), rhs=0), f"{tag}_{u}_{v}_{s}")
            self.pair_lits[(u, v)] = lits

    def _check_deadline(self) -> None:
        """PuLP builds about 30k variables a second: a model that cannot be built in time is abandoned."""
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise ModelTimeout(f"built {len(self.prob.variables())} variables when the time limit ran out")

    def edge_pairs(self, k: int) -> list[tuple[int, int, pulp.LpVariable | None]]:
        """Edge k's remaining pairs (in its own orientation) with their literals."""
        key, transposed = self.of_edge[k]
        lits = self.pair_lits[key]
        return [((b, a, lit) if transposed else (a, b, lit)) for (a, b), lit in lits.items()]

    # ---- objective ---------------------------------------------------------
    def _objective(self) -> tuple[_Lin, list[tuple[pulp.LpVariable, _Lin]]]:
        """The objective (picoseconds) and the epigraph rows ``z >= lin`` of every max term alternative.

        Each max term contributes ``base + unit·z`` with ``z >= 0`` (``z`` is not in ``obj``): ``base`` is the
        largest constant part among its alternatives, each alternative keeps
        its literals' costs above their group's minimum (one literal per group
        is 1), so every coefficient is a difference, never a raw time.
        """
        f = self.f
        obj = _Lin()
        for i, n in enumerate(f.nodes):
            m = int(n.costs[self.dom.node_ok[i]].min())
            obj.const += m
            for s, lit in self.x[i].items():
                obj.add(lit, int(n.costs[s]) - m)
        for k, e in enumerate(f.edges):
            pairs = self.edge_pairs(k)
            m = min(int(e.costs[a, b]) for a, b, _ in pairs)
            obj.const += m
            for a, b, lit in pairs:
                obj.add(lit, int(e.costs[a, b]) - m)
        self.z, self.z_base, rows = [], [], []
        for t, term in enumerate(f.max_terms):
            alts = []
            for alt in term.alternatives:
                lin = _Lin()
                groups = [[(lit, int(alt.unary[s])) for s, lit in self.x[term.node].items()]]
                groups += [[(lit, int(table[a, b])) for a, b, lit in self.edge_pairs(k)] for k, table in alt.edge_parts]
                for group in groups:
                    m = min(c for _, c in group)
                    lin.const += m
                    for lit, c in group:
                        lin.add(lit, c - m)
                alts.append(lin)
            base = max(lin.const for lin in alts)
            z = self.prob.add_variable(f"z_{t}", 0)
            self.z.append(z)
            self.z_base.append(base)
            obj.const += base
            for lin in alts:
                lin.const -= base
                rows.append((z, lin))
        return obj, rows

    # ---- memory ------------------------------------------------------------
    def _usage_exprs(self, align: int) -> list[tuple[int, int, _Lin]]:
        """(lower, upper, usage) of every buffer that can hold memory, sizes rounded up to ``align``."""
        out = []
        for i, n in enumerate(self.f.nodes):
            if n.interval[1] > n.interval[0]:
                lin = _Lin()
                for s, lit in self.x[i].items():
                    lin.add(lit, _round_up(int(n.usages[s]), align))
                if lin.terms or lin.const:
                    out.append((n.interval[0], n.interval[1], lin))
        for k, e in enumerate(self.f.edges):
            if e.usages is not None and e.interval[1] > e.interval[0]:
                lin = _Lin()
                for a, b, lit in self.edge_pairs(k):
                    lin.add(lit, _round_up(int(e.usages[a, b]), align))
                if lin.terms or lin.const:
                    out.append((e.interval[0], e.interval[1], lin))
        return out

    def _capacity(self) -> None:
        for limit, align in capacity_families(self.f):
            buffers = self._usage_exprs(align)
            for t in _maximal_steps([(lo, hi) for lo, hi, _ in buffers], self._has_negative_usage()):
                lin = _Lin()
                for lo, hi, b in buffers:
                    if lo <= t < hi:
                        lin.const += b.const
                        for var, coef in b.terms.items():
                            lin.add(var, coef)
                if not lin.terms:
                    if lin.const > limit:
                        self.infeasible = f"time step {t}: fixed usage {lin.const} exceeds limit {limit}"
                    continue
                self._add(pulp.LpConstraint(lin.expr(), pulp.LpConstraintLE, rhs=limit - lin.const), f"cap{align}_{t}")

    def _has_negative_usage(self) -> bool:
        return any((n.usages < 0).any() for n in self.f.nodes) or any(
            e.usages is not None and (e.usages < 0).any() for e in self.f.edges
        )

    def add_nogood(self, specs: list[BufferSpec]) -> None:
        """Exclude every assignment holding each of these buffers at least this large (placement failed)."""
        lin = _Lin()
        for spec in specs:
            kind, idx = spec.key
            if kind == "node":
                usages = self.f.nodes[idx].usages
                for s, lit in self.x[idx].items():
                    if usages[s] >= spec.size:
                        lin.add(lit, 1)
            else:
                usages = self.f.edges[idx].usages
                for a, b, lit in self.edge_pairs(idx):
                    if usages[a, b] >= spec.size:
                        lin.add(lit, 1)
        self.cuts += 1
        if not lin.terms:  # every remaining assignment holds these buffers
            self.infeasible = f"the fixed buffers {[spec.key for spec in specs]} cannot be placed"
            return
        self._add(
            pulp.LpConstraint(lin.expr(), pulp.LpConstraintLE, rhs=len(specs) - 1 - lin.const), f"nogood_{self.cuts}"
        )

    # ---- solutions ---------------------------------------------------------
    def start_values(self, assignment) -> dict[pulp.LpVariable, float] | None:
        """Every variable's value at a full assignment, or None if it uses a removed candidate or pair."""
        values: dict[pulp.LpVariable, float] = {}
        for i, lits in enumerate(self.x):
            if assignment[i] not in lits:
                return None
            for s, lit in lits.items():
                if lit is not None:
                    values[lit] = float(s == assignment[i])
        for (u, v), lits in self.pair_lits.items():
            chosen = (assignment[u], assignment[v])
            if chosen not in lits:
                return None
            for pair, lit in lits.items():
                if lit is not None:
                    values[lit] = float(pair == chosen)
        for z, base, term in zip(self.z, self.z_base, self.f.max_terms):
            top = max(affine_value(a, term.node, self.f.edges, assignment) for a in term.alternatives)
            values[z] = (top - base) / self.unit
        return values

    def assignment(self) -> tuple[int, ...]:
        """The solver's choice per node (the largest x, robust to tolerances)."""
        return tuple(max(lits, key=lambda s: 1.0 if lits[s] is None else lits[s].varValue or 0.0) for lits in self.x)

    def size(self) -> dict[str, int]:
        variables = self.prob.variables()
        return {
            "variables": len(variables),
            "integer_variables": sum(v.cat == pulp.LpInteger for v in variables),
            "constraints": len(self.prob.constraints()),
        }

    def _add(self, constraint: pulp.LpConstraint, name: str) -> None:
        self.prob.addConstraint(constraint, name)


def capacity_families(f: Formulation) -> list[tuple[int, int]]:
    """(limit, alignment) of each family of capacity rows.

    Raw usage against ``usage_limit``; with placement, sizes rounded up to the
    alignment against the capacity rounded up to it: co-live buffers at aligned
    offsets occupy disjoint aligned blocks, the topmost ending by then. This
    cuts off sets that fit in bytes but can never be placed.
    """
    out = []
    if f.usage_limit is not None:
        out.append((f.usage_limit, 1))
    if f.placement is not None:
        align = f.placement.alignment
        cap = _round_up(f.placement.capacity, align)
        if align > 1 or f.usage_limit is None or cap < f.usage_limit:
            out.append((cap, align))
    return out


def _unit(largest: float) -> int:
    """The least power of two that brings ``largest`` down to ``MAX_COEFFICIENT`` or below."""
    unit = 1
    while largest / unit > MAX_COEFFICIENT:
        unit *= 2
    return unit


def _round_up(size: int, align: int) -> int:
    return -(-size // align) * align


def _maximal_steps(intervals: list[tuple[int, int]], keep_all: bool) -> list[int]:
    """One step per segment whose live set is maximal (something starts at its start, ends at its end)."""
    starts = {lo for lo, _ in intervals}
    ends = {hi for _, hi in intervals}
    bounds = sorted(starts | ends)
    return [lo for lo, hi in zip(bounds, bounds[1:]) if keep_all or (lo in starts and hi in ends)]
