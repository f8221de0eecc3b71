"""Graph from JSON: every field checked, every error naming the field, op or tensor.

The graph is rebuilt by replaying its ops through the builder, so a JSON graph
obeys exactly the rules of one built in Python (shapes, dtypes, order).
"""

from __future__ import annotations

from typing import Any

from spyreopt.errors import FormatError, GraphError
from spyreopt.model.graph import GRAPH_VERSION, Graph


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


def check_version(data: Any, supported: int, what: str) -> None:
    """A ``version`` this spyreopt reads: ``supported``, or none (files written before versions existed)."""
    if isinstance(data, dict) and "version" in data and data["version"] != supported:
        raise FormatError(
            f"{what}: version {data['version']!r} is not supported; this spyreopt reads version {supported} "
            f"(and files without a version)"
        )


def graph_from_dict(data: Any) -> Graph:
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
