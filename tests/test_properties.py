"""Properties every backend must hold, on generated problems (issue: robustness).

Bounded example counts by default (the "ci" profile); select the longer profile
with ``SPYREOPT_HYPOTHESIS_PROFILE=long``.
"""

import os
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spyreopt as so
from spyreopt.model.problem import Problem
from spyreopt.model.staging import plan_masks
from spyreopt.solvers.registry import solve_formulation
from spyreopt.testing import strategies as sst
from spyreopt.testing.formulations import unplaced_optimum

settings.register_profile("ci", max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), database=None)
settings.register_profile("long", max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
settings.load_profile(os.environ.get("SPYREOPT_HYPOTHESIS_PROFILE", "ci"))

BACKENDS = [
    b for b in ["greedy", "anneal", "cpsat", "milp"] if b not in os.environ.get("SPYREOPT_SKIP_BACKENDS", "").split(",")
]
TIME_LIMIT = 5.0


@given(sst.problems(max_ops=4, max_dim=256))
def test_every_backend_returns_a_valid_simulated_exact_plan(problem):
    greedy = None
    for backend in BACKENDS:
        plan = so.solve(problem, backend=backend, time_limit=TIME_LIMIT, seed=0)
        plan.validate()
        so.simulate(plan)
        assert plan.stats["objective_units"] == problem.total_ps(problem.normalize(_assignment(problem, plan)))
        assert so.Plan.from_json(plan.to_json()) == plan
        if backend == "greedy":
            greedy = plan.cost_us
        elif backend in ("cpsat", "milp"):
            assert plan.cost_us <= greedy + 1e-9


def _assignment(problem: Problem, plan) -> tuple[int, ...]:
    """The candidate indices a plan chose (layout, residency), recovered from its decisions."""
    out = []
    masks = plan_masks(problem.graph, problem.ops, plan.tensors, plan.edges)  # staged inputs (model.staging)
    for i, o in enumerate(problem.ops):
        p = plan.op(o.name)
        space = problem.cands[i].space
        for s, c in enumerate(problem.candidates[i]):
            lay = problem.layout(i, s)
            same = lay.division.as_dict(space) == p.division and lay.stick == p.stick and c.residency == p.residency
            if same and c.stage == masks.get(o.name, 0):
                out.append(s)
                break
        else:
            raise AssertionError(f"op {o.name}: chosen decisions are not a candidate")
    return tuple(out)


@given(sst.formulations(max_nodes=5, max_candidates=3, placement=False))
def test_exact_backends_equal_brute_force_on_tiny_formulations(f):
    best = unplaced_optimum(f)
    assert best is not None  # zero-memory candidates always fit
    for backend in ("cpsat", "milp"):
        sol = solve_formulation(f, backend, time_limit=TIME_LIMIT, seed=0)
        assert sol.status == "optimal"
        assert sol.objective == f.evaluate(sol.assignment) == best


@given(sst.formulations(max_nodes=6, max_candidates=4))
def test_every_backend_is_feasible_and_reports_its_true_objective(f):
    greedy = solve_formulation(f, "greedy", time_limit=TIME_LIMIT, seed=0)
    for backend in BACKENDS:
        sol = solve_formulation(f, backend, time_limit=TIME_LIMIT, seed=0)
        assert f.violations(sol.assignment, sol.offsets) == []
        assert sol.objective == f.evaluate(sol.assignment)
        if backend in ("cpsat", "milp"):
            assert sol.objective <= greedy.objective


# Work budgets that finish long before the clock on any load: the determinism promise is for runs that finish
# them (annealing's rounds and steps, CP-SAT's deterministic time, HiGHS's proof); a wall-clock cut is a timeout.
BUDGETS = {"anneal": {"steps": 3000, "rounds": 30}}


@settings(max_examples=4)
@given(sst.problems(max_ops=4), st.sampled_from(BACKENDS))
def test_same_seed_gives_identical_plans(problem, backend):
    a, b = (so.solve(problem, backend=backend, time_limit=120, seed=7, **BUDGETS.get(backend, {})) for _ in range(2))
    assert a.status != "timeout", f"{backend} did not finish its budget: {a.message}"
    assert a.to_json() == b.to_json()


@pytest.mark.parametrize("backend", BACKENDS)
def test_time_limit_is_honoured_on_a_large_problem(backend):
    problem = Problem(so.workloads.get("layer_stack", layers=4))
    assert problem.formulation.nodes  # build the standard form first: it is not the backend's time
    start = time.perf_counter()
    plan = so.solve(problem, backend=backend, time_limit=1.0, seed=0)
    elapsed = time.perf_counter() - start
    plan.validate()
    assert elapsed < 1.0 + 3.0, f"{backend} took {elapsed:.1f} s with a 1 s limit"
