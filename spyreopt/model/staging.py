"""Input staging: a graph input or weight read by several ops is loaded into the scratchpad once.

The published softmax's last step ("clone the input into scratchpad once instead of re-fetching it for
every reader"), planned jointly with every other decision through the Formulation, in every backend:

* the *loader* is the first op reading the tensor. It reads it from device memory as it always does; its
  candidates come twice, with and without keeping what it read (its per-core read slices, in the stick it
  reads them in) in its cores' scratchpads. Keeping costs no time, only the slices' footprint from the
  loader to the last reader;
* every later reader's candidates come twice too: reading the tensor from device memory (as today) or from
  the kept slices. A candidate reading the kept slices has that operand removed from its device-memory read
  (its leaf read), so it pays nothing for it;
* an edge loader -> reader allows "read from the kept slices" only with a keeping loader candidate: in place
  (free) when its slices are exactly the ones each reader core needs in the same stick, else by a relayout of
  the kept slices (its time, and its copy for the reader's step) when legal, as for any resident tensor;
* an edge loader -> last reader carries the kept buffer (footprint from the loader to the last reader,
  whichever readers use it), so it gets an address like any resident tensor.

Candidates carry the decision in ``Candidate.stage`` (bit j: operand j is kept, for the loader, or read from
the kept slices, for a later reader). Nothing here is in a solver: the Formulation holds it all.

Limits: the loader is the first reader (a later op cannot load for the ones after it); a reader needing
another stick reads device memory; tiled-loop ops neither load nor read a staged tensor (loops stage their own
loop-invariant operands, ``model.tiling``); a reader whose every device-memory read is staged keeps the edge
reads' shared stream latency of ``Problem.reads_leaf`` (per op, not per candidate).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from spyreopt.costmodel.spyre import to_ps
from spyreopt.errors import PlanError
from spyreopt.model.candidates import resolve
from spyreopt.model.edge_analysis import analyse_edge
from spyreopt.model.formulation import Edge
from spyreopt.model.layout import box_padded_bytes
from spyreopt.model.plan_data import EdgePlan, TensorPlan


@dataclass(frozen=True)
class Stage:
    """One stageable tensor: its loader (op step, operand) and the later readers' (op step, operand)."""

    tensor: str
    loader: tuple[int, int]
    readers: tuple[tuple[int, int], ...]

    @property
    def last(self) -> int:
        return max(v for v, _ in self.readers)


def find_stages(problem) -> list[Stage]:
    """Every graph input or weight read by two or more ops (the loader, then every later reader)."""
    uses: dict[str, list[tuple[int, int]]] = {}
    for i, oc in enumerate(problem.cands):
        for j, ref in enumerate(oc.refs):
            if problem.graph.tensors[ref.base].producer is None:
                uses.setdefault(ref.base, []).append((i, j))
    out = []
    for name in sorted(uses, key=lambda n: uses[n][0]):
        reads = uses[name]
        loader = reads[0]
        later = tuple((v, j) for v, j in reads if v != loader[0])
        if later:
            out.append(Stage(name, loader, later))
    return out


def roles(problem) -> list[dict[int, tuple[str, int]]]:
    """Per op: operand -> ("load" | "read", stage index)."""
    out: list[dict[int, tuple[str, int]]] = [{} for _ in problem.ops]
    for k, st in enumerate(problem.stages):
        out[st.loader[0]][st.loader[1]] = ("load", k)
        for v, j in st.readers:
            out[v][j] = ("read", k)
    return out


def variants(problem, i: int, cands: list, fixed: int | None) -> list:
    """Op i's candidates with every combination of its staging bits (untiled layouts only); ``fixed``: the one
    bit mask a plan chose (the fixed Problem of a plan)."""
    bits = sorted(problem.stage_roles[i])
    if not bits:
        return cands
    masks = [fixed] if fixed is not None else _masks(bits)
    out = []
    for m in masks:
        for c in cands:
            if m == 0 or problem.cands[i].layouts[c.layout].tile is None:
                out.append(replace(c, stage=m))
    return out


def _masks(bits: list[int]) -> list[int]:
    out = [0]
    for j in bits:
        out += [m | (1 << j) for m in out]
    return sorted(out)


