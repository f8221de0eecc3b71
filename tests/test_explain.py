"""``Plan.explain``: every stated alternative cost is the plan's cost with that one decision pinned."""

from __future__ import annotations

import pytest

import spyreopt as so
from spyreopt.cli import main
from spyreopt.errors import PlanError
from spyreopt.model.explain_problem import fixed_cost
from spyreopt.model.hardware import HardwareSpec

WORKLOADS = ("softmax", "mlp", "sdpa", "layernorm", "mha", "relayout", "transformer_block")


@pytest.fixture(scope="module")
def plans():
    return {name: so.solve(so.workloads.get(name), backend="greedy", time_limit=10) for name in WORKLOADS}


def test_every_stated_cost_is_the_cost_with_that_alternative_pinned(plans):
    ops, workloads, checked = set(), set(), 0
    for name, plan in plans.items():
        ex = plan.explain()
        assert [x.op for x in ex.ops] == [o.name for o in plan.ops]
        for x in ex.ops:
            for alt in x.alternatives:
                assert alt.reasons, f"{name}/{x.op}: {alt.kind} has no reason"
                if alt.cost_us is None:
                    continue
                assert alt.choice != x.chosen
                # an independent Problem of one candidate per op, the alternative in place of the op's decision
                assert alt.cost_us == pytest.approx(fixed_cost(plan, x.op, alt.choice), abs=1e-6)
                assert any(r.startswith("plan total ") for r in alt.reasons)
                ops.add((name, x.op))
                workloads.add(name)
                checked += 1
    assert len(ops) >= 30 and len(workloads) >= 5, (len(ops), len(workloads))
    assert checked >= 60


def test_the_chosen_decision_evaluates_to_the_plan(plans):
    plan = plans["transformer_block"]
    x = plan.explain().ops[3]
    assert fixed_cost(plan, x.op, x.chosen) == pytest.approx(plan.cost_us, abs=1e-6)


def test_every_edge_not_in_place_has_a_reason(plans):
    for plan in plans.values():
        ex = plan.explain()
        assert len(ex.edges) == sum(e.mode != "inplace" for e in plan.edges)
        for e in ex.edges:
            assert e.reasons and e.consumer in e.reasons[0], (e.tensor, e.reasons)


def test_one_op_and_its_edges():
    plan = so.solve(so.workloads.get("softmax"), backend="greedy")
    ex = plan.explain("softmax.sub")
    assert [x.op for x in ex.ops] == ["softmax.sub"]
    assert all("softmax.sub" in (e.producer, e.consumer) for e in ex.edges)
    assert "op softmax.sub (pointwise)" in ex.text()
    with pytest.raises(PlanError, match="no op 'nope'"):
        plan.explain("nope")


def test_capacity_names_the_step_and_the_live_buffers():
    """On a scratchpad of 10 KiB per core gelu's output cannot stay on chip: the explanation says where."""
    hw = HardwareSpec(planner_fraction=0.005)
    plan = so.solve(so.workloads.get("mlp"), backend="greedy", hardware=hw)
    gelu = plan.explain("gelu").ops[0]
    assert gelu.chosen.residency == "hbm"
    res = next(a for a in gelu.alternatives if a.kind == "residency")
    assert res.cost_us is None
    assert "over capacity at step 2 (down)" in res.reasons[0] and "copy of gelu for down" in res.reasons[0]
    edge = plan.explain().edges[0]
    assert edge.mode == "hbm" and any("keeping gelu on chip" in r and "capacity" in r for r in edge.reasons)


def test_a_pinned_op_says_so():
    pin = {"up": {"division": {"m": 8, "n": 4}}}
    plan = so.solve(so.workloads.get("mlp"), backend="greedy", pin=pin)
    up = plan.explain("up").ops[0]
    assert up.note.startswith("pinned") and up.chosen.division["m"] == 8
    assert all(a.reasons[0].startswith("up is pinned") for a in up.alternatives)


def test_cli_explain(tmp_path, capsys):
    plan = so.solve(so.workloads.get("mlp"), backend="greedy")
    path = tmp_path / "plan.json"
    path.write_text(plan.to_json())
    assert main(["explain", str(path), "--op", "gelu"]) == 0
    out = capsys.readouterr().out
    assert "op gelu (pointwise)" in out and "op up" not in out
    assert main(["explain", str(tmp_path / "missing.json")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_forbidden_capability_is_named_and_the_best_alternative_respects_it():
    plan = so.solve(so.workloads.get("softmax"), backend="greedy", forbid=["relayout"])
    ex = plan.explain()
    reasons = [r for x in ex.ops for a in x.alternatives for r in a.reasons]
    assert any(r.endswith("and the plan forbids relayout") for r in reasons)
    for x in ex.ops:
        best = next(a for a in x.alternatives if a.kind == "best")
        assert not any("forbids" in r for r in best.reasons), (x.op, best.reasons)
        if best.cost_us is not None:
            assert best.cost_us == pytest.approx(fixed_cost(plan, x.op, best.choice), abs=1e-6)
    spill = next(e for e in ex.edges if e.mode == "spill")
    assert "the plan forbids relayout" in spill.reasons[1]


def test_a_whole_model_plan_is_explained_op_by_op():
    """A four-layer decoder planned one layer at a time and stitched: every op and edge gets its reason."""
    from spyreopt.presets import get as preset

    plan = so.solve(preset("tiny", layers=4), backend="greedy", decompose="layers")
    ex = plan.explain()
    assert not ex.notes  # every decision is one of the enumerated candidates, and the cost is the plan's
    assert len(ex.ops) == len(plan.ops) > 100 and all(x.alternatives or x.note for x in ex.ops)
    assert all(e.reasons for e in ex.edges) and len(ex.edges) == sum(e.mode != "inplace" for e in plan.edges)
    costed = [(x.op, a) for x in ex.ops for a in x.alternatives if a.cost_us is not None]
    for op, alt in costed[:: max(1, len(costed) // 8)]:
        assert alt.cost_us == pytest.approx(fixed_cost(plan, op, alt.choice), abs=1e-6), (op, alt.kind)
