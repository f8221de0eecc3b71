"""The reduction chain: the shared domain rules and the structural reductions, to a fixpoint, with the exact inverse.

``reduce_formulation(f)`` returns a ``Reduction``: a smaller Formulation and the
maps between its assignments and ``f``'s. For every feasible reduced
assignment ``a``, ``expand(a)`` is feasible in ``f`` with the same objective, and
the reduced optimum equals the original optimum, so a backend's "optimal",
"infeasible" and bound on the reduced formulation are statements about ``f``.
Node indices are kept (an eliminated node stays as a one-candidate, edgeless
placeholder), so buffers of nodes keep their keys.

One pass, repeated until nothing changes:

* ``domains`` (the one presolve over candidates: memory, arc consistency,
  bound pruning against a checked incumbent, dominance; in the first pass
  optionally LP reduced-cost fixing) on the current state;
* ``merge``: folding of self-loops and fixed ends, parallel edges, followers;
* ``eliminate``: leaf and series elimination.

Nodes and edges that a max term reads are never merged or eliminated. Integer
arithmetic is exact: an operation whose result would leave int64 is skipped.
The huge-cost sentinel rule is not part of the chain (it is exact only when the
result is feasible); with a finite incumbent, bound pruning removes the
IOPDDL 1e18 entries exactly.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from spyreopt.model.formulation import BufferKey, Formulation
from spyreopt.solvers.presolve.domains import domains
from spyreopt.solvers.presolve.eliminate import eliminate
from spyreopt.solvers.presolve.merge import fold_edges, merge_followers, merge_parallel
from spyreopt.solvers.presolve.state import State


@dataclass
class Reduction:
    """A reduced Formulation and the maps between its assignments and the original's."""

    original: Formulation
    formulation: Formulation
    keep: list[list[int]]  # per node: original index of each reduced candidate
    steps: list[tuple]  # eliminations in order: (v, parents, {parent values: v value})
    edge_origin: list[BufferKey | None]
    dominated_by: dict[tuple[int, int], int]
    stats: dict

    def expand(self, assignment) -> tuple[int, ...]:
        """The original assignment a reduced assignment stands for (same objective, same memory)."""
        x = [self.keep[i][int(s)] for i, s in enumerate(assignment)]
        for v, parents, table in reversed(self.steps):
            x[v] = table[tuple(x[p] for p in parents)]
        return tuple(x)

    def expand_offsets(self, offsets: dict[BufferKey, int]) -> dict[BufferKey, int]:
        """Offsets keyed by the original buffers (a merged node's memory rides on a self-loop)."""
        out = {}
        for key, off in offsets.items():
            orig = key if key[0] == "node" else self.edge_origin[key[1]]
            if orig is None:
                raise ValueError(f"reduced buffer {key} has no original buffer")
            out[orig] = off
        return out

    def project_offsets(self, offsets: dict[BufferKey, int]) -> dict[BufferKey, int]:
        """Original offsets keyed by the reduced buffers (the inverse of ``expand_offsets``)."""
        reduced = {orig: ("edge", k) for k, orig in enumerate(self.edge_origin) if orig is not None}
        return {reduced.get(key, key): off for key, off in offsets.items() if key[0] == "node" or key in reduced}

    def project(self, assignment) -> tuple[int, ...] | None:
        """A reduced assignment no worse than a feasible original one (a warm start), or None.

        Dominated candidates are replaced by their dominators; None when the
        assignment uses a candidate pruned as infeasible or above the bound.
        """
        gone = {step[0] for step in self.steps}
        out = []
        for i, s in enumerate(assignment):
            if i in gone:
                out.append(0)
                continue
            s = int(s)
            index = {c: r for r, c in enumerate(self.keep[i])}
            while s not in index:
                if (i, s) not in self.dominated_by:
                    return None
                s = self.dominated_by[(i, s)]
            out.append(index[s])
        return tuple(out)


def reduce_formulation(
    f: Formulation, *, upper_bound: int | None = None, lp_time: float | None = None, deadline: float | None = None
) -> Reduction:
    """Apply every exact reduction until none applies.

    ``upper_bound`` must be the objective of an assignment checked feasible
    with ``f.violations`` (for instance greedy's); with it, anything that cannot
    be part of a solution at least as good is removed. ``lp_time``: the first
    pass also runs the LP rule (reduced-cost fixing, ``presolve.lp``) for at
    most this long; its bound is ``stats["lp_bound"]``. ``deadline``
    (``time.perf_counter()`` seconds): no rule runs past it (the reduction stays
    exact; ``stats["cut_by_clock"]`` says it happened). Raises InfeasibleError
    when a domain empties (no assignment, or none within the bound).
    """
    state = State(f)
    passes = 0
    lp_bound = None
    cut = False
    while True:
        passes += 1
        g, order = state.formulation(f.name + "-reduced")
        dom = domains(g, upper_bound=upper_bound, lp_time=lp_time if passes == 1 else None, deadline=deadline)
        lp_bound = dom.lp_bound if passes == 1 else lp_bound
        cut |= dom.cut_by_clock
        state.apply(dom, order)
        changed = False  # the domain rules are at their fixpoint: only a structural change calls for a new pass
        for step in (fold_edges, merge_parallel, merge_followers, eliminate):
            changed |= step(state)
        if not changed or (deadline is not None and time.perf_counter() > deadline):
            cut |= changed
            break
    reduced, order = state.formulation(f.name + "-reduced")
    stats = {
        "passes": passes,
        "nodes": len(f.nodes),
        "active_nodes": sum(len(n.keep) > 1 for n in state.nodes),
        "candidates_before": sum(n.num_candidates for n in f.nodes),
        "candidates_after": sum(len(n.keep) for n in state.nodes),
        "edges_before": len(f.edges),
        "edges_after": len(reduced.edges),
        "lp_bound": lp_bound,
        "cut_by_clock": cut,
        **state.counts,
    }
    return Reduction(
        original=f,
        formulation=reduced,
        keep=[list(n.keep) for n in state.nodes],
        steps=list(state.steps),
        edge_origin=[state.edges[k].origin for k in order],
        dominated_by=dict(state.dominated_by),
        stats=stats,
    )
