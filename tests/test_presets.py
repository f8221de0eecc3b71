"""Whole models: the decoder builder, presets, backend="auto" and the CLI's model: path."""

from __future__ import annotations

import json
import time
from collections import Counter

import numpy as np
import pytest

import spyreopt as so
from spyreopt.cli import main
from spyreopt.hw.sim_numpy import random_inputs
from spyreopt.presets import decoder
from spyreopt.presets import get as preset
from spyreopt.presets import names as presets

SMALL = {"hidden": 32, "heads": 4, "kv_heads": 2, "intermediate": 64}  # head_dim 8, 2 query heads per kv head


def kinds(g: so.Graph) -> Counter:
    return Counter(o.kind for o in g.ops.values())


# ---- builder -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("phase, extra", [("prefill", {}), ("decode", {"context": 16})])
def test_ops_per_layer_are_constant_and_as_designed(phase, extra):
    seq = 8 if phase == "prefill" else 1
    one, two, three = (decoder(n, **SMALL, seq=seq, phase=phase, vocab=50, **extra) for n in (1, 2, 3))
    per_layer = kinds(two) - kinds(one)
    assert kinds(three) - kinds(two) == per_layer
    # matmuls: q, k, v, scores, context, o, gate, up, down; reductions: two rmsnorm means, softmax max and sum,
    # the rope pair sums of q and k; pointwise: 2 x 4 in the norms, 2 rope products, scale, mask, 3 in the
    # softmax, silu, glu, two residual adds
    if phase == "prefill":
        assert per_layer == Counter({"pointwise": 19, "matmul": 9, "reduce": 6, "reshape": 6, "view": 4})
    else:  # no causal mask for one token; the cache is read as is, new keys and values are outputs
        assert per_layer == Counter({"pointwise": 18, "matmul": 9, "reduce": 6, "reshape": 4, "view": 3})
        assert sum(t.startswith("l1.") for t in three.outputs) == 2


def test_shapes_prefill_vs_decode_and_gqa_broadcast():
    pre = decoder(2, **SMALL, seq=8, vocab=50)
    t = pre.tensors
    assert t["l0.q_proj"].shape == (8, 32) and t["l0.k_proj"].shape == (8, 16)  # 2 kv heads of 8
    assert t["l0.scores"].shape == (2, 2, 8, 8)  # [kv, group, seq, seq]: each kv head serves 2 query heads
    assert t["l1.k_t"].shape == (2, 1, 8, 8) and t["mask"].shape == (8, 8)
    assert t["lm_head"].shape == (8, 50) and pre.outputs == ["lm_head"]
    dec = decoder(2, **SMALL, seq=1, phase="decode", context=16, vocab=50)
    t = dec.tensors
    assert t["x"].shape == (1, 32) and "mask" not in t
    assert t["l0.k_cache"].shape == (2, 1, 16, 8) and t["l0.scores"].shape == (2, 2, 1, 16)
    assert t["l0.context"].shape == (2, 2, 1, 8) and t["lm_head"].shape == (1, 50)
    assert {"l0.k_rope.sum", "l0.v_proj", "lm_head"} <= set(dec.outputs)
    batch = decoder(1, **SMALL, seq=4, phase="decode", context=16)
    assert batch.tensors["mask"].shape == (4, 16) and batch.outputs[-1] == "norm_f.scale"


