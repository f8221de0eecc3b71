"""Candidate domains and allowed pairs, and the two rules every other rule leans on.

``Domains`` holds per node a mask of the candidates left and per edge a mask of
the pairs left. ``memory_rule`` and ``arc_consistency`` are rules 1 and 2 of
``presolve.domains``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from spyreopt.model.formulation import Formulation
from spyreopt.solvers.presolve.limits import live, memory_limit


@dataclass
class Domains:
    """Candidate domains and allowed pairs left after the exact rules."""

    masks: list[np.ndarray]  # per node: bool over its candidates
    allowed: list[np.ndarray]  # per edge: bool [S_u, S_v]
    replaced: list[dict[int, int]]  # per node: candidate dropped by dominance -> a candidate no worse
    threshold: int | None = None  # the huge-cost rule's threshold, when it fired
    lp_bound: int | None = None  # the LP relaxation's (safe) lower bound, when the LP rule ran
    floor: int | None = None  # least objective of any assignment using an entry the huge-cost rule removed
    counts: dict[str, int] = field(default_factory=dict)
    conflict: str | None = None  # why no assignment exists, when a domain became empty
    cut_by_clock: bool = False  # a rule stopped at the deadline: still exact, but less may be removed

    def domain(self, i: int) -> np.ndarray:
        return np.flatnonzero(self.masks[i])

    def effective(self, f: Formulation, k: int) -> np.ndarray:
        """Edge k's pairs whose both ends are still possible."""
        e = f.edges[k]
        return self.allowed[k] & self.masks[e.u][:, None] & self.masks[e.v][None, :]

    def map_assignment(self, assignment) -> list[int]:
        """Replace dropped candidates by their dominators (no worse, still feasible)."""
        out = [int(s) for s in assignment]
        for i, rep in enumerate(self.replaced):
            while out[i] in rep:
                out[i] = rep[out[i]]
        return out


def memory_rule(f: Formulation, dom: Domains) -> str | None:
    """Rule 1: candidates and pairs that alone exceed the memory limit while live."""
    limit = memory_limit(f)
    if limit is None:
        return None
    for i, n in enumerate(f.nodes):
        if live(n.interval):
            over = dom.masks[i] & (n.usages > limit)
            dom.counts["over_limit"] += int(over.sum())
            dom.masks[i] &= ~over
            if not dom.masks[i].any():
                return f"node {i} ({n.name}): every candidate uses more than the memory limit {limit}"
    for k, e in enumerate(f.edges):
        if e.usages is not None and live(e.interval):
            dom.allowed[k] &= ~(e.usages > limit)
    return None


def arc_consistency(f: Formulation, dom: Domains, start, changed: set[int] | None = None) -> str | None:
    """Drop candidates without an allowed pair on some edge; a conflict message if a domain empties.

    Starts from the edges of the nodes in ``start``; nodes whose domain shrank
    are added to ``changed`` when given.
    """
    queue = deque(sorted({k for i in start for k in f.incident_edges(i)}))
    queued = set(queue)
    while queue:
        k = queue.popleft()
        queued.discard(k)
        e = f.edges[k]
        eff = dom.effective(f, k)
        if e.u == e.v:
            news = {e.u: dom.masks[e.u] & np.diagonal(eff)}
        else:
            news = {e.u: dom.masks[e.u] & eff.any(axis=1), e.v: dom.masks[e.v] & eff.any(axis=0)}
        for i, new in news.items():
            removed = int(dom.masks[i].sum() - new.sum())
            if not removed:
                continue
            dom.counts["unsupported"] += removed
            dom.masks[i] = new
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
