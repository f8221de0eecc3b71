"""In-place address reuse (``model.inplace``): a pointwise op writes its output over an operand dying at it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import spyreopt as so
from spyreopt.hw.execute import check_execution
from spyreopt.model.check.plans import fixed_problem
from spyreopt.model.formulation import fill_members
from spyreopt.model.inplace import donors
from spyreopt.model.restrict import Restriction, check_restriction, make_problem
from spyreopt.reproduce import device_memory_bytes, softmax_graph
from spyreopt.solvers.addresses import place_assignment
from spyreopt.solvers.registry import solve_formulation
from spyreopt.testing.formulations import random_formulation, unplaced_optimum

MN = 512 * 1024
ONE_CORE = so.HardwareSpec(cores=1)


@pytest.fixture(scope="module")
def softmax_plans():
    """The published softmax stages (c) and (d): in place without staging, then with the input staged."""
    g = softmax_graph(512, 1024, 0)
    return {
        stage: so.solve(g, hardware=ONE_CORE, forbid=forbid, backend="cpsat", time_limit=10, seed=0)
        for stage, forbid in (("c", ("staging",)), ("d", ()), ("no reuse", ("staging", "reuse")))
    }


# ---- the standard form ----------------------------------------------------------------------------------
def test_random_formulations_have_tails_and_aliases():
    fs = [random_formulation(seed, num_nodes=5, max_candidates=3, inplace=True) for seed in range(12)]
    assert sum(any(e.tail is not None for e in f.edges) for f in fs) >= 10
    assert sum(any(e.alias is not None and e.alias.any() for e in f.edges) for f in fs) >= 3


@pytest.mark.parametrize("seed", range(12))
def test_exact_backends_equal_brute_force_with_tails(seed):
    f = random_formulation(seed, num_nodes=5, max_candidates=3, inplace=True)
    best = unplaced_optimum(f)
    for backend in ("cpsat", "milp"):
        sol = solve_formulation(f, backend, time_limit=5, seed=0)
        assert sol.status == "optimal"
        assert sol.objective == f.evaluate(sol.assignment) == best


@pytest.mark.parametrize("seed", range(8))
def test_every_backend_places_aliased_buffers_at_one_address(seed):
    f = random_formulation(seed, num_nodes=6, max_candidates=4, inplace=True, placement=True, tight=0.8)
    for backend in ("greedy", "anneal", "cpsat", "milp"):
        sol = solve_formulation(f, backend, time_limit=3, seed=0)
        assert f.violations(sol.assignment, sol.offsets) == []
        assert sol.objective == f.evaluate(sol.assignment)
        for a, b in f.address_links(sol.assignment):
            assert sol.offsets[a] == sol.offsets[b]


def test_alias_frees_the_donor_at_its_last_step_only():
    f = random_formulation(4, num_nodes=5, max_candidates=3, inplace=True, placement=True, tight=1.0)
    k = next(k for k, e in enumerate(f.edges) if e.alias is not None and e.alias.any())
    tail = f.edges[k]
    a, b = (int(x[0]) for x in np.nonzero(tail.alias))
    rest = [0] * len(f.nodes)
    rest[tail.u], rest[tail.v] = a, b
    keys = {x.key for x in f.buffers(rest)}
    assert ("edge", k) not in keys  # the tail holds nothing under an alias pair
    groups = f.address_groups(rest)
    donor = next(g for g in groups if g.key == ("node", tail.u))
    assert ("node", tail.v) in donor.members and donor.lower == tail.u
    rest[tail.v] = 0  # zero-memory consumer candidate: the donor's tail holds its size over the step
    held = {x.key: x for x in f.buffers(rest)}[("edge", k)]
    assert (held.lower, held.upper, held.size) == (tail.v, tail.v + 1, int(f.nodes[tail.u].usages[a]))
    assert f.nodes[tail.u].interval[1] == tail.v  # the donor's own buffer ends where its tail starts


def test_a_split_address_is_a_violation():
    f = random_formulation(4, num_nodes=5, max_candidates=3, inplace=True, placement=True, tight=1.0)
    tail = next(e for e in f.edges if e.alias is not None and e.alias.any())
    a, b = (int(x[0]) for x in np.nonzero(tail.alias))
    x = [0] * len(f.nodes)
    x[tail.u], x[tail.v] = a, b
    offsets = place_assignment(f, x)
    assert f.violations(x, offsets) == []
    offsets[("node", tail.v)] += f.placement.alignment
    assert any("must share one address" in v for v in f.violations(x, offsets))
    assert fill_members(f.address_groups(x), {("node", tail.u): 0})[("node", tail.v)] == 0


# ---- the Spyre problem -----------------------------------------------------------------------------------
def test_softmax_stages_move_the_published_bytes(softmax_plans):
    assert device_memory_bytes(softmax_plans["c"]) == 3 * MN * 2
    assert device_memory_bytes(softmax_plans["d"]) == 2 * MN * 2
    assert device_memory_bytes(softmax_plans["no reuse"]) > 3 * MN * 2  # something spills without reuse
    c, d = softmax_plans["c"], softmax_plans["d"]
    assert c.op("softmax.exp").inplace_over == 0 and c.op("softmax.sub").inplace_over is None
    assert d.op("softmax.sub").inplace_over == 0 and d.op("softmax.exp").inplace_over == 0
    assert d.tensor("softmax.sub").address == d.tensor("x").address == d.tensor("softmax.exp").address
    assert d.cost_us < c.cost_us < softmax_plans["no reuse"].cost_us
    assert all(o.inplace_over is None for o in softmax_plans["no reuse"].ops)


@pytest.mark.parametrize("stage", ["c", "d"])
def test_softmax_in_place_plans_validate_simulate_and_execute(softmax_plans, stage):
    plan = softmax_plans[stage]
    plan.validate()
    assert so.Plan.from_json(plan.to_json()) == plan
    sim = so.simulate(plan)
    assert sim.device_read_bytes + sim.device_write_bytes == device_memory_bytes(plan)
    assert abs(sim.time_us - plan.cost_us) / plan.cost_us < 0.05
    check_execution(plan)


@pytest.mark.parametrize("stage", ["c", "d"])
def test_memory_profile_is_the_plans_buffers(softmax_plans, stage):
    """The Formulation's profile equals the plan's live buffers, the donor and its writer counted once."""
    plan = softmax_plans[stage]
    problem = fixed_problem(plan)
    a = problem.normalize([0] * len(problem.ops))
    profile = problem.formulation.usage_profile(a)
    want = [0] * len(problem.ops)
    for t in plan.tensors:
        for step in range(*t.lifetime) if t.address is not None else ():
            want[step] += t.bytes_per_core
    for o in plan.ops:
        if o.inplace_over is not None:
            want[problem.step[o.name]] -= plan.tensor(o.name).bytes_per_core
    assert profile == want
    assert max(profile) <= MN * 2 + 2 * 2048  # one 1 MiB buffer and the reductions' rows


def test_forbid_reuse_is_checked_on_the_plan(softmax_plans):
    check_restriction(softmax_plans["d"], Restriction.of(None, ()))
    with pytest.raises(so.PlanError, match=r"forbid reuse: op\(s\) \['softmax.sub', 'softmax.exp'\]"):
        check_restriction(softmax_plans["d"], Restriction.of(None, "reuse"))


def test_no_donor_for_a_graph_output_a_reduction_or_a_later_reader():
    g = so.Graph("donors")
    x = g.input("x", (256, 1024), "fp16")
    y = g.pointwise("exp", x, name="y")
    z = g.pointwise("neg", y, name="z")  # y is read again by w: it does not die at z
    w = g.pointwise("add", y, z, name="w")  # y and z die here: one donor only (the first operand)
    s = g.reduce("sum", w, dims=(0,), name="s")  # a reduction writes nothing over its operand
    g.output(g.pointwise("mul", w, s, name="out"))  # w dies at out, but out is a graph output in device memory
    problem = make_problem(g, ONE_CORE)
    found = {(problem.ops[d.producer].name, problem.ops[d.consumer].name) for d in donors(problem)}
    assert found == {("y", "w")}


def test_a_writer_whose_buffer_is_widened_over_a_loop_takes_no_donor():
    """Found on a Qwen2-1.5B layer at 1,000 tokens: scale_scores may hold a staged operand across a loop, so its
    buffer starts at scores' step, beside scores' own; writing over scores then overlapped it, and anneal's
    plan failed the formulation's check ("overlap in address while both live")."""
    from spyreopt.model.tiling import node_interval
    from spyreopt.presets import decoder

    problem = so.Problem(decoder(1, 1536, 12, 2, 8960, 1000, name="qwen_layer"))
    widened = {problem.ops[v].name for v in range(len(problem.ops)) if node_interval(problem, v)[0] < v}
    assert "l0.scale_scores" in widened  # the case is still there
    found = donors(problem)
    assert found and all(node_interval(problem, d.consumer)[0] == d.consumer for d in found)
    assert "l0.scale_scores" not in {problem.ops[d.consumer].name for d in found}


