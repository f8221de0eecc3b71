"""The Inductor adapter on six Hugging Face families (tiny configurations built from their config
classes, random weights, no download) and on a Llama model whose weights are on the ``meta`` device.

Per family, as a new user would: ``torch.compile(model, backend="spyreopt", options={"mode":
"analysis", "backend": "cpsat"})``; every captured graph translates without error, at most 2% of
its Inductor nodes are opaque, the plan is valid, and the outputs equal eager.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import spyreopt.integrations.inductor as si  # noqa: E402
from spyreopt.integrations.inductor import families  # noqa: E402

OPTIONS = {"mode": "analysis", "backend": "cpsat", "time_limit": 2}
MAX_OPAQUE = 0.02


pytestmark = pytest.mark.usefixtures("fresh_compiler")


def covered(record: si.CapturedGraph) -> None:
    """No translation error, at most 2% of Inductor's nodes opaque, a valid plan over every op."""
    assert record.error is None, record.error
    nodes = sum(record.inductor_nodes.values())
    assert nodes > 0 and len(record.opaque) <= MAX_OPAQUE * nodes, record.opaque
    assert record.counts["opaque"] == len(record.opaque)
    assert set(record.op_buffer) == set(record.graph.ops)
    record.plan.validate()
    assert {o.name for o in record.plan.ops} <= set(record.graph.ops)


def compile_family(name: str) -> list[si.CapturedGraph]:
    fam = families.get(name)
    compiled = torch.compile(fam.model, backend="spyreopt", options=OPTIONS, dynamic=False)
    with torch.no_grad():
        got, want = compiled(**fam.kwargs)[fam.output], fam.model(**fam.kwargs)[fam.output]
    torch.testing.assert_close(got, want)
    records = si.plans()
    assert records
    for r in records:
        covered(r)
    return records


def kinds(record: si.CapturedGraph) -> dict[str, int]:
    return {k: v for k, v in record.counts.items() if v}


def test_gpt2_gathers_embeddings_as_device_memory_reads():
    (r,) = compile_family("gpt2")
    assert r.counts["opaque"] == 0 and r.counts["matmul"] == 13  # 4 linear layers x 2, 2 x attention, LM head
    gathers = [n for n in r.notes if "gathers" in n]
    assert gathers and all("device-memory read" in n for n in gathers)
    rows = [t for t in r.graph.tensors.values() if ".rows@" in t.name]
    assert rows and all(t.producer is None and t.shape[-1] == 64 for t in rows)  # token rows of the 64-wide tables


def test_bert_attention_scale_is_not_dropout():
    (r,) = compile_family("bert")
    assert r.counts["opaque"] == 0
    assert sum(1 for m in r.matmuls if m.kernel == "sdpa") == 4  # scores and context, 2 layers


@pytest.mark.parametrize("name", ["qwen2", "mistral"])
def test_grouped_query_attention_and_rotary_concatenation(name):
    (r,) = compile_family(name)
    assert r.counts["opaque"] == 0
    scores = [m for m in r.matmuls if m.op.endswith(".scores")]
    assert len(scores) == 2
    for m in scores:  # 4 query heads over 2 kv heads: batch = group 2 x batch 2 x kv heads 2
        assert (m.batch, m.m, m.n, m.k) == (8, 16, 16, 16)
        k_t = r.graph.tensors[r.graph.ops[m.op].inputs[1]].shape
        assert k_t == (2, 2, 16, 16)  # keys are read once per kv head, broadcast over the group
    assert any("concatenation" in n for n in r.notes)  # rotate_half's cat: pieces through device memory


@pytest.mark.slow
def test_t5_position_bias_is_an_attention_mask_operand():
    (r,) = compile_family("t5")
    assert r.counts["opaque"] == 0
    scaled = [o for o in r.graph.ops.values() if o.name.endswith(".scaled")]
    assert len(scaled) == 6 and all(len(o.inputs) == 3 for o in scaled)  # scores, scale, mask