def effective_leaf(problem, i: int, mask: int) -> tuple[bool, ...]:
    """Op i's leaf flags with the operands it reads from staged slices removed (no device-memory read)."""
    read = {j for j, (role, _) in problem.stage_roles[i].items() if role == "read" and mask >> j & 1}
    return tuple(flag and j not in read for j, flag in enumerate(problem.leaf[i]))


def kept_slices(problem, i: int, layout: int, j: int) -> tuple[tuple[tuple[int, tuple], ...], int]:
    """((core, box) the op reads of operand j, in base coords) and the stick it reads them in."""
    oc = problem.cands[i]
    lay = oc.layouts[layout]
    base = problem.graph.tensors[oc.refs[j].base]
    stick = len(base.shape) - 1 if lay.required[j] is None else lay.required[j]
    return lay.reads[j], stick


def footprint(problem, i: int, layout: int, j: int) -> int:
    """Per-core scratchpad bytes of the kept slices of operand j (the largest slice, padded to sticks)."""
    reads, stick = kept_slices(problem, i, layout, j)
    base = problem.graph.tensors[problem.cands[i].refs[j].base]
    return max(box_padded_bytes(b, stick, base.elem_bytes, problem.hw.stick_bytes) for _, b in reads)


@dataclass(frozen=True)
class Read:
    """How reader v's layout reads the kept slices of a loader layout: in place, by a relayout (its cost in ps,
    its copy's bytes per core and fan-in), or not at all (``mode`` None)."""

    mode: str | None
    extra_ps: int = 0
    copy_bytes: int = 0
    fan_in: int = 1


def kept_read(problem, st: Stage, lu: int, v: int, j: int, lv: int) -> Read:
    """In place when the loader's kept slices (layout ``lu``) are exactly what every core of reader v (layout
    ``lv``) reads of operand j in the same stick; else a relayout from the kept slices when legal, as for any
    resident tensor (``edge_analysis.analyse_edge``); another stick is never read from the kept slices."""
    u = st.loader[0]
    key = ("stage read", st.tensor, problem.sig[u], st.loader[1], lu, problem.sig[v], j, lv)  # equal ids, equal layouts
    memo = problem._memo
    if key in memo:
        return memo[key]
    u, ju = st.loader
    held, stick = kept_slices(problem, u, lu, ju)
    need, need_stick = kept_slices(problem, v, lv, j)
    own = dict(held)
    if stick != need_stick:
        out = Read(None)
    elif all(own.get(c) == box for c, box in need):
        out = Read("inplace")
    elif not problem.stage_relayout:
        out = Read(None)
    else:
        kept = replace(problem.cands[u].layouts[lu], owner_boxes=own, stick=stick)
        tensor = problem.graph.tensors[st.tensor]
        cons = problem.cands[v]
        ea = analyse_edge(kept, cons, cons.layouts[lv], j, tensor, problem.hw, problem.coef)
        out = (
            Read("relayout", int(to_ps(ea.relayout_ns)), ea.copy_bytes, ea.fan_in) if ea.relayout_legal else Read(None)
        )
    memo[key] = out
    return out


def stage_edges(problem, ends: dict[int, int] | None = None) -> list[Edge]:
    """Per stage: the edge loader -> last reader holding the kept buffer (loader to last reader, or to
    ``ends[stage]`` when the last reader may write over it: ``model.inplace`` adds the tail), then per later
    reader op the edge allowing its reads of the kept slices, with any relayout's cost and copy."""
    out = []
    for s, st in enumerate(problem.stages):
        u, ju = st.loader
        cu = problem.candidates[u]
        keep = np.array([c.stage >> ju & 1 for c in cu], dtype=bool)
        size = np.array([footprint(problem, u, c.layout, ju) if k else 0 for c, k in zip(cu, keep)], dtype=np.int64)
        rows = len(problem.candidates[st.last])
        zero = np.zeros((len(cu), rows), dtype=np.int64)
        hi = (ends or {}).get(s, st.last + 1)
        out.append(Edge(u, st.last, zero, None, np.broadcast_to(size[:, None], zero.shape).copy(), (u, hi)))
        by_reader: dict[int, list[int]] = {}
        for v, j in st.readers:
            by_reader.setdefault(v, []).append(j)
        for v, js in sorted(by_reader.items()):
            cost, ok, copy = _reader_table(problem, st, keep, v, tuple(js))
            out.append(Edge(u, v, cost, ok, copy, (v, v + 1)))
    return out


