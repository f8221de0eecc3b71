"""IOPDDL contest instances (ASPLOS 2025): load into a Formulation, evaluate like the contest.

An instance is ``{"problem": {"name", "nodes": {"intervals", "costs", "usages"},
"edges": {"nodes", "costs"}, "usage_limit"}}``. Node ``i`` picks strategy ``s``:
cost ``costs[i][s]``, memory ``usages[i][s]`` while live (half-open interval;
``[0, 0]`` is never live). Edge ``k`` over nodes ``(u, v)`` costs
``edges.costs[k][s_u * len(costs[v]) + s_v]``; parallel edges all count. A
solution is infeasible when the live usage at some time step exceeds
``usage_limit``.

``evaluate_iopddl`` is deliberately written from the contest's definition and
not from ``Formulation.evaluate``, so that the two can check each other.
"""

from __future__ import annotations

import gzip
import itertools
import json
import zlib
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from spyreopt.errors import FormatError
from spyreopt.model.formulation import Edge, Formulation, Node

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

BEST_KNOWN: dict[str, int] = {
    "asplos-2025-iopddl-B": 532_843,
    "asplos-2025-iopddl-G": 217_039,
}
"""Best cost of any of the 20 contest teams, by problem name."""


@dataclass(frozen=True)
class IopddlProblem:
    """A validated instance: plain Python ints, exactly as in the file."""

    name: str
    intervals: list[tuple[int, int]]
    costs: list[list[int]]
    usages: list[list[int]]
    edge_nodes: list[list[int]]
    edge_costs: list[list[int]]
    usage_limit: int | None


# ---- reading and validation (the format's one shape check) -----------------
@dataclass(frozen=True)
class IopddlArrays:
    """A validated instance as flat int64 arrays: strategy ``s`` of node ``i`` at ``off[i] + s``.

    Edge ``k`` joins ``ends[endoff[k]:endoff[k+1]]`` (two nodes unless a hyperedge) and its
    row-major table is ``ecost[eoff[k]:eoff[k+1]]``. Both readers build on this: the contest
    engine (``contest.load``) and ``parse_problem`` (Python ints for the exact evaluator).
    """

    name: str
    k: np.ndarray
    off: np.ndarray
    cost: np.ndarray
    usage: np.ndarray
    intervals: np.ndarray  # [n, 2]
    endoff: np.ndarray
    ends: np.ndarray
    eoff: np.ndarray
    ecost: np.ndarray
    usage_limit: int | None


