"""Built-in workloads (DESIGN section 8): the Spyre compiler's public examples as graphs.

``get(name, **shape)`` builds one with its published shape unless overridden;
``names()`` lists them.
"""

from __future__ import annotations

from collections.abc import Callable

from spyreopt.errors import GraphError
from spyreopt.model.graph import Graph


def softmax(rows: int = 512, cols: int = 1024, dtype: str = "fp16") -> Graph:
    """The scratchpad example: 32.51 -> 23.67 µs on Spyre from reuse alone."""
    g = Graph("softmax")
    g.output(g.softmax(g.input("x", (rows, cols), dtype), name="softmax"))
    return g


def mlp(tokens: int = 128, d_model: int = 256, d_ff: int = 1024, dtype: str = "fp16") -> Graph:
    """Matmul -> gelu -> matmul: the pointwise op should adopt its matmul's division."""
    g = Graph("mlp")
    x = g.input("x", (tokens, d_model), dtype)
    h = g.pointwise("gelu", g.matmul(x, g.weight("w1", (d_model, d_ff), dtype), name="up"), name="gelu")
    g.output(g.matmul(h, g.weight("w2", (d_ff, d_model), dtype), name="down"))
    return g


def swiglu(tokens: int = 128, d_model: int = 256, d_ff: int = 1024, dtype: str = "fp16") -> Graph:
    """Gated MLP (gate, up, silu, multiply, down): two matmuls read one input, a third reads their product."""
    g = Graph("swiglu")
    _swiglu(g, g.input("x", (tokens, d_model), dtype), d_model, d_ff, dtype, "")
    g.output(list(g.ops)[-1])
    return g


def _swiglu(g: Graph, x: str, d_model: int, d_ff: int, dtype: str, p: str) -> str:
    gate = g.matmul(x, g.weight(f"{p}w_gate", (d_model, d_ff), dtype), name=f"{p}gate")
    up = g.matmul(x, g.weight(f"{p}w_up", (d_model, d_ff), dtype), name=f"{p}up")
    h = g.pointwise("mul", g.pointwise("silu", gate, name=f"{p}silu"), up, name=f"{p}glu")
    return g.matmul(h, g.weight(f"{p}w_down", (d_ff, d_model), dtype), name=f"{p}down")


def sdpa(batch: int = 1, heads: int = 4, seq: int = 256, head_dim: int = 64, dtype: str = "fp16") -> Graph:
    """Scaled dot-product attention; the score matrix can stay on chip with a shared batch/row split."""
    g = Graph("sdpa")
    shape = (batch, heads, seq, head_dim)
    q, k, v = (g.input(n, shape, dtype) for n in "qkv")
    g.output(_attention(g, q, k, v, g.weight("scale", (1,), dtype), ""))
    return g


def _attention(g: Graph, q: str, k: str, v: str, scale: str, p: str) -> str:
    scores = g.matmul(q, g.transpose(k, -2, -1, name=f"{p}k_t"), name=f"{p}scores")
    scaled = g.pointwise("mul", scores, scale, name=f"{p}scale_scores")
    probs = g.softmax(scaled, name=f"{p}softmax")
    return g.matmul(probs, v, name=f"{p}context")


def mha(seq: int = 256, d_model: int = 256, heads: int = 4, dtype: str = "fp16") -> Graph:
    """Multi-head attention with per-head projection weights, summed over heads at the end."""
    g = Graph("mha")
    g.output(_mha(g, g.input("x", (seq, d_model), dtype), seq, d_model, heads, dtype, ""))
    return g


def _mha(g: Graph, x: str, seq: int, d_model: int, heads: int, dtype: str, p: str) -> str:
    if d_model % heads:
        raise GraphError(f"workload mha: d_model {d_model} not divisible by heads {heads}")
    d = d_model // heads
    q, k, v = (g.matmul(x, g.weight(f"{p}w{n}", (heads, d_model, d), dtype), name=f"{p}proj_{n}") for n in "qkv")
    ctx = _attention(g, q, k, v, g.weight(f"{p}scale", (1,), dtype), p)
    per_head = g.matmul(ctx, g.weight(f"{p}wo", (heads, d, d_model), dtype), name=f"{p}proj_o")
    return g.reduce("sum", per_head, 0, name=f"{p}sum_heads")


