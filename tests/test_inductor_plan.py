"""The Inductor pass plans as ``so.solve`` does (``auto`` by default, repeated layers solved once), names
every op after the model's modules, and hands its decisions over per Inductor buffer."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import spyreopt as so  # noqa: E402
import spyreopt.integrations.inductor as si  # noqa: E402
from spyreopt.errors import SolverError  # noqa: E402
from spyreopt.integrations.inductor import examples, families  # noqa: E402
from spyreopt.model.plan_data import EDGE_MODES  # noqa: E402
from spyreopt.solvers import registry  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def tiny_llama(layers: int):
    return families.llama(layers=layers, hidden_size=128, intermediate_size=256, num_attention_heads=4,
                          num_key_value_heads=2, vocab_size=256)  # fmt: skip


def plan_meta(model, seq: int, **options) -> si.CapturedGraph:
    ids = torch.zeros(1, seq, dtype=torch.long, device="meta")
    compiled = torch.compile(model, backend="spyreopt", options={"mode": "analysis", **options}, dynamic=False)
    with torch.no_grad():
        compiled(input_ids=ids, use_cache=False)
    (r,) = si.plans()
    assert r.error is None, r.error
    return r


def test_auto_is_the_default_and_every_backend_of_solve_is_accepted():
    assert si.Options().backend == "auto"
    for name in ["auto", *registry.names()]:
        assert si.Options.from_dict({"backend": name}).backend == name
    with pytest.raises(SolverError, match="auto"):  # the error lists what is known, auto included
        si.Options.from_dict({"backend": "nope"})


def test_repeated_layers_of_a_captured_model_are_solved_once():
    """Inductor names every layer's buffers differently; the segments still key alike."""
    r = plan_meta(tiny_llama(6), 16, time_limit=6)
    auto = r.plan.stats["auto"]
    assert auto["method"].startswith("layers/"), r.plan.message
    assert auto["distinct"] < auto["segments"]
    r.plan.validate()


def test_every_op_is_named_after_its_module():
    r = plan_meta(tiny_llama(1), 16, time_limit=2)
    assert r.unnamed == []  # every op of an HF model has a module path
    q = next(m for m in r.matmuls if r.origin(m.op).module == "model.layers.0.self_attn.q_proj")
    assert r.origin(q.op).source == "aten.mm" and (q.m, q.n, q.k) == (16, 128, 128)
    head = [m for m in r.matmuls if r.origin(m.op).module == "lm_head"]
    assert [(m.m, m.n, m.k) for m in head] == [(16, 256, 128)]
    scores = [m for m in r.matmuls if m.op.endswith(".scores")]
    assert scores and all(r.origin(m.op).module == "model.layers.0.self_attn" for m in scores)
    per_layer = r.rollup(3)
    assert {"model.layers.0", "lm_head"} <= set(per_layer)
    assert sum(row["ops"] for row in per_layer.values()) == len(r.plan.ops)
    assert sum(row["predicted_us"] for row in per_layer.values()) == pytest.approx(
        sum(o.predicted_us for o in r.plan.ops)
    )
    assert {"model.layers.0.self_attn", "model.layers.0.mlp"} <= set(r.rollup(4))
    assert "model.layers.0.mlp.down_proj (aten.mm)" in r.table()
    rep = r.report()
    assert rep["ops"] == r.counts and rep["unnamed"] == 0 and rep["stages"] and rep["simulated_us"] > 0
    assert rep["predicted_us"] == r.plan.cost_us and rep["method"] == r.plan.stats["auto"]["method"]


def test_ops_of_no_module_are_listed():
    (r,) = _run(lambda x, w: torch.relu(x @ w), torch.randn(16, 32), torch.randn(32, 8))
    assert f"{len(r.plan.ops)} op(s) without a module" in r.summary()
    assert r.unnamed == [o.name for o in r.plan.ops] and r.rollup() == {
        "-": {"ops": len(r.plan.ops), "predicted_us": pytest.approx(r.plan.cost_us, rel=0.5)}
    }


def _run(model, *args, options=None):
    compiled = torch.compile(model, backend="spyreopt", options=options or {"mode": "analysis"}, dynamic=False)
    with torch.no_grad():
        torch.testing.assert_close(compiled(*args), model(*args))
    return si.plans()


