"""Reduced-cost fixing from the LP relaxation: candidates and pairs whose LP bound exceeds a checked incumbent go.

The LP is the local marginal polytope of the formulation (the auto-sharding
relaxation): ``x[i, s]`` and pair variables ``y[k, a, b]`` in [0, 1], one-hot
rows per node, row and column links per edge, and an epigraph variable per
max term (``z >= alternative``); memory and addresses are left out, which
only weakens the bound. For multipliers ``lam`` (any values; HiGHS's duals are
good ones) the Lagrangian gives, for every assignment ``x`` of the domains,
``cost(x) >= L + sum_j max(d_j, 0) * x_j`` with reduced costs ``d = c - A^T lam``
and ``L = lam^T b + sum_j min over its box of d_j * x_j``. So a candidate or pair
with ``L + d_j > upper_bound`` is in no assignment at least as good as the
incumbent. The products are computed in floating point with an error bound
(each dot product is off by at most ``(n + 2) * eps * sum |terms|``) that is
subtracted before comparing, so the rule never removes an assignment whose
cost is within the bound.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

import numpy as np

from spyreopt.model.formulation import Formulation
from spyreopt.solvers.presolve.masks import Domains
from spyreopt.solvers.presolve.windows import node_windows
from spyreopt.solvers.quiet import quiet_stdout

EPS = np.finfo(np.float64).eps
WHOLE_COLUMNS = 150_000  # a larger LP is cut into windows (HiGHS needs tens of seconds for a million columns)


class _LP:
    """The relaxation's matrices, built column by column with the map back to candidates and pairs."""

    def __init__(self, f: Formulation, dom: Domains, nodes: list[int], edges: list[int], terms: list[int]):
        self.cost: list[float] = []
        self.lo: list[float] = []
        self.hi: list[float] = []
        self.eq: tuple[list[int], list[int], list[float]] = ([], [], [])
        self.ub: tuple[list[int], list[int], list[float]] = ([], [], [])
        self.b_eq: list[float] = []
        self.b_ub: list[float] = []
        self.const = 0
        self.x: dict[int, dict[int, int]] = {}  # node -> candidate -> column
        self.y: dict[int, dict[tuple[int, int], int]] = {}  # edge -> pair -> column
        for i in nodes:
            n = f.nodes[i]
            d = dom.domain(i)
            base = int(n.costs[d].min())
            self.const += base
            self.x[i] = {int(s): self._column(int(n.costs[s]) - base) for s in d}
            row = self._row_eq(1.0)
            for col in self.x[i].values():
                self._entry(self.eq, row, col, 1.0)
        for k in edges:
            self._edge(f, dom, k, f.edges[k])
        for t in terms:
            self._max_term(f, dom, f.max_terms[t])

    def _column(self, cost: float, lo: float = 0.0, hi: float = 1.0) -> int:
        self.cost.append(float(cost))
        self.lo.append(lo)
        self.hi.append(hi)
        return len(self.cost) - 1

    def _row_eq(self, rhs: float) -> int:
        self.b_eq.append(rhs)
        return len(self.b_eq) - 1

    @staticmethod
    def _entry(part, row: int, col: int, value: float) -> None:
        part[0].append(row)
        part[1].append(col)
        part[2].append(value)

    def _pairs(self, f: Formulation, dom: Domains, k: int) -> dict[tuple[int, int], int]:
        """Column of each effective pair of edge k (a loop's pair is its node's candidate)."""
        e = f.edges[k]
        if e.u == e.v:
            return {(s, s): col for s, col in self.x[e.u].items() if dom.allowed[k][s, s]}
        return self.y[k]

    def _edge(self, f: Formulation, dom: Domains, k: int, e) -> None:
        eff = dom.effective(f, k)
        if e.u == e.v:
            self.y[k] = {}
            diag = {s: int(e.costs[s, s]) for s in self.x[e.u] if eff[s, s]}
            base = min(diag.values())
            self.const += base
            for s, c in diag.items():
                self.cost[self.x[e.u][s]] += c - base
            for s in self.x[e.u]:
                if s not in diag:
                    self.hi[self.x[e.u][s]] = 0.0  # the loop forbids this candidate
            return
        pairs = np.argwhere(eff)
        base = int(e.costs[eff].min())
        self.const += base
        cols = {(int(a), int(b)): self._column(int(e.costs[a, b]) - base) for a, b in pairs}
        self.y[k] = cols
        rows = {a: self._row_eq(0.0) for a in self.x[e.u]}
        colrows = {b: self._row_eq(0.0) for b in self.x[e.v]}
        for (a, b), col in cols.items():
            self._entry(self.eq, rows[a], col, 1.0)
            self._entry(self.eq, colrows[b], col, 1.0)
        for a, row in rows.items():
            self._entry(self.eq, row, self.x[e.u][a], -1.0)
        for b, row in colrows.items():
            self._entry(self.eq, row, self.x[e.v][b], -1.0)

    def _max_term(self, f: Formulation, dom: Domains, m) -> None:
        """z >= const + sum(terms) per alternative, each alternative shifted by its least value."""
        alts = []
        for alt in m.alternatives:
            groups = [{self.x[m.node][s]: int(alt.unary[s]) for s in self.x[m.node]}]
            groups += [
                {col: int(table[a, b]) for (a, b), col in self._pairs(f, dom, k).items()} for k, table in alt.edge_parts
            ]
            const = sum(min(g.values()) for g in groups)
            terms: dict[int, int] = {}
            for g in groups:
                low = min(g.values())
                for col, c in g.items():
                    if c != low:
                        terms[col] = terms.get(col, 0) + c - low
            alts.append((const, terms))
        base = max(c for c, _ in alts)
        top = max(c + sum(t.values()) for c, t in alts) - base
        self.const += base
        z = self._column(1.0, 0.0, float(max(top, 0)))
        for const, terms in alts:  # sum(terms) - z <= base - const
            self.b_ub.append(float(base - const))
            row = len(self.b_ub) - 1
            for col, c in terms.items():
                self._entry(self.ub, row, col, float(c))
            self._entry(self.ub, row, z, -1.0)