def layernorm(rows: int = 512, cols: int = 1024, dtype: str = "fp16") -> Graph:
    """Layer norm over 1024 columns with scale and shift, decomposed into eight ops."""
    g = Graph("layernorm")
    x = g.input("x", (rows, cols), dtype)
    g.output(g.layernorm(x, g.weight("gamma", (cols,), dtype), g.weight("beta", (cols,), dtype), name="ln"))
    return g


def rmsnorm(rows: int = 512, cols: int = 1024, dtype: str = "fp16") -> Graph:
    """RMS norm over 1024 columns with a scale, decomposed into five ops."""
    g = Graph("rmsnorm")
    x = g.input("x", (rows, cols), dtype)
    g.output(g.rmsnorm(x, g.weight("gamma", (cols,), dtype), name="rms"))
    return g


def big_matmul(m: int = 8192, k: int = 32768, n: int = 4096, dtype: str = "fp16") -> Graph:
    """[8192,32768] x [32768,4096]: the span limit forces a 2-way k split; then a 16-way n split."""
    g = Graph("big_matmul")
    g.output(g.matmul(g.input("a", (m, k), dtype), g.weight("b", (k, n), dtype), name="mm"))
    return g


def decode_proj(m: int = 8, k: int = 4096, n: int = 4096, dtype: str = "fp16") -> Graph:
    """A decode-time projection of an 8B model: a 2-4x spread between the best and worst split."""
    g = Graph("decode_proj")
    g.output(g.matmul(g.input("x", (m, k), dtype), g.weight("w", (k, n), dtype), name="proj"))
    return g


def transformer_block(
    seq: int = 128, d_model: int = 256, heads: int = 4, d_ff: int = 512, dtype: str = "fp16"
) -> Graph:
    """A pre-norm decoder block: rmsnorm, multi-head attention, residual, rmsnorm, SwiGLU, residual."""
    g = Graph("transformer_block")
    x = g.input("x", (1, seq, d_model), dtype)  # [1, S, E]: the heads' sum keeps a leading 1
    _block(g, x, seq, d_model, heads, d_ff, dtype, "")
    g.output(list(g.ops)[-1])
    return g


def _block(g: Graph, x: str, seq: int, d_model: int, heads: int, d_ff: int, dtype: str, p: str) -> str:
    h = g.rmsnorm(x, g.weight(f"{p}g1", (d_model,), dtype), name=f"{p}norm1")
    attn = _mha(g, h, seq, d_model, heads, dtype, p)
    x1 = g.pointwise("add", x, attn, name=f"{p}resid1")
    h2 = g.rmsnorm(x1, g.weight(f"{p}g2", (d_model,), dtype), name=f"{p}norm2")
    return g.pointwise("add", x1, _swiglu(g, h2, d_model, d_ff, dtype, p), name=f"{p}resid2")


def layer_stack(
    layers: int = 4, seq: int = 32, d_model: int = 256, heads: int = 4, d_ff: int = 512, dtype: str = "fp16"
) -> Graph:
    """A stack of identical small transformer blocks (about 25 ops per layer; ``layers=`` sets the depth)."""
    g = Graph(f"layer_stack_{layers}")
    x = g.input("x", (1, seq, d_model), dtype)  # every layer maps [1, S, E] to [1, S, E]
    for i in range(layers):
        x = _block(g, x, seq, d_model, heads, d_ff, dtype, f"l{i}.")
    g.output(x)
    return g


def relayout(tokens: int = 256, d_model: int = 4096, d_out: int = 256, dtype: str = "fp16") -> Graph:
    """Two matmuls whose best slicings differ: a relayout beats a device-memory round trip."""
    g = Graph("relayout")
    x = g.input("x", (tokens, d_model), dtype)
    y = g.matmul(x, g.weight("w1", (d_model, d_model), dtype), name="wide")
    g.output(g.matmul(y, g.weight("w2", (d_model, d_out), dtype), name="narrow"))
    return g


