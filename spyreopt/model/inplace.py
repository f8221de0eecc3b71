"""In-place address reuse: a pointwise op writes its output over an operand that dies at it.

The published softmax's third step ("pointwise steps reuse scratchpad addresses in place"): ``exp`` writes
over ``sub``'s output, ``sub`` over the staged input. Planned jointly through the Formulation, in every
backend, with positive usages only:

* a *donor* is a tensor resident in the scratchpad whose last reader ``c`` is a pointwise op that may write
  its output over it: a node buffer (an op's output, not a graph output) or a staged input's kept slices
  (``model.staging``: the holder edge loader -> last reader);
* the donor's buffer ends at ``c`` (exclusive) and a *tail* edge donor -> ``c`` over ``[c, c+1)`` carries its
  footprint there (``Edge.tail``), except for the *alias* pairs (``Edge.alias``), where ``c``'s output takes
  the donor's address and the tail holds nothing: the donor is resident, ``c`` reads it in place and keeps its
  output on chip with exactly those per-core slices, in the same stick, untiled. So the memory profile is
  exact in every backend, and the address rules (a tail at its donor's address, an aliased output at the
  address it writes over) live in ``Formulation.address_groups`` and the placement backends.

Each pointwise op has at most one donor (its first eligible operand), so no two donors vanish into one output.
Writing in place costs no time: it only saves memory. ``Problem(reuse=False)`` (``forbid="reuse"``) plans
without it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spyreopt.costmodel import spyre
from spyreopt.model import staging
from spyreopt.model.candidates import resolve
from spyreopt.model.formulation import Edge
from spyreopt.model.tiling import node_interval

INPLACE = spyre.MODES.index("inplace")


@dataclass(frozen=True)
class Donor:
    """A buffer ``consumer`` may write over: op ``producer``'s output (``stage`` None) or stage ``stage``'s kept
    slices (``producer`` is the loader); ``operands``: the consumer's operands reading it."""

    producer: int
    consumer: int
    operands: tuple[int, ...]
    stage: int | None
    alias: np.ndarray  # bool [S_producer, S_consumer]


def _same_elements(problem, v: int, tensor: str, js: list[int]) -> bool:
    """Op v is pointwise and each operand j reads ``tensor`` whole, element for element like its output."""
    g, op = problem.graph, problem.ops[v]
    if op.kind != "pointwise" or not js:
        return False
    t, out = g.tensors[tensor], g.tensors[op.output]
    if t.shape != out.shape or t.dtype != out.dtype or tensor in g.outputs:
        return False
    ident = tuple(range(len(t.shape)))
    return all(resolve(g, op.inputs[j]).perm == ident and g.tensors[op.inputs[j]].shape == t.shape for j in js)


def _writes_over(problem, v: int, lay_v: int, js: list[int], stick: int, size: int) -> bool:
    """Layout ``lay_v`` of op v writes each core's output exactly over the slice it reads of operands ``js``."""
    lay = problem.cands[v].layouts[lay_v]
    if lay.tile is not None or lay.stick != stick or lay.footprint != size:
        return False
    return all(dict(lay.reads[j]) == lay.owner_boxes for j in js)


def _node_alias(problem, u: int, v: int, js: list[int]) -> np.ndarray:
    """Pairs where v writes over op u's resident output (read in place on every operand ``js``).

    A function of u's op table, the edge tables u -> v and the two ops' signatures and candidate lists; the
    tables are the Problem's memoised objects (alive as long as it is), so pairs with the same ones share it."""
    cu, cv = problem.candidates[u], problem.candidates[v]
    table = problem.op_table(u)
    ks = [k for k in problem.in_edges[v] if problem.edges[k].producer == u]
    tables = [problem.edge_table(k) for k in ks]
    whole = ("node alias", problem.sig[u], problem.sig[v], tuple(js), problem._candidate_key(u),
           problem._candidate_key(v), id(table), tuple(id(t) for t in tables))  # fmt: skip
    held = problem._memo.get(whole)
    if held is not None:
        return held
    usage = table.usage
    ok = np.zeros((len(cu), len(cv)), dtype=bool)
    modes = [t.parts.mode[np.ix_(t.pu, t.pv)] == INPLACE for t in tables]
    memo: dict[tuple[int, int], bool] = {}
    for a, c in enumerate(cu):
        lu = problem.cands[u].layouts[c.layout]
        if c.residency == "hbm" or lu.tile is not None:
            continue
        for b, d in enumerate(cv):
            if d.residency == "hbm" or not all(m[a, b] for m in modes):
                continue
            key = (c.layout, d.layout)
            if key not in memo:
                memo[key] = _writes_over(problem, v, d.layout, js, lu.stick, int(usage[a]))
            ok[a, b] = memo[key]
    ok.setflags(write=False)
    problem._memo[whole] = ok
    return ok


