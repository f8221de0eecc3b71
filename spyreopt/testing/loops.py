"""Tiled-loop plans made by hand from an untiled plan, for testing the loop checker, the
simulator and numeric execution independently of the planner that will choose loops.

``with_loop(plan, ops, op_dims, tiles)`` wraps ``ops`` into one loop: tensors produced and
read inside stay on chip (one tile at the producer's address), the loop's outputs and
the tensors entering it go through device memory, and ``footprint_bytes`` is the
checker's own figure (tests of the footprint rule change it afterwards).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from spyreopt.model.check.loop_dims import Loop, base_tensor
from spyreopt.model.check.loops import footprint
from spyreopt.model.graph import Graph
from spyreopt.model.plan import Plan


def _bytes_per_core(g: Graph, o: dict, tensor: str) -> int:
    """An untiled per-core slice's bytes, stick-padded (for sizing a tile buffer generously)."""
    t = g.tensors[tensor]
    eps = max(128 // t.elem_bytes, 1)
    ext = list(t.shape)
    ext[o["stick"]] = -(-ext[o["stick"]] // eps) * eps
    total = t.elem_bytes
    for e in ext:
        total *= e
    return -(-total // o["cores"])


def _lifetime(g: Graph, data: dict, op: str, tensor: str) -> list[int]:
    """From its producer's step to just after its last reader's."""
    order = [o["name"] for o in data["ops"]]
    readers = [order.index(e["consumer"]) for e in data["edges"] if e["tensor"] == tensor]
    return [order.index(op), max(readers, default=order.index(op)) + 1]


def with_loop(
    plan: Plan,
    ops: list[str],
    op_dims: Mapping[str, str],
    tiles: int,
    staged: Iterable[str] = (),
    accumulate: bool | None = None,
) -> Plan:
    """A copy of ``plan`` with ``ops`` run as one loop over ``tiles`` tiles (appended to its loops)."""
    data = json.loads(plan.to_json())
    g = Graph.from_dict(data["graph"])
    inside = set(ops)
    index = len(data.get("loops", []))
    reads_inside, reads_outside = set(), set()
    for e in data["edges"]:
        a, b = e["producer"] in inside, e["consumer"] in inside
        if a and b:
            reads_inside.add(e["tensor"])
            if e["mode"] in ("hbm", "spill"):  # the tile stays on chip: read in place (same slicing assumed)
                e.update(mode="inplace", restickify=False, copy_address=None, copy_bytes_per_core=0, fan_in=1)
            continue
        if a or b:
            e.update(mode="hbm", restickify=False, copy_address=None, copy_bytes_per_core=0, fan_in=0)
        if a:
            reads_outside.add(e["tensor"])
    tensors = {t["name"]: t for t in data["tensors"]}
    top = max((t["address"] + t["bytes_per_core"] for t in data["tensors"] if t["address"] is not None), default=0)
    for e in data["edges"]:
        if e["copy_address"] is not None:
            top = max(top, e["copy_address"] + e["copy_bytes_per_core"])
    for o in data["ops"]:
        out = g.ops[o["name"]].output
        if o["name"] in inside:
            o["loop"] = index
            if o.get("inplace_over") is not None:  # no in-place write inside a loop: the tile gets its own buffer
                o["inplace_over"] = None
                if tensors[out]["address"] is not None:
                    tensors[out]["address"] = top
                    top += tensors[out]["bytes_per_core"]
            keep = out in reads_inside
            leave = out in reads_outside or out in g.outputs
            res = "lx+hbm" if keep and leave else "lx" if keep else "hbm"
            if res == "hbm" and "lx" in o["residency"] and accumulate:
                res = o["residency"]  # an accumulator may stay on chip
            o["residency"] = tensors[out]["residency"] = res
            if "lx" not in res:
                tensors[out].update(address=None, bytes_per_core=0)
            elif tensors[out]["address"] is None:  # a tile buffer the untiled plan kept in device memory
                size = -(-_bytes_per_core(g, o, out) // tiles // 128) * 128
                tensors[out].update(address=top, bytes_per_core=size, lifetime=_lifetime(g, data, o["name"], out))
                top += size
            else:
                tensors[out]["bytes_per_core"] //= tiles
    entering = {
        base_tensor(g, x)[0]
        for n in ops
        for x in g.ops[n].inputs
        if g.tensors[base_tensor(g, x)[0]].producer not in inside
    }
    for o in data["ops"]:
        out = g.ops[o["name"]].output
        if out in entering and o["residency"] == "lx":
            o["residency"] = tensors[out]["residency"] = "lx+hbm"
    data.setdefault("loops", []).append(
        {"ops": list(ops), "dim": op_dims[ops[0]], "op_dims": dict(op_dims), "tiles": tiles, "footprint_bytes": 0,
         "staged": list(staged), "accumulate": bool(accumulate)}
    )  # fmt: skip
    out = Plan.from_json(json.dumps(data))
    g2 = Graph.from_dict(out.graph)
    from spyreopt.model.hardware import HardwareSpec

    out.loops[index].footprint_bytes = footprint(Loop(out, g2, HardwareSpec.from_dict(out.hardware), index))
    return out