def read_json(path: str | PathLike) -> dict:
    """The JSON document of a plain or gzipped file (detected by content, not by name)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise FormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not raw:
        raise FormatError(f"{path}: the file is empty")
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as exc:
            raise FormatError(f"{path}: not a complete gzip file ({type(exc).__name__}: {exc})") from None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise FormatError(f"{path}: not valid JSON: {exc}") from exc


def validate(data: Any) -> IopddlArrays:
    """Check a contest document (or its ``problem`` member) and flatten it; FormatError names the bad field.

    Vectorised (a 95 MB instance holds four million numbers): element types are checked with one
    pass of ``type`` over the flattened lists, values with array comparisons.
    """
    if isinstance(data, dict) and "problem" in data:
        data = data["problem"]
    p = _require_dict(data, "problem")
    nodes = _require_dict(_member(p, "nodes", "problem"), "problem.nodes")
    edges = _require_dict(_member(p, "edges", "problem"), "problem.edges")
    intervals = _require_list(_member(nodes, "intervals", "problem.nodes"), "problem.nodes.intervals")
    costs = _require_list(_member(nodes, "costs", "problem.nodes"), "problem.nodes.costs")
    usages = _require_list(_member(nodes, "usages", "problem.nodes"), "problem.nodes.usages")
    n = len(costs)
    for field, seq in (("intervals", intervals), ("usages", usages)):
        if len(seq) != n:
            raise FormatError(f"problem.nodes.{field}: {len(seq)} entries, problem.nodes.costs has {n}")
    iv_len = _lengths(intervals, "problem.nodes.intervals")
    if (iv_len != 2).any():
        i = int(np.flatnonzero(iv_len != 2)[0])
        raise FormatError(f"problem.nodes.intervals[{i}]: expected [lower, upper], got {iv_len[i]} numbers")
    iv = _ints(intervals, iv_len, "problem.nodes.intervals").reshape(n, 2)
    bad = (iv[:, 0] < 0) | (iv[:, 1] < iv[:, 0])
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise FormatError(
            f"problem.nodes.intervals[{i}]: {iv[i].tolist()} is not a half-open interval with 0 <= lower <= upper"
        )
    k = _lengths(costs, "problem.nodes.costs")
    if (k == 0).any():
        raise FormatError(f"problem.nodes.costs[{int(np.argmin(k))}]: a node needs at least one strategy")
    ku = _lengths(usages, "problem.nodes.usages")
    if (ku != k).any():
        i = int(np.flatnonzero(ku != k)[0])
        raise FormatError(f"problem.nodes.usages[{i}]: {ku[i]} entries, problem.nodes.costs[{i}] has {k[i]}")
    cost = _ints(costs, k, "problem.nodes.costs")
    usage = _ints(usages, k, "problem.nodes.usages")
    off = _offsets(k)
    if (cost < 0).any():
        j = int(np.flatnonzero(cost < 0)[0])
        i = int(np.searchsorted(off, j, side="right") - 1)
        raise FormatError(f"problem.nodes.costs[{i}][{j - off[i]}]: negative cost {cost[j]}")
    if (usage < 0).any():
        j = int(np.flatnonzero(usage < 0)[0])
        i = int(np.searchsorted(off, j, side="right") - 1)
        raise FormatError(f"problem.nodes.usages[{i}][{j - off[i]}]: negative usage {usage[j]}")
    edge_nodes = _require_list(_member(edges, "nodes", "problem.edges"), "problem.edges.nodes")
    edge_costs = _require_list(_member(edges, "costs", "problem.edges"), "problem.edges.costs")
    if len(edge_costs) != len(edge_nodes):
        raise FormatError(f"problem.edges.costs: {len(edge_costs)} entries, problem.edges.nodes has {len(edge_nodes)}")
    arity = _lengths(edge_nodes, "problem.edges.nodes")
    if (arity == 0).any():
        raise FormatError(f"problem.edges.nodes[{int(np.argmin(arity))}]: an edge needs at least one node")
    ends = _ints(edge_nodes, arity, "problem.edges.nodes")
    endoff = _offsets(arity)
    bad = (ends < 0) | (ends >= n)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        kk = int(np.searchsorted(endoff, j, side="right") - 1)
        raise FormatError(f"problem.edges.nodes[{kk}]: node {ends[j]} out of range 0..{n - 1}")
    size = np.multiply.reduceat(k[ends], endoff[:-1]) if len(ends) else np.zeros(0, np.int64)
    ke = _lengths(edge_costs, "problem.edges.costs")
    if (ke != size).any():
        j = int(np.flatnonzero(ke != size)[0])
        raise FormatError(
            f"problem.edges.costs[{j}]: {ke[j]} entries, the strategy counts of nodes "
            f"{ends[endoff[j] : endoff[j + 1]].tolist()} need {size[j]}"
        )
    ecost = _ints(edge_costs, ke, "problem.edges.costs")
    if (ecost < 0).any():
        j = int(np.flatnonzero(ecost < 0)[0])
        kk = int(np.searchsorted(_offsets(ke), j, side="right") - 1)
        raise FormatError(f"problem.edges.costs[{kk}]: negative cost {ecost[j]}")
    limit = p.get("usage_limit")
    if limit is not None:
        limit = _int(limit, "problem.usage_limit")
        if limit < 0:
            raise FormatError(f"problem.usage_limit: negative limit {limit}")
    name = p.get("name", "iopddl")
    if not isinstance(name, str):
        raise FormatError(f"problem.name: expected a string, got {type(name).__name__}")
    return IopddlArrays(name, k, off, cost, usage, iv, endoff, ends, _offsets(ke), ecost, limit)


def parse_problem(data: Any) -> IopddlProblem:
    """Validate a contest document (or its ``problem`` member) into Python ints; FormatError names the bad field."""
    a = validate(data)

    def rows(flat: np.ndarray, off: np.ndarray) -> list[list[int]]:
        values = flat.tolist()
        bounds = off.tolist()
        return [values[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])]

    intervals = [(lo, hi) for lo, hi in a.intervals.tolist()]
    return IopddlProblem(
        a.name,
        intervals,
        rows(a.cost, a.off),
        rows(a.usage, a.off),
        rows(a.ends, a.endoff),
        rows(a.ecost, a.eoff),
        a.usage_limit,
    )


def _member(d: dict, key: str, where: str) -> Any:
    if key not in d:
        raise FormatError(f"{where}.{key}: missing")
    return d[key]


def _require_dict(x: Any, where: str) -> dict:
    if not isinstance(x, dict):
        raise FormatError(f"{where}: expected an object, got {type(x).__name__}")
    return x


def _require_list(x: Any, where: str) -> list:
    if not isinstance(x, list):
        raise FormatError(f"{where}: expected a list, got {type(x).__name__}")
    return x


def _int(x: Any, where: str) -> int:
    # bool is an int subclass in Python but never a valid number in the format
    if isinstance(x, bool) or not isinstance(x, int):
        raise FormatError(f"{where}: expected an integer, got {x!r}")
    if not INT64_MIN <= x <= INT64_MAX:
        raise FormatError(f"{where}: {x} does not fit in a signed 64-bit integer")
    return x


def _offsets(lengths: np.ndarray) -> np.ndarray:
    off = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=off[1:])
    return off


def _lengths(rows: list, where: str) -> np.ndarray:
    """Length of every row; every row must be a list."""
    if not set(map(type, rows)) <= {list}:
        i = next(i for i, r in enumerate(rows) if type(r) is not list)
        raise FormatError(f"{where}[{i}]: expected a list, got {type(rows[i]).__name__}")
    return np.fromiter(map(len, rows), np.int64, len(rows))


def _ints(rows: list, lengths: np.ndarray, where: str) -> np.ndarray:
    """The rows' entries flattened into int64, or FormatError at the first entry that is no 64-bit integer."""
    flat = list(itertools.chain.from_iterable(rows))
    ok = set(map(type, flat)) <= {int}
    if ok:
        try:
            return np.array(flat, dtype=np.int64).reshape(-1)
        except OverflowError:
            ok = False
    off = _offsets(lengths)
    for j, v in enumerate(flat):  # the slow path only finds the culprit
        i = int(np.searchsorted(off, j, side="right") - 1)
        _int(v, f"{where}[{i}][{j - off[i]}]")
    raise AssertionError("unreachable: a bad entry was detected above")


