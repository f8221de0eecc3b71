"""Pin and forbid: every backend honours them, plans stay valid, bad pins are typed errors naming op and rule."""

from __future__ import annotations

import json

import pytest

import spyreopt as so
from spyreopt.cli import main
from spyreopt.model.restrict import Restriction, check_restriction, make_problem
from spyreopt.model.staging import staged_inputs

BACKENDS = ("greedy", "anneal", "cpsat", "milp")


def _decode(m: int = 8, k: int = 4096, n: int = 4096) -> so.Graph:
    g = so.Graph("proj")
    g.output(g.matmul(g.input("x", (m, k)), g.weight("w", (k, n)), name="mm"))
    return g


@pytest.mark.parametrize("backend", BACKENDS)
def test_pinned_division_is_planned_by_every_backend(backend):
    g = _decode()
    free = so.solve(g, backend=backend, time_limit=2)
    plan = so.solve(g, backend=backend, time_limit=2, pin={"mm": {"division": {"m": 8, "n": 1, "k": 2}}})
    assert plan.op("mm").division == {"m": 8, "n": 1, "k": 2}
    assert plan.cost_us > free.cost_us  # the published worst split is worse than the planner's own
    assert plan.stats["restriction"]["pin"] == {"mm": {"division": {"m": 8, "n": 1, "k": 2}}}
    plan.validate()
    so.Plan.from_json(plan.to_json()).validate()


def test_partial_pin_leaves_other_dims_free():
    plan = so.solve(_decode(), pin={"mm": {"division": {"m": 2}}})
    assert plan.op("mm").division["m"] == 2
    assert plan.op("mm").cores > 2  # n or k split by the planner


@pytest.mark.parametrize("backend", BACKENDS)
def test_forbid_inplace_keeps_every_tensor_in_device_memory(backend):
    g = so.workloads.get("softmax")
    plan = so.solve(g, backend=backend, time_limit=2, forbid=("inplace",))
    assert all(t.residency == "hbm" for t in plan.tensors)
    assert all(e.mode == "hbm" for e in plan.edges)
    assert plan.cost_us > so.solve(g, backend=backend, time_limit=2).cost_us


@pytest.mark.parametrize("backend", BACKENDS)
def test_forbid_relayout(backend):
    g = so.workloads.get("relayout")
    assert any(e.mode == "relayout" for e in so.solve(g, backend=backend, time_limit=2).edges)
    plan = so.solve(g, backend=backend, time_limit=2, forbid="relayout")
    assert not any(e.mode == "relayout" for e in plan.edges)
    plan.validate()


def test_forbid_restickify():
    g = so.Graph("t")
    e = g.pointwise("exp", g.transpose(g.input("x", (512, 1024)), 0, 1), name="exp")
    g.output(g.reduce("sum", e, -1, name="sum"))
    free, restricted = so.Problem(g), make_problem(g, forbid="restickify")
    assert len(restricted.candidates[0]) < len(free.candidates[0])  # layouts reading x in another stick are gone
    for backend in BACKENDS:
        plan = so.solve(g, backend=backend, time_limit=2, forbid=["restickify"])
        assert not any(e.restickify for e in plan.edges)
        assert all(o.breakdown["restickify"] == 0 for o in plan.ops)
    with pytest.raises(so.PlanError, match="'proj_k' -> 'scores'.*needs a restickify"):
        so.solve(so.workloads.get("mha"), forbid="restickify")  # k is written stick-on-last, read transposed


def test_pinned_residency_and_forbid_staging():
    g = so.workloads.get("softmax")
    plan = so.solve(g, pin={"softmax.exp": {"residency": "hbm"}, "softmax.max": {"residency": "lx"}})
    assert plan.op("softmax.exp").residency == "hbm"
    assert plan.op("softmax.max").residency in ("lx", "lx+hbm")
    free = so.solve(g)
    unstaged = so.solve(g, forbid=("staging",))  # staging: tests/test_staging.py
    assert not staged_inputs(unstaged)
    assert free.cost_us <= unstaged.cost_us + 1e-9


@pytest.mark.parametrize(
    ("pin", "forbid", "message"),
    [
        ({"nope": {"residency": "lx"}}, (), "op 'nope' is not an op of the graph"),
        ({"mm": {"division": {"q": 2}}}, (), "op 'mm': pin names dim 'q'; its dims are m, n, k"),
        ({"mm": {"division": {"n": 3}}}, (), "factor 3 on dim n does not divide"),
        ({"mm": {"division": {"m": 8, "n": 8}}}, (), "uses 64 cores, more than 32"),
        ({"mm": {"division": {"m": 0}}}, (), "pin['mm'].division.m: expected a positive integer"),
        (
            {"mm": {"residency": "lx"}},
            (),
            "op 'mm': residency 'lx' pinned but not possible: its output has no consumer",
        ),
        ({"mm": {"residency": "sram"}}, (), "pin['mm'].residency: 'sram' not one of"),
        ({"mm": {"cores": 4}}, (), "pin['mm']: unknown key(s) ['cores']"),
        ({}, ("relayout", "tiles"), "forbid: unknown capability ['tiles']"),
        ({}, ("relayout", 3), "forbid: expected capability names (strings)"),
    ],
)
def test_bad_pins_are_typed_errors_naming_op_and_rule(pin, forbid, message):
    with pytest.raises(so.PlanError) as info:
        so.solve(_decode(), pin=pin, forbid=forbid)
    assert message in str(info.value)


