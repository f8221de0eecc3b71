"""The Plan as data: every decision, the predicted cost, and the graph, hardware and coefficients it was made for.

``PlanData`` holds the fields and writes them as JSON; the judges (``model.check``), the explanation and the
tables read a ``PlanData``. ``model.plan.Plan`` is the same record with the conveniences a user calls
(``validate``, ``explain``, ``table``, ``show``, ``from_json``), which use those modules: kept apart, no module
that reads a plan imports the one that calls it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

EDGE_MODES = ("inplace", "relayout", "restickify", "hbm", "spill")
PLAN_VERSION = 1  # of the JSON form (docs/formats.md); readers accept it and files without a version
STATUSES = ("optimal", "feasible", "timeout", "interrupted", "infeasible", "error")


@dataclass
class OpPlan:
    name: str
    kind: str
    division: dict[str, int]
    cores: int
    stick: int
    residency: str
    predicted_us: float
    breakdown: dict[str, float]
    loop: int | None = None  # index into ``Plan.loops`` when the op runs inside a tiled loop
    inplace_over: int | None = None  # operand whose dying scratchpad buffer the output is written over


@dataclass
class TensorPlan:
    name: str
    producer: str
    residency: str
    stick: int
    address: int | None
    bytes_per_core: int
    lifetime: list[int]  # half-open op steps [lo, hi) while resident (through its last reader)


@dataclass
class EdgePlan:
    tensor: str
    producer: str
    consumer: str
    operand: int
    mode: str
    restickify: bool
    copy_address: int | None
    copy_bytes_per_core: int
    lifetime: list[int]
    fan_in: int


@dataclass
class LoopPlan:
    """A tiled loop: iteration t runs every op of ``ops`` (schedule order) on tile t of its tiled dim.

    Tile t of a dim of extent E is [t*E/T, (t+1)*E/T); each op's core division applies within the tile.
    """

    ops: list[str]  # schedule order
    dim: str  # the tiled dim in the first op's division naming (m, n, k, b0.. for matmuls; d0, d1.. otherwise)
    op_dims: dict[str, str]  # each op's tiled dim in its own division naming ("k": a matmul tiled over its reduction)
    tiles: int
    footprint_bytes: int  # per iteration, per core: live tile buffers + staged operands + accumulators
    staged: list[str] = field(default_factory=list)  # loop-invariant tensors loaded on chip once
    accumulate: bool = False  # some op reduces over the tiled dim: its partial result stays on chip


@dataclass
class PlanData:
    graph: dict
    hardware: dict
    coefficients: dict
    ops: list[OpPlan]
    tensors: list[TensorPlan]
    edges: list[EdgePlan]
    status: str
    cost_us: float
    bound_us: float | None
    solve_seconds: float
    backend: str
    seed: int = 0
    message: str = ""
    stats: dict[str, Any] = field(default_factory=dict)
    loops: list[LoopPlan] = field(default_factory=list)

    # ---- views -------------------------------------------------------------
    def op(self, name: str) -> OpPlan:
        for o in self.ops:
            if o.name == name:
                return o
        raise KeyError(f"plan has no op {name!r}")

    def tensor(self, name: str) -> TensorPlan:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(f"plan has no tensor {name!r}")

    @property
    def gap(self) -> float | None:
        if self.bound_us is None or self.cost_us <= 0:
            return None
        return max(self.cost_us - self.bound_us, 0.0) / self.cost_us

    # ---- JSON --------------------------------------------------------------
    def to_dict(self, timing: bool = False) -> dict:
        """Every decision; wall-clock measurements only with ``timing=True`` (they vary between runs)."""
        data = asdict(self)
        data["version"] = PLAN_VERSION
        if not timing:
            data.pop("solve_seconds")
            data["stats"] = {k: v for k, v in data["stats"].items() if k != "timing"}
        return data

    def to_json(self, timing: bool = False) -> str:
        """Deterministic JSON (sorted keys): same input and seed give the same bytes."""
        return json.dumps(self.to_dict(timing), sort_keys=True, indent=1)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlanData) and self.to_json() == other.to_json()
