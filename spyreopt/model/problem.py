"""Problem: a Graph on a HardwareSpec under a cost model, compiled into the Formulation.

Each compute op is a choice node. Its candidates are layout (division x output
stick dim) x residency of its output x balance branch:

* residency ``hbm`` (written to device memory only), ``lx`` (kept in the
  writer cores' scratchpads), ``lx+hbm`` (kept and also written back, so a
  consumer whose slices do not match may read device memory: the spill);
* the branch resolves the device-memory term ``(r+w)/B + a*min(r, w)``: its
  ``min`` is concave, so each op whose reads vary with its producers' choices
  gets two twin candidates, one charging ``a*r``, one ``a*w``. Both over-estimate
  and the cheaper twin is exact; ``normalize`` picks it after any search, so
  the epigraph of every op time stays linear and exact at the optimum;
* an op reading a graph input that several ops read gets a copy of each candidate per staging choice
  (keep what it read on chip, or read the kept slices instead of device memory: ``model.staging``).

Each producer->consumer operand is an edge whose pair table holds the edge
mode's cost (in place, relayout, restickify, device-memory read, spill), its
LX copy, and the device-memory read that enters the consumer's op time.
Costs are integers in picoseconds (``cost_unit_us`` = 1e-6), composed by
``costmodel.spyre``. Ops (and edges) with the same signature share their
layouts and cost tables (``model.tables``), so the build is linear in the ops
with a constant set by the distinct signatures.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from spyreopt.costmodel import spyre
from spyreopt.costmodel.analytic import COST_UNIT_US
from spyreopt.costmodel.coefficients import Coefficients, default
from spyreopt.errors import GraphError, InfeasibleError, PlanError
from spyreopt.model import staging as staging_model
from spyreopt.model.candidates import Layout, OpCandidates, op_signature, resolve
from spyreopt.model.formulation import Formulation, affine_value
from spyreopt.model.geometry import LayoutQuantities, edge_quantities, layout_quantities
from spyreopt.model.graph import Graph
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.tables import EdgeTable, LoopClasses, OpTable, build_formulation, edge_table, op_table
from spyreopt.model.tiling import (
    checked_tiled_layout,
    edge_loop_classes,
    layout_tiles,
    loop_residencies,
    parse_tiling,
    staged_tensors_of,
    tiled_layouts,
)
from spyreopt.model.tiling_scope import tiling_plan

RESIDENCIES = ("hbm", "lx", "lx+hbm")
FORBIDDEN = None


@dataclass(frozen=True)
class Candidate:
    layout: int
    residency: str
    branch: str  # "r" | "w" | "-"
    stage: int = 0  # bit j: operand j is kept on chip (its loader) or read from the kept slices (``model.staging``)


@dataclass(frozen=True)
class PairInfo:
    mode: str  # inplace | relayout | restickify | hbm | spill
    extra_ps: int  # relayout or restickify time, additive
    read_ps: int  # device-memory read time, inside the consumer's op time
    read_bytes: int
    copy_bytes: int  # LX bytes per core of a consumer-side copy
    restick: bool
    fan_in: int


@dataclass(frozen=True)
class EdgeRef:
    producer: int  # op index
    consumer: int
    operand: int
    tensor: str


@dataclass(frozen=True)
class UnaryParts:
    """The costs of one candidate that do not depend on its edges, in ps."""

    overhead: int
    psum: int
    restick: int  # restickify of graph inputs and weights read in another stick
    split_write: int  # a k split writes its output after the partial sums: not overlapped
    compute: int
    mem: int  # device-memory time overlapped with compute (leaf reads, the write, the balance term)
    leaf_bytes: int

    @property
    def additive(self) -> int:
        return self.overhead + self.psum + self.restick + self.split_write


@dataclass
class OpBreakdown:
    """Predicted time of one op, in microseconds, by where it goes (sums to ``total``)."""

    compute: float
    memory: float
    spill: float
    overlap: float  # <= 0: time hidden by overlapping compute and memory
    restickify: float
    relayout: float
    overhead: float

    @property
    def total(self) -> float:
        return self.compute + self.memory + self.spill + self.overlap + self.restickify + self.relayout + self.overhead


class Problem:
    def __init__(
        self,
        graph: Graph,
        hw: HardwareSpec | None = None,
        coefficients: Coefficients | None = None,
        *,
        max_layouts: int = 6,
        fixed: dict[str, tuple] | None = None,
        tiling: bool = True,
        staging: bool = True,
        stage_masks: dict[str, int] | None = None,
        reuse: bool = True,
    ):
        """``fixed`` maps op names -> (factors or a label such as "m:4 x n:8", stick, residency[, tiling]): those
        ops get exactly that one candidate (all ops: the problem of a plan's decisions, to check it; some: pinned
        ops); the optional tiling is (dim name, tile count[, staged tensor names]) or None. ``tiling=False`` plans no tiled loops.
        ``staging=False`` stages no graph input (``model.staging``); ``stage_masks`` fixes ops' staging bits (a plan's).
        ``reuse=False``: no op writes its output over a dying operand (``model.inplace``)."""
        graph.check()
        self.graph = graph
        self.hw = hw or HardwareSpec()
        self.coef = coefficients or default()
        for t in graph.tensors.values():
            if t.nbytes > self.hw.device_memory_bytes:
                raise GraphError(
                    f"tensor {t.name!r}: {t.nbytes} bytes exceed device memory {self.hw.device_memory_bytes}"
                )
        self._check_device_memory()
        self.ops = graph.compute_ops()
        self.step = {o.name: i for i, o in enumerate(self.ops)}
        self.fixed = fixed
        self.max_layouts = max_layouts  # the enumeration's pruning, which every "optimal" is relative to
        self._memo: dict = {}
        self._staged: dict = {}  # staging variants of a candidate list (``_op_candidates``)
        refs = [tuple(resolve(graph, x) for x in o.inputs) for o in self.ops]
        scope, counts = tiling_plan(graph, self.ops, self.hw, refs, self.coef) if tiling else ({}, ())
        self.tile_scope = {i: d for i, d in scope.items() if not (fixed and self.ops[i].name in fixed)}
        self.tile_counts = counts if self.tile_scope else ()
        self.sig = self._signatures()
        self.cands = self._layouts(max_layouts)
        self.edges = self._edges()
        self.in_edges: list[list[int]] = [[] for _ in self.ops]
        self.out_edges: list[list[int]] = [[] for _ in self.ops]
        for k, e in enumerate(self.edges):
            self.in_edges[e.consumer].append(k)
            self.out_edges[e.producer].append(k)
        self.last_use = [max([i] + [self.edges[k].consumer for k in out]) for i, out in enumerate(self.out_edges)]
        self.leaf = [tuple(self.graph.tensors[r.base].producer is None for r in oc.refs) for oc in self.cands]
        self.stages = staging_model.find_stages(self) if staging else []
        self.stage_roles = staging_model.roles(self)
        self.stage_masks = stage_masks
        self.stage_relayout = True  # a later reader may relayout the kept slices (False: forbid relayout)
        self.reuse = reuse
        self._list_ids: dict[int, tuple[list, int]] = {}
        self.candidates = [self._op_candidates(i) for i in range(len(self.ops))]
        self._op_tables: dict[int, tuple[list, OpTable]] = {}
        self._edge_tables: dict[int, tuple[list, list, EdgeTable]] = {}

    def _check_device_memory(self) -> None:
        """Inputs, weights and outputs live in device memory for the whole program: they must fit."""
        g = self.graph
        held = [(t.name, t.nbytes) for t in g.tensors.values() if t.producer is None or t.name in g.outputs]
        need = sum(b for _, b in held)
        cap = self.hw.device_memory_bytes
        if need > cap:
            held.sort(key=lambda x: -x[1])
            shown = ", ".join(f"{n} ({b})" for n, b in held[:8])
            raise InfeasibleError(
                f"graph {g.name!r}: infeasible at time step 0: inputs, weights and outputs need {need} bytes of device "
                f"memory, which holds {cap} ({need - cap} over); buffers: {shown}; the smallest device memory that "
                f"would fit is {need}",
                {
                    "time_step": 0,
                    "usage": need,
                    "limit": cap,
                    "over": need - cap,
                    "buffers": held,
                    "min_capacity": need,
                },
            )

    # ---- structure ---------------------------------------------------------
    def _signatures(self) -> list[int]:
        """Per op, a small id of its signature and fixed decision: equal ids have equal layouts."""
        ids: dict = {}
        out = []
        for o in self.ops:
            pin = (self.fixed[o.name][:2], self._fixed_tiling(o.name)) if self.fixed and o.name in self.fixed else None
            scope = self.tile_scope.get(self.step[o.name])
            out.append(ids.setdefault((op_signature(self.graph, o), pin, scope), len(ids)))
        return out

    def _layouts(self, max_layouts: int) -> list[OpCandidates]:
        first: dict[int, OpCandidates] = {}
        out = []
        for o, sig in zip(self.ops, self.sig):
            if sig in first:
                out.append(first[sig].like(self.graph, o))
                continue
            pin = self.fixed[o.name][:2] if self.fixed and o.name in self.fixed else None
            oc = OpCandidates(self.graph, o, self.hw, self.coef, max_layouts, pin)
            if not oc.layouts:
                raise GraphError(
                    f"op {o.name!r}: no legal division (span limit {self.hw.span_limit_bytes} bytes per core)"
                )
            tiled = self._fixed_tiling(o.name) if pin is not None else None
            if tiled is not None:
                dim, tiles = parse_tiling(oc, {"dim": tiled[0], "tiles": tiled[1]})
                staged_names = set(tiled[2]) if len(tiled) > 2 else set()  # the loop's staged tensors
                staged = bool(staged_names & set(staged_tensors_of(oc, dim)))
                oc.layouts = [checked_tiled_layout(oc, 0, dim, tiles, staged)]
            elif self.step[o.name] in self.tile_scope:
                extra = tiled_layouts(oc, self.tile_scope[self.step[o.name]], self.tile_counts)  # adds aligned ones
                oc.layouts = oc.layouts + extra
            first[sig] = oc
            out.append(oc)
        return out

    def _fixed_tiling(self, name: str) -> tuple | None:
        """A fixed op's (factors, stick) and its tiling (dim name, tile count) when it has one."""
        fixed = self.fixed[name]
        return tuple(fixed[3]) if len(fixed) > 3 and fixed[3] is not None else None

    def _edges(self) -> list[EdgeRef]:
        out = []
        for v, o in enumerate(self.ops):
            for j, x in enumerate(o.inputs):
                base = resolve(self.graph, x).base
                producer = self.graph.tensors[base].producer
                if producer is not None:
                    out.append(EdgeRef(self.step[producer], v, j, base))
        return out

    def _op_candidates(self, i: int) -> list[Candidate]:
        name = self.ops[i].name
        is_output = self.ops[i].output in self.graph.outputs
        consumed, varying_reads = bool(self.out_edges[i]), bool(self.in_edges[i])
        res = ("hbm",) if not consumed else (("hbm", "lx+hbm") if is_output else RESIDENCIES)
        if self.fixed and name in self.fixed:
            want, capacity = self.fixed[name][2], self.hw.planner_lx_bytes
            if want not in res:
                why = "a graph output must be written to device memory" if is_output else "its output has no consumer"
                raise PlanError(f"op {name!r}: residency {want!r} not allowed ({why}); allowed: {list(res)}")
            if want != "hbm" and self.cands[i].layouts[0].footprint > capacity:
                raise PlanError(
                    f"op {name!r}: resident output needs {self.cands[i].layouts[0].footprint} bytes per core, "
                    f"scratchpad capacity is {capacity}"
                )
            res = (want,)
        key = ("candidates", self.sig[i], res, varying_reads)
        if key not in self._memo:
            capacity = self.hw.planner_lx_bytes
            out = []
            for li, lay in enumerate(self.cands[i].layouts):
                for r in res if lay.tile is None else loop_residencies(lay, res):
                    if r != "hbm" and lay.footprint > capacity:
                        continue
                    branches = ("r", "w") if r != "lx" and varying_reads else ("-",)
                    out.extend(Candidate(li, r, b) for b in branches)
            if not out:
                raise PlanError(f"op {name!r}: no candidate: residency {list(res)} is not possible inside a loop")
            self._memo[key] = (tuple(out), self._memo.setdefault(("list", tuple(out)), len(self._memo)))
        cands, list_id = self._memo[key]
        out = list(cands)
        if self.stage_roles[i]:
            fixed_mask = None if self.stage_masks is None else self.stage_masks.get(name, 0)
            if fixed_mask is None and self.fixed and name in self.fixed:
                fixed_mask = 0  # a fixed op stages nothing unless its staging bits are given (a plan's)
            # a function of the base list (``key``), the staging bits and the layouts' tiles (``sig``): built and
            # hashed once per distinct op of a model, not per op (a candidate copy per staging mask)
            staged = (key, tuple(sorted(self.stage_roles[i])), fixed_mask)
            if staged not in self._staged:
                out = tuple(staging_model.variants(self, i, out, fixed_mask))
                self._staged[staged] = (out, self._memo.setdefault(("list", out), len(self._memo)))
            out, list_id = self._staged[staged]
            out = list(out)
        self._list_ids[i] = (out, list_id)
        return out

    def layout(self, i: int, s: int) -> Layout:
        return self.cands[i].layouts[self.candidates[i][s].layout]

    @cached_property
    def reads_leaf(self) -> list[bool]:
        """Per op: reads a graph input or weight, so its device-memory read stream starts anyway."""
        return [any(flags) for flags in self.leaf]

    # ---- memoised tables ---------------------------------------------------
    def _candidate_key(self, i: int) -> int:
        """A small id of op i's candidate list (lists may be replaced, e.g. restricted, before the build)."""
        cands = self.candidates[i]
        held = self._list_ids.get(i)
        if held is None or held[0] is not cands:
            held = (cands, self._memo.setdefault(("list", tuple(cands)), len(self._memo)))
            self._list_ids[i] = held
        return held[1]

    def layout_quantities(self, i: int) -> LayoutQuantities:
        key = ("layouts", self.sig[i], self.leaf[i])
        if key not in self._memo:
            self._memo[key] = layout_quantities(self.cands[i], self.leaf[i])
        return self._memo[key]

    def edge_quantities(self, k: int) -> spyre.EdgeQuantities:
        """Edge k's quantities over (producer layout, consumer layout), shared by edges of equal signatures."""
        e = self.edges[k]
        key = ("edge", self.sig[e.producer], self.sig[e.consumer], e.operand)
        if key not in self._memo:
            tensor = self.graph.tensors[e.tensor]
            cu, cv = self.cands[e.producer], self.cands[e.consumer]
            self._memo[key] = edge_quantities(cu, cv, e.operand, tensor, self.hw, self.coef)
        return self._memo[key]

    def op_table(self, i: int) -> OpTable:
        cands = self.candidates[i]
        held = self._op_tables.get(i)
        if held is not None and held[0] is cands:
            return held[1]
        reads = tuple(sorted(j for j, (role, _) in self.stage_roles[i].items() if role == "read"))
        key = ("op", self.sig[i], self.leaf[i], self._candidate_key(i), reads)
        if key not in self._memo:
            if any(c.stage for c in cands):
                self._memo[key] = staging_model.merged_op_table(
                    self, i, cands, lambda leaf, cs: self._op_table(i, leaf, cs)
                )
            else:
                self._memo[key] = self._op_table(i, self.leaf[i], cands)
        self._op_tables[i] = (cands, self._memo[key])
        return self._memo[key]

    def _op_table(self, i: int, leaf: tuple[bool, ...], cands: list[Candidate]) -> OpTable:
        """The table of candidates ``cands`` of op i reading the leaf operands flagged in ``leaf``."""
        codes = [(c.layout, spyre.RESIDENCIES.index(c.residency), spyre.BRANCHES.index(c.branch)) for c in cands]
        lay, res, br = (np.array(x, dtype=np.int64) for x in zip(*codes))
        lkey = ("layouts", self.sig[i], leaf)
        if lkey not in self._memo:
            self._memo[lkey] = layout_quantities(self.cands[i], leaf)
        return op_table(self.coef, self._memo[lkey], lay, res, br)

    def edge_table(self, k: int) -> EdgeTable:
        e = self.edges[k]
        cu, cv = self.candidates[e.producer], self.candidates[e.consumer]
        held = self._edge_tables.get(k)
        if held is not None and held[0] is cu and held[1] is cv:
            return held[2]
        ids = (self.sig[e.producer], self.sig[e.consumer], e.operand, self.reads_leaf[e.consumer])
        key = ("pairs", *ids, self._candidate_key(e.producer), self._candidate_key(e.consumer))
        if key not in self._memo:
            frac = spyre.overlap_fraction(self.coef, self.layout_quantities(e.consumer).stream_bytes)
            v_g1 = self.op_table(e.consumer).g1
            q = self.edge_quantities(k)
            pu, pv = self.cands[e.producer], self.cands[e.consumer]
            loop = None
            if any(x.tile for x in pu.layouts) or any(x.tile for x in pv.layouts):
                inner, touched = edge_loop_classes(pu, pv, e.operand)
                loop = LoopClasses(inner, touched, layout_tiles(pu), layout_tiles(pv))
            self._memo[key] = edge_table(self.coef, q, cu, cv, frac, v_g1, self.reads_leaf[e.consumer], loop)
        self._edge_tables[k] = (cu, cv, self._memo[key])
        return self._memo[key]

    # ---- costs -------------------------------------------------------------
    def unary(self, i: int, s: int) -> tuple[int, int, int, int]:
        """(additive ps, compute ps, memory ps outside edges, leaf-read bytes) of op i's candidate s."""
        u = self.unary_parts(i, s)
        return u.additive, u.compute, u.mem, u.leaf_bytes

    def unary_parts(self, i: int, s: int) -> UnaryParts:
        t = self.op_table(i)
        p = t.parts
        return UnaryParts(
            int(p.overhead[s]), int(p.psum[s]), int(p.restick[s]), int(p.split_write[s]),
            int(p.compute[s]), int(p.mem[s]), int(t.leaf_bytes[s]),
        )  # fmt: skip

    def fraction(self, i: int, s: int) -> float:
        """How much of candidate s's time compute and memory overlap (few double-buffered tiles: little)."""
        return float(self.op_table(i).parts.fraction[s])

    def pair(self, k: int, su: int, sv: int) -> PairInfo | None:
        """Edge k's mode and costs for producer candidate su and consumer candidate sv (None: impossible)."""
        t = self.edge_table(k)
        a, b = t.pu[su], t.pv[sv]
        p = t.parts
        mode = int(p.mode[a, b])
        if mode == spyre.FORBIDDEN:
            return None
        read = int(p.read[a, b]) + (int(t.mix[a, b]) if t.r_twin[sv] else 0)
        return PairInfo(
            spyre.MODES[mode], int(p.extra[a, b]), read, int(p.read_bytes[a, b]), int(p.copy[a, b]),
            bool(p.restick[a, b]), int(p.fan_in[a, b]),
        )  # fmt: skip

    def op_time_ps(self, compute: int, mem: int, fraction: float = 1.0) -> int:
        """compute + mem - gamma*fraction*min(compute, mem), as max of two affine forms in integers
        (the default fraction 1 is the most overlap: a lower bound for any candidate)."""
        return int(spyre.op_time(self.coef, compute, mem, fraction))

    # ---- the standard form -------------------------------------------------
    @cached_property
    def formulation(self) -> Formulation:
        return build_formulation(self)

    # ---- evaluation --------------------------------------------------------
    def _edge_sums(self, assignment) -> tuple[np.ndarray, ...]:
        """Per op, over its incoming edges: (device-memory reads, spills, relayouts, restickifies) in ps."""
        n = len(self.ops)
        sums = np.zeros((4, n), dtype=np.int64)
        for k, e in enumerate(self.edges):
            info = self.pair(k, assignment[e.producer], assignment[e.consumer])
            if info is None:
                raise PlanError(
                    f"op {self.ops[e.consumer].name!r}: edge from {self.ops[e.producer].name!r} has an impossible pair"
                )
            sums[1 if info.mode == "spill" else 0, e.consumer] += info.read_ps
            sums[2 if info.mode == "relayout" else 3, e.consumer] += info.extra_ps
        for v, ps in staging_model.edge_costs(self, assignment).items():  # relayouts from staged inputs
            sums[2, v] += ps
        return tuple(sums)

    def _own(self, assignment) -> dict[str, np.ndarray]:
        """Per op, its assigned candidate's own parts."""
        cols = {k: [] for k in ("overhead", "psum", "restick", "split_write", "compute", "mem", "fraction")}
        for i, s in enumerate(assignment):
            p = self.op_table(i).parts
            for k, v in cols.items():
                v.append(getattr(p, k)[s])
        return {k: np.array(v) for k, v in cols.items()}

    def evaluate(self, assignment) -> dict[str, OpBreakdown]:
        """Per-op predicted time in µs, recomputed from the cost model (not from the Formulation)."""
        us = COST_UNIT_US
        own = self._own(assignment)
        reads, spill, relayout, restick = self._edge_sums(assignment)
        compute, mem = own["compute"], own["mem"] + reads
        t = spyre.op_time(self.coef, compute, mem + spill, own["fraction"])
        out: dict[str, OpBreakdown] = {}
        for i, o in enumerate(self.ops):
            out[o.name] = OpBreakdown(
                compute=int(compute[i]) * us,
                memory=int(mem[i] + own["split_write"][i]) * us,
                spill=int(spill[i]) * us,
                overlap=int(t[i] - compute[i] - mem[i] - spill[i]) * us,
                restickify=int(restick[i] + own["restick"][i]) * us,
                relayout=int(relayout[i]) * us,
                overhead=int(own["overhead"][i] + own["psum"][i]) * us,
            )
        return out

    def total_ps(self, assignment) -> int:
        own = self._own(assignment)
        reads, spill, relayout, restick = self._edge_sums(assignment)
        additive = own["overhead"] + own["psum"] + own["restick"] + own["split_write"] + relayout + restick
        t = spyre.op_time(self.coef, own["compute"], own["mem"] + reads + spill, own["fraction"])
        return int(sum(int(x) for x in additive + t))

    def normalize(self, assignment) -> tuple[int, ...]:
        """Move every op to its cheaper balance twin (same layout and residency), and drop kept inputs no op
        reads (``staging.drop_unread``): exact and never worse."""
        a = list(assignment)
        f = self.formulation
        staging_model.drop_unread(self, a)
        for term in f.max_terms:
            i = term.node
            c = self.candidates[i][a[i]]
            if c.branch == "-":
                continue
            twin = self.candidates[i].index(replace(c, branch="w" if c.branch == "r" else "r"))
            values = []
            cur = a[i]
            for s in (cur, twin):
                a[i] = s
                values.append(max(affine_value(alt, i, f.edges, a) for alt in term.alternatives))
            a[i] = twin if values[1] < values[0] else cur
        return tuple(a)
