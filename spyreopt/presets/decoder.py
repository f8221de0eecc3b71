"""``decoder``: a Llama-family decoder (prefill or one decode step) built with the Graph builder.

Per layer: RMSNorm, Q/K/V projections with grouped-query attention, rotary
embedding, attention (scores, causal mask, softmax, PV), output projection and
residual add, then RMSNorm, SwiGLU MLP and residual add; after the last layer a
final RMSNorm and the LM head. What the builder has no op for is made explicit:

* the token embedding is a gather: the graph starts from the embedded hidden
  states ``x`` [seq, hidden];
* rotary embedding rotates each (first half, second half) pair of a head by a
  position's angle. With the head dim viewed as [2, head_dim/2] it is one
  broadcast multiply by the rotation table ``rope`` [seq, 1, 2, 2, head_dim/2]
  (cos, -sin; sin, cos per position and frequency, an input) and one sum over
  the pair axis: the rotation as pointwise ops, exactly HF Llama's
  ``x*cos + rotate_half(x)*sin``;
* grouped-query attention broadcasts each of the ``kv_heads`` key/value heads
  over its ``heads/kv_heads`` query heads through the batched matmul's batch
  dims (queries [kv, group, s, d] against keys [kv, 1, d, ctx]): no copy of K/V;
* decode: the KV cache is a graph input per layer (``k_cache``, ``v_cache``,
  ``context`` positions including the new ones, already rotated), the new
  tokens' rotated keys and values are graph outputs (the cache write is an
  in-place update of another buffer, which the builder does not model).
"""

from __future__ import annotations

from spyreopt.errors import GraphError
from spyreopt.model.graph import Graph
from spyreopt.model.graph_parts import DTYPE_BYTES

PHASES = ("prefill", "decode")


def _check(name: str, **values: int) -> None:
    for field, v in values.items():
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise GraphError(f"op {name!r}: {field} must be a positive integer, got {v!r}")


