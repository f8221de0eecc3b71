"""Graph: the tensor program to plan, built op by op in schedule (topological) order.

Composite ops (softmax, layernorm, rmsnorm) are decomposed into primitive ops
the way the compiler would; transpose/permute are views (they move no data,
the stick dim moves with them); reshape materialises a copy. The JSON form
(``to_json``, version ``GRAPH_VERSION``) is documented in docs/formats.md.
"""

from __future__ import annotations

import graphlib
import json
from typing import TYPE_CHECKING, Any

from spyreopt.errors import FormatError, GraphError
from spyreopt.model.graph_parts import (
    DEFAULT_DEVICE_MEMORY,
    DTYPE_BYTES,
    POINTWISE_FNS,
    REDUCE_FNS,
    Op,
    Tensor,
    broadcast_shapes,
)
from spyreopt.model.json_form import check_version, parse_json

if TYPE_CHECKING:
    import networkx as nx

GRAPH_VERSION = 1  # of the JSON form; readers accept it and files without a version (written before it existed)


class Graph:
    """A builder of ops over named tensors, in schedule order. Every builder method returns the name of the
    tensor it made (an op's output is named after the op), to pass to later ops::

        g = so.Graph("mlp")
        x = g.input("x", (128, 256))                    # fp16 by default
        h = g.pointwise("gelu", g.matmul(x, g.weight("w1", (256, 1024))), name="gelu")
        g.output(g.matmul(h, g.weight("w2", (1024, 256)), name="down"))
        print(g.summary())

    Functions: ``POINTWISE_FUNCTIONS``, ``REDUCTIONS``; element types: ``DTYPES``. Mistakes raise
    ``so.GraphError`` naming the op and the reason."""

    def __init__(self, name: str = "graph", device_memory_bytes: int = DEFAULT_DEVICE_MEMORY):
        self.name = name
        self.tensors: dict[str, Tensor] = {}
        self.ops: dict[str, Op] = {}
        self.outputs: list[str] = []
        self._device_memory = device_memory_bytes
        self._counter = 0

    # ---- naming and checks -------------------------------------------------
    def _fresh(self, base: str) -> str:
        self._counter += 1
        name = f"{base}_{self._counter}"
        while name in self.tensors or name in self.ops:
            self._counter += 1
            name = f"{base}_{self._counter}"
        return name

    def _tensor(self, op: str, name: str) -> Tensor:
        if not isinstance(name, str):
            raise GraphError(f"op {op!r}: expected a tensor name, got {type(name).__name__}")
        if name not in self.tensors:
            raise GraphError(f"op {op!r}: unknown tensor {name!r} (used before it is produced?)")
        return self.tensors[name]

    def _add_tensor(self, op: str, name: str, shape, dtype: str, role: str, producer: str | None) -> str:
        if name in self.tensors:
            raise GraphError(f"op {op!r}: tensor {name!r} already exists")
        if dtype not in DTYPE_BYTES:
            raise GraphError(f"op {op!r}: unknown dtype {dtype!r}; known: {sorted(DTYPE_BYTES)}")
        try:
            shape = tuple(int(d) for d in shape)
        except (TypeError, ValueError) as exc:
            raise GraphError(f"op {op!r}: shape {shape!r} is not a tuple of integers") from exc
        if not shape:
            raise GraphError(f"op {op!r}: tensor {name!r} has an empty shape (scalars are not planned)")
        if any(d <= 0 for d in shape):
            raise GraphError(f"op {op!r}: tensor {name!r} has a zero-size or negative dim in {shape}")
        t = Tensor(name, shape, dtype, role, producer)
        if t.nbytes > self._device_memory:
            raise GraphError(
                f"op {op!r}: tensor {name!r} needs {t.nbytes} bytes, more than device memory ({self._device_memory})"
            )
        self.tensors[name] = t
        return name

    def _add_op(self, kind: str, inputs, shape, dtype: str, attrs: dict, name: str | None, base: str) -> str:
        op_name = name or self._fresh(base)
        if op_name in self.ops:
            raise GraphError(f"op {op_name!r}: an op with this name already exists")
        for x in inputs:
            self._tensor(op_name, x)
        out = self._add_tensor(
            op_name,
            op_name if op_name not in self.tensors else self._fresh(op_name),
            shape,
            dtype,
            "activation",
            op_name,
        )
        self.ops[op_name] = Op(op_name, kind, tuple(inputs), out, dict(attrs))
        return out

    # leaves
    def input(self, name: str, shape, dtype: str = "fp16") -> str:
        """Add a graph input (an activation the program receives, in device memory); returns its name.

        ``shape``: positive ints; ``dtype``: one of ``DTYPES`` (fp16, bf16, fp32, fp8, int64).
        Raises GraphError on a duplicate name, a bad shape or an unknown dtype."""
        return self._add_tensor(name, name, shape, dtype, "input", None)

    def weight(self, name: str, shape, dtype: str = "fp16") -> str:
        """Add a weight (a constant in device memory, read like an input); returns its name.

        Same arguments and errors as ``input``."""
        return self._add_tensor(name, name, shape, dtype, "weight", None)

    def output(self, x: str) -> str:
        """Mark tensor ``x`` as a graph output (written to device memory); returns ``x``.

        Raises GraphError if ``x`` is unknown or is an input or weight rather than computed by an op."""
        t = self._tensor("output", x)
        if t.producer is None:
            raise GraphError(f"op 'output': tensor {x!r} is a graph input or weight, not computed by any op")
        if x not in self.outputs:
            self.outputs.append(x)
        return x

    # compute ops
    def matmul(self, a: str, b: str, *, name: str | None = None, dtype: str | None = None) -> str:
        """``a @ b``: a [..., M, K] times b [..., K, N] gives [..., M, N]; leading (batch) dims broadcast.

        ``name`` names the op and its output (default ``matmul``, made unique); ``dtype`` of the output
        defaults to a's. Raises GraphError for operands of rank < 2, mismatched K, batch dims that do not
        broadcast, or an op name already used."""
        op = name or "matmul"
        ta, tb = self._tensor(op, a), self._tensor(op, b)
        if len(ta.shape) < 2 or len(tb.shape) < 2:
            raise GraphError(f"op {op!r}: matmul needs operands of rank >= 2, got {ta.shape} and {tb.shape}")
        if ta.shape[-1] != tb.shape[-2]:
            raise GraphError(f"op {op!r}: shape mismatch, {ta.shape} @ {tb.shape} (K {ta.shape[-1]} != {tb.shape[-2]})")
        batch = broadcast_shapes(op, ta.shape[:-2] or (1,), tb.shape[:-2] or (1,))
        if not ta.shape[:-2] and not tb.shape[:-2]:
            batch = ()
        shape = batch + (ta.shape[-2], tb.shape[-1])
        return self._add_op("matmul", [a, b], shape, dtype or ta.dtype, {}, name, "matmul")

    def pointwise(self, fn: str, *xs: str, name: str | None = None, dtype: str | None = None) -> str:
        """Elementwise ``fn`` (one of ``POINTWISE_FUNCTIONS``) over ``xs`` with numpy broadcasting.

        The output has the broadcast shape and the first operand's dtype unless ``dtype`` is given.
        Raises GraphError for an unknown function, no operands, or shapes that do not broadcast."""
        op = name or fn
        if fn not in POINTWISE_FNS:
            raise GraphError(f"op {op!r}: unknown pointwise function {fn!r}; known: {sorted(POINTWISE_FNS)}")
        if not xs:
            raise GraphError(f"op {op!r}: pointwise {fn!r} needs at least one operand")
        ts = [self._tensor(op, x) for x in xs]
        shape = broadcast_shapes(op, *(t.shape for t in ts))
        return self._add_op("pointwise", list(xs), shape, dtype or ts[0].dtype, {"fn": fn}, name, fn)

    def reduce(self, fn: str, x: str, dims, *, name: str | None = None, dtype: str | None = None) -> str:
        """Reduce ``x`` with ``fn`` (one of ``REDUCTIONS``) over ``dims`` (an int or ints, negative from the
        end), keeping them as size-1 dims (keepdim) so the result broadcasts back against ``x``.

        Raises GraphError for an unknown function, or dims that are empty, repeated or out of range."""
        op = name or f"reduce_{fn}"
        if fn not in REDUCE_FNS:
            raise GraphError(f"op {op!r}: unknown reduction {fn!r}; known: {sorted(REDUCE_FNS)}")
        t = self._tensor(op, x)
        dims = (dims,) if isinstance(dims, int) else tuple(dims)
        norm = tuple(sorted({d % len(t.shape) if -len(t.shape) <= d < len(t.shape) else None for d in dims} - {None}))
        if len(norm) != len(dims) or not dims:
            raise GraphError(f"op {op!r}: reduction dims {dims} invalid for shape {t.shape}")
        shape = tuple(1 if i in norm else d for i, d in enumerate(t.shape))
        return self._add_op("reduce", [x], shape, dtype or t.dtype, {"fn": fn, "dims": list(norm)}, name, f"{fn}")

    def permute(self, x: str, perm, *, name: str | None = None) -> str:
        """A view of ``x`` with its dims reordered (output dim i is input dim ``perm[i]``): no data moves,
        the stick dim moves with the view. Raises GraphError if ``perm`` is not a permutation of x's dims."""
        op = name or "permute"
        t = self._tensor(op, x)
        perm = tuple(int(p) for p in perm)
        if sorted(perm) != list(range(len(t.shape))):
            raise GraphError(f"op {op!r}: {perm} is not a permutation of the {len(t.shape)} dims of {x!r}")
        shape = tuple(t.shape[p] for p in perm)
        return self._add_op("view", [x], shape, t.dtype, {"perm": list(perm)}, name, "permute")

    def transpose(self, x: str, d0: int = -2, d1: int = -1, *, name: str | None = None) -> str:
        """A view of ``x`` with dims ``d0`` and ``d1`` swapped (default the last two): ``permute``."""
        t = self._tensor(name or "transpose", x)
        rank = len(t.shape)
        perm = list(range(rank))
        perm[d0 % rank], perm[d1 % rank] = perm[d1 % rank], perm[d0 % rank]
        return self.permute(x, perm, name=name or self._fresh("transpose"))

    def reshape(self, x: str, shape, *, name: str | None = None) -> str:
        """``x`` with a new shape of the same element count: a copy (an op the planner divides like a
        pointwise one). Raises GraphError when the element counts differ."""
        op = name or "reshape"
        t = self._tensor(op, x)
        shape = tuple(int(d) for d in shape)
        n = 1
        for d in shape:
            n *= d
        if n != t.numel:
            raise GraphError(f"op {op!r}: cannot reshape {t.shape} ({t.numel} elements) to {shape} ({n})")
        return self._add_op("reshape", [x], shape, t.dtype, {}, name, "reshape")

    # composites, decomposed into primitive ops named ``{name}.{part}``
    def softmax(self, x: str, dim: int = -1, *, name: str | None = None) -> str:
        """Softmax of ``x`` along ``dim`` as five ops: ``.max``, ``.sub``, ``.exp``, ``.sum``, ``.div``;
        returns the output's name (the ``.div``). Raises GraphError for a bad dim or a name already used."""
        p = name or self._fresh("softmax")
        m = self.reduce("max", x, dim, name=f"{p}.max")
        s = self.pointwise("sub", x, m, name=f"{p}.sub")
        e = self.pointwise("exp", s, name=f"{p}.exp")
        z = self.reduce("sum", e, dim, name=f"{p}.sum")
        return self.pointwise("div", e, z, name=f"{p}.div")

    def layernorm(self, x: str, gamma: str | None = None, beta: str | None = None, *, name: str | None = None) -> str:
        """Layer norm over the last dim (no epsilon term: it costs nothing to plan) as ``.mean``, ``.center``,
        ``.square``, ``.var``, ``.rsqrt``, ``.norm`` and, given ``gamma`` / ``beta`` tensors that broadcast
        against x, ``.scale`` / ``.shift``. Returns the output's name."""
        p = name or self._fresh("layernorm")
        mu = self.reduce("mean", x, -1, name=f"{p}.mean")
        c = self.pointwise("sub", x, mu, name=f"{p}.center")
        var = self.reduce("mean", self.pointwise("square", c, name=f"{p}.square"), -1, name=f"{p}.var")
        r = self.pointwise("rsqrt", var, name=f"{p}.rsqrt")
        y = self.pointwise("mul", c, r, name=f"{p}.norm")
        if gamma is not None:
            y = self.pointwise("mul", y, gamma, name=f"{p}.scale")
        if beta is not None:
            y = self.pointwise("add", y, beta, name=f"{p}.shift")
        return y

    def rmsnorm(self, x: str, gamma: str | None = None, *, name: str | None = None) -> str:
        """RMS norm over the last dim as ``.square``, ``.meansq``, ``.rsqrt``, ``.norm`` and, given ``gamma``,
        ``.scale``. Returns the output's name."""
        p = name or self._fresh("rmsnorm")
        ms = self.reduce("mean", self.pointwise("square", x, name=f"{p}.square"), -1, name=f"{p}.meansq")
        r = self.pointwise("rsqrt", ms, name=f"{p}.rsqrt")
        y = self.pointwise("mul", x, r, name=f"{p}.norm")
        if gamma is not None:
            y = self.pointwise("mul", y, gamma, name=f"{p}.scale")
        return y

    # queries
    def compute_ops(self) -> list[Op]:
        """The ops that run, in schedule order: every op but the views, which move no data (a view's consumer
        reads its input with the stick dim moved; the planner decides nothing for it)."""
        return [o for o in self.ops.values() if o.kind != "view"]

    def to_networkx(self) -> nx.DiGraph:
        """The op graph: a node per op (attribute ``kind``), an edge per producer -> consumer (``tensor``).

        networkx is imported here, on use: the planner itself needs only the standard library's ``graphlib``,
        and a command with a 0.3 s limit should not spend a tenth of it importing networkx."""
        import networkx as nx

        g = nx.DiGraph()
        for o in self.ops.values():
            g.add_node(o.name, kind=o.kind)
            for x in o.inputs:
                src = self.tensors[x].producer
                if src is not None:
                    g.add_edge(src, o.name, tensor=x)
        return g

    def check(self) -> None:
        """Raise GraphError if the graph is not a DAG in schedule order or has no outputs."""
        order = graphlib.TopologicalSorter({o.name: self._producers(o) for o in self.ops.values()})
        try:
            order.prepare()
        except graphlib.CycleError as exc:
            cycle = exc.args[1][:-1]  # graphlib repeats the first node at the end
            raise GraphError(f"op {cycle[0]!r}: the graph has a cycle {cycle}") from None
        if not self.outputs:
            raise GraphError(f"graph {self.name!r}: no outputs; mark at least one with Graph.output")

    def _producers(self, op: Op) -> set[str]:
        return {p for x in op.inputs if (p := self.tensors[x].producer) is not None}

    def __repr__(self) -> str:
        kinds: dict[str, int] = {}
        for o in self.ops.values():
            kinds[o.kind] = kinds.get(o.kind, 0) + 1
        ops = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "no ops"
        leaves = sum(t.producer is None for t in self.tensors.values())
        outs = len(self.outputs)
        return f"<Graph {self.name!r}: {len(self.ops)} ops ({ops}), {leaves} inputs and weights, {outs} output{'s' * (outs != 1)}>"

    def summary(self, limit: int = 40) -> str:
        """A readable listing: each leaf and op (kind, function, shape, dtype, inputs), at most ``limit`` ops."""
        lines = [repr(self)]
        for t in self.tensors.values():
            if t.producer is None:
                lines.append(f"  {t.role:6s} {t.name}: {list(t.shape)} {t.dtype}")
        for n, o in enumerate(self.ops.values()):
            if n == limit:
                lines.append(f"  ... {len(self.ops) - limit} more ops")
                break
            out = self.tensors[o.output]
            what = o.kind + (f" {o.attrs['fn']}" if "fn" in o.attrs else "")
            mark = "  (output)" if o.output in self.outputs else ""
            lines.append(f"  {what:14s} {o.name}({', '.join(o.inputs)}): {list(out.shape)} {out.dtype}{mark}")
        return "\n".join(lines)

    # JSON (docs/formats.md)
    def to_dict(self) -> dict:
        """The graph as plain data: ``version``, ``name``, ``leaves``, ``ops`` (schedule order), ``outputs``."""
        leaves = [
            {"name": t.name, "shape": list(t.shape), "dtype": t.dtype, "role": t.role}
            for t in self.tensors.values()
            if t.producer is None
        ]
        ops = [
            {
                "name": o.name,
                "kind": o.kind,
                "inputs": list(o.inputs),
                "output": o.output,
                "shape": list(self.tensors[o.output].shape),
                "dtype": self.tensors[o.output].dtype,
                "attrs": o.attrs,
            }
            for o in self.ops.values()
        ]
        return {
            "version": GRAPH_VERSION,
            "name": self.name,
            "leaves": leaves,
            "ops": ops,
            "outputs": list(self.outputs),
        }

    def to_json(self) -> str:
        """``to_dict`` as deterministic JSON (sorted keys)."""
        return json.dumps(self.to_dict(), sort_keys=True, indent=1)

    @classmethod
    def from_dict(cls, data: Any) -> Graph:
        """Rebuild a graph by replaying its ops through the builder; FormatError or GraphError naming the field,
        op or tensor when the data is malformed, FormatError for a version this spyreopt does not read."""
        return graph_from_dict(data)

    @classmethod
    def from_json(cls, text: str) -> Graph:
        """``from_dict`` of a JSON text (FormatError when it is not JSON)."""
        return cls.from_dict(parse_json(text, "graph JSON"))


