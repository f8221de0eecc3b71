"""The vocabulary of a graph: element types, op kinds and functions, and the Tensor and Op records a ``Graph``
holds (``model.graph`` builds them; the records are plain data any module may read)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spyreopt.errors import GraphError

DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4, "fp8": 1, "int64": 8}  # int64: index tensors (inductor adapter)
DTYPES = tuple(DTYPE_BYTES)
"""Element types a tensor may have (``DTYPE_BYTES`` gives their sizes)."""
POINTWISE_FUNCTIONS = (
    "add", "sub", "mul", "div", "max", "min", "pow",  # binary (broadcasting)
    "neg", "exp", "log", "sqrt", "rsqrt", "recip", "gelu", "silu", "relu", "tanh", "sigmoid", "square", "copy",
)  # fmt: skip
"""Functions ``Graph.pointwise`` takes (``so.POINTWISE_FUNCTIONS``)."""
REDUCTIONS = ("sum", "max", "min", "mean")
"""Functions ``Graph.reduce`` takes (``so.REDUCTIONS``)."""
POINTWISE_FNS = set(POINTWISE_FUNCTIONS)
TRANSCENDENTAL = {"exp", "log", "sqrt", "rsqrt", "recip", "gelu", "silu", "tanh", "sigmoid", "pow", "div"}  # slow path
REDUCE_FNS = set(REDUCTIONS)
DEFAULT_DEVICE_MEMORY = 128 << 30  # HardwareSpec().device_memory_bytes; checked again per problem

OP_KINDS = ("matmul", "pointwise", "reduce", "view", "reshape")


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str
    role: str  # input | weight | activation
    producer: str | None = None

    @property
    def elem_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * self.elem_bytes


@dataclass(frozen=True)
class Op:
    name: str
    kind: str
    inputs: tuple[str, ...]
    output: str
    attrs: dict[str, Any] = field(default_factory=dict, hash=False, compare=True)


def broadcast_shapes(op: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    rank = max(len(s) for s in shapes)
    out = []
    for axis in range(rank):
        dims = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise GraphError(f"op {op!r}: shapes {list(shapes)} do not broadcast (axis {axis}: {sorted(dims)})")
        out.append(dims.pop() if dims else 1)
    return tuple(out)
