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
  the epigraph of every op time stays linear and exact at the optimum.

Each producer->consumer operand is an edge whose pair table holds the edge
mode's cost (in place, relayout, restickify, device-memory read, spill), its
LX copy, and the device-memory read that enters the consumer's op time.
Costs are integers in picoseconds (``cost_unit_us`` = 1e-6).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from spyreopt.costmodel import analytic as cm
from spyreopt.costmodel.coefficients import Coefficients, default
from spyreopt.errors import GraphError, InfeasibleError, PlanError
from spyreopt.hw.spec import HardwareSpec
from spyreopt.model.candidates import (
    EdgeAnalysis,
    Layout,
    OpCandidates,
    analyse_edge,
    leaf_read,
    resolve,
    restick_cost_ns,
)
from spyreopt.model.division import reduction_split
from spyreopt.model.formulation import Affine, Edge, Formulation, MaxTerm, Node, Placement, affine_value
from spyreopt.model.graph import Graph

RESIDENCIES = ("hbm", "lx", "lx+hbm")
FORBIDDEN = None


@dataclass(frozen=True)
class Candidate:
    layout: int
    residency: str
    branch: str  # "r" | "w" | "-"


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
        fixed: dict[str, tuple[tuple[int, ...] | str, int, str]] | None = None,
    ):
        """``fixed`` maps op names -> (factors or a label such as "m:4 x n:8", stick, residency): those ops get
        exactly that one candidate (all ops: the problem of a plan's decisions, to check it; some: pinned ops)."""
        graph.check()
        self.graph = graph
        self.hw = hw or HardwareSpec()
        self.coef = coefficients or default()
        for t in graph.tensors.values():
            if t.nbytes > self.hw.device_memory_bytes:
                raise GraphError(f"tensor {t.name!r}: {t.nbytes} bytes exceed device memory {self.hw.device_memory_bytes}")
        self._check_device_memory()
        self.ops = [o for o in graph.ops.values() if o.kind != "view"]
        self.step = {o.name: i for i, o in enumerate(self.ops)}
        self.fixed = fixed
        self.max_layouts = max_layouts  # the enumeration's pruning, which every "optimal" is relative to
        self.cands = [
            OpCandidates(graph, o, self.hw, self.coef, max_layouts, fixed[o.name][:2] if fixed and o.name in fixed else None)
            for o in self.ops
        ]
        for oc in self.cands:
            if not oc.layouts:
                raise GraphError(f"op {oc.op.name!r}: no legal division (span limit {self.hw.span_limit_bytes} bytes per core)")
        self.edges = self._edges()
        self.last_use = self._last_use()
        self.candidates = [self._op_candidates(i) for i in range(len(self.ops))]
        self._pair_cache: dict = {}
        self._edge_cache: dict = {}

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
                {"time_step": 0, "usage": need, "limit": cap, "over": need - cap, "buffers": held, "min_capacity": need},
            )

    # ---- structure ---------------------------------------------------------
    def _edges(self) -> list[EdgeRef]:
        out = []
        for v, o in enumerate(self.ops):
            for j, x in enumerate(o.inputs):
                base = resolve(self.graph, x).base
                producer = self.graph.tensors[base].producer
                if producer is not None:
                    out.append(EdgeRef(self.step[producer], v, j, base))
        return out

    def _last_use(self) -> list[int]:
        last = list(range(len(self.ops)))
        for e in self.edges:
            last[e.producer] = max(last[e.producer], e.consumer)
        return last

    def _op_candidates(self, i: int) -> list[Candidate]:
        out_name = self.ops[i].output
        is_output = out_name in self.graph.outputs
        consumed = any(e.producer == i for e in self.edges)
        varying_reads = any(e.consumer == i for e in self.edges)
        capacity = self.hw.planner_lx_bytes
        res = ["hbm"] if not consumed else (["hbm", "lx+hbm"] if is_output else list(RESIDENCIES))
        if self.fixed and self.ops[i].name in self.fixed:
            want, name = self.fixed[self.ops[i].name][2], self.ops[i].name
            if want not in res:
                why = "a graph output must be written to device memory" if is_output else "its output has no consumer"
                raise PlanError(f"op {name!r}: residency {want!r} not allowed ({why}); allowed: {res}")
            if want != "hbm" and self.cands[i].layouts[0].footprint > capacity:
                raise PlanError(
                    f"op {name!r}: resident output needs {self.cands[i].layouts[0].footprint} bytes per core, "
                    f"scratchpad capacity is {capacity}"
                )
            res = [want]
        out = []
        for li, lay in enumerate(self.cands[i].layouts):
            for r in res:
                if r != "hbm" and lay.footprint > capacity:
                    continue
                writes = r != "lx"
                branches = ("r", "w") if writes and varying_reads else ("-",)
                out.extend(Candidate(li, r, b) for b in branches)
        return out

    def layout(self, i: int, s: int) -> Layout:
        return self.cands[i].layouts[self.candidates[i][s].layout]

    # ---- costs -------------------------------------------------------------
    def unary(self, i: int, s: int) -> tuple[int, int, int, int]:
        """(additive ps, compute ps, memory ps outside edges, leaf-read bytes) of op i's candidate s."""
        u = self.unary_parts(i, s)
        return u.additive, u.compute, u.mem, u.leaf_bytes

    def unary_parts(self, i: int, s: int) -> UnaryParts:
        cand, lay, coef = self.candidates[i][s], self.layout(i, s), self.coef
        leaf_bytes = leaf_requests = restick = 0
        for j, ref in enumerate(self.cands[i].refs):
            if self.graph.tensors[ref.base].producer is None:
                rb, rq, rn = leaf_read(self.cands[i], lay, j)
                leaf_bytes, leaf_requests, restick = leaf_bytes + rb, leaf_requests + rq, restick + cm.ps(rn)
        write = lay.write_bytes if cand.residency != "lx" else 0
        write_ps = cm.ps(cm.transfer_ns(coef, write, lay.write_requests if write else 0, 1 if write else 0))
        split = reduction_split(self.cands[i].space, lay.division) > 1
        overlapped_write = 0 if split else write
        mem = cm.ps(cm.transfer_ns(coef, leaf_bytes, leaf_requests, 1 if self.reads_leaf[i] else 0))
        mem += 0 if split else write_ps
        frac = self.fraction(i, s)
        if cand.branch == "r":
            mem += cm.ps(coef.hbm_mixed_ns_per_byte * frac * leaf_bytes)
        elif cand.branch == "w":
            mem += cm.ps(coef.hbm_mixed_ns_per_byte * frac * overlapped_write)
        else:
            mem += cm.ps(coef.hbm_mixed_ns_per_byte * frac * min(leaf_bytes, overlapped_write))
        return UnaryParts(
            cm.ps(coef.op_overhead_ns), cm.ps(lay.psum_ns), restick, write_ps if split else 0,
            cm.ps(lay.compute_ns), mem, leaf_bytes,
        )  # fmt: skip

    def fraction(self, i: int, s: int) -> float:
        """How much of candidate s's time compute and memory overlap (few double-buffered tiles: little)."""
        return cm.overlap_fraction(self.coef, self.layout(i, s).stream_bytes)

    @cached_property
    def reads_leaf(self) -> list[bool]:
        """Per op: reads a graph input or weight, so its device-memory read stream starts anyway."""
        return [any(self.graph.tensors[r.base].producer is None for r in oc.refs) for oc in self.cands]

    def pair(self, k: int, su: int, sv: int) -> PairInfo | None:
        """Edge k's mode and costs for producer candidate su and consumer candidate sv (None: impossible)."""
        e = self.edges[k]
        cu, cv = self.candidates[e.producer][su], self.candidates[e.consumer][sv]
        key = (k, cu.layout, cu.residency, cv.layout)
        if key not in self._pair_cache:
            self._pair_cache[key] = self._pair(e, cu, cv)
        info = self._pair_cache[key]
        if info is None or info.read_bytes == 0 or cv.branch != "r":
            return info
        mix = cm.ps(self.coef.hbm_mixed_ns_per_byte * self.fraction(e.consumer, sv) * info.read_bytes)
        return PairInfo(info.mode, info.extra_ps, info.read_ps + mix, info.read_bytes, info.copy_bytes, info.restick, info.fan_in)

    def _pair(self, e: EdgeRef, cu: Candidate, cv: Candidate) -> PairInfo | None:
        plan_u = self.cands[e.producer].layouts[cu.layout]
        cons = self.cands[e.consumer]
        plan_v = cons.layouts[cv.layout]
        need = plan_v.required[e.operand]
        restick = need is not None and need != plan_u.stick
        stick = need if restick else plan_u.stick  # a device-memory read is of the copy in the needed stick
        read = cons.hbm_read_bytes(plan_v, e.operand, stick)
        requests = cons.hbm_read_requests(plan_v, e.operand, stick)
        streams = 0 if self.reads_leaf[e.consumer] else 1  # per edge: exact when one edge reads device memory
        read_ps = cm.ps(cm.transfer_ns(self.coef, read, requests, streams))
        if cu.residency == "hbm":
            restick_ps = cm.ps(restick_cost_ns(cons, plan_v, e.operand, plan_u.stick, need, None)) if restick else 0
            return PairInfo("hbm", restick_ps, read_ps, read, 0, restick, 0)
        ea = self.edge_analysis(e, cu.layout, cv.layout)
        if restick:  # the copy is written in the consumer's stick layout: size it there
            copy = cons.max_read_bytes(plan_v, e.operand, need)
            restick_ps = cm.ps(restick_cost_ns(cons, plan_v, e.operand, plan_u.stick, need, plan_u))
            return PairInfo("restickify", restick_ps, 0, 0, copy, True, 0)
        if ea.inplace:
            return PairInfo("inplace", 0, 0, 0, 0, False, 1)
        relayout_ps = cm.ps(ea.relayout_ns)
        if ea.relayout_legal and (cu.residency == "lx" or relayout_ps <= read_ps):
            return PairInfo("relayout", relayout_ps, 0, 0, ea.copy_bytes, False, ea.fan_in)
        if cu.residency == "lx+hbm":
            return PairInfo("spill", 0, read_ps, read, 0, False, 0)
        return FORBIDDEN

    def edge_analysis(self, e: EdgeRef, lu: int, lv: int) -> EdgeAnalysis:
        """In-place / relayout analysis of a producer and consumer layout (cached; residency-independent)."""
        key = (e.producer, e.consumer, e.operand, lu, lv)
        if key not in self._edge_cache:
            cons = self.cands[e.consumer]
            self._edge_cache[key] = analyse_edge(
                self.cands[e.producer].layouts[lu], cons, cons.layouts[lv], e.operand,
                self.graph.tensors[e.tensor], self.hw, self.coef,
            )  # fmt: skip
        return self._edge_cache[key]

    def op_time_ps(self, compute: int, mem: int, fraction: float = 1.0) -> int:
        """compute + mem - gamma*fraction*min(compute, mem), as max of two affine forms in integers
        (the default fraction 1 is the most overlap: a lower bound for any candidate)."""
        g1 = 1.0 - self.coef.overlap_gamma * fraction
        return max(int(round(g1 * compute)) + mem, compute + int(round(g1 * mem)))

    # ---- the standard form -------------------------------------------------
    @cached_property
    def formulation(self) -> Formulation:
        nodes = []
        for i, o in enumerate(self.ops):
            cands = self.candidates[i]
            costs = np.array([self.unary(i, s)[0] for s in range(len(cands))], dtype=np.int64)
            usages = np.array(
                [self.layout(i, s).footprint if c.residency != "hbm" else 0 for s, c in enumerate(cands)], dtype=np.int64
            )
            nodes.append(Node(o.name, costs, usages, (i, self.last_use[i] + 1)))
        edges, mem_tables = [], []
        for k, e in enumerate(self.edges):
            cost, allowed, usage, mem = self._edge_tables(k)
            edges.append(Edge(e.producer, e.consumer, cost, None if allowed.all() else allowed, usage, (e.consumer, e.consumer + 1)))
            mem_tables.append(mem)
        terms = [self._max_term(i, mem_tables) for i in range(len(self.ops))]
        cap = self.hw.planner_lx_bytes
        return Formulation(
            nodes=tuple(nodes),
            edges=tuple(edges),
            usage_limit=cap,
            max_terms=tuple(terms),
            placement=Placement(cap, self.hw.stick_bytes),
            cost_unit_us=cm.COST_UNIT_US,
            name=self.graph.name,
        )

    def _edge_tables(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Edge k's (extra cost, allowed, copy usage, memory time) tables over candidate pairs.

        Computed once per distinct (producer layout, residency) x consumer layout and
        expanded to every candidate pair; the consumer's "r" twins add the balance term.
        """
        e = self.edges[k]
        cu_list, cv_list = self.candidates[e.producer], self.candidates[e.consumer]
        ukeys = sorted({(c.layout, c.residency) for c in cu_list})
        vkeys = sorted({c.layout for c in cv_list})
        pu = np.array([ukeys.index((c.layout, c.residency)) for c in cu_list])
        pv = np.array([vkeys.index(c.layout) for c in cv_list])
        shape = (len(ukeys), len(vkeys))
        extra, copy, read_ps, read_b = (np.zeros(shape, dtype=np.int64) for _ in range(4))
        ok = np.ones(shape, dtype=bool)
        for a, (lu, ru) in enumerate(ukeys):
            for b, lv in enumerate(vkeys):
                info = self._pair(e, Candidate(lu, ru, "-"), Candidate(lv, "hbm", "-"))
                if info is None:
                    ok[a, b] = False
                    continue
                extra[a, b], copy[a, b], read_ps[a, b], read_b[a, b] = info.extra_ps, info.copy_bytes, info.read_ps, info.read_bytes
        frac = np.array([cm.overlap_fraction(self.coef, self.cands[e.consumer].layouts[lv].stream_bytes) for lv in vkeys])
        # same operation order as pair(): (a * f) * bytes, then to ps
        mix = np.round((self.coef.hbm_mixed_ns_per_byte * frac)[None, :] * read_b.astype(np.float64) * cm.PS_PER_NS)
        mix = mix.astype(np.int64)
        r_twin = np.array([c.branch == "r" for c in cv_list])
        mem = read_ps[pu][:, pv] + np.where(r_twin[None, :], mix[pu][:, pv], 0)
        return extra[pu][:, pv], ok[pu][:, pv], copy[pu][:, pv], mem

    def _max_term(self, i: int, mem_tables: list[np.ndarray]) -> MaxTerm:
        n = len(self.candidates[i])
        comp = np.array([self.unary(i, s)[1] for s in range(n)], dtype=np.int64)
        mem = np.array([self.unary(i, s)[2] for s in range(n)], dtype=np.int64)
        incoming = [k for k, e in enumerate(self.edges) if e.consumer == i]
        g1 = 1.0 - self.coef.overlap_gamma * np.array([self.fraction(i, s) for s in range(n)])

        def scaled(a: np.ndarray) -> np.ndarray:  # same rounding as op_time_ps (half to even); last axis: this op
            return np.round(g1 * a.astype(np.float64)).astype(np.int64)

        alt_mem = Affine(scaled(comp) + mem, tuple((k, mem_tables[k]) for k in incoming))
        alt_comp = Affine(comp + scaled(mem), tuple((k, scaled(mem_tables[k])) for k in incoming))
        return MaxTerm(i, (alt_mem, alt_comp))

    # ---- evaluation --------------------------------------------------------
    def evaluate(self, assignment) -> dict[str, OpBreakdown]:
        """Per-op predicted time in µs, recomputed from the cost model (not from the Formulation)."""
        us = cm.COST_UNIT_US
        out: dict[str, OpBreakdown] = {}
        for i, o in enumerate(self.ops):
            s = assignment[i]
            u = self.unary_parts(i, s)
            compute, mem = u.compute, u.mem
            spill = relayout = restick = 0
            for k, e in enumerate(self.edges):
                if e.consumer != i:
                    continue
                info = self.pair(k, assignment[e.producer], s)
                if info is None:
                    raise ValueError(f"op {o.name!r}: edge from {self.ops[e.producer].name!r} has an impossible pair")
                if info.mode == "spill":
                    spill += info.read_ps
                else:
                    mem += info.read_ps
                if info.mode == "relayout":
                    relayout += info.extra_ps
                else:
                    restick += info.extra_ps
            t = self.op_time_ps(compute, mem + spill, self.fraction(i, s))
            out[o.name] = OpBreakdown(
                compute=compute * us,
                memory=(mem + u.split_write) * us,
                spill=spill * us,
                overlap=(t - compute - mem - spill) * us,
                restickify=(restick + u.restick) * us,
                relayout=relayout * us,
                overhead=(u.overhead + u.psum) * us,
            )
        return out

    def total_ps(self, assignment) -> int:
        total = 0
        for i in range(len(self.ops)):
            s = assignment[i]
            additive, compute, mem, _ = self.unary(i, s)
            for k, e in enumerate(self.edges):
                if e.consumer == i:
                    info = self.pair(k, assignment[e.producer], s)
                    mem += info.read_ps
                    additive += info.extra_ps
            total += additive + self.op_time_ps(compute, mem, self.fraction(i, s))
        return total

    def normalize(self, assignment) -> tuple[int, ...]:
        """Move every op to its cheaper balance twin (same layout and residency): exact and never worse."""
        a = list(assignment)
        f = self.formulation
        for term in f.max_terms:
            i = term.node
            c = self.candidates[i][a[i]]
            if c.branch == "-":
                continue
            twin = self.candidates[i].index(Candidate(c.layout, c.residency, "w" if c.branch == "r" else "r"))
            values = []
            for s in (a[i], twin):
                trial = list(a)
                trial[i] = s
                values.append(max(affine_value(alt, i, f.edges, trial) for alt in term.alternatives))
            if values[1] < values[0]:
                a[i] = twin
        return tuple(a)