def _field(obj: Any, key: str, kind: type | tuple, where: str) -> Any:
    if not isinstance(obj, dict):
        raise FormatError(f"{where}: expected an object, got {type(obj).__name__}")
    if key not in obj:
        raise FormatError(f"{where}: missing field {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        expected = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise FormatError(f"{where}.{key}: expected {expected}, got {type(value).__name__}")
    return value


def _shape(obj: dict, where: str) -> tuple[int, ...]:
    shape = _field(obj, "shape", list, where)
    if not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        raise FormatError(f"{where}.shape: expected a list of integers, got {shape!r}")
    if any(d <= 0 for d in shape):
        raise FormatError(f"{where}.shape: zero or negative size in {shape}")
    return tuple(shape)


def graph_from_dict(data: Any) -> Graph:
    """The graph a JSON document describes, rebuilt by replaying its ops through the builder, so it obeys exactly
    the rules of one built in Python (shapes, dtypes, order)."""
    check_version(data, GRAPH_VERSION, "graph JSON")
    name = _field(data, "name", str, "graph")
    g = Graph(name)
    for i, leaf in enumerate(_field(data, "leaves", list, "graph")):
        where = f"graph.leaves[{i}]"
        lname = _field(leaf, "name", str, where)
        role = _field(leaf, "role", str, where)
        if role not in ("input", "weight"):
            raise FormatError(f"{where}.role: expected 'input' or 'weight', got {role!r}")
        dtype = _field(leaf, "dtype", str, where)
        (g.input if role == "input" else g.weight)(lname, _shape(leaf, where), dtype)
    for i, op in enumerate(_field(data, "ops", list, "graph")):
        where = f"graph.ops[{i}]"
        _replay(g, op, where)
    outputs = _field(data, "outputs", list, "graph")
    for j, out in enumerate(outputs):
        if not isinstance(out, str):
            raise FormatError(f"graph.outputs[{j}]: expected a tensor name, got {out!r}")
        g.output(out)
    g.check()
    return g


def _replay(g: Graph, op: dict, where: str) -> None:
    name = _field(op, "name", str, where)
    kind = _field(op, "kind", str, where)
    inputs = _field(op, "inputs", list, where)
    attrs = op.get("attrs", {})
    if not isinstance(attrs, dict):
        raise FormatError(f"{where}.attrs: expected an object")
    dtype = op.get("dtype")
    for j, x in enumerate(inputs):
        if not isinstance(x, str):
            raise FormatError(f"{where}.inputs[{j}]: expected a tensor name, got {x!r}")
    try:
        if kind == "matmul":
            _arity(inputs, 2, where)
            out = g.matmul(*inputs, name=name, dtype=dtype)
        elif kind == "pointwise":
            out = g.pointwise(_field(attrs, "fn", str, f"{where}.attrs"), *inputs, name=name, dtype=dtype)
        elif kind == "reduce":
            _arity(inputs, 1, where)
            out = g.reduce(
                _field(attrs, "fn", str, f"{where}.attrs"), inputs[0], _field(attrs, "dims", list, f"{where}.attrs"),
                name=name, dtype=dtype,
            )  # fmt: skip
        elif kind == "view":
            _arity(inputs, 1, where)
            out = g.permute(inputs[0], _field(attrs, "perm", list, f"{where}.attrs"), name=name)
        elif kind == "reshape":
            _arity(inputs, 1, where)
            out = g.reshape(inputs[0], _shape(op, where), name=name)
        else:
            raise GraphError(f"op {name!r}: unknown op kind {kind!r}; known: matmul, pointwise, reduce, view, reshape")
    except TypeError as exc:
        raise FormatError(f"{where}: {exc}") from exc
    if "shape" in op and tuple(_shape(op, where)) != g.tensors[out].shape:
        raise GraphError(f"op {name!r}: declared shape {op['shape']} but inputs give {list(g.tensors[out].shape)}")
    if "output" in op and op["output"] != out:
        raise FormatError(f"{where}.output: expected {out!r} (outputs are named after their op), got {op['output']!r}")


def _arity(inputs: list, n: int, where: str) -> None:
    if len(inputs) != n:
        raise FormatError(f"{where}.inputs: expected {n} tensor(s), got {len(inputs)}")
