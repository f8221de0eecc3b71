"""No backend returns a plan it has not checked: MILP's start and the reduction chain's mapped-back plan (issue 16).

Each test injects the fault the check guards against (a start or an inner backend that returns an
invalid plan) and asserts that it never comes back as the answer.
"""

from __future__ import annotations

import itertools

import pytest

from spyreopt.errors import SolverError
from spyreopt.model.formulation import Formulation, Solution
from spyreopt.solvers import greedy, milp
from spyreopt.solvers.milp import backend as milp_backend
from spyreopt.solvers.milp.run import RunResult
from spyreopt.solvers.registry import get_backend
from spyreopt.solvers.solving_chain import solve_chain
from spyreopt.testing.formulations import random_formulation


def _cheapest_invalid(f: Formulation) -> tuple[int, ...]:
    """The cheapest assignment that breaks a constraint and beats every valid one."""
    every = sorted(itertools.product(*(range(n.num_candidates) for n in f.nodes)), key=f.evaluate)
    best_valid = min(f.evaluate(a) for a in every if not f.violations(a))
    bad = next(a for a in every if f.violations(a))
    assert f.evaluate(bad) < best_valid
    return bad


def test_milp_never_returns_an_invalid_greedy_start(monkeypatch):
    f = random_formulation(2, tight=0.1)
    bad = _cheapest_invalid(f)
    monkeypatch.setattr(milp.backend.greedy, "solve", lambda f, **kw: Solution(bad, {}, "feasible", f.evaluate(bad)))
    sol = milp.solve(f, time_limit=10, seed=0)
    assert f.violations(sol.assignment, sol.offsets) == []
    assert sol.stats["start"].startswith("none (greedy plan invalid")
    assert sol.status == "optimal"


def test_the_chain_refuses_an_invalid_mapped_back_plan():
    f = random_formulation(3, num_nodes=8, tight=0.8, placement=True)

    def no_addresses(g, *, hint=None, **kw):  # an inner backend that forgets the addresses
        sol = greedy.solve(g, **kw)
        return Solution(sol.assignment, {}, "optimal", sol.objective)

    assert any(b.size for b in f.buffers(greedy.solve(f, time_limit=5).assignment))
    with pytest.raises(SolverError, match=r"milp.s own plan is invalid \(backend bug\).*no address"):
        solve_chain(f, "milp", lambda name: no_addresses if name == "milp" else get_backend(name), time_limit=5, seed=0)


def test_milp_does_not_trust_an_infeasible_verdict_that_its_start_contradicts(monkeypatch):
    # the failure mode behind issue 16's false optimum: the solver wrongly calls a model with a feasible start
    # infeasible; taken at its word, "nothing is better than the start" would be reported as a proof
    f = random_formulation(1, num_nodes=8, tight=0.5)
    wrong = RunResult(False, False, True, False, None, "Infeasible; No Solution Exists")
    monkeypatch.setattr(milp_backend, "runner", lambda name: lambda prob, **kw: wrong)
    sol = milp.solve(f, time_limit=10, seed=0)
    assert f.violations(sol.assignment, sol.offsets) == []
    assert sol.status != "optimal" and sol.bound is None
    assert "contradicted by the start" in sol.message and "infeasible" in sol.stats["numerics"]