def _reader_table(problem, st: Stage, keep: np.ndarray, v: int, js: tuple[int, ...]):
    """(cost, allowed or None, copy or None) of reader v's edge from the loader: a function of the two ops'
    signatures and candidate lists, so readers of equal signature (every layer's) share one, read-only."""
    u, ju = st.loader
    key = ("stage table", st.tensor, problem.sig[u], ju, problem._candidate_key(u), problem.sig[v], js,
           problem._candidate_key(v))  # fmt: skip
    memo = problem._memo
    if key in memo:
        return memo[key]
    cu, cv = problem.candidates[u], problem.candidates[v]
    ok = np.ones((len(cu), len(cv)), dtype=bool)
    cost = np.zeros(ok.shape, dtype=np.int64)
    copy = np.zeros(ok.shape, dtype=np.int64)
    kept_layouts = sorted({d.layout for d, k in zip(cu, keep) if k})
    rows = {lu: np.array([a for a, d in enumerate(cu) if d.layout == lu and keep[a]]) for lu in kept_layouts}
    for b, c in enumerate(cv):
        for j in js:
            if not c.stage >> j & 1:
                continue
            ok[~keep, b] = False  # a loader candidate keeping nothing serves no read of the kept slices
            for lu, idx in rows.items():
                r = kept_read(problem, st, lu, v, j, c.layout)
                ok[idx, b] &= r.mode is not None
                cost[idx, b] += r.extra_ps
                copy[idx, b] += r.copy_bytes
    out = (cost, None if ok.all() else ok, copy if copy.any() else None)
    for a in out:
        if a is not None:
            a.setflags(write=False)
    memo[key] = out
    return out


def stage_edge_index(problem, start: int | None = None) -> dict[tuple, int]:
    """Formulation edge index of each stage's holder edge (key ``(s,)``) and of its reader edges (``(s, v)``):
    the stage edges come last, in ``stage_edges`` order, but for the kept slices' tails (``model.inplace``)
    after them (``start``: the first one's index, before the Formulation exists)."""
    total = sum(1 + len({v for v, _ in st.readers}) for st in problem.stages)
    if start is None:
        f = problem.formulation
        start = len(f.edges) - total - sum(e.tail is not None and e.tail[0] == "edge" for e in f.edges)
    k = start
    out: dict[tuple, int] = {}
    for s, st in enumerate(problem.stages):
        out[(s,)] = k
        k += 1
        for v in sorted({v for v, _ in st.readers}):
            out[(s, v)] = k
            k += 1
    return out


def reads_of(problem, assignment, s: int, v: int) -> list[tuple[int, Read]]:
    """Reader v's reads of stage s's kept slices under an assignment: (operand, how)."""
    st = problem.stages[s]
    u = st.loader[0]
    lu, cv = problem.candidates[u][assignment[u]].layout, problem.candidates[v][assignment[v]]
    return [(j, kept_read(problem, st, lu, v, j, cv.layout)) for w, j in st.readers if w == v and cv.stage >> j & 1]


def edge_costs(problem, assignment) -> dict[int, int]:
    """Per reader op, the relayout ps of its reads of kept slices (what the Formulation's stage edges charge)."""
    out: dict[int, int] = {}
    for s, st in enumerate(problem.stages):
        for v in sorted({v for v, _ in st.readers}):
            out[v] = out.get(v, 0) + sum(r.extra_ps for _, r in reads_of(problem, assignment, s, v))
    return out


def drop_unread(problem, a: list[int]) -> None:
    """A loader keeping an input no later op reads from the scratchpad keeps nothing instead: the same cost
    (keeping is free), less memory, so no plan records a staged input without a reader (in place on ``a``)."""
    for st in problem.stages:
        u, ju = st.loader
        c = problem.candidates[u][a[u]]
        if c.stage >> ju & 1 and not any(problem.candidates[v][a[v]].stage >> j & 1 for v, j in st.readers):
            plain = replace(c, stage=c.stage & ~(1 << ju))
            if plain in problem.candidates[u]:  # a fixed Problem (a plan's decisions) may hold only the kept one
                a[u] = problem.candidates[u].index(plain)