def test_decisions_cover_every_buffer_and_reproduce_the_plan_as_pins():
    (r,) = _run(examples.Block(), torch.randn(2, 16, 64), options={"mode": "analysis", "time_limit": 3})
    decided = si.decisions(r)
    assert set(decided) == set(r.op_buffer.values())  # every planned buffer
    for buf, d in decided.items():
        w = d.writer
        assert w.op in {o.op for o in d.ops} and r.op_buffer[w.op] == buf
        factors = 1
        for f in w.division.values():
            factors *= f
        assert factors == w.cores
        assert (w.address is None) == (w.residency == "hbm")
        for e in d.consumers:
            assert e.mode in EDGE_MODES and r.op_buffer[e.consumer] == e.consumer_buffer != buf
    attn = next(d for d in decided.values() if any(o.op.endswith(".scores") for o in d.ops))
    assert len(attn.ops) > 5  # an attention kernel's matmuls and softmax, one buffer
    again = so.solve(r.graph, pin=si.pins(decided), time_limit=3)
    for o in r.plan.ops:
        p = again.op(o.name)
        assert (p.division, p.residency, p.stick, p.loop is None) == (o.division, o.residency, o.stick, o.loop is None)
    assert again.cost_us == pytest.approx(r.plan.cost_us, rel=1e-9)


def test_full_mode_attaches_the_decisions_before_scheduling(monkeypatch):
    from torch._inductor import scheduler
    from torch._inductor.virtualized import V

    seen = []
    original = scheduler.Scheduler.__init__

    def reading(self, *args, **kwargs):  # a downstream pass: reads the decisions where Inductor schedules
        seen.append(si.attached(V.graph))
        original(self, *args, **kwargs)

    monkeypatch.setattr(scheduler.Scheduler, "__init__", reading)
    (r,) = _run(examples.MLP(64, 128, 32), torch.randn(16, 64), options={"mode": "full", "time_limit": 2})
    assert r.error is None and seen and seen[0] is not None
    assert set(seen[0]) == set(si.decisions(r)) and seen[0]["buf0"].writer.op in r.graph.ops


def test_op_groups_cover_both_sides_and_separate_the_differences():
    from spyreopt.bench.inductor_groups import DIFFERENCES, GROUPS, SHARED, builder_group, captured_groups, grouped

    assert set(GROUPS) == set(SHARED) | set(DIFFERENCES)
    g = so.presets.get("tiny", seq=16, layers=2)
    plan = so.solve(g, backend="greedy", time_limit=5)
    built = grouped({o.name: builder_group(o.name) for o in plan.ops}, plan)
    assert sum(built.values()) == pytest.approx(plan.cost_us, abs=0.1 * len(GROUPS))
    assert all(built[k] > 0 for k in (*SHARED, "rotary", "norms_residual")) and built["kv_copies"] == 0
    assert [builder_group(n) for n in ("l1.resid_mlp", "l0.k_rope.sum", "l0.softmax.max", "l1.o_proj")] == [
        "norms_residual", "rotary", "attention", "projections"]  # fmt: skip
    r = plan_meta(tiny_llama(2), 16, backend="greedy")
    groups = captured_groups(r)
    captured = grouped(groups, r.plan)
    assert sum(captured.values()) == pytest.approx(r.plan.cost_us, abs=0.1 * len(GROUPS))
    assert all(captured[k] > 0 for k in (*SHARED, "rotary", "norms_residual", "kv_copies"))  # HF's repeat_kv here
    assert {groups[m.op] for m in r.matmuls} == {"projections", "attention", "mlp", "lm_head"}


def test_parameters_are_weights_laid_out_as_the_matmul_reads_them():
    """nn.Linear keeps (out, in); its device layout is chosen at load, so the matmul reads (in, out) as is."""
    with si.capture(backend="greedy", time_limit=2) as graphs:
        torch.compile(examples.MLP(64, 128, 32))(torch.randn(16, 64))
    (r,) = graphs
    assert r.error is None, r.error
    for mm in r.matmuls:
        b = r.graph.tensors[r.graph.ops[mm.op].inputs[1]]
        assert b.role == "weight" and b.producer is None and b.shape == (mm.k, mm.n)
    assert sum("laid out as read" in n for n in r.notes) == 2