# ---- at real model scale (Llama-3-8B: 32 heads of 128, hidden 4096, intermediate 14336): tiled loops --------
def long_attention(heads: int = 32, seq: int = 1536, head_dim: int = 128, dtype: str = "fp16") -> Graph:
    """Prefill attention at sequence 1536: the score matrix (144 MiB) is 2.25x all 32 scratchpads together,
    so it stays on chip only a tile at a time, inside a loop over heads or rows."""
    g = Graph("long_attention")
    shape = (1, heads, seq, head_dim)
    q, k, v = (g.input(n, shape, dtype) for n in "qkv")
    g.output(_attention(g, q, k, v, g.weight("scale", (1,), dtype), ""))
    return g


def prefill_swiglu(tokens: int = 8192, d_model: int = 896, d_ff: int = 4864, dtype: str = "fp16") -> Graph:
    """The SwiGLU MLP of Qwen2-0.5B (hidden 896, intermediate 4864) on an 8192-token prefill: each
    intermediate (76 MiB) exceeds all scratchpads together. (With Llama-3-8B's 4096 x 14336 the MLP is
    compute-bound, and tiling saves less: the three matmuls' MACs dominate either way.)"""
    g = Graph("prefill_swiglu")
    _swiglu(g, g.input("x", (tokens, d_model), dtype), d_model, d_ff, dtype, "")
    g.output(list(g.ops)[-1])
    return g


def ktiled_matmul(tokens: int = 1024, k: int = 65536, n: int = 1024, dtype: str = "fp16") -> Graph:
    """gelu then a matmul over a reduction of 65536: the activation (128 MiB) stays on chip only when the
    matmul is tiled over k, accumulating its output on chip."""
    g = Graph("ktiled_matmul")
    h = g.pointwise("gelu", g.input("x", (tokens, k), dtype), name="act")
    g.output(g.matmul(h, g.weight("w", (k, n), dtype), name="proj"))
    return g


WORKLOADS: dict[str, Callable[..., Graph]] = {
    "softmax": softmax,
    "mlp": mlp,
    "swiglu": swiglu,
    "sdpa": sdpa,
    "mha": mha,
    "layernorm": layernorm,
    "rmsnorm": rmsnorm,
    "big_matmul": big_matmul,
    "decode_proj": decode_proj,
    "transformer_block": transformer_block,
    "relayout": relayout,
}
# real model scale, needing tiled loops to keep their intermediates on chip: in the spyre bench suite, not in
# ``names()`` (whose every workload the tests also execute numerically, which at this size takes gigabytes)
TILED: dict[str, Callable[..., Graph]] = {
    "long_attention": long_attention,
    "prefill_swiglu": prefill_swiglu,
    "ktiled_matmul": ktiled_matmul,
}
EXTRA: dict[str, Callable[..., Graph]] = {"layer_stack": layer_stack, **TILED}
SMALL = ("softmax", "mlp", "swiglu", "sdpa", "layernorm", "rmsnorm")


def names() -> list[str]:
    """The small built-in workloads (``EXTRA`` holds the stack and the model-scale ones; ``spyreopt workloads``
    lists both)."""
    return list(WORKLOADS)


def get_builder(name: str) -> Callable[..., Graph]:
    """The function that builds workload ``name`` (its docstring says what it is; its keywords, the shape)."""
    builder = WORKLOADS.get(name) or EXTRA.get(name)
    if builder is None:
        raise GraphError(f"unknown workload {name!r}; known: {', '.join(list(WORKLOADS) + list(EXTRA))}")
    return builder


def get(name: str, **shape) -> Graph:
    """Workload ``name`` at its published shape, or with ``shape`` keywords overriding it (GraphError if unknown)."""
    builder = get_builder(name)
    try:
        return builder(**shape)
    except TypeError as exc:
        raise GraphError(f"workload {name!r}: {exc}") from exc