def _problem_of(source: str | PathLike | dict | IopddlProblem) -> IopddlProblem:
    if isinstance(source, IopddlProblem):
        return source
    if isinstance(source, dict):
        return parse_problem(source)
    return parse_problem(read_json(source))


# ---- into the Formulation --------------------------------------------------
def load_iopddl(source: str | PathLike | dict | IopddlProblem) -> Formulation:
    """A Formulation whose ``evaluate`` and ``violations`` match the contest on every solution.

    Costs keep their contest values (1e18 entries stay costs, as in the
    contest's evaluator, not forbidden pairs); the cost unit is abstract (1.0).
    """
    p = _problem_of(source)
    nodes = tuple(
        Node(f"n{i}", np.array(c, dtype=np.int64), np.array(u, dtype=np.int64), iv)
        for i, (c, u, iv) in enumerate(zip(p.costs, p.usages, p.intervals))
    )
    edges = []
    for k, (ends, c) in enumerate(zip(p.edge_nodes, p.edge_costs)):
        if len(ends) != 2:
            raise FormatError(f"problem.edges.nodes[{k}]: {len(ends)} nodes; the Formulation holds pairwise edges only")
        u, v = ends
        table = np.array(c, dtype=np.int64).reshape(len(p.costs[u]), len(p.costs[v]))
        edges.append(Edge(u, v, table))
    return Formulation(nodes=nodes, edges=tuple(edges), usage_limit=p.usage_limit, name=p.name)


# ---- the contest's evaluation ---------------------------------------------
def evaluate_iopddl(
    source: str | PathLike | dict | IopddlProblem, solution: list[int]
) -> tuple[int, bool, dict[str, Any]]:
    """``(cost, feasible, details)`` of a solution, computed as the contest does, in Python ints.

    ``details`` holds the node and edge cost parts, the peak live usage and its
    first time step, the limit, and the time steps over the limit.
    """
    p = _problem_of(source)
    if isinstance(solution, (str, bytes)) or not hasattr(solution, "__len__"):
        raise FormatError(f"solution: expected a list of strategy indices, got {type(solution).__name__}")
    if len(solution) != len(p.costs):
        raise FormatError(f"solution: {len(solution)} entries, the problem has {len(p.costs)} nodes")
    choice = []
    for i, s in enumerate(solution):
        s = _int(int(s) if isinstance(s, np.integer) else s, f"solution[{i}]")
        if not 0 <= s < len(p.costs[i]):
            raise FormatError(f"solution[{i}]: strategy {s} out of range 0..{len(p.costs[i]) - 1}")
        choice.append(s)

    node_cost = sum(p.costs[i][s] for i, s in enumerate(choice))
    edge_cost = 0
    for ends, table in zip(p.edge_nodes, p.edge_costs):
        index = 0
        for j in ends:  # row-major over the edge's nodes, first node major
            index = index * len(p.costs[j]) + choice[j]
        edge_cost += table[index]

    # live usage per step by a difference array over half-open intervals
    horizon = max((hi for _, hi in p.intervals), default=0)
    delta = [0] * (horizon + 1)
    for (lo, hi), s, use in zip(p.intervals, choice, p.usages):
        if lo < hi:
            delta[lo] += use[s]
            delta[hi] -= use[s]
    live, over = 0, []
    peak, peak_step = 0, None
    for t in range(horizon):
        live += delta[t]
        if peak_step is None or live > peak:
            peak, peak_step = live, t
        if p.usage_limit is not None and live > p.usage_limit:
            over.append(t)
    details = {
        "node_cost": node_cost,
        "edge_cost": edge_cost,
        "peak_usage": peak,
        "peak_step": peak_step,
        "usage_limit": p.usage_limit,
        "steps_over_limit": over,
    }
    return node_cost + edge_cost, not over, details


def score(name: str, cost: int, feasible: bool) -> float | None:
    """best_known / cost as in the contest (0.0 when infeasible); None for an unknown instance."""
    best = BEST_KNOWN.get(name)
    if best is None:
        return None
    if not feasible or cost <= 0:
        return 0.0
    return best / cost


def save_solution(path: str | PathLike, assignment) -> None:
    """Write the chosen strategy index of every node as a JSON list."""
    Path(path).write_text(json.dumps([int(s) for s in assignment]) + "\n")
