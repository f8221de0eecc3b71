"""The one presolve over candidate domains: which candidates and pairs any better solution may use.

``domains(f, ...)`` returns per node a mask of the candidates left and per edge
a mask of the pairs left. Each rule keeps at least one optimal assignment, so
a search over the domains finds the optimum of ``f`` and its bound is a bound
of ``f``:

1. Memory: a candidate (pair) whose own usage exceeds ``memory_limit(f)``
   while live cannot occur.
2. Arc consistency: a candidate with no allowed pair on some edge, against
   the candidates still possible at the other end, cannot occur.
3. Bound pruning (``upper_bound``: the objective of an assignment the caller
   has CHECKED feasible): a candidate or pair whose lower bound exceeds it is
   in no assignment at least as good (``bounds.prune_by_bound``). With a
   finite incumbent this also removes IOPDDL's 1e18 "never" entries, exactly.
4. Huge costs (``forbid_huge``, no incumbent needed): the sentinel rule of
   ``bounds.forbid_sentinels``; exact only when the result is feasible, so a
   caller that uses it must retry without it on a conflict or an infeasible
   search (``Domains.threshold`` says it fired).
5. Dominance (``dominance.prune_dominated``): a candidate no better than
   another in every table that reads it goes; ``Domains.replaced`` maps it to
   the candidate that replaces it in a hint.
6. LP (``lp_time``, with ``upper_bound``): reduced-cost fixing from the LP
   relaxation (``presolve.lp``), after dominance so the LP is smallest, then
   dominance again; ``Domains.lp_bound`` is a valid lower bound.

A conflict (an empty domain) is reported in ``Domains.conflict``, never raised:
with rules 1-3, 5 and 6 it proves that ``f`` has no assignment (better than the
incumbent).
"""

from __future__ import annotations

import time

import numpy as np

from spyreopt.model.formulation import Formulation
from spyreopt.solvers.presolve.bounds import forbid_sentinels, prune_by_bound
from spyreopt.solvers.presolve.dominance import prune_dominated
from spyreopt.solvers.presolve.limits import memory_limit
from spyreopt.solvers.presolve.lp import lp_fixing
from spyreopt.solvers.presolve.masks import Domains, arc_consistency, memory_rule


def domains(
    f: Formulation,
    masks: list[np.ndarray] | None = None,
    *,
    upper_bound: int | None = None,
    forbid_huge: bool = False,
    dominance: bool = True,
    lp_time: float | None = None,
    deadline: float | None = None,
) -> Domains:
    """Apply the rules of the module docstring to ``f`` (optionally within given domains).

    ``upper_bound`` must be the objective of an assignment checked with
    ``f.violations``: pruning against an unchecked value is not exact.
    ``lp_time`` (with ``upper_bound``): also reduced-cost fixing from the LP
    relaxation (``presolve.lp``), given at most this many seconds.
    ``deadline`` (``time.perf_counter()`` seconds): dominance and the LP stop
    there (still exact; ``Domains.cut_by_clock`` says so).
    """
    masks = [np.ones(n.num_candidates, bool) for n in f.nodes] if masks is None else [m.copy() for m in masks]
    allowed = [np.ones(e.costs.shape, bool) if e.allowed is None else e.allowed.astype(bool) for e in f.edges]
    dom = Domains(masks, allowed, [{} for _ in f.nodes])
    dom.counts = {"over_limit": 0, "unsupported": 0, "bound": 0, "sentinel": 0, "dominated": 0, "merged": 0}
    dom.conflict = memory_rule(f, dom)
    if dom.conflict is None:
        dom.conflict = arc_consistency(f, dom, range(len(f.nodes)))
    while dom.conflict is None and upper_bound is not None:
        changed, dom.conflict = prune_by_bound(f, dom, upper_bound)
        if dom.conflict is not None or not changed:
            break
        dom.conflict = arc_consistency(f, dom, sorted(changed))
    if dom.conflict is None and forbid_huge:
        dom.threshold = forbid_sentinels(f, dom)
        if dom.threshold is not None:
            dom.conflict = arc_consistency(f, dom, range(len(f.nodes)))
    if dom.conflict is None and dominance:
        dom.conflict = prune_dominated(f, dom, memory_limit(f) is not None, deadline)
    if deadline is not None and lp_time is not None:
        lp_time = min(lp_time, deadline - time.perf_counter())
        dom.cut_by_clock |= lp_time <= 0
    if dom.conflict is None and upper_bound is not None and lp_time is not None and lp_time > 0:  # after dominance
        changed, dom.lp_bound = lp_fixing(f, dom, upper_bound, lp_time)
        dom.conflict = arc_consistency(f, dom, sorted(changed))
        if dom.conflict is None and changed and dominance:
            dom.conflict = prune_dominated(f, dom, memory_limit(f) is not None, deadline)
    return dom