# ---- the checker and the simulator reject what is not a legal in-place write ---------------------------
def test_checker_and_simulator_reject_an_illegal_in_place_write(softmax_plans):
    plan = softmax_plans["c"]
    bad = so.Plan.from_json(plan.to_json())
    bad.op("softmax.sum").inplace_over = 0  # a reduction
    with pytest.raises(so.PlanError, match="only a pointwise op may"):
        bad.validate()
    bad.tensor("softmax.sum").address = bad.tensor("softmax.exp").address
    with pytest.raises(so.PlanError, match="only a pointwise op may"):
        so.simulate(bad)

    bad = so.Plan.from_json(plan.to_json())
    bad.op("softmax.exp").inplace_over = None  # the same address without saying so: an overlap
    with pytest.raises(so.PlanError, match="overlap in scratchpad at step 2"):
        bad.validate()
    with pytest.raises(so.PlanError, match="overwrites live tensor 'softmax.sub'"):
        so.simulate(bad)

    bad = so.Plan.from_json(plan.to_json())
    bad.tensor("softmax.exp").address += 128  # not the donor's address: an overlap, and no legal in-place write
    with pytest.raises(so.PlanError, match="overlap in scratchpad at step 2"):
        bad.validate()
    with pytest.raises(so.PlanError, match="overwrites live tensor 'softmax.sub'"):
        so.simulate(bad)


