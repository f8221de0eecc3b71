"""Windows of a formulation that follow the graph's structure: its layers, else slices of the schedule.

Used where a whole-problem computation is too large: the LP rule solves one
LP per window, and CP-SAT's large-neighbourhood search frees one window at a
time. The windows only choose what is computed together; every rule that
uses them stays exact for any choice.
"""

from __future__ import annotations

import numpy as np

from spyreopt.model.formulation import Formulation
from spyreopt.solvers.presolve.masks import Domains


def layers(f: Formulation) -> list[list[int]] | None:
    """Nodes grouped by the first component of their name ("l3.proj_q" -> "l3"), in schedule order,
    when that gives at least two groups of several nodes each; else None."""
    groups: dict[str, list[int]] = {}
    for i, n in enumerate(f.nodes):
        head, dot, _ = n.name.partition(".")
        if not dot:
            return None
        groups.setdefault(head, []).append(i)
    out = sorted(groups.values(), key=lambda g: (min(f.nodes[i].interval[0] for i in g), g[0]))
    return out if len(out) >= 2 and all(len(g) > 1 for g in out) else None


def node_windows(f: Formulation, dom: Domains, columns: int) -> list[list[int]]:
    """Disjoint windows covering every node, each with at most about ``columns`` LP columns where
    possible: the whole formulation when it is that small, else its layers (split further when one
    is too large), else consecutive slices of the schedule."""
    size = _columns(f, dom)
    if size.sum() <= columns:
        return [list(range(len(f.nodes)))]
    groups = layers(f) or [sorted(range(len(f.nodes)), key=lambda i: (f.nodes[i].interval[0], i))]
    out: list[list[int]] = []
    for group in groups:
        current: list[int] = []
        load = 0
        for i in group:
            if current and load + size[i] > columns:
                out.append(current)
                current, load = [], 0
            current.append(i)
            load += int(size[i])
        out.append(current)
    return out


def _columns(f: Formulation, dom: Domains) -> np.ndarray:
    """Per node its candidates plus half the allowed pairs of its edges: its share of the LP."""
    size = np.array([int(m.sum()) for m in dom.masks], dtype=np.int64)
    for k, e in enumerate(f.edges):
        if e.u != e.v:
            pairs = int(dom.effective(f, k).sum())
            size[e.u] += pairs // 2
            size[e.v] += pairs - pairs // 2
    return size