@dataclass
class _Window:
    """One LP's safe bound and, per candidate and pair, how far fixing it would raise that bound."""

    bound: float
    nodes: list[tuple[np.ndarray, np.ndarray, np.ndarray]]  # per window node: candidates, rise at 1, rise at 0
    edges: list[tuple[np.ndarray, np.ndarray]]  # per window edge: pairs [P, 2], rise at 1


def _run_highs(lp: _LP, time_limit: float) -> np.ndarray | None:
    """Row duals of the LP by HiGHS's dual simplex (equality rows, then ``<=`` rows), or None if not optimal."""
    import highspy  # imported here: it loads only when the LP rule runs (scipy.optimize would cost seconds)

    n, m_eq = len(lp.cost), len(lp.b_eq)
    rows = np.array(lp.eq[0] + [m_eq + r for r in lp.ub[0]], dtype=np.int32)
    cols = np.array(lp.eq[1] + lp.ub[1], dtype=np.int64)
    vals = np.array(lp.eq[2] + lp.ub[2], dtype=np.float64)
    order = np.argsort(cols, kind="stable")
    model = highspy.HighsLp()
    model.num_col_, model.num_row_ = n, m_eq + len(lp.b_ub)
    model.col_cost_, model.col_lower_, model.col_upper_ = lp.cost, lp.lo, lp.hi
    model.row_lower_ = lp.b_eq + [-highspy.kHighsInf] * len(lp.b_ub)
    model.row_upper_ = lp.b_eq + lp.b_ub
    model.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    model.a_matrix_.start_ = np.searchsorted(cols[order], np.arange(n + 1)).astype(np.int32)
    model.a_matrix_.index_ = rows[order]
    model.a_matrix_.value_ = vals[order]
    with quiet_stdout():
        h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)  # HiGHS's thread scheduler is global: the MILP backend's setting, and deterministic
    h.setOptionValue("solver", "simplex")
    h.setOptionValue("simplex_strategy", 1)  # dual simplex: 2-10x faster than the default here, and its duals fix most
    h.setOptionValue("time_limit", max(time_limit, 0.01))
    h.passModel(model)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    return np.array(h.getSolution().row_dual, dtype=np.float64)


