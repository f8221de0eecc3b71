"""A plan's fields from JSON (``Plan.from_dict``): every field type-checked, errors naming the field."""

from __future__ import annotations

from copy import copy
from dataclasses import fields
from typing import Any, get_args, get_origin, get_type_hints

from spyreopt.errors import FormatError
from spyreopt.model.json_form import check_version
from spyreopt.model.plan_data import (
    EDGE_MODES,
    PLAN_VERSION,
    STATUSES,
    EdgePlan,
    LoopPlan,
    OpPlan,
    PlanData,
    TensorPlan,
)

RESIDENCIES = ("hbm", "lx", "lx+hbm")


def _check(value: Any, hint: Any, where: str) -> Any:
    """Check one field against its type hint (int, float, str, bool, list[int], dict, and X | None)."""
    args = get_args(hint)
    if type(None) in args:
        if value is None:
            return None
        hint = next(a for a in args if a is not type(None))
    elif value is None:
        raise FormatError(f"{where}: must not be null")
    origin = get_origin(hint) or hint
    if hint is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise FormatError(f"{where}: expected an integer, got {value!r}")
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise FormatError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if hint is str and not isinstance(value, str):
        raise FormatError(f"{where}: expected a string, got {value!r}")
    if hint is bool and not isinstance(value, bool):
        raise FormatError(f"{where}: expected true/false, got {value!r}")
    if origin is list:
        item = (get_args(hint) or (int,))[0]
        ok = (
            (lambda x: isinstance(x, str))
            if item is str
            else (lambda x: isinstance(x, int) and not isinstance(x, bool))
        )
        if not isinstance(value, list) or not all(ok(x) for x in value):
            raise FormatError(f"{where}: expected a list of {item.__name__}s, got {value!r}")
    if origin is dict and not isinstance(value, dict):
        raise FormatError(f"{where}: expected an object, got {type(value).__name__}")
    return value


# fields added after plans were first written: absent from older JSON, read as their default
OPTIONAL = {"loop": None, "staged": [], "accumulate": False, "inplace_over": None}


def _record(cls: type, data: Any, where: str, skip: tuple[str, ...] = ()) -> dict:
    if not isinstance(data, dict):
        raise FormatError(f"{where}: expected an object, got {type(data).__name__}")
    hints = get_type_hints(cls)
    out = {}
    for f in fields(cls):
        if f.name in skip:
            continue
        if f.name not in data:
            if f.name == "solve_seconds":  # wall-clock: absent from deterministic JSON
                out[f.name] = 0.0
                continue
            if f.name in OPTIONAL:
                out[f.name] = copy(OPTIONAL[f.name])
                continue
            raise FormatError(f"{where}: missing field {f.name!r}")
        out[f.name] = _check(data[f.name], hints[f.name], f"{where}.{f.name}")
    unknown = sorted(set(data) - {f.name for f in fields(cls)})
    if unknown:
        raise FormatError(f"{where}: unknown field(s) {unknown}")
    return out


def _list(data: dict, key: str) -> list:
    value = data.get(key)
    if not isinstance(value, list):
        raise FormatError(f"plan.{key}: expected a list, got {type(value).__name__}")
    return value


def _records(data: dict, key: str, cls: type, choices: dict[str, tuple], non_negative: tuple[str, ...]) -> list[dict]:
    """``plan.<key>``: each record type-checked, each ``choices`` field one of its values, each ``non_negative``
    field (when set) at least 0."""
    out = []
    for i, x in enumerate(_list(data, key)):
        where = f"plan.{key}[{i}]"
        rec = _record(cls, x, where)
        for name, allowed in choices.items():
            if rec[name] not in allowed:
                raise FormatError(f"{where}.{name}: {rec[name]!r} not one of {allowed}")
        for name in non_negative:
            if rec[name] is not None and rec[name] < 0:
                raise FormatError(f"{where}.{name}: negative ({rec[name]})")
        out.append(rec)
    return out


def plan_fields(data: Any) -> dict[str, Any]:
    """The keyword arguments of a ``PlanData`` (or ``Plan``) a JSON document describes."""
    check_version(data, PLAN_VERSION, "plan JSON")
    if isinstance(data, dict):
        data = {k: v for k, v in data.items() if k != "version"}
    top = _record(PlanData, data, "plan", skip=("ops", "tensors", "edges", "loops"))
    ops = [OpPlan(**rec) for rec in _records(data, "ops", OpPlan, {"residency": RESIDENCIES}, ("inplace_over",))]
    for i, o in enumerate(ops):
        for d, f in o.division.items():
            if isinstance(f, bool) or not isinstance(f, int) or f <= 0:
                raise FormatError(f"plan.ops[{i}].division.{d}: expected a positive integer, got {f!r}")
    records = _records(data, "tensors", TensorPlan, {"residency": RESIDENCIES}, ("bytes_per_core",))
    tensors = [TensorPlan(**rec) for rec in records]
    edges = [
        EdgePlan(**rec) for rec in _records(data, "edges", EdgePlan, {"mode": EDGE_MODES}, ("copy_bytes_per_core",))
    ]
    if top["status"] not in STATUSES:
        raise FormatError(f"plan.status: {top['status']!r} not one of {STATUSES}")
    loops = _loops(data.get("loops", []))
    for i, o in enumerate(ops):
        if o.loop is not None and not 0 <= o.loop < len(loops):
            raise FormatError(f"plan.ops[{i}].loop: {o.loop} is not an index into plan.loops ({len(loops)} loops)")
    return dict(ops=ops, tensors=tensors, edges=edges, loops=loops, **top)


def _loops(data: Any) -> list[LoopPlan]:
    """``plan.loops`` (absent in plans written before tiled loops: none)."""
    if not isinstance(data, list):
        raise FormatError(f"plan.loops: expected a list, got {type(data).__name__}")
    out = []
    for i, x in enumerate(data):
        rec = _record(LoopPlan, x, f"plan.loops[{i}]")
        if rec["tiles"] < 1:
            raise FormatError(f"plan.loops[{i}].tiles: expected a positive integer, got {rec['tiles']}")
        if rec["footprint_bytes"] < 0:
            raise FormatError(f"plan.loops[{i}].footprint_bytes: negative ({rec['footprint_bytes']})")
        for op, d in rec["op_dims"].items():
            if not isinstance(d, str):
                raise FormatError(f"plan.loops[{i}].op_dims.{op}: expected a dim name, got {d!r}")
        out.append(LoopPlan(**rec))
    return out