def merged_op_table(problem, i: int, cands: list, build):
    """Op i's table when its candidates read different operand sets from device memory: one table per
    effective leaf set (``build(leaf, sub_candidates)``), merged back in candidate order."""
    groups: dict[tuple[bool, ...], list[int]] = {}
    for s, c in enumerate(cands):
        groups.setdefault(effective_leaf(problem, i, c.stage), []).append(s)
    n = len(cands)
    parts: dict[str, np.ndarray] = {}
    fields: dict[str, np.ndarray] = {}
    first = None
    for leaf, idx in groups.items():
        t = build(leaf, [cands[s] for s in idx])
        first = first or t
        for name in vars(t.parts):
            v = np.asarray(getattr(t.parts, name))
            parts.setdefault(name, np.zeros(n, dtype=v.dtype))[idx] = v
        for name in ("additive", "usage", "leaf_bytes", "g1", "alt_mem", "alt_comp"):
            v = np.asarray(getattr(t, name))
            fields.setdefault(name, np.zeros(n, dtype=v.dtype))[idx] = v
    for a in list(parts.values()) + list(fields.values()):
        a.setflags(write=False)
    return replace(first, parts=replace(first.parts, **parts), **fields)


# ---- plans ------------------------------------------------------------------------------------------------
def staged_inputs(plan) -> list:
    """The plan's staged graph inputs and weights: its tensor records named like a leaf of its graph."""
    leaves = {t["name"] for t in plan.graph.get("leaves", [])}
    return [t for t in plan.tensors if t.name in leaves]


def decoded(problem, assignment, offsets) -> tuple[list, list]:
    """The plan records of an assignment's staging: a TensorPlan per kept input (``producer`` is its loader,
    residency ``lx``, the kept buffer's address, bytes per core and lifetime) and an EdgePlan per read of the
    kept slices (mode ``inplace`` or ``relayout`` with its copy, producer the loader)."""
    tensors, edges = [], []
    index = stage_edge_index(problem)
    intervals = problem.formulation.edges
    for s, st in enumerate(problem.stages):
        u, ju = st.loader
        c = problem.candidates[u][assignment[u]]
        if not c.stage >> ju & 1:
            continue
        _, stick = kept_slices(problem, u, c.layout, ju)
        k = index[(s,)]
        lo, hi = intervals[k].interval[0], st.last + 1  # through the last reader (a tail may hold its end)
        size = footprint(problem, u, c.layout, ju)
        loader = problem.ops[u].name
        tensors.append(TensorPlan(st.tensor, loader, "lx", stick, offsets.get(("edge", k)), size, [lo, hi]))
        for v in sorted({v for v, _ in st.readers}):
            k = index[(s, v)]
            at = offsets.get(("edge", k))
            for j, r in reads_of(problem, assignment, s, v):
                addr = None if not r.copy_bytes or at is None else at
                life = list(intervals[k].interval)
                edges.append(
                    EdgePlan(
                        st.tensor, loader, problem.ops[v].name, j, r.mode, False, addr, r.copy_bytes, life, r.fan_in
                    )
                )
                at = None if at is None else at + r.copy_bytes
    return tensors, edges


def plan_masks(graph, ops: list, tensors: list, edges: list) -> dict[str, int]:
    """Each op's staging bits as a plan records them (``decoded``): the loader of every kept graph input, and
    every op reading kept slices (an edge whose tensor is a graph input or weight)."""
    masks: dict[str, int] = {}
    by_name = {o.name: o for o in ops}
    for t in tensors:
        if t.name not in graph.tensors or graph.tensors[t.name].producer is not None:
            continue
        op = by_name.get(t.producer)
        js = [j for j, x in enumerate(op.inputs) if resolve(graph, x).base == t.name] if op else []
        if not js:
            raise PlanError(f"staged tensor {t.name!r}: its loader {t.producer!r} is not an op reading it")
        masks[op.name] = masks.get(op.name, 0) | 1 << js[0]
    for e in edges:
        if e.tensor in graph.tensors and graph.tensors[e.tensor].producer is None:
            if e.consumer not in by_name:
                raise PlanError(f"edge of staged tensor {e.tensor!r}: unknown consumer {e.consumer!r}")
            masks[e.consumer] = masks.get(e.consumer, 0) | 1 << e.operand
    return masks