def test_checker_and_simulator_reject_writing_over_an_operand_read_later():
    g = so.Graph("later")
    x = g.input("x", (512, 1024), "fp16")
    y = g.pointwise("exp", x, name="y")
    z = g.pointwise("neg", y, name="z")
    g.output(g.pointwise("add", y, z, name="w"))
    pin = {"y": {"residency": "lx"}, "z": {"residency": "lx"}}
    plan = so.solve(g, hardware=ONE_CORE, backend="cpsat", time_limit=5, seed=0, pin=pin)
    assert plan.op("z").inplace_over is None and plan.tensor("z").address is not None
    bad = so.Plan.from_json(plan.to_json())
    bad.op("z").inplace_over = 0
    bad.tensor("z").address = bad.tensor("y").address
    with pytest.raises(so.PlanError, match=r"'y' is still read later, by \['w'\]"):
        bad.validate()
    with pytest.raises(so.PlanError, match="overwrites live tensor 'y'"):
        so.simulate(bad)


def test_checker_rejects_an_in_place_write_over_a_relaid_out_operand():
    g = so.Graph("relaid")
    x = g.input("x", (512, 1024), "fp16")
    y = g.pointwise("neg", x, name="y")
    z = g.pointwise("exp", y, name="z")
    g.output(g.pointwise("relu", z, name="w"))
    hw = so.HardwareSpec(cores=8)
    pin = {
        "y": {"division": {"d0": 8, "d1": 1}, "residency": "lx"},
        "z": {"division": {"d0": 1, "d1": 8}, "residency": "lx"},
    }
    plan = so.solve(g, hardware=hw, backend="cpsat", time_limit=5, seed=0, pin=pin)
    edge = next(e for e in plan.edges if e.consumer == "z")
    assert edge.mode != "inplace" and plan.op("z").inplace_over is None and plan.tensor("z").address is not None
    bad = so.Plan.from_json(plan.to_json())
    bad.op("z").inplace_over = 0
    bad.tensor("z").address = bad.tensor("y").address
    with pytest.raises(so.PlanError, match="is not read in place"):
        bad.validate()


@pytest.mark.parametrize("backend", ["greedy", "anneal", "cpsat", "milp"])
def test_same_seed_same_plan(backend):
    g = softmax_graph(512, 1024, 0)
    plans = [so.solve(g, hardware=ONE_CORE, backend=backend, time_limit=4, seed=1) for _ in range(2)]
    assert plans[0].to_json() == plans[1].to_json()
    assert device_memory_bytes(plans[0]) == 2 * MN * 2
    plans[0].validate()


def test_old_plans_without_the_field_still_load(softmax_plans):
    import json

    data = json.loads(softmax_plans["no reuse"].to_json())
    for o in data["ops"]:
        o.pop("inplace_over")
    plan = so.Plan.from_json(json.dumps(data))
    assert all(o.inplace_over is None for o in plan.ops)
    plan.validate()
    assert replace(plan.ops[0]).inplace_over is None


@pytest.mark.parametrize("seed", range(10))
def test_exact_backends_agree_on_placed_formulations_with_aliases(seed):
    """MILP places after solving and cuts what does not place; a cut over a group tied by an alias is not a
    proof (a plan without the tie places differently), so its "optimal" must still match CP-SAT's."""
    f = random_formulation(seed, num_nodes=7, max_candidates=4, inplace=True, placement=True, tight=1.0)
    sols = {b: solve_formulation(f, b, time_limit=10, seed=0) for b in ("cpsat", "milp")}
    for sol in sols.values():
        assert f.violations(sol.assignment, sol.offsets) == []
    if all(s.status == "optimal" for s in sols.values()):
        assert sols["cpsat"].objective == sols["milp"].objective
    for b, s in sols.items():
        other = sols["milp" if b == "cpsat" else "cpsat"]
        if s.status == "optimal":
            assert s.objective <= other.objective, b