def _stage_alias(problem, s: int, js: list[int]) -> np.ndarray:
    """Pairs where the last reader of stage s writes over the kept slices it reads in place."""
    st = problem.stages[s]
    u, ju = st.loader
    v = st.last
    cu, cv = problem.candidates[u], problem.candidates[v]
    ok = np.zeros((len(cu), len(cv)), dtype=bool)
    memo: dict[tuple[int, int], bool] = {}
    for a, c in enumerate(cu):
        if not c.stage >> ju & 1:
            continue
        for b, d in enumerate(cv):
            if d.residency == "hbm" or not all(d.stage >> j & 1 for j in js):
                continue
            key = (c.layout, d.layout)
            if key not in memo:
                reads = [staging.kept_read(problem, st, c.layout, v, j, d.layout).mode for j in js]
                _, stick = staging.kept_slices(problem, u, c.layout, ju)
                size = staging.footprint(problem, u, c.layout, ju)
                memo[key] = all(r == "inplace" for r in reads) and _writes_over(problem, v, d.layout, js, stick, size)
            ok[a, b] = memo[key]
    return ok


def donors(problem) -> list[Donor]:
    """Every op's donor (at most one: its first operand with an alias pair), in consumer order."""
    if not problem.reuse:
        return []
    memo = problem._memo
    if "donors" in memo and memo["donors"][0] is problem.candidates:
        return memo["donors"][1]
    staged = {(st.tensor, st.last): s for s, st in enumerate(problem.stages)}
    out = []
    for v, op in enumerate(problem.ops):
        if op.kind != "pointwise" or node_interval(problem, v)[0] < v:
            continue  # a buffer widened back over its loop (``tiling.node_interval``) is live beside its donor's
        for j0, x in enumerate(op.inputs):
            base = resolve(problem.graph, x).base
            js = [j for j, y in enumerate(op.inputs) if resolve(problem.graph, y).base == base]
            if j0 != js[0] or not _same_elements(problem, v, base, js):
                continue
            producer = problem.graph.tensors[base].producer
            if producer is not None:
                u = problem.step[producer]
                if problem.last_use[u] != v:
                    continue
                alias, stage = _node_alias(problem, u, v, js), None
            else:
                s = staged.get((base, v))
                if s is None:
                    continue
                u, stage = problem.stages[s].loader[0], s
                alias = _stage_alias(problem, s, [j for w, j in problem.stages[s].readers if w == v])
            if alias.any():
                alias.setflags(write=False)
                out.append(Donor(u, v, tuple(js), stage, alias))
                break
    memo["donors"] = (problem.candidates, out)
    return out


def tail_edges(problem, found: list[Donor], holder: dict[int, int] | None = None) -> list[Edge]:
    """Per donor, its tail edge over the consumer's step: the donor's footprint but for the alias pairs; an op
    output whose interval is widened past its last reader (a loop's, ``tiling.node_interval``) continues
    there by a second tail, empty for the alias pairs. ``holder``: formulation edge index of each stage's
    kept buffer (the donors of kept slices; None: node donors only)."""
    out = []
    for d in found:
        if (d.stage is None) == (holder is not None):
            continue
        cu = problem.candidates[d.producer]
        if d.stage is None:
            size = np.asarray(problem.op_table(d.producer).usage, dtype=np.int64)
            tail = ("node", d.producer)
        else:
            ju = problem.stages[d.stage].loader[1]
            size = np.array(
                [staging.footprint(problem, d.producer, c.layout, ju) if c.stage >> ju & 1 else 0 for c in cu],
                dtype=np.int64,
            )
            tail = ("edge", holder[d.stage])
        usage = np.where(d.alias, 0, size[:, None])
        zero = np.zeros(d.alias.shape, dtype=np.int64)
        v = d.consumer
        out.append(Edge(d.producer, v, zero, None, usage, (v, v + 1), tail, d.alias))
        hi = node_interval(problem, d.producer)[1] if d.stage is None else v + 1
        if hi > v + 1:
            out.append(Edge(d.producer, v, zero, None, usage.copy(), (v + 1, hi), tail))
    return out


def lifetime(problem, i: int, assignment) -> tuple[int, int]:
    """Op i's output buffer's steps: its interval, or up to its last reader when that writes over it."""
    lo, hi = node_interval(problem, i)
    for d in _node_donors(problem).get(i, ()):
        if d.alias[assignment[i], assignment[d.consumer]]:
            return lo, d.consumer + 1
    return lo, hi


def _node_donors(problem) -> dict[int, list[Donor]]:
    """The op-output donors by producer, in ``donors`` order (built once per candidate lists)."""
    found = donors(problem)
    held = problem._memo.get("node donors")
    if held is not None and held[0] is found:
        return held[1]
    out: dict[int, list[Donor]] = {}
    for d in found:
        if d.stage is None:
            out.setdefault(d.producer, []).append(d)
    problem._memo["node donors"] = (found, out)
    return out


def writes_over(problem, assignment) -> dict[int, int]:
    """Op -> the operand it writes its output over, under an assignment."""
    return {
        d.consumer: d.operands[0] for d in donors(problem) if d.alias[assignment[d.producer], assignment[d.consumer]]
    }
