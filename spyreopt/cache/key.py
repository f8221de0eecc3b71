"""Canonical problem keys: the same planning problem gives the same sha256, whatever its names.

The graph's op order is its schedule, so the canonical form refers to ops by
their index in that order and to tensors by where they come from: an op's
output by its producer's index, a graph input or weight by the order in which
the schedule first reads it. Op, tensor and graph names never enter the key;
everything the planner reads does: kinds, shapes, dtypes, attributes, which
tensors are outputs, every hardware field but its label, every cost-model
coefficient, the backend and all of its options, and how the Problem's
candidates are built (or, for a ready-made Problem, the candidates themselves).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.errors import SolverError
from spyreopt.model.graph import Graph
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.problem import Problem

KEY_FORMAT = 1  # bump when the canonical form or the stored plan layout changes
DEFAULT_MAX_LAYOUTS = inspect.signature(Problem).parameters["max_layouts"].default


def _version() -> str:
    try:
        return metadata.version("spyreopt")
    except metadata.PackageNotFoundError:  # a source checkout that was never installed
        return "unknown"


@dataclass(frozen=True)
class Canonical:
    """A graph's name-free form and the renaming that maps its names onto it."""

    payload: dict
    op_names: dict[str, str]  # graph op name -> canonical op name ("op<index>")
    tensor_names: dict[str, str]  # graph tensor name -> canonical name ("out<op index>" / "leaf<first-use index>")


def _number(x: Any, where: str) -> Any:
    """One spelling per value: integral floats become ints, -0.0 becomes 0, numpy scalars become Python."""
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return x
    if hasattr(x, "item") and callable(x.item) and getattr(x, "shape", None) == ():
        x = x.item()
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        if math.isfinite(x) and x == int(x):
            return int(x)
        return x
    raise SolverError(f"{where}: a {type(x).__name__} cannot be part of a plan-cache key (solve without a cache)")


def canon(obj: Any, where: str = "value") -> Any:
    """A JSON-ready copy with normalised numbers; anything else that is not plain data is an error."""
    if isinstance(obj, dict):
        return {str(k): canon(v, f"{where}.{k}") for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [canon(v, f"{where}[{i}]") for i, v in enumerate(obj)]
    return _number(obj, where)


def canonical_graph(graph: Graph) -> Canonical:
    ops = list(graph.ops.values())
    op_names = {o.name: f"op{i}" for i, o in enumerate(ops)}
    tensor_names = {o.output: f"out{i}" for i, o in enumerate(ops)}
    for o in ops:  # leaves numbered by first use in schedule order
        for x in o.inputs:
            if x not in tensor_names:
                tensor_names[x] = f"leaf{len(tensor_names) - len(ops)}"
    unused = sorted(
        (t for t in graph.tensors.values() if t.name not in tensor_names),
        key=lambda t: json.dumps([t.role, t.dtype, list(t.shape)]),
    )
    for t in unused:
        tensor_names[t.name] = f"leaf{len(tensor_names) - len(ops)}"
    leaves = sorted(
        (t for t in graph.tensors.values() if t.producer is None), key=lambda t: int(tensor_names[t.name][4:])
    )
    payload = {
        "leaves": [[t.role, t.dtype, list(t.shape)] for t in leaves],
        "ops": [
            [
                o.kind,
                [tensor_names[x] for x in o.inputs],
                list(graph.tensors[o.output].shape),
                graph.tensors[o.output].dtype,
                canon(o.attrs, f"op {o.name!r} attrs"),
            ]
            for o in ops
        ],
        "outputs": sorted(tensor_names[x] for x in graph.outputs),
    }
    return Canonical(payload, op_names, tensor_names)


def _candidates(problem: Problem, c: Canonical) -> list:
    """Every candidate of every op, so a restricted or ``fixed`` Problem keys differently from the default."""
    out = []
    for i, o in enumerate(problem.ops):
        cands = [
            [list(problem.layout(i, s).division.factors), problem.layout(i, s).stick, cand.residency, cand.branch]
            for s, cand in enumerate(problem.candidates[i])
        ]
        out.append([c.op_names[o.name], cands])
    return out


def key_payload(
    graph: Graph | Problem,
    backend: str,
    options: dict[str, Any],
    *,
    hardware: HardwareSpec | None = None,
    coefficients: Coefficients | None = None,
    extra: dict | None = None,
) -> tuple[dict, Canonical]:
    """The canonical JSON object that is hashed, and the graph's renaming onto it.

    ``options`` holds every backend option, ``time_limit`` and ``seed`` included.
    ``extra`` is any further restriction the caller applies (e.g. fixed boundary
    residencies); it must already be in canonical names.
    """
    problem = graph if isinstance(graph, Problem) else None
    g = problem.graph if problem else graph
    hw = problem.hw if problem else (hardware or HardwareSpec())
    coef = problem.coef if problem else coefficients
    if coef is None:
        from spyreopt.costmodel.coefficients import default

        coef = default()
    c = canonical_graph(g)
    hw_fields = {k: v for k, v in hw.to_dict().items() if k != "name"}  # the name is a label, not a parameter
    payload = {
        "format": KEY_FORMAT,
        "spyreopt": _version(),
        "graph": c.payload,
        "hardware": canon(hw_fields, "hardware"),
        "coefficients": canon(coef.to_dict(), "coefficients"),
        "backend": backend,
        "options": canon(dict(options), "option"),
        "problem": {"candidates": _candidates(problem, c)} if problem else {"max_layouts": DEFAULT_MAX_LAYOUTS},
        "extra": canon(extra or {}, "extra"),
    }
    return payload, c


def digest(payload: dict) -> str:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def problem_key(
    graph: Graph | Problem,
    backend: str = "greedy",
    *,
    time_limit: float = 10.0,
    seed: int = 0,
    hardware: HardwareSpec | None = None,
    coefficients: Coefficients | None = None,
    **options: Any,
) -> str:
    """sha256 of the canonical problem: equal for renamed copies, different when anything planned on differs."""
    payload, _ = key_payload(
        graph,
        backend,
        {"time_limit": time_limit, "seed": seed, **options},
        hardware=hardware,
        coefficients=coefficients,
    )
    return digest(payload)
