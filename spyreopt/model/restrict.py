"""Pin decisions and forbid capabilities: a Problem whose candidates and edge pairs are masked.

A restriction only removes choices: the costs of what remains are those of the
unrestricted Problem, so every restricted plan is a plan of the original
problem (``plan.validate()`` re-derives it without knowing the restriction),
and every backend sees the restriction because it is in the Formulation.

* ``pin={op: {"division": {dim: parts, ...}, "residency": "lx" | "hbm" | "lx+hbm",
  "tiling": {"dim": name, "tiles": T} | None}}``:
  dims are named as in the plan JSON (``m``, ``n``, ``k``, ``b0``... for
  matmuls, ``b`` when there is one batch dim; ``d0``, ``d1``... otherwise);
  dims not named stay free. ``"lx"`` means on chip (``lx``, or ``lx+hbm`` for a
  graph output, which is always written back). ``"tiling"`` runs the op in a loop over ``T`` tiles of that
  dim (named like the division's), or untiled with ``None``; a pinned loop whose one iteration cannot fit
  the scratchpad is a PlanError giving the footprint and the capacity.
* ``forbid``: ``"inplace"`` (nothing stays on chip: every tensor goes through
  device memory), ``"relayout"`` (no on-chip copy between slicings; where the
  cost model would relayout an ``lx+hbm`` tensor rather than re-read its written
  copy, that pair is removed, not turned into a spill), ``"restickify"`` (every
  tensor is read in the stick it is stored in),
  ``"tiling"`` (no tiled loops: the plan of the untiled problem), ``"staging"``
  (no graph input or weight kept on chip for its later readers, ``model.staging``), ``"reuse"`` (no op
  writes its output over a dying operand's scratchpad buffer, ``model.inplace``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from copy import copy
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from spyreopt.costmodel import spyre
from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.errors import FormatError, PlanError, SolverError
from spyreopt.model.candidates import Layout, OpCandidates
from spyreopt.model.division import enumerate_divisions
from spyreopt.model.graph import Graph
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.plan_data import PlanData
from spyreopt.model.problem import Candidate, Problem
from spyreopt.model.staging import staged_inputs
from spyreopt.model.tables import EdgeTable, frozen
from spyreopt.model.tiling import checked_tiled_layout, parse_tiling, tiled_layout

CAPABILITIES = ("inplace", "relayout", "restickify", "reuse", "staging", "tiling")
# capabilities the planner does not have yet: forbidding them is accepted and changes nothing
NOT_PLANNED: dict[str, str] = {}
PIN_KEYS = ("division", "residency", "tiling")
PIN_RESIDENCIES = {"hbm": ("hbm",), "lx": ("lx", "lx+hbm"), "lx+hbm": ("lx+hbm",)}


@dataclass(frozen=True)
class Restriction:
    """Pinned decisions per op name and forbidden capabilities, checked on construction."""

    pin: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    forbid: frozenset[str] = frozenset()

    @classmethod
    def of(cls, pin: Mapping[str, Mapping[str, Any]] | None, forbid: Iterable[str] | str | None) -> Restriction:
        if isinstance(forbid, str):
            forbid = [f for f in forbid.split(",") if f.strip()]
        forbid = list(forbid or ())
        if not all(isinstance(f, str) for f in forbid):
            raise PlanError(f"forbid: expected capability names (strings), got {forbid!r}")
        forbid = frozenset(f.strip() for f in forbid)
        unknown = sorted(forbid - set(CAPABILITIES))
        if unknown:
            raise PlanError(f"forbid: unknown capability {unknown}; known: {', '.join(CAPABILITIES)}")
        if pin is not None and not isinstance(pin, Mapping):
            raise PlanError(f"pin: expected an object mapping op names to decisions, got {type(pin).__name__}")
        for op, decision in (pin or {}).items():
            if not isinstance(decision, Mapping):
                raise PlanError(f"pin[{op!r}]: expected an object with {PIN_KEYS}, got {decision!r}")
            bad = sorted(set(decision) - set(PIN_KEYS))
            if bad:
                raise PlanError(f"pin[{op!r}]: unknown key(s) {bad}; pin takes {PIN_KEYS}")
            res = decision.get("residency")
            if res is not None and res not in PIN_RESIDENCIES:
                raise PlanError(f"pin[{op!r}].residency: {res!r} not one of {sorted(PIN_RESIDENCIES)}")
            tiling = decision.get("tiling")
            if "tiling" in decision and tiling is not None:
                if not isinstance(tiling, Mapping) or set(tiling) != {"dim", "tiles"}:
                    raise PlanError(f"pin[{op!r}].tiling: expected {{'dim': name, 'tiles': T}} or null, got {tiling!r}")
                t = tiling["tiles"]
                if not isinstance(tiling["dim"], str) or isinstance(t, bool) or not isinstance(t, int) or t < 2:
                    raise PlanError(
                        f"pin[{op!r}].tiling: expected a dim name and an integer tiles >= 2, got {tiling!r}"
                    )
            div = decision.get("division", {})
            if not isinstance(div, Mapping):
                raise PlanError(f"pin[{op!r}].division: expected an object {{dim: parts}}, got {div!r}")
            for d, parts in div.items():
                if isinstance(parts, bool) or not isinstance(parts, int) or parts <= 0:
                    raise PlanError(f"pin[{op!r}].division.{d}: expected a positive integer, got {parts!r}")
        return cls(dict(pin or {}), forbid)

    @property
    def empty(self) -> bool:
        return not self.pin and not (self.forbid - set(NOT_PLANNED))

    def to_dict(self) -> dict:
        return {"pin": {k: dict(v) for k, v in sorted(self.pin.items())}, "forbid": sorted(self.forbid)}


class RestrictedProblem(Problem):
    """A Problem with pinned ops narrowed to their pinned layouts and residencies and forbidden pairs removed.

    Pinned-division ops get a signature of their own (their layouts differ from their twins'); the
    candidate lists are replaced before the Formulation is built, and edge tables are masked.
    """

    def __init__(
        self,
        graph: Graph,
        hw: HardwareSpec | None = None,
        coefficients: Coefficients | None = None,
        *,
        restriction: Restriction,
        max_layouts: int = 6,
        tiling: bool = True,
        staging: bool = True,
        reuse: bool = True,
    ):
        self.restriction = restriction
        names = {o.name for o in graph.compute_ops()}
        for op in restriction.pin:
            if op not in names:
                why = "a view (it has no decisions of its own)" if op in graph.ops else "not an op of the graph"
                raise PlanError(f"pin: op {op!r} is {why}; pinnable ops: {', '.join(sorted(names))}")
        self._masked: dict[int, tuple[EdgeTable, EdgeTable]] = {}
        super().__init__(graph, hw, coefficients, max_layouts=max_layouts, tiling=tiling, staging=staging, reuse=reuse)
        self.stage_relayout = "relayout" not in restriction.forbid
        self.candidates = [self._restricted(i) for i in range(len(self.ops))]

    # ---- layouts and candidates ------------------------------------------------
    def _signatures(self) -> list[int]:
        sig = super()._signatures()
        top = max(sig, default=-1)
        for i, o in enumerate(self.ops):
            pin = self.restriction.pin.get(o.name, {})
            if pin.get("division") or "tiling" in pin:
                top += 1
                sig[i] = top
        return sig

    def _layouts(self, max_layouts: int) -> list[OpCandidates]:
        out = super()._layouts(max_layouts)
        for i, o in enumerate(self.ops):
            division = self.restriction.pin.get(o.name, {}).get("division")
            if division:
                oc = copy(out[i])
                oc._sizes = {}  # not shared with the twins whose layouts these replace
                oc.layouts = self._pinned_layouts(oc, self._factor_pin(oc, division))
                out[i] = oc
            if self.restriction.pin.get(o.name, {}).get("tiling") is not None:
                oc = copy(out[i])
                oc._sizes = {}
                oc.layouts = pinned_tiled_layouts(oc, self.restriction.pin[o.name]["tiling"])
                out[i] = oc
        return out

    def _restricted(self, i: int) -> list[Candidate]:
        name, cands = self.ops[i].name, self.candidates[i]
        pin = self.restriction.pin.get(name, {})
        if "restickify" in self.restriction.forbid:
            leaf_restick = self.op_table(i).parts.restick
            cands = [c for s, c in enumerate(cands) if leaf_restick[s] == 0]
            if not cands:
                raise PlanError(
                    f"op {name!r}: forbid restickify, but every legal layout reads a graph input in another stick"
                )
        if "inplace" in self.restriction.forbid:
            cands = [c for c in cands if c.residency == "hbm" and not c.stage]
        if "tiling" in pin:
            cands = self._tiling_pinned(i, cands, pin["tiling"], pin.get("residency"))
        if "residency" in pin:
            allowed = sorted({c.residency for c in cands})
            kept = [c for c in cands if c.residency in PIN_RESIDENCIES[pin["residency"]]]
            if not kept:
                raise PlanError(self._residency_reason(i, pin["residency"], allowed))
            cands = kept
        return cands

    def _tiling_pinned(self, i: int, cands: list[Candidate], tiling, residency: str | None) -> list[Candidate]:
        """The candidates with the pinned tiling (None: untiled); PlanError when the pinned loop (with its
        output on chip if that is pinned too) cannot fit the scratchpad in one iteration."""
        oc = self.cands[i]
        want = parse_tiling(oc, tiling)
        layouts = [lay for lay in oc.layouts if _tiling_of(lay) == want]
        cap = self.hw.planner_lx_bytes
        if want is not None and layouts:
            held = self.layout_quantities(i).held
            need = [lay.footprint if residency == "lx" else int(held[oc.layouts.index(lay)]) for lay in layouts]
            if min(need) > cap:
                raise PlanError(
                    f"op {oc.op.name!r}: pinned loop of {want[1]} tiles over dim {tiling['dim']!r} needs {min(need)} "
                    f"bytes per core in one iteration, scratchpad capacity is {cap}"
                )
        kept = [c for c in cands if _tiling_of(oc.layouts[c.layout]) == want]
        if not kept:
            raise PlanError(f"op {oc.op.name!r}: pinned tiling {tiling} leaves no candidate under the other pins")
        return kept

    def _factor_pin(self, oc: OpCandidates, division: Mapping[str, int]) -> dict[int, int]:
        """Pinned factors by iteration-dim index (``b`` names the only batch dim of a matmul)."""
        dims = oc.space.dims
        batch = [d for d in dims if d.startswith("b")]
        out = {}
        for d, parts in division.items():
            key = batch[0] if d == "b" and len(batch) == 1 else d
            if key not in dims:
                raise PlanError(f"op {oc.op.name!r}: pin names dim {d!r}; its dims are {', '.join(dims)}")
            out[dims.index(key)] = parts
        return out

    def _pinned_layouts(self, oc: OpCandidates, want: dict[int, int]) -> list[Layout]:
        """The enumerated layouts with the pinned factors, or every legal one when enumeration kept none."""
        kept = [lay for lay in oc.layouts if all(lay.division.factors[d] == f for d, f in want.items())]
        if kept:
            return kept
        sticks = sorted({lay.stick for lay in oc.layouts})
        first_error: PlanError | None = None
        out: list[Layout] = []
        space = oc.space
        for stick in sticks:
            if len(want) == len(space.dims):
                options = [tuple(want[d] for d in range(len(space.dims)))]
            else:
                units = oc._units(stick, oc._required(stick))
                divisions = enumerate_divisions(space, units, self.hw.cores)
                options = [d.factors for d in divisions if all(d.factors[k] == f for k, f in want.items())]
            for factors in options:
                try:
                    out.append(oc.checked_layout(factors, stick))
                except PlanError as exc:
                    first_error = first_error or exc
        if out:
            return out
        if first_error is None:  # a partial pin with no legal completion: the pinned factors alone say why
            try:
                oc.checked_layout(tuple(want.get(d, 1) for d in range(len(space.dims))), sticks[0])
            except PlanError as exc:
                first_error = exc
        named = {space.dims[d]: f for d, f in sorted(want.items())}
        if first_error is not None:
            raise PlanError(f"pinned division {named}: {first_error}") from first_error
        raise PlanError(f"op {oc.op.name!r}: pinned division {named} cannot be completed into a legal division")

    def _residency_reason(self, i: int, want: str, allowed: list[str]) -> str:
        name = self.ops[i].name
        if "inplace" in self.restriction.forbid:
            why = "forbid inplace keeps every tensor in device memory"
        elif not self.out_edges[i]:
            why = "its output has no consumer, so it is only written to device memory"
        else:
            foot = min(lay.footprint for lay in self.cands[i].layouts)
            why = f"its output needs at least {foot} bytes per core, scratchpad capacity is {self.hw.planner_lx_bytes}"
        return f"op {name!r}: residency {want!r} pinned but not possible: {why}; allowed: {allowed}"

    # ---- edge pairs ------------------------------------------------------------
    def edge_table(self, k: int) -> EdgeTable:
        """The unrestricted table with forbidden modes removed (costs of the remaining pairs unchanged)."""
        table = super().edge_table(k)
        held = self._masked.get(k)
        if held is not None and held[0] is table:
            return held[1]
        parts, forbid = table.parts, self.restriction.forbid
        cut = np.zeros(parts.mode.shape, dtype=bool)
        if "relayout" in forbid:
            cut |= parts.mode == spyre.MODES.index("relayout")
        if "restickify" in forbid:
            cut |= parts.restick.astype(bool)
        if cut.any():
            mode = np.where(cut, spyre.FORBIDDEN, parts.mode)
            ok = mode[np.ix_(table.pu, table.pv)] != spyre.FORBIDDEN
            masked = replace(table, parts=replace(parts, mode=mode), allowed=None if ok.all() else frozen(ok))
        else:
            masked = table
        if masked.allowed is not None and not masked.allowed.any():
            self._no_pair(k, table)
        self._masked[k] = (table, masked)
        return masked

    def _no_pair(self, k: int, table: EdgeTable) -> None:
        e = self.edges[k]
        prod_, cons = self.ops[e.producer].name, self.ops[e.consumer].name
        grid = np.ix_(table.pu, table.pv)
        modes, restick = table.parts.mode[grid], table.parts.restick[grid].astype(bool)
        if restick.all():
            why = "the consumer reads it in another stick, which needs a restickify"
        elif (modes == spyre.MODES.index("relayout")).any():
            why = "the resident tensor's slices do not match the consumer's, which needs a relayout"
        else:
            why = "the resident tensor's slices do not match the consumer's and no legal relayout exists"
        pins = {n: dict(p) for n, p in self.restriction.pin.items() if n in (prod_, cons)}
        raise PlanError(
            f"edge {prod_!r} -> {cons!r} (tensor {e.tensor!r}): no allowed pair under pin {pins} and forbid "
            f"{sorted(self.restriction.forbid)}: {why}"
        )


def _tiling_of(lay: Layout) -> tuple[int, int] | None:
    return None if lay.tile is None else (lay.tile.dim, lay.tile.tiles)


def pinned_tiled_layouts(oc: OpCandidates, tiling: Mapping[str, Any]) -> list[Layout]:
    """Every legal tiled version of the op's untiled layouts for a pinned tiling, or PlanError saying why none."""
    dim, tiles = parse_tiling(oc, dict(tiling))
    bases = [b for b, lay in enumerate(oc.layouts) if lay.tile is None]
    tiled = [lay for b in bases if (lay := tiled_layout(oc, b, dim, tiles)) is not None]
    if not tiled:
        checked_tiled_layout(oc, bases[0], dim, tiles)  # raises PlanError with the rule
    return [oc.layouts[b] for b in bases] + tiled


def load_pin(path: str | Path) -> dict[str, dict[str, Any]]:
    """A pin file (JSON object of op name -> decisions), checked like ``pin=``."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise FormatError(f"pin file {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise FormatError(f"pin file {path}: expected an object mapping op names to decisions")
    Restriction.of(data, None)
    return data


def make_problem(
    graph: Graph,
    hw: HardwareSpec | None = None,
    coefficients: Coefficients | None = None,
    *,
    pin: Mapping[str, Mapping[str, Any]] | None = None,
    forbid: Iterable[str] | str | None = None,
) -> Problem:
    """The Problem of a graph under a restriction (the plain Problem when nothing is restricted)."""
    restriction = Restriction.of(pin, forbid)
    tiling = "tiling" not in restriction.forbid
    staging = "staging" not in restriction.forbid
    reuse = "reuse" not in restriction.forbid
    if restriction.empty:
        return Problem(graph, hw, coefficients, tiling=tiling, staging=staging, reuse=reuse)
    return RestrictedProblem(
        graph, hw, coefficients, restriction=restriction, tiling=tiling, staging=staging, reuse=reuse
    )


def check_backend(restriction: Restriction, backend: str, baseline: bool) -> None:
    """Baselines choose residencies by their own rule (everything in device memory first): an on-chip pin
    is a SolverError for them, not a crash inside the baseline."""
    if not baseline:
        return
    for op, pin in sorted(restriction.pin.items()):
        if pin.get("residency", "hbm") != "hbm":
            raise SolverError(
                f"backend {backend!r} is a baseline that chooses residencies by its own rule: it cannot honour "
                f"the pinned residency {pin['residency']!r} of op {op!r}; use greedy, anneal, cpsat or milp"
            )


def check_restriction(plan: PlanData, restriction: Restriction) -> None:
    """Raise PlanError if a plan breaks a pin or uses a forbidden capability (checked from the plan alone)."""
    for name, pin in restriction.pin.items():
        op = plan.op(name)
        for d, parts in pin.get("division", {}).items():
            key = "b0" if d == "b" and "b0" in op.division and "b1" not in op.division else d
            if op.division.get(key, 1) != parts:
                raise PlanError(f"op {name!r}: pinned {d}={parts}, plan has division {op.division}")
        if "residency" in pin and op.residency not in PIN_RESIDENCIES[pin["residency"]]:
            raise PlanError(f"op {name!r}: pinned residency {pin['residency']!r}, plan has {op.residency!r}")
    forbid = restriction.forbid
    if "inplace" in forbid:
        resident = [t.name for t in plan.tensors if t.residency != "hbm"]
        if resident:
            raise PlanError(f"forbid inplace: tensor(s) {resident} stay on chip")
    staged = [t.name for t in staged_inputs(plan)]
    if "staging" in forbid and staged:
        raise PlanError(f"forbid staging: graph input(s) {staged} staged on chip")
    if "inplace" in forbid and staged:
        raise PlanError(f"forbid inplace: graph input(s) {staged} staged on chip")
    reused = [o.name for o in plan.ops if o.inplace_over is not None]
    if "reuse" in forbid and reused:
        raise PlanError(f"forbid reuse: op(s) {reused} write their output over an operand's scratchpad buffer")
    if "tiling" in forbid and plan.loops:
        raise PlanError(f"forbid tiling: the plan has {len(plan.loops)} tiled loop(s), first {plan.loops[0].ops}")
    for name, pin in restriction.pin.items():
        if "tiling" not in pin:
            continue
        op = plan.op(name)
        got = None if op.loop is None else (plan.loops[op.loop].op_dims[name], plan.loops[op.loop].tiles)
        want = None if pin["tiling"] is None else (pin["tiling"]["dim"], pin["tiling"]["tiles"])
        if got != want and not (want and got and want[0] == "b" and got[0] == "b0" and want[1] == got[1]):
            raise PlanError(f"op {name!r}: pinned tiling {pin['tiling']}, plan has {got}")
    for e in plan.edges:
        if e.mode == "relayout" and "relayout" in forbid or e.restickify and "restickify" in forbid:
            raise PlanError(f"edge {e.producer!r} -> {e.consumer!r}: mode {e.mode!r} uses a forbidden capability")
