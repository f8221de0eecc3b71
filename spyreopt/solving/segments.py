"""Split a schedule into repeated segments at cut points (one tensor crosses), for ``solving.layers``.

A *cut* is a position in the schedule (between two compute ops) that at most
one activation crosses: produced before it, read after it (graph inputs and
weights always live in device memory and do not count). The residual stream
between transformer layers is the typical one. If that tensor is fixed to
device memory, in the layout graph inputs are read in (stick on its last dim),
no scratchpad buffer, relayout or shared cost term spans the cut, so the
problem splits exactly into independent segments: the consumer side reads the
tensor like a graph input, the producer side writes it like a graph output.

Cutting everywhere would force every such tensor to device memory, so the
split keeps only the cuts that make segments repeat: among the chains "a prefix
up to a cut, then blocks of ``period`` steps each ending on a cut, then the
rest", it picks the one that leaves the fewest ops to solve once blocks that
read alike are merged, then the fewest blocks (a cheap structural stand-in
picks the chain; the segments' exact canonical keys decide what is reused). A
graph with nothing repeated stays whole.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from spyreopt.cache.key import canonical_graph
from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.errors import PlanError
from spyreopt.model.candidates import OpCandidates, resolve
from spyreopt.model.graph import Graph
from spyreopt.model.graph_parts import Op, Tensor
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.opspace import op_space

HBM = ("hbm",)


@dataclass(frozen=True)
class Segment:
    """Compute steps ``[start, stop)`` of the full schedule as a graph of their own.

    ``restrict`` maps a tensor leaving the segment (or a graph output) to the
    residencies its producer may take and the stick dim it must have.
    """

    start: int
    stop: int
    graph: Graph
    restrict: dict[str, tuple[tuple[str, ...], int]]

    def extra(self) -> dict:
        """The restriction in canonical names and the staging rule, for the segment's cache key."""
        names = canonical_graph(self.graph).tensor_names
        restrict = {names[t]: [list(r), s] for t, (r, s) in sorted(self.restrict.items())}
        return {"restrict": restrict, "staging": False}  # ``layers.restricted_problem`` stages no input