def test_vit_patch_embedding_is_a_matmul_over_patches():
    (r,) = compile_family("vit")
    assert r.counts["opaque"] == 0
    (conv,) = [m for m in r.matmuls if m.kernel == "extern_kernels.convolution"]
    assert (conv.batch, conv.m, conv.n, conv.k) == (2 * 4, 4, 128, 3 * 8 * 8)
    assert any("concatenation" in n for n in r.notes)  # the class token prepended to the patches


def test_meta_device_llama_plans_without_allocating_weights():
    model = families.llama(layers=1, hidden_size=256, intermediate_size=512, num_attention_heads=4,
                           num_key_value_heads=2, vocab_size=1000)  # fmt: skip
    assert all(p.device.type == "meta" for p in model.parameters())
    ids = torch.zeros(1, 32, dtype=torch.long, device="meta")
    compiled = torch.compile(model, backend="spyreopt", options=OPTIONS, dynamic=False)
    with torch.no_grad():
        out = compiled(input_ids=ids, use_cache=False)
    assert out.logits.device.type == "meta" and out.logits.shape == (1, 32, 1000)
    # still on meta after compiling and running: a meta storage has no data (its pointer is null)
    assert all(p.device.type == "meta" and p.untyped_storage().data_ptr() == 0 for p in model.parameters())
    (r,) = si.plans()
    covered(r)
    assert r.counts["opaque"] == 0
    mm = sorted((m.m, m.n, m.k) for m in r.matmuls if m.kernel.startswith("extern"))
    assert (32, 1000, 256) in mm and (32, 256, 512) in mm  # the LM head and the MLP down projection


# ---- the configurations users ask about most -------------------------------------------------
@pytest.mark.parametrize("head_dim", [128, pytest.param(256, marks=pytest.mark.slow)])
def test_grouped_query_attention_at_real_head_dims(head_dim):
    (r,) = compile_family(f"gqa{head_dim}")
    assert r.counts["opaque"] == 0
    scores = [m for m in r.matmuls if m.op.endswith(".scores")]
    assert len(scores) == 2 and all(m.k == head_dim and (m.m, m.n) == (16, 16) for m in scores)
    k_t = r.graph.tensors[r.graph.ops[scores[0].op].inputs[1]].shape
    assert k_t == (2, 1, head_dim, 16)  # batch 2 x one kv head, read once for both query heads
    assert r.unnamed == []


def test_sliding_window_attention_reads_its_window_as_a_mask():
    (r,) = compile_family("swa")
    assert r.counts["opaque"] == 0
    scaled = [o for o in r.graph.ops.values() if o.name.endswith(".scaled")]
    assert len(scaled) == 2 and all(len(o.inputs) == 3 for o in scaled)  # scores, scale, the window's mask


def test_mixture_of_experts_router_is_opaque_with_its_reason_and_the_rest_planned():
    fam = families.get("moe")
    compiled = torch.compile(fam.model, backend="spyreopt", options=OPTIONS, dynamic=False)
    with torch.no_grad():
        torch.testing.assert_close(compiled(**fam.kwargs).logits, fam.model(**fam.kwargs).logits)
    (r,) = si.plans()
    assert r.error is None, r.error
    r.plan.validate()
    reasons = " | ".join(r.opaque.values())
    assert "top-k selection depends on the data" in reasons and "as many tokens as the router sent" in reasons
    routers = [m for m in r.matmuls if r.origin(m.op).module.endswith("gate")]  # the router's logits: planned
    assert len(routers) == 2 and all(m.n == 4 for m in routers)
    assert sum(m.op.endswith(".scores") for m in r.matmuls) == 2  # attention is planned as usual


def test_batch_4_decode_step_over_a_static_cache():
    model, inputs = families.decode_step(batch=4, context=32)
    compiled = torch.compile(model, backend="spyreopt", options=OPTIONS, dynamic=False)
    with torch.no_grad():
        torch.testing.assert_close(compiled(**inputs()).logits, model(**inputs()).logits)
    records = si.plans()
    assert records
    for r in records:
        covered(r)
    (r,) = records
    proj = [m for m in r.matmuls if r.origin(m.op).module.endswith(("q_proj", "down_proj", "lm_head"))]
    assert len(proj) == 5 and all(m.m == 4 for m in proj)  # one row per sequence of the batch
    assert any("written into" in n for n in r.notes)  # the new keys and values go into the cache
