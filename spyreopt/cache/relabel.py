"""Plans in canonical names and back: how one stored plan serves every renamed copy of its problem.

A stored plan keeps only its decisions (ops, tensors, edges, status, cost,
stats) with canonical names; the graph, hardware and coefficients it embeds are
the caller's, filled in when it is read back.
"""

from __future__ import annotations

from spyreopt.cache.key import Canonical
from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.model.graph import Graph
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.plan import Plan

CONTEXT = ("graph", "hardware", "coefficients")
# which fields of each plan record hold an op name ("op") or a tensor name ("tensor")
NAME_FIELDS = {
    "ops": {"name": "op"},
    "tensors": {"name": "tensor", "producer": "op"},
    "edges": {"tensor": "tensor", "producer": "op", "consumer": "op"},
}


def _rename(data: dict, ops: dict[str, str], tensors: dict[str, str]) -> dict:
    maps = {"op": ops, "tensor": tensors}
    out = dict(data)
    for section, fields in NAME_FIELDS.items():
        out[section] = [{**rec, **{f: maps[kind][rec[f]] for f, kind in fields.items()}} for rec in data[section]]
    out["loops"] = [  # tiled loops name their ops (also as op_dims keys) and their staged tensors
        {**x, "ops": [ops[n] for n in x["ops"]], "op_dims": {ops[n]: d for n, d in x["op_dims"].items()},
         "staged": [tensors[t] for t in x["staged"]]}
        for x in data.get("loops", [])
    ]  # fmt: skip
    return out


def to_canonical(plan: Plan, c: Canonical) -> dict:
    """The plan's decisions in canonical names, wall-clock timing kept, context dropped."""
    data = plan.to_dict(timing=True)
    for k in CONTEXT:
        data.pop(k)
    return _rename(data, c.op_names, c.tensor_names)


def from_canonical(data: dict, c: Canonical, graph: Graph, hardware: HardwareSpec, coefficients: Coefficients) -> Plan:
    """The stored decisions in ``graph``'s names, with the caller's graph, hardware and coefficients."""
    ops = {v: k for k, v in c.op_names.items()}
    tensors = {v: k for k, v in c.tensor_names.items()}
    named = _rename(data, ops, tensors)
    named.update(graph=graph.to_dict(), hardware=hardware.to_dict(), coefficients=coefficients.to_dict())
    return Plan.from_dict(named)
