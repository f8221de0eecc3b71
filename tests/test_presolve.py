"""The shared presolve is exact for every backend: reduced and unreduced problems have the same optimum.

Brute force on tiny formulations is the judge: it shares nothing with the
presolve but ``Formulation.evaluate`` and ``Formulation.violations``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from spyreopt.model.formulation import Edge, Formulation, Node
from spyreopt.solvers.presolve import domains, reduce_formulation
from spyreopt.solvers.registry import solve_formulation
from spyreopt.testing.formulations import random_formulation

BACKENDS = ("greedy", "anneal", "cpsat", "milp")
EXACT = ("cpsat", "milp")
SMALL = [
    dict(num_nodes=5, max_candidates=3),
    dict(num_nodes=6, max_candidates=3, forbid_prob=0.5, tight=0.3),
    dict(num_nodes=6, max_candidates=3, edge_prob=0.8, max_terms=False),
    dict(num_nodes=5, max_candidates=4, tight=0.0),
]


def optimum(f: Formulation) -> tuple[int | None, list[tuple[int, ...]]]:
    """The optimum without addresses and every assignment that reaches it (allowed pairs, usage limit)."""
    best, args = None, []
    for a in itertools.product(*(range(n.num_candidates) for n in f.nodes)):
        if f.violations(a):
            continue
        c = f.evaluate(a)
        if best is None or c < best:
            best, args = c, [a]
        elif c == best:
            args.append(a)
    return best, args


def instances():
    for seed in range(6):
        for kw in SMALL:
            yield random_formulation(seed, **kw)


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_through_the_chain_is_exact(backend):
    """Inverted plans are valid in the original and evaluate to the reported objective; exact backends
    report the brute-force optimum as "optimal", with a bound no larger."""
    checked = 0
    for f in itertools.islice(instances(), 12):
        best, _ = optimum(f)
        if best is None:
            continue
        sol = solve_formulation(f, backend, time_limit=5, seed=0)
        assert f.violations(sol.assignment, sol.offsets) == []
        assert sol.objective == f.evaluate(sol.assignment) >= best
        assert "presolve" in sol.stats
        if backend in EXACT:
            assert sol.status == "optimal" and sol.objective == best, (f.name, sol.message)
            assert sol.bound is not None and sol.bound <= best
        checked += 1
    assert checked >= 8


def test_an_invalid_plan_from_a_backend_is_blamed_on_the_backend(monkeypatch):
    """The chain checks the inverted plan; when the backend's plan is already invalid in the reduced
    formulation, the error says so instead of suspecting the reductions."""
    import sys
    import types

    from spyreopt.errors import SolverError
    from spyreopt.model.formulation import Solution
    from spyreopt.solvers import registry

    f = random_formulation(3, num_nodes=12, max_candidates=4, tight=0.3)
    assert f.usage_limit is not None

    def solve(g, **kw):  # every node's largest-usage candidate: over the usage limit
        a = tuple(int(np.argmax(n.usages)) for n in g.nodes)
        assert g.violations(a)
        return Solution(a, {}, "feasible", g.evaluate(a))

    broken = types.ModuleType("broken_backend")
    broken.solve = solve
    monkeypatch.setitem(sys.modules, "broken_backend", broken)
    monkeypatch.setitem(registry.BACKENDS, "broken", registry.Backend("broken_backend"))
    with pytest.raises(SolverError, match=r"broken's own plan is invalid \(backend bug\)"):
        solve_formulation(f, "broken", time_limit=5, seed=0)


@pytest.mark.parametrize("backend", EXACT)
def test_placement_same_optimum_with_and_without_presolve(backend):
    for seed in range(4):
        f = random_formulation(seed, num_nodes=7, max_candidates=3, placement=True, tight=0.5)
        plain = solve_formulation(f, backend, time_limit=10, seed=0, presolve=False)
        reduced = solve_formulation(f, backend, time_limit=10, seed=0)
        assert plain.status == reduced.status == "optimal"
        assert plain.objective == reduced.objective
        assert f.violations(reduced.assignment, reduced.offsets) == []


@pytest.mark.parametrize("lp", [None, 5.0])
def test_reduction_keeps_the_optimum_and_expands_exactly(lp):
    """Brute force on the reduced formulation: same optimum; every reduced optimum expands to an original one."""
    for f in itertools.islice(instances(), 16):
        best, args = optimum(f)
        if best is None:
            continue
        for bound in (best, f.evaluate(args[0]) + 7):
            red = reduce_formulation(f, upper_bound=bound, lp_time=lp)
            g = red.formulation
            reduced_best, reduced_args = optimum(g)
            assert reduced_best == best, f.name
            for a in reduced_args:
                x = red.expand(a)
                assert f.violations(x) == [] and f.evaluate(x) == g.evaluate(a) == best
            projected = red.project(args[0])
            if projected is not None:
                assert g.evaluate(projected) <= f.evaluate(args[0])
            if red.stats["lp_bound"] is not None:
                assert red.stats["lp_bound"] <= best


def test_domains_keep_an_optimum_and_bounds_are_valid():
    for f in itertools.islice(instances(), 20):
        best, args = optimum(f)
        if best is None:
            continue
        dom = domains(f, upper_bound=best, lp_time=5.0)
        assert dom.conflict is None
        kept = [a for a in args if all(dom.masks[i][s] for i, s in enumerate(a))]
        kept = [a for a in kept if all(dom.allowed[k][a[e.u], a[e.v]] for k, e in enumerate(f.edges))]
        assert kept, f.name  # some optimum survives every rule, the LP included
        assert dom.lp_bound is None or dom.lp_bound <= best
        assert dom.map_assignment(args[0]) is not None


def test_bound_pruning_removes_what_cannot_beat_the_incumbent():
    """A candidate 100 more expensive than the alternative goes against an incumbent of cost 5."""
    n0 = Node("a", np.array([0, 100]), np.array([0, 0]), (0, 1))
    n1 = Node("b", np.array([5, 3]), np.array([0, 0]), (0, 1))
    f = Formulation((n0, n1), (Edge(0, 1, np.array([[0, 2], [0, 0]])),), None)
    dom = domains(f, upper_bound=5, dominance=False)
    assert dom.masks[0].tolist() == [True, False] and dom.counts["bound"] == 1
    red = reduce_formulation(f, upper_bound=5)
    assert red.formulation.evaluate(red.project((0, 1))) == f.evaluate((0, 1)) == 5


def test_conflict_is_reported_not_raised():
    n0 = Node("a", np.array([1, 2]), np.array([0, 0]), (0, 1))
    n1 = Node("b", np.array([1]), np.array([0]), (0, 1))
    f = Formulation((n0, n1), (Edge(0, 1, np.zeros((2, 1), np.int64), np.zeros((2, 1), bool)),), None)
    dom = domains(f)
    assert dom.conflict is not None and "no candidate has an allowed pair" in dom.conflict


def test_windowed_lp_keeps_an_optimum(monkeypatch):
    """Cut into windows (slices of the schedule here), the LP bound is weaker but still valid and exact."""
    import spyreopt.solvers.presolve.lp as lp

    monkeypatch.setattr(lp, "WHOLE_COLUMNS", 12)
    windowed = 0
    for f in itertools.islice(instances(), 20):
        best, args = optimum(f)
        if best is None:
            continue
        dom = domains(f, upper_bound=best, dominance=False)
        parts, _ = lp._parts(f, dom)
        windowed += len(parts) > 1
        dom = domains(f, upper_bound=best, lp_time=5.0)
        kept = [a for a in args if all(dom.masks[i][s] for i, s in enumerate(a))]
        kept = [a for a in kept if all(dom.allowed[k][a[e.u], a[e.v]] for k, e in enumerate(f.edges))]
        assert kept and (dom.lp_bound is None or dom.lp_bound <= best), f.name
    assert windowed >= 5
