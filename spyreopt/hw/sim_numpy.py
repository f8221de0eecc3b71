"""What every op computes, in numpy float32: shared by the reference evaluation
and by per-core execution (which applies it to slices), plus seeded inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce
from math import sqrt

import numpy as np
from scipy.special import erf

from spyreopt.errors import GraphError
from spyreopt.model.graph import Graph
from spyreopt.model.graph_parts import Op


def _variadic(f: Callable) -> Callable:
    return lambda *xs: reduce(f, xs)


def _gelu(x: np.ndarray) -> np.ndarray:
    return (0.5 * x * (1.0 + erf(x / np.float32(sqrt(2.0))))).astype(np.float32)


POINTWISE: dict[str, tuple[Callable, tuple[int, int | None]]] = {  # fn -> (numpy, (min, max) operands)
    "add": (_variadic(np.add), (2, None)),
    "sub": (np.subtract, (2, 2)),
    "mul": (_variadic(np.multiply), (2, None)),
    "div": (np.divide, (2, 2)),
    "max": (_variadic(np.maximum), (2, None)),
    "min": (_variadic(np.minimum), (2, None)),
    "pow": (np.power, (2, 2)),
    "neg": (np.negative, (1, 1)),
    "exp": (np.exp, (1, 1)),
    "log": (np.log, (1, 1)),
    "sqrt": (np.sqrt, (1, 1)),
    "rsqrt": (lambda x: np.float32(1.0) / np.sqrt(x), (1, 1)),
    "recip": (lambda x: np.float32(1.0) / x, (1, 1)),
    "gelu": (_gelu, (1, 1)),
    "silu": (lambda x: x / (np.float32(1.0) + np.exp(-x)), (1, 1)),
    "relu": (lambda x: np.maximum(x, np.float32(0.0)), (1, 1)),
    "tanh": (np.tanh, (1, 1)),
    "sigmoid": (lambda x: np.float32(1.0) / (np.float32(1.0) + np.exp(-x)), (1, 1)),
    "square": (np.square, (1, 1)),
    "copy": (lambda x: np.array(x, copy=True), (1, 1)),
}
REDUCE: dict[str, Callable] = {"sum": np.sum, "max": np.max, "min": np.min, "mean": np.mean}


def apply(op: Op, xs: list[np.ndarray], out_extents: tuple[int, ...] | None = None) -> np.ndarray:
    """Op ``op`` on operand values in view coordinates. A reshape given only part of its
    output (``out_extents``) reshapes the block of input rows it was handed."""
    with np.errstate(all="ignore"):
        if op.kind == "matmul":
            return np.matmul(xs[0], xs[1])
        if op.kind == "pointwise":
            fn, (lo, hi) = POINTWISE[op.attrs["fn"]]
            if len(xs) < lo or (hi is not None and len(xs) > hi):
                raise GraphError(
                    f"op {op.name!r}: {op.attrs['fn']!r} takes {lo}..{hi or 'any'} operands, got {len(xs)}"
                )
            return np.asarray(fn(*xs), dtype=np.float32)
        if op.kind == "reduce":
            return REDUCE[op.attrs["fn"]](xs[0], axis=tuple(op.attrs["dims"]), keepdims=True).astype(np.float32)
        if op.kind == "view":
            return xs[0].transpose(op.attrs["perm"])
        if op.kind == "reshape":
            return xs[0].reshape(out_extents)
    raise GraphError(f"op {op.name!r}: unknown kind {op.kind!r}")


def reference_values(graph: Graph, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every tensor of the graph, evaluated whole in schedule order."""
    values = dict(inputs)
    for op in graph.ops.values():
        values[op.output] = apply(op, [values[x] for x in op.inputs], graph.tensors[op.output].shape)
    return values


def random_inputs(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs and weights, uniform in [-1, 1); a weight of rank >= 2 is scaled by
    1/sqrt(rows) so matmul outputs stay of order one (softmax stays well conditioned)."""
    rng = np.random.default_rng(seed)
    out = {}
    for t in graph.tensors.values():
        if t.producer is not None:
            continue
        scale = 1.0 / sqrt(t.shape[-2]) if t.role == "weight" and len(t.shape) >= 2 else 1.0
        out[t.name] = (rng.uniform(-1.0, 1.0, t.shape) * scale).astype(np.float32)
    return out


def checked_inputs(graph: Graph, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    leaves = {t.name: t for t in graph.tensors.values() if t.producer is None}
    missing = sorted(set(leaves) - set(inputs))
    if missing:
        raise GraphError(f"graph {graph.name!r}: no value for input(s) {missing}")
    out = {}
    for name, t in leaves.items():
        a = np.asarray(inputs[name], dtype=np.float32)
        if a.shape != t.shape:
            raise GraphError(f"input {name!r}: value has shape {a.shape}, the graph says {t.shape}")
        out[name] = a
    return out
