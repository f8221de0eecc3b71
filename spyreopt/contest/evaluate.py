"""The contest's judge: cost and feasibility from the JSON document and the solution alone.

Shares nothing with the search (no arrays, no reductions): it reads the parsed
document as the contest's evaluator does, in Python integers, so a bug in the
engine's incremental costs cannot confirm itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from spyreopt.errors import FormatError


@dataclass(frozen=True)
class Verdict:
    """What the contest would say about a solution."""

    cost: int
    feasible: bool
    peak_usage: int
    usage_limit: int | None
    steps_over_limit: int


def judge(doc: dict, solution: list[int]) -> Verdict:
    """Cost (node + edge, exact) and whether the live usage stays within the limit at every step."""
    p = doc["problem"] if "problem" in doc else doc
    costs, usages, intervals = p["nodes"]["costs"], p["nodes"]["usages"], p["nodes"]["intervals"]
    if len(solution) != len(costs):
        raise FormatError(f"solution: {len(solution)} entries, the problem has {len(costs)} nodes")
    choice = [int(s) for s in solution]
    for i, s in enumerate(choice):
        if not 0 <= s < len(costs[i]):
            raise FormatError(f"solution[{i}]: strategy {s} out of range 0..{len(costs[i]) - 1}")
    total = sum(c[s] for c, s in zip(costs, choice))
    for (u, v), table in zip(p["edges"]["nodes"], p["edges"]["costs"]):
        total += table[choice[u] * len(costs[v]) + choice[v]]
    horizon = max((hi for _, hi in intervals), default=0)
    delta = [0] * (horizon + 1)
    for (lo, hi), use, s in zip(intervals, usages, choice):
        if lo < hi:
            delta[lo] += use[s]
            delta[hi] -= use[s]
    limit = p.get("usage_limit")
    live = peak = over = 0
    for t in range(horizon):
        live += delta[t]
        peak = max(peak, live)
        if limit is not None and live > limit:
            over += 1
    return Verdict(total, over == 0, peak, limit, over)