def _llama_numpy(v: dict, g: so.Graph, heads: int, kv: int, cache: bool) -> np.ndarray:
    """One Llama layer and the final norm, written independently: HF's rotate_half and repeat_kv."""
    x = v["x"]
    d = g.tensors["l0.wq"].shape[1] // heads

    def rms(a, w):
        return a / np.sqrt((a * a).mean(-1, keepdims=True)) * w

    def rope(a, n):  # [s, n*d]: x*cos + rotate_half(x)*sin with the angles of the table
        a = a.reshape(len(a), n, d)
        cos, sin = v["rope"][:, 0, 1, 1, :], v["rope"][:, 0, 1, 0, :]  # [s, d/2]
        cos, sin = np.concatenate([cos, cos], -1)[:, None], np.concatenate([sin, sin], -1)[:, None]
        half = np.concatenate([-a[..., d // 2 :], a[..., : d // 2]], -1)
        return a * cos + half * sin

    h = rms(x, v["l0.attn_norm"])
    q = rope(h @ v["l0.wq"], heads)  # [s, heads, d]
    if cache:
        k = v["l0.k_cache"][:, 0]  # [kv, ctx, d]
        vv = v["l0.v_cache"][:, 0]
    else:
        k = rope(h @ v["l0.wk"], kv).transpose(1, 0, 2)
        vv = (h @ v["l0.wv"]).reshape(len(x), kv, d).transpose(1, 0, 2)
    k, vv = np.repeat(k, heads // kv, axis=0), np.repeat(vv, heads // kv, axis=0)  # repeat_kv: [heads, ctx, d]
    s = np.einsum("shd,hcd->hsc", q, k) * v["l0.scale"][0]
    if "mask" in v:
        s = s + v["mask"]
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ctx = np.einsum("hsc,hcd->shd", p, vv).reshape(len(x), heads * d)
    x = x + ctx @ v["l0.wo"]
    h = rms(x, v["l0.mlp_norm"])
    gate = h @ v["l0.w_gate"]
    x = x + (gate / (1 + np.exp(-gate)) * (h @ v["l0.w_up"])) @ v["l0.w_down"]
    return rms(x, v["norm_f"])


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_gqa_and_rope_compute_a_llama_layer(phase):
    seq, ctx = (6, None) if phase == "prefill" else (1, 10)
    g = decoder(1, **SMALL, seq=seq, phase=phase, context=ctx, dtype="fp32")
    values = random_inputs(g, seed=3)
    pos = np.arange(seq)[:, None] + (ctx - seq if ctx else 0)
    angle = pos / 10000.0 ** (np.arange(4) / 4)  # [seq, d/2]
    c, s = np.cos(angle), np.sin(angle)
    values["rope"] = np.stack([np.stack([c, -s], 1), np.stack([s, c], 1)], 1)[:, None].astype(np.float32)
    values["l0.scale"] = np.array([8**-0.5], np.float32)
    if seq > 1:
        values["mask"] = np.triu(np.full((seq, seq), -1e4, np.float32), 1)
    got = so.reference(g, values)["norm_f.scale"]
    want = _llama_numpy(values, g, heads=4, kv=2, cache=phase == "decode")
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_builder_errors_name_the_field():
    with pytest.raises(so.GraphError, match="multiple of kv_heads"):
        decoder(1, 32, 4, 3, 64, 8)
    with pytest.raises(so.GraphError, match="decode needs context"):
        decoder(1, 32, 4, 2, 64, 1, phase="decode")
    with pytest.raises(so.GraphError, match="context"):
        decoder(1, 32, 4, 2, 64, 8, phase="decode", context=4)
    with pytest.raises(so.GraphError, match="phase"):
        decoder(1, 32, 4, 2, 64, 8, phase="train")
    with pytest.raises(so.GraphError, match="layers"):
        decoder(0, 32, 4, 2, 64, 8)
    with pytest.raises(so.GraphError, match="even head_dim"):
        decoder(1, 12, 4, 2, 64, 8)


# ---- presets -------------------------------------------------------------------------------------------------------


def test_presets_have_public_shapes():
    assert presets() == ["llama-3-8b", "granite-3.3-8b", "mistral-7b", "tiny"]
    g = preset("llama-3-8b", layers=1)
    t = g.tensors
    assert t["x"].shape == (2048, 4096) and t["l0.wk"].shape == (4096, 1024) and t["l0.w_up"].shape == (4096, 14336)
    assert t["lm_head"].shape == (2048, 128256) and t["lm_head.w"].shape == (4096, 128256)
    assert preset("granite-3.3-8b", layers=1).tensors["l0.w_gate"].shape == (4096, 12800)
    assert preset("mistral-7b", layers=1).tensors["lm_head"].shape == (2048, 32000)
    d = preset("llama-3-8b", phase="decode", layers=1)
    assert d.tensors["l0.k_cache"].shape == (8, 1, 4096, 128) and d.tensors["x"].shape == (1, 4096)
    assert len(preset("llama-3-8b").ops) > 1000  # the full 32-layer prefill
    with pytest.raises(so.GraphError, match="unknown model preset"):
        preset("gpt-5")


# ---- auto ----------------------------------------------------------------------------------------------------------


def test_auto_is_the_default_and_proves_small_graphs():
    plan = so.solve(so.workloads.get("mlp"), time_limit=10)
    assert plan.backend == "auto" and plan.status == "optimal"
    assert plan.stats["auto"]["method"] == "exact" and plan.message.startswith("auto: exact")
    assert plan.cost_us <= so.solve(so.workloads.get("mlp"), "greedy").cost_us


def test_auto_decomposes_repeated_layers_within_the_limit_and_deterministically():
    g = preset("tiny", phase="decode", layers=3)
    start = time.perf_counter()
    plan = so.solve(g, time_limit=12, seed=1)
    assert time.perf_counter() - start < 12 + 2  # the deadline, plus the final validation
    plan.validate()
    report = plan.stats["auto"]
    assert report["method"].startswith("layers/") and report["segments"] == 4 and report["distinct"] == 2
    assert "over 4 segments" in plan.message
    greedy = so.solve(g, "greedy", decompose="layers")
    assert plan.cost_us <= greedy.cost_us
    assert so.solve(g, time_limit=12, seed=1).to_json() == plan.to_json()  # budgets are steps, not seconds


def test_auto_replans_the_cuts_on_the_full_graph():
    g = preset("tiny", phase="decode", layers=3)
    plan = so.solve(g, time_limit=20)
    plan.validate()
    report = plan.stats["auto"]
    # per cut the residual's producer and readers: 3 in a layer (norm square and scale, residual add), 2 in norm_f
    assert "+cuts" in report["method"] and report["cut_ops"] == 4 + 4 + 3
    (cuts,) = [s for s in report["stages"] if s.get("segment") == "cuts"]
    assert plan.stats["objective_units"] <= cuts["start"]  # never worse than the stitched plan it starts from
    assert plan.status == "feasible" and plan.cost_us <= so.solve(g, "greedy", decompose="layers").cost_us


def test_ctrl_c_returns_the_best_plan_so_far():
    def interrupt(label):
        if label.endswith(": start"):  # the start plan exists: Ctrl-C now
            raise KeyboardInterrupt

    plan = so.solve(so.workloads.get("mha"), time_limit=30, on_stage=interrupt)
    plan.validate()
    assert plan.status == "interrupted" and plan.stats["auto"]["interrupted"] and "interrupted" in plan.message
    assert [s["backend"] for s in plan.stats["auto"]["stages"]] == ["hbm", "greedy"]
    assert so.Plan.from_json(plan.to_json()).status == "interrupted"


def test_ctrl_c_before_any_plan_propagates():
    def interrupt(label):
        raise KeyboardInterrupt

    g = preset("tiny", phase="decode", layers=3)
    with pytest.raises(KeyboardInterrupt):  # the first segment's start is in, the other distinct one is not
        so.solve(g, time_limit=10, on_stage=interrupt)


def test_auto_rejects_unknown_options():
    with pytest.raises(so.SolverError, match="unknown option"):
        so.solve(so.workloads.get("mlp"), backend="auto", steps=5)


# ---- CLI -----------------------------------------------------------------------------------------------------------


def test_cli_solves_a_model_preset(tmp_path, capsys):
    out = tmp_path / "plan.json"
    args = ["solve", "model:tiny", "--phase", "decode", "--layers", "2", "--context", "64", "--time-limit", "8"]
    assert main([*args, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "tiny_decode_2l_s1_c64" in text and "note: auto: layers/" in text and "[auto, " in text
    plan = so.Plan.from_json(out.read_text())
    plan.validate()
    assert json.loads(out.read_text())["graph"]["name"] == "tiny_decode_2l_s1_c64"


def test_cli_model_options_need_a_model(capsys):
    assert main(["solve", "mlp", "--seq", "8"]) == 2
    assert "model: preset" in capsys.readouterr().err
    assert main(["solve", "model:nope"]) == 2
    assert "unknown model preset" in capsys.readouterr().err


def test_models_bench_rows_compare_auto_with_a_baseline():
    from spyreopt.bench import models as bench

    rows = bench.run(
        [("tiny", "decode", 1, 64)], time_limit=10, baselines=("greedy",), baseline_factor=1, progress=False
    )
    auto, greedy = rows
    assert (auto.backend, greedy.backend) == ("auto", "greedy") and auto.valid and greedy.valid
    assert auto.workload == "tiny_decode_2l_s1_c64" and auto.ops == greedy.ops > 50
    assert auto.note.startswith(("within 10 s wall", "over 10 s wall")) and "auto/greedy cost" in greedy.note
    assert auto.cost_us <= greedy.cost_us
    assert "+whole" in auto.note  # whole-graph greedy was a candidate (its window moves cross the cuts)


def test_ctrl_c_in_a_layer_decomposition_finishes_with_greedy(tmp_path, monkeypatch):
    import sys
    import types

    from spyreopt.solvers import registry

    ctrl_c = types.ModuleType("ctrl_c_backend")  # a backend the user interrupts: Ctrl-C during its search

    def solve(f, **kw):
        raise KeyboardInterrupt

    ctrl_c.solve = solve
    monkeypatch.setitem(sys.modules, "ctrl_c_backend", ctrl_c)
    monkeypatch.setitem(registry.BACKENDS, "ctrl_c", registry.Backend("ctrl_c_backend"))
    g = preset("tiny", phase="decode", layers=3)
    plan = so.solve(g, backend="ctrl_c", decompose="layers", cache=tmp_path)
    plan.validate()
    assert plan.status == "interrupted" and plan.stats["decomposition"]["distinct"] == 2
    assert plan.cost_us == so.solve(g, "greedy", decompose="layers").cost_us
    assert so.PlanCache(tmp_path).stats().entries == 0  # greedy's stand-in plans are not stored as ctrl_c's


def test_ctrl_c_still_works_after_a_cpsat_stage():
    """CP-SAT resets SIGINT to the default (kill the process) after its search; auto restores Ctrl-C."""
    import os
    import subprocess
    import sys

    script = (
        "import os, signal, time\n"
        "import spyreopt as so\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"  # a parent run in the background ignores it
        "plan = so.solve(so.workloads.get('mlp'), time_limit=5)\n"
        "assert plan.stats['auto']['stages'][-1]['backend'] == 'cpsat'\n"
        "try:\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(5)\n"
        "except KeyboardInterrupt:\n"
        "    print('KeyboardInterrupt')\n"
    )
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(so.__file__))}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "KeyboardInterrupt", done.stderr[-500:]