def test_infeasible_pins_name_the_rule():
    g = so.workloads.get("softmax")
    hw = so.HardwareSpec(cores=1)  # one 1 MiB slice fits in the 1.55 MiB scratchpad, two do not
    with pytest.raises(so.PlanError, match="forbid inplace keeps every tensor in device memory"):
        so.solve(g, hardware=hw, pin={"softmax.sub": {"residency": "lx"}}, forbid="inplace")
    big = so.Graph("big")
    y = big.pointwise("neg", big.input("x", (2048, 1024)), name="neg")
    big.output(big.pointwise("relu", y, name="relu"))
    with pytest.raises(so.PlanError, match="op 'neg': residency 'lx' pinned but not possible: its output needs"):
        so.solve(big, hardware=hw, pin={"neg": {"residency": "lx"}}, forbid="tiling")  # a loop would fit a tile
    pin = {"neg": {"division": {"d0": 8, "d1": 1}, "residency": "lx"}, "relu": {"division": {"d0": 1, "d1": 8}}}
    with pytest.raises(so.PlanError, match=r"edge 'neg' -> 'relu' \(tensor 'neg'\): no allowed pair.*needs a relayout"):
        so.solve(big, pin=pin, forbid="relayout,restickify")  # the model takes a cheaper relayout over the spill


def test_check_restriction_reads_the_plan_alone():
    plan = so.solve(_decode())
    with pytest.raises(so.PlanError, match="op 'mm': pinned m=8"):
        check_restriction(plan, Restriction.of({"mm": {"division": {"m": 8}}}, None))
    relayout = so.solve(so.workloads.get("relayout"))
    with pytest.raises(so.PlanError, match="uses a forbidden capability"):
        check_restriction(relayout, Restriction.of(None, "relayout"))


def test_pin_with_a_built_problem_is_refused():
    with pytest.raises(so.SolverError, match="pin/forbid"):
        so.solve(so.Problem(_decode()), forbid="relayout")


def test_cli_pin_and_forbid(tmp_path, capsys):
    pin = tmp_path / "pin.json"
    pin.write_text(json.dumps({"proj": {"division": {"m": 8, "n": 4}}}))
    out = tmp_path / "plan.json"
    assert main(["solve", "decode_proj", "--pin", str(pin), "--forbid", "relayout,staging", "--out", str(out)]) == 0
    plan = so.Plan.from_json(out.read_text())
    assert plan.op("proj").division["m"] == 8 and plan.op("proj").division["n"] == 4
    assert plan.stats["restriction"]["forbid"] == ["relayout", "staging"]
    pin.write_text(json.dumps({"proj": {"division": {"x": 2}}}))
    assert main(["solve", "decode_proj", "--pin", str(pin)]) == 2
    assert "PlanError: op 'proj': pin names dim 'x'" in capsys.readouterr().err
    pin.write_text("[1, 2]")
    assert main(["solve", "decode_proj", "--pin", str(pin)]) == 2
    assert "FormatError: pin file" in capsys.readouterr().err


@pytest.mark.parametrize("backend", ["hbm", "independent"])
def test_baselines_honour_divisions_and_refuse_on_chip_pins(backend):
    g = so.workloads.get("softmax")
    plan = so.solve(g, backend=backend, pin={"softmax.sub": {"division": {"d0": 4}}})
    assert plan.op("softmax.sub").division["d0"] == 4
    with pytest.raises(so.SolverError, match=f"backend '{backend}' is a baseline.*'softmax.max'"):
        so.solve(g, backend=backend, pin={"softmax.max": {"residency": "lx"}})


def test_batch_dim_alias_and_views():
    g = so.Graph("bmm")
    a, b = g.input("a", (4, 64, 128)), g.input("b", (4, 128, 256))
    g.output(g.matmul(a, b, name="mm"))
    plan = so.solve(g, pin={"mm": {"division": {"b": 4, "m": 2}}})
    assert plan.op("mm").division["b0"] == 4 and plan.op("mm").division["m"] == 2
    v = so.Graph("view")
    t = v.transpose(v.input("x", (256, 128)), 0, 1, name="t")
    v.output(v.pointwise("exp", t, name="exp"))
    with pytest.raises(so.PlanError, match="op 't' is a view"):
        so.solve(v, pin={"t": {"residency": "hbm"}})
