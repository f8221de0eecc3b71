"""Input staging (``model.staging``): a graph input read by several ops loaded into the scratchpad once."""

from __future__ import annotations

import pytest

import spyreopt as so
from spyreopt.hw.execute import check_execution
from spyreopt.model.problem import Problem
from spyreopt.model.restrict import make_problem
from spyreopt.model.staging import staged_inputs
from spyreopt.reproduce import device_memory_bytes
from spyreopt.solvers import cpsat, milp
from spyreopt.testing.formulations import unplaced_optimum

BACKENDS = ("greedy", "anneal", "cpsat", "milp")


def chain(rows: int = 256, cols: int = 1024, name: str = "chain") -> so.Graph:
    """x read by three memory-bound pointwise ops: each re-read of x costs its bytes again."""
    g = so.Graph(name)
    x = g.input("x", (rows, cols), "fp16")
    a = g.pointwise("exp", x, name="a")
    b = g.pointwise("mul", a, x, name="b")
    g.output(g.pointwise("add", b, x, name="c"))
    return g


@pytest.mark.parametrize("backend", ["cpsat", "milp"])
def test_staging_chosen_when_it_pays(backend):
    g = chain()
    plan = so.solve(g, backend=backend, time_limit=20, seed=0)
    unstaged = so.solve(g, backend=backend, time_limit=20, seed=0, forbid="staging")
    staged = staged_inputs(plan)
    assert [t.name for t in staged] == ["x"]
    assert staged[0].producer == "a" and staged[0].residency == "lx" and staged[0].address is not None
    readers = sorted(e.consumer for e in plan.edges if e.tensor == "x")
    assert readers == ["b", "c"]
    assert plan.cost_us < unstaged.cost_us
    x_bytes = g.tensors["x"].nbytes
    assert device_memory_bytes(unstaged) - device_memory_bytes(plan) == 2 * x_bytes  # two reads of x saved
    assert "staged: x loaded by a, read on chip by b, c" in plan.table()


def test_not_staged_when_it_cannot_pay():
    # a scratchpad too small to hold x beside the ops' outputs: reading device memory again is the only way
    hw = so.HardwareSpec(cores=1, lx_bytes=512 * 1024, program_reserve_bytes=64 * 1024)
    plan = so.solve(chain(), hardware=hw, backend="cpsat", time_limit=10, seed=0)
    assert staged_inputs(plan) == []
    assert staged_inputs(so.solve(chain(), hardware=so.HardwareSpec(cores=1), backend="cpsat", time_limit=10))


PIN = {
    "a": {"division": {"d0": 4, "d1": 1}},
    "b": {"division": {"d0": 1, "d1": 4}},
    "c": {"division": {"d0": 1, "d1": 4}},
}


@pytest.mark.parametrize("backend", ["cpsat", "milp"])
def test_relayout_from_the_staged_copy(backend):
    # the later readers slice x across other cores than its loader: a reader gathers its slice on chip
    plan = so.solve(chain(), backend=backend, time_limit=10, seed=0, pin=PIN)
    reads = [e for e in plan.edges if e.tensor == "x"]
    assert staged_inputs(plan) and any(e.mode == "relayout" and e.copy_address is not None for e in reads)
    assert plan.cost_us < so.solve(chain(), backend=backend, time_limit=10, seed=0, pin=PIN, forbid="staging").cost_us
    assert plan.op(reads[0].consumer).breakdown["relayout"] > 0
    plan.validate()
    so.simulate(plan)
    check_execution(plan)
    # forbid relayout: the kept slices serve in place only, so here nothing is worth staging
    assert staged_inputs(so.solve(chain(), backend=backend, time_limit=10, seed=0, pin=PIN, forbid="relayout")) == []


def test_forbid_staging_removes_it():
    g = chain()
    free, restricted = Problem(g), make_problem(g, forbid="staging")
    assert free.stages and not restricted.stages
    assert any(c.stage for c in free.candidates[0]) and not any(c.stage for cs in restricted.candidates for c in cs)
    for backend in BACKENDS:
        plan = so.solve(g, backend=backend, time_limit=5, seed=0, forbid=["staging"])
        assert staged_inputs(plan) == [] and not any(e.tensor == "x" for e in plan.edges)
    plan = so.solve(g, backend="cpsat", time_limit=10, seed=0)
    with pytest.raises(so.PlanError, match="forbid staging: graph input"):
        from spyreopt.model.restrict import Restriction, check_restriction

        check_restriction(plan, Restriction.of(None, ["staging"]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_staged_plan_validates_simulates_and_executes(backend):
    g = chain(128, 512)
    plan = so.solve(g, backend=backend, time_limit=10, seed=0)
    if backend != "greedy":
        assert staged_inputs(plan)
    plan.validate()
    again = so.Plan.from_json(plan.to_json())
    assert again == plan
    again.validate()
    sim = so.simulate(plan)
    assert sim.time_us > 0
    check_execution(plan)
    assert so.solve(g, backend=backend, time_limit=10, seed=0).to_json() == plan.to_json()  # deterministic


def test_validate_rejects_a_read_the_loader_does_not_keep():
    plan = so.solve(chain(), backend="cpsat", time_limit=10, seed=0)
    plan.tensors = [t for t in plan.tensors if t.name != "x"]  # readers still read x on chip
    with pytest.raises(so.PlanError, match="staged input"):
        plan.validate()
    plan = so.solve(chain(), backend="cpsat", time_limit=10, seed=0)
    with pytest.raises(so.PlanError):
        so.simulate(_moved(plan))  # the kept slices are not where the readers look


def _moved(plan: so.Plan) -> so.Plan:
    out = so.Plan.from_json(plan.to_json())
    for t in out.tensors:
        if t.name == "x":
            t.address += 128
    return out


def test_cpsat_and_milp_find_the_optimum_over_staging_choices():
    g = so.Graph("tiny")
    x = g.input("x", (64, 128), "fp16")
    a = g.pointwise("exp", x, name="a")
    g.output(g.pointwise("add", a, x, name="b"))
    hw = so.HardwareSpec(cores=2)
    problem = Problem(g, hw, max_layouts=2, tiling=False)
    f = problem.formulation
    assert any(c.stage for c in problem.candidates[1])  # b may read x on chip
    best = unplaced_optimum(f)
    unstaged = unplaced_optimum(Problem(g, hw, max_layouts=2, tiling=False, staging=False).formulation)
    assert best < unstaged  # staging is the better choice here
    for solve in (cpsat.solve, milp.solve):
        sol = solve(f, time_limit=20, seed=0)
        assert sol.objective == f.evaluate(sol.assignment) == best
        assert f.violations(sol.assignment, sol.offsets) == []
