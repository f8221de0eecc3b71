"""End to end with greedy: every workload plans, validates, round-trips, and is deterministic."""

import copy

import pytest

import spyreopt as so
from spyreopt.errors import FormatError, PlanError, SolverError
from spyreopt.model.problem import Problem


@pytest.fixture(scope="module")
def greedy_plans():
    return {name: so.solve(so.workloads.get(name), backend="greedy", time_limit=30) for name in so.workloads.names()}


@pytest.mark.parametrize("name", so.workloads.names())
def test_greedy_plan_validates_and_round_trips(greedy_plans, name):
    plan = greedy_plans[name]
    plan.validate()
    text = plan.to_json()
    again = so.Plan.from_json(text)
    assert again == plan and again.to_json() == text
    assert plan.cost_us > 0 and plan.backend == "greedy"
    assert {o.name for o in plan.ops} == {o.name for o in so.workloads.get(name).compute_ops()}


@pytest.mark.parametrize("name", ["softmax", "mlp", "sdpa"])
def test_same_seed_gives_identical_json(greedy_plans, name):
    assert so.solve(so.workloads.get(name), backend="greedy").to_json() == greedy_plans[name].to_json()


@pytest.mark.parametrize("name", so.workloads.names())
def test_objective_equals_problem_evaluate(greedy_plans, name):
    plan = greedy_plans[name]
    total = sum(o.predicted_us for o in plan.ops)
    assert total == pytest.approx(plan.cost_us, rel=1e-9, abs=1e-9)
    for o in plan.ops:
        assert sum(o.breakdown.values()) == pytest.approx(o.predicted_us, abs=1e-9)


def test_formulation_objective_matches_problem_for_random_assignments():
    import numpy as np

    prob = Problem(so.workloads.get("sdpa"))
    f = prob.formulation
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(200):
        a = [int(rng.integers(len(c))) for c in prob.candidates]
        if any(not f.edges[k].is_allowed(a[e.u], a[e.v]) for k, e in enumerate(f.edges)):
            continue
        assert f.evaluate(a) == prob.total_ps(a)
        checked += 1
    assert checked > 10


def test_big_matmul_greedy_picks_a_k_split(greedy_plans):
    op = greedy_plans["big_matmul"].op("mm")
    assert op.division["k"] > 1


def test_unknown_backend_lists_known_ones():
    with pytest.raises(SolverError, match="greedy"):
        so.solve(so.workloads.get("mlp"), backend="simplex")


def _plan():
    return so.solve(so.workloads.get("softmax"), backend="greedy")


def _leaves(plan):
    return {leaf["name"] for leaf in plan.graph["leaves"]}


def _resident(plan):
    return [t for t in plan.tensors if t.address is not None]


@pytest.mark.parametrize(
    "corrupt, needle",
    [
        (lambda p: p.ops[0].division.update(d0=3), "does not divide"),
        (lambda p: p.ops[1].division.update(d0=64), "more than 32"),
        (lambda p: setattr(p.ops[-1], "residency", "lx"), "graph output"),
        (lambda p: setattr(p, "cost_us", p.cost_us * 2), "cost_us"),
        (lambda p: setattr(_resident(p)[0], "address", _resident(p)[0].address + 64), "multiple"),
        (lambda p: setattr(_resident(p)[0], "address", 10**9), "outside the scratchpad"),
        (lambda p: p.edges.remove([e for e in p.edges if e.tensor not in _leaves(p)][-1]), "missing"),
        # a read of a staged input recorded no more: the consumer now reads device memory, which costs more
        (lambda p: p.edges.remove([e for e in p.edges if e.tensor in _leaves(p)][-1]), "cost_us"),
        (lambda p: setattr(p.ops[0], "cores", 7), "cores"),
    ],
)
def test_plan_errors_name_the_constraint(corrupt, needle):
    plan = copy.deepcopy(_plan())
    assert _resident(plan), "the softmax plan keeps something on chip"
    corrupt(plan)
    with pytest.raises(PlanError, match=needle):
        plan.validate()


def test_overlapping_addresses_are_rejected():
    plan = copy.deepcopy(_plan())
    res = _resident(plan)
    live = [(a, b) for i, a in enumerate(res) for b in res[i + 1 :] if a.lifetime[0] < b.lifetime[1] and b.lifetime[0] < a.lifetime[1]]
    assert live, "two resident tensors live at once"
    a, b = live[0]
    b.address = a.address
    with pytest.raises(PlanError, match="overlap"):
        plan.validate()


def test_changed_edge_mode_is_rejected():
    plan = copy.deepcopy(_plan())
    plan.edges[0].mode = "relayout" if plan.edges[0].mode != "relayout" else "inplace"
    with pytest.raises(PlanError, match="mode"):
        plan.validate()


@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda d: d.pop("ops"), "ops"),
        (lambda d: d["ops"][0].update(cores="many"), "cores"),
        (lambda d: d["tensors"][0].update(residency="cache"), "residency"),
        (lambda d: d["edges"][0].update(mode="teleport"), "mode"),
        (lambda d: d.update(status="great"), "status"),
        (lambda d: d["ops"][0]["division"].update(d0=-1), "positive"),
    ],
)
def test_bad_plan_json_is_a_typed_error(mutate, needle):
    import json

    data = json.loads(_plan().to_json())
    mutate(data)
    with pytest.raises(FormatError, match=needle):
        so.Plan.from_json(json.dumps(data))


@pytest.mark.parametrize("name", ["softmax", "mlp", "sdpa", "transformer_block"])
def test_baselines_are_valid_and_behave_as_defined(name):
    g = so.workloads.get(name)
    hbm = so.solve(g, backend="hbm")
    assert all(t.residency == "hbm" for t in hbm.tensors)
    assert all(e.mode == "hbm" for e in hbm.edges)
    ind = so.solve(g, backend="independent")
    resident = {t.name for t in ind.tensors if t.residency != "hbm"}
    for e in ind.edges:
        if e.tensor in resident:
            assert e.mode == "inplace"  # independent keeps a tensor only where every consumer slices it identically
    assert ind.cost_us <= hbm.cost_us + 1e-9
    greedy = so.solve(g, backend="greedy")
    assert greedy.cost_us <= ind.cost_us + 1e-9


def test_restickify_copy_is_sized_in_the_consumers_layout():
    """Regression: a transposed read of a resident fp32 tensor; the copy's padding is in the new stick dim."""
    g = so.Graph("repro")
    a, b = g.input("a", (16, 128), "fp32"), g.input("b", (16, 128), "fp32")
    h = g.pointwise("gelu", a, b, name="h")
    g.output(g.matmul(g.transpose(h, name="h_t"), g.input("x", (16, 64), "fp32"), name="dw"))
    g.output(g.reduce("sum", h, 0, name="db"))
    for backend in ("greedy", "cpsat"):
        plan = so.solve(g, backend=backend)
        copies = [e for e in plan.edges if e.mode == "restickify"]
        assert all(e.copy_bytes_per_core >= 128 * 16 // max(plan.op("dw").cores, 1) for e in copies)
        so.simulate(plan)


def test_some_ops_can_be_pinned():
    g = so.workloads.get("mlp")
    prob = Problem(g, fixed={"gelu": ((1, 1), 1, "hbm")})
    i = prob.step["gelu"]
    assert len(prob.candidates[i]) <= 2 and all(c.residency == "hbm" for c in prob.candidates[i])
    plan = so.solve(prob, backend="greedy")
    assert plan.op("gelu").cores == 1 and plan.op("gelu").residency == "hbm"