def _solve_window(f: Formulation, dom: Domains, part: tuple[list[int], list[int], list[int]], time_limit: float):
    """The LP of one window (its nodes, the edges and max terms inside it), or None if not solved in time."""
    lp = _LP(f, dom, *part)
    y = _run_highs(lp, time_limit)
    if y is None:
        return None
    m_eq = len(lp.b_eq)
    y[m_eq:] = np.minimum(y[m_eq:], 0.0)  # a <= row's multiplier must be <= 0 for the bound to hold
    rows = np.array(lp.eq[0] + [m_eq + r for r in lp.ub[0]], dtype=np.int64)
    cols = np.array(lp.eq[1] + lp.ub[1], dtype=np.int64)
    vals = np.array(lp.eq[2] + lp.ub[2], dtype=np.float64)
    b = np.array(lp.b_eq + lp.b_ub, dtype=np.float64)
    c = np.array(lp.cost)
    lo, hi = np.array(lp.lo), np.array(lp.hi)
    n = len(c)
    d = c - np.bincount(cols, weights=vals * y[rows], minlength=n)
    # error of each reduced cost: (column count + 2) * eps * (|c| + |A|^T |y|)
    mag = np.abs(c) + np.bincount(cols, weights=np.abs(vals * y[rows]), minlength=n)
    err = (np.bincount(cols, minlength=n) + 2) * EPS * mag
    dual = float(y @ b)
    dual_err = (len(y) + 2) * EPS * float(np.abs(y) @ np.abs(b))
    box = np.minimum(d * lo, d * hi)
    box_err = err * np.maximum(np.abs(lo), np.abs(hi))
    lagrange = dual + box.sum() - dual_err - box_err.sum() - len(box) * EPS * np.abs(box).sum()
    lagrange -= 1e-9 * (abs(lagrange) + 1)  # one more margin for the summation above
    # with x_j at 1 the bound rises by (d_j - its box minimum); at 0 by minus its box minimum
    rise_one = d - err - (box + box_err)
    rise_zero = -(box + box_err)
    nodes = []
    for i in part[0]:
        cols = lp.x[i]
        idx = np.array(list(cols.values()))
        nodes.append((np.array(list(cols.keys())), rise_one[idx], rise_zero[idx]))
    edges = []
    for k in part[1]:
        cols = lp.y[k]
        keys = list(cols)
        idx = np.array([cols[p] for p in keys], dtype=np.int64)
        edges.append((np.array(keys, dtype=np.int64).reshape(-1, 2), rise_one[idx] if keys else np.zeros(0)))
    return _Window(lp.const + lagrange, nodes, edges)


