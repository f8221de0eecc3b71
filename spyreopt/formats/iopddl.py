"""IOPDDL contest instances (ASPLOS 2025): read, judge and score like the contest; load into a Formulation.

An instance is ``{"problem": {"name", "nodes": {"intervals", "costs", "usages"},
"edges": {"nodes", "costs"}, "usage_limit"}}``. Node ``i`` picks strategy ``s``:
cost ``costs[i][s]``, memory ``usages[i][s]`` while live (half-open interval;
``[0, 0]`` is never live). Edge ``k`` over nodes ``(u, v)`` costs
``edges.costs[k][s_u * len(costs[v]) + s_v]``; parallel edges all count. A
solution is infeasible when the live usage at some time step exceeds
``usage_limit``.

This is the package's one IOPDDL module: one array form of a document
(``Instance``, from ``read_instance`` or ``validate``), one judge
(``evaluate_iopddl``), one table of the contest's time limits and best costs
(``contest_table``, behind ``score``). The judge is written from the contest's
definition, in Python integers, over the validated arrays only: it shares
nothing with ``Formulation.evaluate`` or the contest engine's reductions, so
each checks the others.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

from spyreopt.errors import FormatError
from spyreopt.formats.iopddl_arrays import Instance, check_int, validate
from spyreopt.formats.iopddl_read import read_instance, read_json
from spyreopt.model.formulation import Edge, Formulation, Node

__all__ = [
    "Instance",
    "best_known",
    "contest_table",
    "evaluate_iopddl",
    "instance_of",
    "load_iopddl",
    "read_instance",
    "read_json",
    "save_solution",
    "score",
    "validate",
]


@cache
def contest_table() -> dict[str, dict[str, int]]:
    """Time limit (s) and best contest cost of all 25 public instances, by problem name."""
    text = resources.files("spyreopt.formats").joinpath("iopddl_instances.json").read_text()
    return json.loads(text)["instances"]


def best_known(name: str) -> int | None:
    """The best cost any of the 20 contest teams reached on the instance, None for an unknown one."""
    entry = contest_table().get(name)
    return None if entry is None else entry["best_cost"]


def instance_of(source: str | PathLike | dict | Instance) -> Instance:
    """The validated arrays of a file, a parsed document or an ``Instance``."""
    if isinstance(source, Instance):
        return source
    if isinstance(source, (str, PathLike)):
        return read_instance(source)
    return validate(source)


# ---- into the Formulation --------------------------------------------------
def load_iopddl(source: str | PathLike | dict | Instance) -> Formulation:
    """A Formulation whose ``evaluate`` and ``violations`` match the contest on every solution.

    Costs keep their contest values (1e18 entries stay costs, as in the
    contest's evaluator, not forbidden pairs); the cost unit is abstract (1.0).
    """
    a = instance_of(source)
    eu, ev = a.eu, a.ev
    nodes = tuple(
        Node(f"n{i}", a.cost[a.off[i] : a.off[i + 1]].copy(), a.usage[a.off[i] : a.off[i + 1]].copy(), (lo, hi))
        for i, (lo, hi) in enumerate(zip(a.lo.tolist(), a.hi.tolist()))
    )
    k = a.k
    edges = tuple(
        Edge(u, v, a.ecost[a.eoff[j] : a.eoff[j + 1]].reshape(k[u], k[v]).copy())
        for j, (u, v) in enumerate(zip(eu.tolist(), ev.tolist()))
    )
    return Formulation(nodes=nodes, edges=edges, usage_limit=a.usage_limit, name=a.name)


# ---- the contest's evaluation ---------------------------------------------
def evaluate_iopddl(source: str | PathLike | dict | Instance, solution) -> tuple[int, bool, dict[str, Any]]:
    """``(cost, feasible, details)`` of a solution, computed as the contest does, in Python ints.

    ``details`` holds the node and edge cost parts, the peak live usage and its
    first time step, the limit, and the time steps over the limit.
    """
    a = instance_of(source)
    if isinstance(solution, (str, bytes)) or not hasattr(solution, "__len__"):
        raise FormatError(f"solution: expected a list of strategy indices, got {type(solution).__name__}")
    if len(solution) != a.n:
        raise FormatError(f"solution: {len(solution)} entries, the problem has {a.n} nodes")
    k = a.k.tolist()
    choice = []
    for i, s in enumerate(solution):
        s = check_int(int(s) if isinstance(s, np.integer) else s, f"solution[{i}]")
        if not 0 <= s < k[i]:
            raise FormatError(f"solution[{i}]: strategy {s} out of range 0..{k[i] - 1}")
        choice.append(s)

    off = a.off.tolist()
    picked = [off[i] + s for i, s in enumerate(choice)]
    node_cost = sum(a.cost[picked].tolist())
    ends, endoff, eoff = a.ends.tolist(), a.endoff.tolist(), a.eoff.tolist()
    entries = []
    for j in range(a.m):
        index = 0
        for w in ends[endoff[j] : endoff[j + 1]]:  # row-major over the edge's nodes, first node major
            index = index * k[w] + choice[w]
        entries.append(eoff[j] + index)
    edge_cost = sum(a.ecost[entries].tolist())

    # live usage per step by a difference array over half-open intervals
    use = a.usage[picked].tolist()
    lo, hi = a.lo.tolist(), a.hi.tolist()
    horizon = max(hi, default=0)
    delta = [0] * (horizon + 1)
    for b, e, u in zip(lo, hi, use):
        if b < e:
            delta[b] += u
            delta[e] -= u
    live, over = 0, []
    peak, peak_step = 0, None
    for t in range(horizon):
        live += delta[t]
        if peak_step is None or live > peak:
            peak, peak_step = live, t
        if a.usage_limit is not None and live > a.usage_limit:
            over.append(t)
    details = {
        "node_cost": node_cost,
        "edge_cost": edge_cost,
        "peak_usage": peak,
        "peak_step": peak_step,
        "usage_limit": a.usage_limit,
        "steps_over_limit": over,
    }
    return node_cost + edge_cost, not over, details


def score(name: str, cost: int, feasible: bool) -> float | None:
    """best_known / cost as in the contest (0.0 when infeasible); None for an instance not in the contest."""
    best = best_known(name)
    if best is None:
        return None
    if not feasible or cost <= 0:
        return 0.0
    return best / cost


def format_score(value: float | None) -> str:
    """A score with enough digits to tell 1.0 from 0.999998 ("n/a" for an unknown instance)."""
    return "n/a" if value is None else f"{value:.6f}"


def save_solution(path: str | PathLike, assignment) -> None:
    """Write the chosen strategy index of every node as a JSON list."""
    Path(path).write_text(json.dumps([int(s) for s in assignment]) + "\n")