class Schedule:
    """The compute ops of a graph in order, with each activation's producer step and last use."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.ops: list[Op] = graph.compute_ops()
        self.step = {o.name: i for i, o in enumerate(self.ops)}
        self.span: dict[str, tuple[int, int]] = {}  # base tensor -> (producer step, last consumer step)
        for o in self.ops:
            self.span.setdefault(o.output, (self.step[o.name], self.step[o.name]))
        for v, o in enumerate(self.ops):
            for x in o.inputs:
                base = resolve(graph, x).base
                if base in self.span:
                    p, last = self.span[base]
                    self.span[base] = (p, max(last, v))

    def crossing(self) -> list[list[str]]:
        """For every position c in 0..n, the tensors produced before step c and read at or after it."""
        n = len(self.ops)
        enter: list[list[str]] = [[] for _ in range(n + 2)]
        leave: list[list[str]] = [[] for _ in range(n + 2)]
        for t, (p, last) in self.span.items():
            if last > p:
                enter[p + 1].append(t)
                leave[last + 1].append(t)
        active: set[str] = set()
        out = []
        for c in range(n + 1):
            active.update(enter[c])
            active.difference_update(leave[c])
            out.append(sorted(active))
        return out


def cut_points(graph: Graph, hw: HardwareSpec, coef: Coefficients) -> list[int]:
    """Positions where the schedule may be cut: at most one tensor crosses, and its producer can
    write it stick-on-last (the layout a segment reads it in)."""
    s = Schedule(graph)
    cuts = []
    for c, tensors in enumerate(s.crossing()):
        if not 0 < c < len(s.ops) or len(tensors) > 1:
            continue
        if tensors and not _can_write_leaf_layout(graph, graph.ops[graph.tensors[tensors[0]].producer], hw, coef):
            continue
        cuts.append(c)
    return cuts


def _can_write_leaf_layout(graph: Graph, op: Op, hw: HardwareSpec, coef: Coefficients) -> bool:
    last = len(graph.tensors[op.output].shape) - 1
    try:  # the one-core division is legal unless a span is too large: try it before enumerating
        OpCandidates(graph, op, hw, coef, 1, fixed=((1,) * len(op_space(graph, op).dims), last))
        return True
    except PlanError:
        return any(lay.stick == last for lay in OpCandidates(graph, op, hw, coef, 1).layouts)


def segment(s: Schedule, start: int, stop: int, hw: HardwareSpec, coef: Coefficients) -> Segment:
    """Steps ``[start, stop)`` as a graph: tensors from earlier steps become inputs (same names).

    A tensor read after the segment is restricted to device memory stick-on-last;
    a graph output it produces to stick-on-last where its op can write that
    (so the last of identical layers keys like the others).
    """
    g = s.graph
    sub = Graph(f"{g.name}[{start}:{stop}]")
    inside = {o.name for o in s.ops[start:stop]}

    def need(name: str) -> None:
        if name in sub.tensors:
            return
        t = g.tensors[name]
        if t.producer is None or t.producer not in inside and g.ops[t.producer].kind != "view":
            sub.tensors[name] = Tensor(name, t.shape, t.dtype, t.role if t.producer is None else "input", None)
            return
        op = g.ops[t.producer]
        for x in op.inputs:  # only views are added here: compute ops come in schedule order below
            need(x)
        sub.ops[op.name] = op
        sub.tensors[name] = t

    for o in s.ops[start:stop]:
        for x in o.inputs:
            need(x)
        sub.ops[o.name] = o
        sub.tensors[o.output] = g.tensors[o.output]
    restrict: dict[str, tuple[tuple[str, ...], int]] = {}
    for o in s.ops[start:stop]:
        p, last = s.span[o.output]
        stick = len(g.tensors[o.output].shape) - 1
        if last >= stop:
            restrict[o.output] = (HBM, stick)
        elif o.output in g.outputs and _can_write_leaf_layout(g, o, hw, coef):
            restrict[o.output] = (("hbm", "lx+hbm") if last > p else HBM, stick)
    dead_ends = [
        o.output for o in s.ops[start:stop] if s.span[o.output][1] == s.span[o.output][0] and o.output not in g.outputs
    ]
    produced = {o.output for o in s.ops[start:stop]}  # views and entering tensors are never outputs here
    sub.outputs = [t for t in restrict] + [t for t in g.outputs if t in produced and t not in restrict]
    if not sub.outputs:  # results of this segment are never read: an unread op is planned the same as an output
        sub.outputs = dead_ends
    sub.check()
    return Segment(start, stop, sub, restrict)


def _step_codes(s: Schedule) -> list[tuple[str, tuple]]:
    """Per step, its op's name-free signature and, per input, (producer step or None, leaf signature, view perm)."""
    g = s.graph
    codes = []
    for o in s.ops:
        t = g.tensors[o.output]
        sig = json.dumps([o.kind, list(t.shape), t.dtype, o.attrs], sort_keys=True, default=str)
        ins = []
        for x in o.inputs:
            ref = resolve(g, x)
            base = g.tensors[ref.base]
            step = s.step[base.producer] if base.producer is not None else None
            ins.append((step, (base.role if step is None else "input", base.shape, base.dtype), ref.perm))
        codes.append((sig, tuple(ins)))
    return codes


def _step_code(s: Schedule, codes: list, i: int, a: int, last: bool) -> tuple:
    """Step i's code inside a block starting at a: producers from a on are relative, earlier ones external;
    ``last``: its output is read after the block (or is a graph output)."""
    sig, ins = codes[i]
    enc = tuple(("rel", i - p, perm) if p is not None and p >= a else ("ext", leaf, perm) for p, leaf, perm in ins)
    return (sig, enc, last)