def decoder(
    layers: int,
    hidden: int,
    heads: int,
    kv_heads: int,
    intermediate: int,
    seq: int,
    phase: str = "prefill",
    context: int | None = None,
    dtype: str = "fp16",
    vocab: int | None = None,
    head_dim: int | None = None,
    name: str | None = None,
) -> Graph:
    """A ``layers``-deep decoder over ``seq`` tokens; ``phase="decode"`` attends over ``context`` cached positions.

    ``vocab=None`` leaves out the LM head (the graph ends at the final norm).
    ``head_dim`` defaults to ``hidden // heads``.
    """
    label = name or f"decoder_{phase}"
    if phase not in PHASES:
        raise GraphError(f"op {label!r}: phase must be one of {PHASES}, got {phase!r}")
    if dtype not in DTYPE_BYTES:
        raise GraphError(f"op {label!r}: unknown dtype {dtype!r}; known: {sorted(DTYPE_BYTES)}")
    head_dim = head_dim if head_dim is not None else (hidden // heads if heads and hidden >= heads else 0)
    ctx = seq if phase == "prefill" else context
    if phase == "prefill" and context not in (None, seq):
        raise GraphError(f"op {label!r}: prefill attends over its own {seq} tokens; context={context} is for decode")
    if ctx is None:
        raise GraphError(f"op {label!r}: decode needs context (the number of cached positions attended)")
    _check(label, layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, intermediate=intermediate, seq=seq,
           context=ctx, head_dim=head_dim, **({"vocab": vocab} if vocab is not None else {}))  # fmt: skip
    if heads % kv_heads:
        raise GraphError(f"op {label!r}: heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
    if head_dim % 2:
        raise GraphError(f"op {label!r}: rotary embedding needs an even head_dim, got {head_dim}")
    if ctx < seq:
        raise GraphError(f"op {label!r}: context ({ctx}) must hold at least the {seq} new positions")
    cfg = _Config(hidden, heads, kv_heads, head_dim, intermediate, seq, ctx, dtype, phase)
    g = Graph(label)
    x = g.input("x", (seq, hidden), dtype)
    g.input("rope", (seq, 1, 2, 2, head_dim // 2), dtype)
    if seq > 1:  # additive causal mask: 0 where a query may attend, -inf elsewhere
        g.input("mask", (seq, ctx), dtype)
    for i in range(layers):
        x = _layer(g, x, cfg, f"l{i}.")
    x = g.rmsnorm(x, g.weight("norm_f", (hidden,), dtype), name="norm_f")
    if vocab is not None:
        x = g.matmul(x, g.weight("lm_head.w", (hidden, vocab), dtype), name="lm_head")
    g.output(x)
    return g


class _Config:
    def __init__(self, hidden, heads, kv_heads, head_dim, intermediate, seq, ctx, dtype, phase):
        self.hidden, self.heads, self.kv, self.d = hidden, heads, kv_heads, head_dim
        self.group, self.ff, self.seq, self.ctx, self.dtype, self.phase = (
            heads // kv_heads, intermediate, seq, ctx, dtype, phase
        )  # fmt: skip


def _rope(g: Graph, t: str, heads: int, c: _Config, p: str) -> str:
    """Rotate [seq, heads*d] by the position table: view as [seq, heads, 1, 2, d/2], multiply, sum the pair axis."""
    pairs = g.reshape(t, (c.seq, heads, 1, 2, c.d // 2), name=f"{p}.pairs")
    prod = g.pointwise("mul", pairs, "rope", name=f"{p}.rot")
    return g.reduce("sum", prod, 3, name=f"{p}.sum")  # [seq, heads, 2, 1, d/2]


def _layer(g: Graph, x: str, c: _Config, p: str) -> str:
    dt, s = c.dtype, c.seq
    h = g.rmsnorm(x, g.weight(f"{p}attn_norm", (c.hidden,), dt), name=f"{p}attn_norm")
    q = g.matmul(h, g.weight(f"{p}wq", (c.hidden, c.heads * c.d), dt), name=f"{p}q_proj")
    k = g.matmul(h, g.weight(f"{p}wk", (c.hidden, c.kv * c.d), dt), name=f"{p}k_proj")
    v = g.matmul(h, g.weight(f"{p}wv", (c.hidden, c.kv * c.d), dt), name=f"{p}v_proj")
    q = _rope(g, q, c.heads, c, f"{p}q_rope")
    k = _rope(g, k, c.kv, c, f"{p}k_rope")
    # queries grouped under their kv head: [seq, kv, group, d] -> [kv, group, seq, d]
    qh = g.permute(g.reshape(q, (s, c.kv, c.group, c.d), name=f"{p}q_heads"), (1, 2, 0, 3), name=f"{p}q_t")
    if c.phase == "prefill":
        kh = g.reshape(k, (s, c.kv, 1, c.d), name=f"{p}k_heads")
        vh = g.reshape(v, (s, c.kv, 1, c.d), name=f"{p}v_heads")
        k_t = g.permute(kh, (1, 2, 3, 0), name=f"{p}k_t")  # [kv, 1, d, seq]
        v_t = g.permute(vh, (1, 2, 0, 3), name=f"{p}v_t")  # [kv, 1, seq, d]
    else:
        g.output(k)  # the new rotated keys and values: written into the cache
        g.output(v)
        k_t = g.permute(g.input(f"{p}k_cache", (c.kv, 1, c.ctx, c.d), dt), (0, 1, 3, 2), name=f"{p}k_t")
        v_t = g.input(f"{p}v_cache", (c.kv, 1, c.ctx, c.d), dt)
    scores = g.matmul(qh, k_t, name=f"{p}scores")  # [kv, group, seq, ctx]: kv heads broadcast over the group
    scores = g.pointwise("mul", scores, g.weight(f"{p}scale", (1,), dt), name=f"{p}scale_scores")
    if s > 1:
        scores = g.pointwise("add", scores, "mask", name=f"{p}causal")
    probs = g.softmax(scores, name=f"{p}softmax")
    ctx = g.matmul(probs, v_t, name=f"{p}context")  # [kv, group, seq, d]
    ctx = g.reshape(g.permute(ctx, (2, 0, 1, 3), name=f"{p}ctx_t"), (s, c.heads * c.d), name=f"{p}ctx_merge")
    attn = g.matmul(ctx, g.weight(f"{p}wo", (c.heads * c.d, c.hidden), dt), name=f"{p}o_proj")
    x = g.pointwise("add", x, attn, name=f"{p}resid_attn")
    h = g.rmsnorm(x, g.weight(f"{p}mlp_norm", (c.hidden,), dt), name=f"{p}mlp_norm")
    gate = g.matmul(h, g.weight(f"{p}w_gate", (c.hidden, c.ff), dt), name=f"{p}gate_proj")
    up = g.matmul(h, g.weight(f"{p}w_up", (c.hidden, c.ff), dt), name=f"{p}up_proj")
    act = g.pointwise("mul", g.pointwise("silu", gate, name=f"{p}silu"), up, name=f"{p}glu")
    down = g.matmul(act, g.weight(f"{p}w_down", (c.ff, c.hidden), dt), name=f"{p}down_proj")
    return g.pointwise("add", x, down, name=f"{p}resid_mlp")
