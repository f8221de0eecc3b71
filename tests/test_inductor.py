"""The Inductor adapter: capture after lowering, translation to a spyreopt Graph, plans, modes, failures.

Most tests use analysis mode (capture and plan, then run eagerly: about a second per graph);
two use full mode, where Inductor generates and runs code.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch._inductor.graph import GraphLowering  # noqa: E402

import spyreopt.integrations.inductor as si  # noqa: E402
from spyreopt.errors import SolverError  # noqa: E402
from spyreopt.integrations.inductor import examples, hook  # noqa: E402
from spyreopt.integrations.inductor.groups import Dim, Read, group_loop, var_cuts  # noqa: E402

ANALYSIS = {"mode": "analysis", "backend": "greedy", "time_limit": 5}


pytestmark = pytest.mark.usefixtures("fresh_compiler")


# ---- models -----------------------------------------------------------------------
def mlp() -> nn.Module:
    return examples.MLP(64, 128, 32)


# ---- helpers ----------------------------------------------------------------------
def run(model, *args, options=ANALYSIS):
    """Compile and run without grad; compare with eager; return the captured graphs."""
    compiled = torch.compile(model, backend="spyreopt", options=options, dynamic=False)
    with torch.no_grad():
        torch.testing.assert_close(compiled(*args), model(*args))
    return si.plans()


def train_step(model, x, options=ANALYSIS):
    """One training step compiled vs eager: outputs and every parameter gradient must agree."""
    compiled = torch.compile(model, backend="spyreopt", options=options, dynamic=False)
    loss = compiled(x).square().mean()
    loss.backward()
    got = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    ref = model(x).square().mean()
    ref.backward()
    torch.testing.assert_close(loss, ref)
    for n, p in model.named_parameters():
        torch.testing.assert_close(got[n], p.grad, msg=f"gradient of {n}")
    return si.plans()


def check(record) -> None:
    """A captured graph: no failure, a valid plan, every op mapped back to an Inductor buffer."""
    assert record.error is None, record.error
    record.plan.validate()
    assert set(record.op_buffer) == set(record.graph.ops)
    assert sum(n for k, n in record.counts.items() if k != "opaque") == len(record.graph.ops)
    assert {o.name for o in record.plan.ops} <= set(record.graph.ops)
    for mm in record.matmuls:
        op = record.graph.ops[mm.op]
        assert op.kind == "matmul"
        a, b = (record.graph.tensors[x].shape for x in op.inputs)
        out = record.graph.tensors[op.output].shape
        assert a[-1] == b[-2] == mm.k
        assert out[-1] == mm.n
        assert math.prod(out[:-1]) == mm.batch * mm.m


def mnk(records) -> list[tuple[int, int, int, int]]:
    return sorted((m.batch, m.m, m.n, m.k) for r in records for m in r.matmuls)


# ---- acceptance: models ----------------------------------------------------------
def test_mlp_matmuls_bias_and_gelu():
    (r,) = run(mlp(), torch.randn(16, 64))
    check(r)
    assert r.kind == "inference"
    assert mnk([r]) == [(1, 16, 32, 128), (1, 16, 128, 64)]
    assert r.counts["matmul"] == 2 and r.counts["opaque"] == 0 and "reshape" not in r.counts
    fns = sorted(o.attrs["fn"] for o in r.graph.ops.values() if o.kind == "pointwise")
    assert fns == ["add", "add", "gelu"]  # two addmm biases, one fused GELU
    assert r.graph.ops[r.matmuls[0].op].kind == "matmul" and r.op_buffer[r.matmuls[0].op] == r.matmuls[0].buffer


def test_swiglu_on_tokens_keeps_token_dims_flat():
    (r,) = run(examples.SwiGLU(64, 128), torch.randn(2, 16, 64))
    check(r)
    assert mnk([r]) == [(1, 32, 64, 128), (1, 32, 128, 64), (1, 32, 128, 64)]
    # (2, 16) tokens need no copy between the matmuls; the notes only say the three weights are laid out as read
    assert "reshape" not in r.counts and len(r.notes) == 3 and all("laid out as read" in n for n in r.notes)


def test_batched_and_unit_batch_matmuls():
    (r,) = run(examples.SwiGLU(64, 128), torch.randn(1, 16, 64))
    check(r)
    assert r.counts["opaque"] == 0 and mnk([r]) == [(1, 16, 64, 128), (1, 16, 128, 64), (1, 16, 128, 64)]
    for b in (1, 4):
        si.clear()
        torch._dynamo.reset()
        args = torch.randn(b, 16, 8), torch.randn(b, 16, 32), torch.randn(b, 32, 8)
        (r,) = run(lambda c, x, y: torch.baddbmm(c, x, y).relu() + torch.bmm(x, y), *args)
        check(r)
        assert r.counts["opaque"] == 0 and mnk([r]) == [(b, 16, 8, 32)] * 2
        out = r.graph.tensors[r.graph.outputs[0]].shape
        assert math.prod(out) == b * 16 * 8


def test_softmax_fp16_keeps_fp32_intermediates():
    (r,) = run(lambda x: torch.softmax(x, -1), torch.randn(64, 128, dtype=torch.float16))
    check(r)
    assert r.counts == {"opaque": 0, "pointwise": 2, "reduce": 2}
    dtypes = {o.kind + ":" + o.attrs["fn"]: r.graph.tensors[o.output].dtype for o in r.graph.ops.values()}
    assert dtypes["reduce:max"] == dtypes["reduce:sum"] == "fp32"
    out = r.graph.outputs[0]
    assert r.graph.tensors[out].dtype == "fp16" and r.graph.tensors[out].shape == (64, 128)
    assert r.graph.tensors["arg0_1"].dtype == "fp16"


def test_layernorm_forward_and_backward_captured():
    records = train_step(nn.LayerNorm(128), torch.randn(64, 128))
    assert sorted(r.kind for r in records) == ["backward", "forward"]
    for r in records:
        check(r)
        assert r.counts["reduce"] >= 2 and r.counts["opaque"] == 0
    fwd = next(r for r in records if r.kind == "forward")
    reduced = [fwd.graph.tensors[o.output].shape for o in fwd.graph.ops.values() if o.kind == "reduce"]
    assert reduced == [(64, 1), (64, 1)]  # mean and variance per row, kept as Inductor's keepdim buffers


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_becomes_matmuls_and_softmax(causal):
    q, k, v = (torch.randn(1, 4, 64, 32) for _ in range(3))
    (r,) = run(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal), q, k, v)
    check(r)
    assert mnk([r]) == [(4, 64, 32, 64), (4, 64, 64, 32)]  # context, scores
    assert r.counts["reduce"] == 2 and r.counts["opaque"] == 0
    mask_leaves = [t for t in r.graph.tensors if "causal_mask" in t]
    assert len(mask_leaves) == int(causal)


def test_transformer_block_training_step_captures_forward_and_backward():
    records = train_step(examples.Block(), torch.randn(2, 16, 64))
    assert sorted(r.kind for r in records) == ["backward", "forward"]
    for r in records:
        check(r)
        assert r.counts["opaque"] == 0
    fwd = next(r for r in records if r.kind == "forward")
    proj = [(1, 32, 64, 64)] * 4 + [(1, 32, 64, 128), (1, 32, 128, 64)]
    assert mnk([fwd]) == sorted(proj + [(8, 16, 16, 16)] * 2)  # + attention scores and context (batch x heads)
    bwd = next(r for r in records if r.kind == "backward")
    # 2 matmuls per linear layer (input and weight gradients) and 5 for attention (scores recomputed, 4 gradients)
    assert len(bwd.matmuls) == 2 * 6 + 5
    assert sum(1 for m in bwd.matmuls if m.kernel == "sdpa_backward") == 5


# ---- modes and entry points ---------------------------------------------------------
def test_full_mode_training_generates_code_and_plans_both_graphs():
    records = train_step(mlp(), torch.randn(16, 64), options={"mode": "full", "backend": "greedy", "time_limit": 5})
    assert sorted(r.kind for r in records) == ["backward", "forward"]
    for r in records:
        check(r)
    assert not si.installed() and GraphLowering.codegen is not hook._codegen_with_capture


def test_capture_block_plans_plain_inductor_and_removes_the_hook():
    original = GraphLowering.codegen
    x = torch.randn(32, 64)
    with si.capture(backend="greedy", time_limit=5) as graphs:
        assert si.installed() and GraphLowering.codegen is not original
        torch.testing.assert_close(torch.compile(lambda x: torch.softmax(x, -1))(x), torch.softmax(x, -1))
    assert not si.installed() and GraphLowering.codegen is original
    (r,) = graphs
    check(r)
    assert si.plans() == graphs


def test_backend_is_registered_and_options_are_checked():
    assert "spyreopt" in torch._dynamo.list_backends()
    assert si.Options.from_dict({"backend": "cpsat", "time_limit": 3}).backend == "cpsat"
    for bad in ({"backnd": "greedy"}, {"backend": "nope"}, {"mode": "fast"}, {"time_limit": 0}):
        with pytest.raises(SolverError):
            si.Options.from_dict(bad)
    with pytest.raises(SolverError, match="analysis"):
        with si.capture(mode="analysis"):
            pass


def test_install_is_counted_and_uninstall_restores():
    original = GraphLowering.codegen
    si.install()
    si.install()
    si.uninstall()
    assert si.installed() and GraphLowering.codegen is not original
    si.uninstall()
    assert not si.installed() and GraphLowering.codegen is original
    si.uninstall()  # an extra uninstall is a no-op
    assert GraphLowering.codegen is original


def test_solve_options_reach_the_solver():
    (r,) = run(mlp(), torch.randn(16, 64), options={"mode": "analysis", "backend": "cpsat", "time_limit": 5, "seed": 3})
    check(r)
    asked = r.plan.stats.get("requested_backend", r.plan.backend)  # plan.backend: whose plan it is (greedy's?)
    assert asked == "cpsat" and r.plan.backend in ("cpsat", "greedy") and r.plan.seed == 3 and r.solve_seconds > 0


# ---- failures and opaque ops ---------------------------------------------------------
@pytest.mark.parametrize("mode", ["analysis", "full"])
def test_translation_failure_is_reported_and_the_program_still_runs(monkeypatch, mode):
    def broken(lowering, name, parameters):
        raise RuntimeError("boom")

    monkeypatch.setattr(hook, "translate", broken)
    x = torch.randn(8, 16)
    (r,) = run(lambda x: torch.softmax(x, -1), x, options={"mode": mode})
    assert r.plan is None and r.error.startswith("translation failed: RuntimeError: boom")
    assert not r.ok


def test_solve_failure_is_reported(monkeypatch):
    def broken(*args, **kwargs):
        raise SolverError("no plan today")

    monkeypatch.setattr(hook, "solve", broken)
    (r,) = run(mlp(), torch.randn(16, 64))
    assert r.graph is not None and r.plan is None and r.error == "solve failed: SolverError: no plan today"


def test_unsupported_nodes_become_opaque_ops_with_reasons():
    def f(x, w):
        y = torch.cummax(x, dim=1).values  # an ATen fallback kernel: not modelled
        return (y @ w).argmax(dim=-1), torch.relu(y)  # argmax: a reduction that is not modelled

    (r,) = run(f, torch.randn(16, 32), torch.randn(32, 8))
    check(r)
    assert r.counts["opaque"] == len(r.opaque) >= 2
    reasons = " | ".join(r.opaque.values())
    assert "cummax" in reasons and "argmax" in reasons
    for buf in r.opaque:
        if buf in r.graph.ops:  # opaque ops with data are copies of a stand-in input, planned like any op
            op = r.graph.ops[buf]
            assert op.kind == "pointwise" and op.attrs["fn"] == "copy"
            assert r.graph.tensors[op.inputs[0]].producer is None
    relu = [o for o in r.graph.ops.values() if o.attrs.get("fn") == "relu"]
    assert len(relu) == 1 and relu[0].inputs[0] in r.opaque  # its consumer reads the opaque op's output
    assert mnk([r]) == [(1, 16, 8, 32)]


def test_slices_are_read_through_device_memory():
    lin = nn.Linear(64, 192)

    def f(x):
        q, k, v = lin(x).chunk(3, dim=-1)  # slices of one matmul output
        return q * k + v

    (r,) = run(f, torch.randn(32, 64))
    check(r)
    mm = r.matmuls[0]
    assert (mm.batch, mm.m, mm.n, mm.k) == (1, 32, 192, 64)
    assert mm.buffer in r.graph.outputs  # the sliced matmul output goes to device memory
    assert any("through device memory" in n for n in r.notes)


# ---- index algebra (no torch needed, but it lives with its only user) ---------------------
def test_var_cuts_tell_views_from_slices():
    dims = (Dim(32, 128), Dim(128, 1))  # a contiguous (32, 128) tensor
    assert var_cuts(Read((2048, 128, 1), dims), (2, 16, 128)) == {0: {1}, 1: {1}, 2: {1}}  # split rows: clean
    assert var_cuts(Read((128, 1), (Dim(2, 2048), Dim(16, 128), Dim(128, 1))), (32, 128)) == {0: {1, 16}, 1: {1}}
    assert "slice" in var_cuts(Read((128, 1), dims, offset=64), (32, 64))
    assert "part of the tensor" in var_cuts(Read((128, 1), dims), (32, 64))
    assert "not affine" in var_cuts(Read((0, 0), dims, affine=False), (32, 128))


def test_group_loop_merges_cuts_and_regroups():
    ranges, out = (2, 16, 128), (2048, 128, 1)
    flat = Read((2048, 128, 1), (Dim(32, 128), Dim(128, 1)))  # a (32, 128) producer read as (2, 16, 128)
    split = Read((2048, 128, 1), (Dim(2, 2048), Dim(16, 128), Dim(128, 1)))
    gp = group_loop(ranges, ("x",) * 3, [flat], out)
    assert [gp.size(g) for g in range(len(gp.groups))] == [32, 128] and gp.status == ["ok"]
    gp = group_loop(ranges, ("x",) * 3, [split, flat], out)
    assert [gp.size(g) for g in range(len(gp.groups))] == [2, 16, 128] and gp.status == ["ok", "regroup"]
    # a matmul's k may not be cut: an operand whose k spans two dims is regrouped by a copy
    a = Read((64, 0, 1), (Dim(8, 64), Dim(4, 16), Dim(16, 1)))
    gp = group_loop((8, 8, 64), ("m", "n", "k"), [a], (8, 1, 0), atomic=frozenset("kn"), reduced=frozenset("k"))
    assert gp.status == ["regroup"]


# ---- ops of common models (fast, plain torch; the Hugging Face families are in test_inductor_families) ----
def test_embedding_gather_is_a_device_memory_read_of_the_rows():
    table = nn.Embedding(100, 64)
    ids = torch.randint(0, 100, (2, 16))
    (r,) = run(lambda i: torch.relu(table(i)), ids)
    check(r)
    assert r.counts["opaque"] == 0
    rows = [t for t in r.graph.tensors.values() if ".rows@" in t.name]
    assert len(rows) == 1 and rows[0].producer is None and rows[0].nbytes == 2 * 16 * 64 * 4  # the rows, not the table
    assert any(t.dtype == "int64" for t in r.graph.tensors.values())  # the indices, at their own size


def test_concatenation_pieces_go_through_device_memory():
    lin = nn.Linear(32, 32)

    def f(x):
        y = lin(x)
        return torch.cat([y.sigmoid(), y.tanh()], dim=0) * 2  # two pieces written into one buffer

    (r,) = run(f, torch.randn(16, 32))
    check(r)
    assert r.counts["opaque"] == 0
    assert sum("written into" in n for n in r.notes) == 2 and any("concatenation" in n for n in r.notes)


def test_patch_convolution_is_a_matmul_over_patches():
    conv = nn.Conv2d(3, 16, kernel_size=4, stride=4)
    (r,) = run(conv, torch.randn(2, 3, 16, 16))
    check(r)
    assert r.counts["opaque"] == 0
    assert mnk([r]) == [(2 * 4, 4, 16, 3 * 4 * 4)]  # (batch x out rows), out cols, channels, patch size


@pytest.mark.parametrize("variant", ["gqa", "mask", "scale"])
def test_sdpa_grouped_query_mask_and_scale(variant):
    q = torch.randn(1, 4, 16, 8)
    kv = torch.randn(1, 2 if variant == "gqa" else 4, 16, 8)
    mask = torch.randn(1, 1, 16, 16)
    kwargs = {"gqa": {"enable_gqa": True}, "mask": {"attn_mask": mask}, "scale": {"scale": 0.1768}}[variant]
    (r,) = run(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kwargs), q, kv, kv)
    check(r)
    assert r.counts["opaque"] == 0
    (scaled,) = [o for o in r.graph.ops.values() if o.name.endswith(".scaled")]
    assert len(scaled.inputs) == (3 if variant == "mask" else 2)  # scores, scale (, mask)
    if variant == "gqa":  # (group 2, batch 1, kv heads 2): keys broadcast over the group
        assert mnk([r]) == [(4, 16, 8, 16), (4, 16, 16, 8)]
        assert r.graph.tensors[r.graph.ops[scaled.inputs[0]].inputs[1]].shape == (2, 8, 16)  # k^T per kv head


def test_cumsum_is_a_reduce_and_an_add():
    (r,) = run(lambda x: torch.cumsum(x, dim=-1) * 2, torch.randn(8, 32))
    check(r)
    assert r.counts["opaque"] == 0 and r.counts["reduce"] == 1


def test_in_place_cache_update_writes_into_the_input_in_device_memory():
    def f(cache, x):
        cache[:, 3] = x.sigmoid()  # a key/value cache write at one position
        return cache * 2

    (r,) = run(f, torch.zeros(4, 8, 16), torch.randn(4, 16))
    check(r)
    assert r.counts["opaque"] == 0
    assert any(n.endswith("in device memory") and "written into arg" in n for n in r.notes)  # the cache input


def test_single_row_matmul_of_a_decode_step():
    (r,) = run(lambda x, w: torch.relu(x) @ w, torch.randn(1, 64), torch.randn(64, 32))
    check(r)
    assert r.counts["opaque"] == 0 and mnk([r]) == [(1, 1, 32, 64)]
