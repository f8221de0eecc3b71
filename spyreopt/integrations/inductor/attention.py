"""Scaled-dot-product attention: Inductor keeps it as one fallback kernel on CPU
(``aten._scaled_dot_product_flash_attention_for_cpu`` and its backward); spyreopt plans the
work inside it, as the Spyre compiler would: the score and context matmuls, the scaling
(and causal or explicit mask) and the softmax -- and for the backward the recomputed probabilities,
the four gradient matmuls and the softmax gradient.
"""

from __future__ import annotations

from torch._inductor import ir

import spyreopt.integrations.inductor.access as acc
from spyreopt.integrations.inductor.access import Unsupported
from spyreopt.integrations.inductor.lowered import Lowered
from spyreopt.integrations.inductor.operands import Builder, MatmulInfo

FORWARD = "aten._scaled_dot_product_flash_attention_for_cpu.default"
BACKWARD = "aten._scaled_dot_product_flash_attention_for_cpu_backward.default"
SOFTMAX_PARTS = (".max", ".sub", ".exp", ".sum", ".div")


def _mm(tr: Builder, name: str, a: str, b: str, dtype: str, kernel: str) -> str:
    out = tr.op(name, "matmul", a, b, dtype=dtype)
    sa, sb = tr.g.tensors[a].shape, tr.g.tensors[b].shape
    batch = 1
    for d in tr.g.tensors[out].shape[:-2]:
        batch *= d
    tr.matmuls.append(MatmulInfo(tr.current, name, kernel, batch, sa[-2], sb[-1], sa[-1]))
    return out


def translate_sdpa(tr: Lowered, op: ir.FallbackKernel) -> dict[int, tuple[str, str, tuple[int, int] | None]]:
    """Add the decomposition of one attention kernel; returns output index -> (tensor, dtype, head split).

    ``tr`` is the translation state (its ``attn_arg`` turns an IR argument into a tensor). An explicit
    mask is one more operand of the scaling; grouped-query attention (fewer key/value heads than
    query heads) computes over (group, batch, kv heads) with keys and values broadcast over the group.
    """
    name = op.get_name()
    backward = str(op.op_overload) == BACKWARD
    arg = acc.arguments(op)
    if arg.get("dropout_p"):
        raise Unsupported(f"attention with dropout {arg['dropout_p']} is not modelled")
    heads = (int(arg["query"].get_size()[1]), int(arg["key"].get_size()[1]))
    split = None
    if heads[0] != heads[1]:
        if heads[0] % heads[1]:
            raise Unsupported(f"attention with {heads[0]} query heads over {heads[1]} key/value heads")
        if backward:
            raise Unsupported("grouped-query attention backward is not modelled")
        split = (heads[0] // heads[1], heads[1])
    q, k, v = (tr.attn_arg(arg[n], split) for n in ("query", "key", "value"))
    masks = [tr.attn_arg(arg["attn_mask"], split)] if arg.get("attn_mask") is not None else []
    kernel = "sdpa_backward" if backward else "sdpa"
    dtype = tr.g.tensors[q].dtype
    scale = tr.g.weight(tr.fresh(f"{name}.scale"), (1,), dtype)
    sq, sk = tr.g.tensors[q].shape[-2], tr.g.tensors[k].shape[-2]
    if arg.get("is_causal"):
        masks.append(tr.g.weight(tr.fresh(f"{name}.causal_mask"), (sq, sk), dtype))
    s = _mm(tr, f"{name}.scores", q, tr.op(f"{name}.k_t", "transpose", k, -2, -1), dtype, kernel)
    if not backward:
        z = tr.op(f"{name}.scaled", "pointwise", "mul", s, scale, *masks, dtype=dtype)
        p = tr.g.softmax(z, name=f"{name}.softmax")
        for part in SOFTMAX_PARTS:
            tr.op_buffer[f"{name}.softmax{part}"] = tr.current
        ctx = _mm(tr, f"{name}.context", p, v, dtype, kernel)
        log_sum = tr.op(f"{name}.log_sum", "pointwise", "log", f"{name}.softmax.sum", dtype="fp32")
        lse_out = tr.op(f"{name}.lse", "pointwise", "add", f"{name}.softmax.max", log_sum, dtype="fp32")
        return {0: (ctx, dtype, split), 1: (lse_out, "fp32", split)}
    do, o, lse = (tr.attn_arg(arg[n]) for n in ("grad_out", "out", "logsumexp"))
    p = tr.op(f"{name}.probs", "pointwise", "exp", s, scale, lse, *masks, dtype=dtype)
    dv = _mm(tr, f"{name}.grad_v", tr.op(f"{name}.p_t", "transpose", p, -2, -1), do, dtype, kernel)
    dp = _mm(tr, f"{name}.grad_p", do, tr.op(f"{name}.v_t", "transpose", v, -2, -1), dtype, kernel)
    do_o = tr.op(f"{name}.do_o", "pointwise", "mul", do, o, dtype="fp32")
    delta = tr.op(f"{name}.delta", "reduce", "sum", do_o, -1, dtype="fp32")
    ds = tr.op(f"{name}.grad_s", "pointwise", "mul", p, dp, delta, scale, dtype=dtype)
    dq = _mm(tr, f"{name}.grad_q", ds, k, dtype, kernel)
    dk = _mm(tr, f"{name}.grad_k", tr.op(f"{name}.s_t", "transpose", ds, -2, -1), q, dtype, kernel)
    return {0: (dq, dtype, None), 1: (dk, dtype, None), 2: (dv, dtype, None)}
