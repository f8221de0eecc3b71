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

Domains come from the shared presolve (``presolve.domains``), bounded by the
checked incumbent: costs of 1e18 (IOPDDL's "never") vanish that way whenever the
incumbent is finite, which keeps the LP's coefficients small. Without a finite
incumbent (or with one ``>= HUGE``) the presolve's huge-cost rule runs too;
``Domains.floor`` then bounds every assignment it excluded, so the caller can
still prove (or refuse to claim) optimality.
"""

from __future__ import annotations

import time

import numpy as np
import pulp

from spyreopt.model.formulation import BufferSpec, Formulation, affine_value
from spyreopt.solvers.presolve import Domains, domains

HUGE = 2**50
"""Costs at or above this break double precision in an LP next to ordinary costs."""

MAX_COEFFICIENT = 2**20
"""Largest objective or epigraph coefficient handed to the solver, in model units (HiGHS tolerances are ~1e-7)."""

GroupKey = tuple[int, int]


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


def milp_domains(f: Formulation, incumbent: int | None) -> Domains:
    """The shared presolve's domains, bounded by the checked ``incumbent``; huge costs go when it cannot remove them."""
    return domains(f, upper_bound=incumbent, forbid_huge=incumbent is None or incumbent >= HUGE)


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
        for i, ok in enumerate(self.dom.masks):
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
            mask = self._group_mask(u, v, members)
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

    def _group_mask(self, u: int, v: int, members: list[int]) -> np.ndarray:
        """Pairs of (u, v) every edge of the group allows (a loop reads its diagonal)."""
        mask = np.outer(self.dom.masks[u], self.dom.masks[v])
        for k in members:
            mask &= _oriented(self.dom.effective(self.f, k), self.of_edge[k][1])
        if u == v:
            mask &= np.eye(len(mask), dtype=bool)
        return mask

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
            m = int(n.costs[self.dom.masks[i]].min())
            obj.const += m
            for s, lit in self.x[i].items():
                obj.add(lit, int(n.costs[s]) - m)
        for k, e in enumerate(f.edges):
            self._check_deadline()
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
            self._check_deadline()
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