def lp_fixing(f: Formulation, dom: Domains, upper_bound: int, time_limit: float) -> tuple[set[int], int | None]:
    """Reduced-cost fixing (module docstring); the nodes whose domains or pairs changed, and the LP bound.

    A formulation whose LP would have more than ``WHOLE_COLUMNS`` columns is
    cut into windows (``windows.node_windows``: its layers, or slices of the
    schedule): each window's LP covers its nodes and the edges and max terms
    inside it, an edge or max term across windows counts at its least value,
    and the sum is still a valid bound. Windows with identical tables are
    solved once. A window whose LP is not solved within the time limit counts
    at its term minima and fixes nothing.
    """
    deadline = time.perf_counter() + time_limit
    parts, floor = _parts(f, dom)
    solved: dict[bytes, _Window | None] = {}
    results = []
    for part in parts:
        key = _signature(f, dom, part)
        if key not in solved:
            solved[key] = _solve_window(f, dom, part, deadline - time.perf_counter())
        results.append(solved[key])
    total = floor + sum(r.bound if r is not None else _part_minima(f, dom, part) for r, part in zip(results, parts))
    changed: set[int] = set()
    for r, (nodes, edges, _) in zip(results, parts):
        if r is None:
            continue
        for i, (cands, one, zero) in zip(nodes, r.nodes):
            gone = total + one > upper_bound
            forced = total + zero > upper_bound  # the candidate cannot be 0: every other one goes
            if forced.any():
                gone = gone | (cands != cands[np.argmax(forced)])
            if gone.any() and not gone.all():
                dom.masks[i][cands[gone]] = False
                dom.counts["lp"] = dom.counts.get("lp", 0) + int(gone.sum())
                changed.add(i)
        for k, (pairs, one) in zip(edges, r.edges):
            gone = total + one > upper_bound
            if gone.any():
                dom.allowed[k][pairs[gone, 0], pairs[gone, 1]] = False
                changed.update((f.edges[k].u, f.edges[k].v))
    return changed, int(np.floor(total))


def _parts(f: Formulation, dom: Domains) -> tuple[list[tuple[list[int], list[int], list[int]]], int]:
    """Per window its nodes, inner edges and inner max terms; and the least value of everything across windows."""
    windows = node_windows(f, dom, WHOLE_COLUMNS)
    where = {i: w for w, nodes in enumerate(windows) for i in nodes}
    edges: list[list[int]] = [[] for _ in windows]
    floor = 0
    for k, e in enumerate(f.edges):
        if where[e.u] == where[e.v]:
            edges[where[e.u]].append(k)
        else:
            floor += int(e.costs[dom.effective(f, k)].min())
    terms: list[list[int]] = [[] for _ in windows]
    for t, m in enumerate(f.max_terms):
        ks = {k for alt in m.alternatives for k, _ in alt.edge_parts}
        if all(where[f.edges[k].u] == where[f.edges[k].v] == where[m.node] for k in ks):
            terms[where[m.node]].append(t)
        else:
            floor += max(
                int(alt.unary[dom.masks[m.node]].min())
                + sum(int(table[dom.effective(f, k)].min()) for k, table in alt.edge_parts)
                for alt in m.alternatives
            )
    return [(w, edges[j], terms[j]) for j, w in enumerate(windows)], floor


def _part_minima(f: Formulation, dom: Domains, part) -> int:
    """The window's term minima: its bound when its LP was not solved."""
    nodes, edges, terms = part
    total = sum(int(f.nodes[i].costs[dom.masks[i]].min()) for i in nodes)
    total += sum(int(f.edges[k].costs[dom.effective(f, k)].min()) for k in edges)
    for t in terms:
        m = f.max_terms[t]
        total += max(
            int(alt.unary[dom.masks[m.node]].min())
            + sum(int(table[dom.effective(f, k)].min()) for k, table in alt.edge_parts)
            for alt in m.alternatives
        )
    return total


def _signature(f: Formulation, dom: Domains, part) -> bytes:
    """Equal for windows whose LPs are identical (same tables in the same order), so each is solved once."""
    nodes, edges, terms = part
    local = {i: j for j, i in enumerate(nodes)}
    local_edge = {k: j for j, k in enumerate(edges)}
    h = hashlib.sha1()
    for i in nodes:
        h.update(f.nodes[i].costs.astype(np.int64).tobytes() + dom.masks[i].tobytes() + b"|")
    for k in edges:
        e = f.edges[k]
        h.update(f"{local[e.u]},{local[e.v]}".encode() + e.costs.astype(np.int64).tobytes())
        h.update(dom.effective(f, k).tobytes() + b"|")
    for t in terms:
        m = f.max_terms[t]
        h.update(f"t{local[m.node]}".encode())
        for alt in m.alternatives:
            h.update(alt.unary.astype(np.int64).tobytes())
            for k, table in alt.edge_parts:
                h.update(f"{local_edge[k]}".encode() + table.astype(np.int64).tobytes())
    return h.digest()