class Proxies:
    """A cheap stand-in for the canonical key of steps [a, b): equal for blocks that read alike.

    A block's key is the bytes of its steps' interned codes. A step whose producers all lie inside the
    block has the code it has in any block holding them (one precomputed id per step and ``last`` flag);
    only the few steps reading from before the block are coded for it: so a key costs a slice, not a
    tuple per step."""

    def __init__(self, s: Schedule, codes: list):
        self.s, self.codes = s, codes
        n = len(s.ops)
        self.ids: dict[tuple, int] = {}
        self.inside = np.array(
            [[self._id(_step_code(s, codes, i, 0, flag)) for flag in (False, True)] for i in range(n)], dtype=np.int64
        ).reshape(n, 2)
        first = [min([p for p, _, _ in codes[i][1] if p is not None], default=i) for i in range(n)]
        self.first = np.array(first, dtype=np.int64)  # the earliest producer a step reads
        self.last_use = np.array([s.span[o.output][1] for o in s.ops], dtype=np.int64)
        self.output = np.array([o.output in s.graph.outputs for o in s.ops], dtype=bool)
        self.memo: dict[tuple[int, int], bytes] = {}

    def _id(self, code: tuple) -> int:
        return self.ids.setdefault(code, len(self.ids))

    def __call__(self, a: int, b: int) -> bytes:
        if (a, b) not in self.memo:
            last = (self.last_use[a:b] >= b) | self.output[a:b]
            ids = self.inside[np.arange(a, b), last.astype(np.int64)]
            for t in np.flatnonzero(self.first[a:b] < a).tolist():
                ids[t] = self._id(_step_code(self.s, self.codes, a + t, a, bool(last[t])))
            self.memo[(a, b)] = ids.tobytes()
        return self.memo[(a, b)]


def _chain(n: int, cuts: set[int], o: int, period: int) -> list[tuple[int, int]]:
    """A prefix [0, o), then blocks of ``period`` steps while they end on a cut, then the rest."""
    blocks = [(0, o)] if o else []
    a = o
    while a + period <= n and (a + period in cuts or a + period == n):
        blocks.append((a, a + period))
        a += period
    if a < n:
        blocks.append((a, n))
    return blocks


def choose_blocks(graph: Graph, hw: HardwareSpec, coef: Coefficients) -> list[tuple[int, int]]:
    """Step ranges to solve separately: the (offset, period) chain of blocks that leaves the fewest ops
    to solve once equal blocks are merged, then the fewest blocks; ``[(0, n)]`` when nothing repeats."""
    s = Schedule(graph)
    n = len(s.ops)
    cuts = cut_points(graph, hw, coef)
    cutset = set(cuts)
    proxy = Proxies(s, _step_codes(s))

    best: tuple[tuple[int, int], list[tuple[int, int]]] = ((n, 1), [(0, n)])
    for o in [0] + cuts:
        for c in cuts:
            period = c - o
            if period <= 0 or o + 2 * period > n or (o + 2 * period not in cutset and o + 2 * period != n):
                continue
            if proxy(o, c) != proxy(c, c + period):
                continue
            blocks = _chain(n, cutset, o, period)
            distinct = {proxy(a, b): b - a for a, b in blocks}
            score = (sum(distinct.values()), len(blocks))
            if score < best[0]:
                best = (score, blocks)
    return best[1]


def split(graph: Graph, hw: HardwareSpec, coef: Coefficients) -> list[Segment]:
    """The segments to solve: the whole graph as one unrestricted segment when nothing repeats."""
    blocks = choose_blocks(graph, hw, coef)
    s = Schedule(graph)
    if len(blocks) == 1:
        return [Segment(0, len(s.ops), graph, {})]
    return [segment(s, a, b, hw, coef) for a, b in blocks]
