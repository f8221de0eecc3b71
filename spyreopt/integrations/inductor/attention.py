"""Scaled-dot-product attention: Inductor keeps it as one fallback kernel on CPU
(``aten._scaled_dot_product_flash_attention_for_cpu`` and its backward); spyreopt plans the
work inside it, as the Spyre compiler would: the score and context matmuls, the scaling
(and causal mask) and the softmax -- and for the backward the recomputed probabilities,
the four gradient matmuls and the softmax gradient.
"""

from __future__ import annotations

from spyreopt.integrations.inductor.access import Unsupported
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


def translate_sdpa(tr: Builder, op, args: list[str]) -> dict[int, tuple[str, str]]:
    """Add the decomposition of one attention kernel; returns output index -> (tensor, dtype)."""
    name = op.get_name()
    backward = str(op.op_overload) == BACKWARD
    if len(args) > (6 if backward else 3):
        raise Unsupported("attention with an explicit mask is not modelled")
    dropout, causal = (tuple(op.constant_args) + (0.0, False))[:2]
    if dropout:
        raise Unsupported(f"attention with dropout {dropout} is not modelled")
    kernel = "sdpa_backward" if backward else "sdpa"
    dtype = tr.g.tensors[args[0]].dtype
    scale = tr.g.weight(tr.fresh(f"{name}.scale"), (1,), dtype)
    if backward:
        do, q, k, v, o, lse = args
    else:
        q, k, v = args
    sq, sk = tr.g.tensors[q].shape[-2], tr.g.tensors[k].shape[-2]
    masks = [tr.g.weight(tr.fresh(f"{name}.causal_mask"), (sq, sk), dtype)] if causal else []
    s = _mm(tr, f"{name}.scores", q, tr.op(f"{name}.k_t", "transpose", k, -2, -1), dtype, kernel)
    if not backward:
        z = tr.op(f"{name}.scaled", "pointwise", "mul", s, scale, *masks, dtype=dtype)
        p = tr.g.softmax(z, name=f"{name}.softmax")
        for part in SOFTMAX_PARTS:
            tr.op_buffer[f"{name}.softmax{part}"] = tr.current
        ctx = _mm(tr, f"{name}.context", p, v, dtype, kernel)
        log_sum = tr.op(f"{name}.log_sum", "pointwise", "log", f"{name}.softmax.sum", dtype="fp32")
        lse_out = tr.op(f"{name}.lse", "pointwise", "add", f"{name}.softmax.max", log_sum, dtype="fp32")
        return {0: (ctx, dtype), 1: (lse_out, "fp32")}
    p = tr.op(f"{name}.probs", "pointwise", "exp", s, scale, lse, *masks, dtype=dtype)
    dv = _mm(tr, f"{name}.grad_v", tr.op(f"{name}.p_t", "transpose", p, -2, -1), do, dtype, kernel)
    dp = _mm(tr, f"{name}.grad_p", do, tr.op(f"{name}.v_t", "transpose", v, -2, -1), dtype, kernel)
    do_o = tr.op(f"{name}.do_o", "pointwise", "mul", do, o, dtype="fp32")
    delta = tr.op(f"{name}.delta", "reduce", "sum", do_o, -1, dtype="fp32")
    ds = tr.op(f"{name}.grad_s", "pointwise", "mul", p, dp, delta, scale, dtype=dtype)
    dq = _mm(tr, f"{name}.grad_q", ds, k, dtype, kernel)
    dk = _mm(tr, f"{name}.grad_k", tr.op(f"{name}.s_t", "transpose", ds, -2, -1), q, dtype, kernel)
    return {0: (dq, dtype), 1: (dk, dtype), 2: (dv, dtype)}
