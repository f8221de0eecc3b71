"""The Formulation: the solver-facing standard form every backend reads.

A Formulation is plain data, the shape of the auto-sharding ILPs and of the
IOPDDL contest, extended with an exact max-epigraph term and address placement:

* choice nodes: node ``i`` picks one candidate ``s`` in ``range(len(costs))``;
  it costs ``costs[s]`` and, while live (half-open ``interval``), uses
  ``usages[s]`` memory;
* edges: a pair table over the two endpoints' candidates, ``costs[s_u, s_v]``;
  pairs that cannot occur are ``allowed[s_u, s_v] == False``; a pair may also
  hold extra memory ``usages[s_u, s_v]`` live over the edge's interval (a
  relayout copy);
* max terms: ``cost += max_k (unary_k[s_node] + sum_e table_k,e[s_u, s_v])``,
  the exact epigraph of a "compute overlaps memory" op time;
* a memory limit per time step, and optionally ``placement``: every buffer
  (node or edge with non-zero usage) must also get an aligned address so that
  no two live buffers overlap within ``placement.capacity``;
* in-place reuse: a *tail* edge continues the buffer ``tail`` (node ``u``'s, or
  an edge's over the same two nodes) over its own interval at the same address,
  its usage being that buffer's size, or 0 for the pairs where node ``v``'s
  buffer takes that address instead (``alias[s_u, s_v]``: ``v`` writes over the
  buffer that dies at it). Contract: a tail's usage is non-zero only where its
  buffer is, and an alias pair has a zero tail usage and a present buffer.
  Every usage stays positive, so backends read tails as plain edges; only
  addresses see them (``address_groups``, ``_placement_violations``).

Costs are integers in ``cost_unit_us`` microseconds each (fixed point, so the
objective is exact and every backend agrees bit for bit). Nothing here knows
about any particular hardware: Spyre compiles into it in ``model.problem``,
IOPDDL loads into it directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import accumulate

import numpy as np

BufferKey = tuple[str, int]
"""("node", i) or ("edge", k): the buffer a node candidate or an edge pair holds."""


@dataclass(frozen=True)
class Node:
    name: str
    costs: np.ndarray  # int64 [S]
    usages: np.ndarray  # int64 [S]
    interval: tuple[int, int]  # half-open; (0, 0) means never live

    @property
    def num_candidates(self) -> int:
        return len(self.costs)


@dataclass(frozen=True)
class Edge:
    u: int
    v: int
    costs: np.ndarray  # int64 [S_u, S_v]
    allowed: np.ndarray | None = None  # bool [S_u, S_v]; None means every pair
    usages: np.ndarray | None = None  # int64 [S_u, S_v]; None means no memory
    interval: tuple[int, int] = (0, 0)
    tail: BufferKey | None = None  # the buffer this edge's memory continues, at its address
    alias: np.ndarray | None = None  # bool [S_u, S_v]: node v's buffer takes the ``tail`` buffer's address

    def is_allowed(self, su: int, sv: int) -> bool:
        return self.allowed is None or bool(self.allowed[su, sv])


@dataclass(frozen=True)
class Affine:
    """One alternative of a max term: a node vector plus edge pair tables."""

    unary: np.ndarray  # int64 [S_node]
    edge_parts: tuple[tuple[int, np.ndarray], ...] = ()  # (edge index, [S_u, S_v])


@dataclass(frozen=True)
class MaxTerm:
    node: int
    alternatives: tuple[Affine, ...]


@dataclass(frozen=True)
class Placement:
    capacity: int
    alignment: int = 1


@dataclass(frozen=True)
class BufferSpec:
    key: BufferKey
    lower: int
    upper: int  # half-open
    size: int
    members: tuple[BufferKey, ...] = ()  # other buffers at this address (``Formulation.address_groups``)


@dataclass(frozen=True)
class Formulation:
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    usage_limit: int | None
    max_terms: tuple[MaxTerm, ...] = ()
    placement: Placement | None = None
    cost_unit_us: float = 1.0
    name: str = "problem"
    _incident: dict = field(default_factory=dict, compare=False, repr=False)

    # ---- structure (indexes derived once, kept in ``_incident``) ---------------
    def _derived(self, name: str, build):
        if name not in self._incident:
            self._incident[name] = build()
        return self._incident[name]

    @property
    def num_steps(self) -> int:
        return self._derived(
            "num_steps",
            lambda: max([n.interval[1] for n in self.nodes] + [e.interval[1] for e in self.edges], default=0),
        )

    def incident_edges(self, i: int) -> list[int]:
        """Edge indices touching node i."""

        def build() -> list[list[int]]:
            table: list[list[int]] = [[] for _ in self.nodes]
            for k, e in enumerate(self.edges):
                table[e.u].append(k)
                if e.v != e.u:
                    table[e.v].append(k)
            return table

        return self._derived("incident", build)[i]

    def max_terms_of(self, i: int) -> list[int]:
        """Max terms whose node is i."""

        def build() -> list[list[int]]:
            table: list[list[int]] = [[] for _ in self.nodes]
            for t, m in enumerate(self.max_terms):
                table[m.node].append(t)
            return table

        return self._derived("terms", build)[i]

    # ---- exact evaluation -----------------------------------------------
    def evaluate(self, assignment: tuple[int, ...] | list[int]) -> int:
        """Exact objective (Python int, no overflow) of a full assignment."""
        self._check_shape(assignment)
        total = sum(int(n.costs[s]) for n, s in zip(self.nodes, assignment))
        for e in self.edges:
            total += int(e.costs[assignment[e.u], assignment[e.v]])
        for m in self.max_terms:
            total += max(affine_value(a, m.node, self.edges, assignment) for a in m.alternatives)
        return total

    def objective_us(self, assignment) -> float:
        return self.evaluate(assignment) * self.cost_unit_us

    def buffers(self, assignment) -> list[BufferSpec]:
        """Every buffer the assignment holds (non-zero usage over a non-empty interval)."""
        out: list[BufferSpec] = []
        for i, (n, s) in enumerate(zip(self.nodes, assignment)):
            size = int(n.usages[s])
            if size > 0 and n.interval[1] > n.interval[0]:
                out.append(BufferSpec(("node", i), n.interval[0], n.interval[1], size))
        for k, e in enumerate(self.edges):
            if e.usages is None:
                continue
            size = int(e.usages[assignment[e.u], assignment[e.v]])
            if size > 0 and e.interval[1] > e.interval[0]:
                out.append(BufferSpec(("edge", k), e.interval[0], e.interval[1], size))
        return out

    def address_links(self, assignment) -> list[tuple[BufferKey, BufferKey]]:
        """Pairs of present buffers that must share one address: a tail and the buffer it continues, and an
        in-place output and the buffer it writes over."""
        present = {b.key for b in self.buffers(assignment)}
        out = []
        for k, e in enumerate(self.edges):
            if e.tail is None or e.tail not in present:
                continue
            if ("edge", k) in present:
                out.append((e.tail, ("edge", k)))
            if e.alias is not None and e.alias[assignment[e.u], assignment[e.v]] and ("node", e.v) in present:
                out.append((e.tail, ("node", e.v)))
        return out

    def address_groups(self, assignment) -> list[BufferSpec]:
        """The assignment's buffers with those sharing an address merged: one spec over the union of their
        intervals, as large as the largest (exact when, as in Spyre, they have one size), its other keys in
        ``members``. What a placement engine places; ``fill_members`` gives the members their offsets."""
        bufs = {b.key: b for b in self.buffers(assignment)}
        root = {k: k for k in bufs}

        def find(k):
            while root[k] != k:
                k = root[k]
            return k

        for a, b in self.address_links(assignment):
            ra, rb = find(a), find(b)
            if ra != rb:
                root[rb] = ra  # the buffer written over stays the group's key
        groups: dict[BufferKey, list[BufferSpec]] = {}
        for k, b in bufs.items():
            groups.setdefault(find(k), []).append(b)
        out = []
        for k, g in groups.items():
            lo, hi, size = min(b.lower for b in g), max(b.upper for b in g), max(b.size for b in g)
            out.append(BufferSpec(k, lo, hi, size, tuple(sorted(b.key for b in g if b.key != k))))
        return sorted(out, key=lambda b: (b.lower, b.key))

    def usage_profile(self, assignment) -> list[int]:
        """Live usage at each time step 0..num_steps-1 (Python ints: usages may be huge)."""
        diff = [0] * (self.num_steps + 1)
        for b in self.buffers(assignment):
            diff[b.lower] += b.size
            diff[b.upper] -= b.size
        return list(accumulate(diff[:-1]))

    def violations(self, assignment, offsets: dict[BufferKey, int] | None = None) -> list[str]:
        """Every hard constraint the assignment (and offsets) break; empty when feasible."""
        self._check_shape(assignment)
        out: list[str] = []
        for k, e in enumerate(self.edges):
            if not e.is_allowed(assignment[e.u], assignment[e.v]):
                out.append(
                    f"edge {k} ({self.nodes[e.u].name} -> {self.nodes[e.v].name}): "
                    f"pair ({assignment[e.u]}, {assignment[e.v]}) is not allowed"
                )
        if self.usage_limit is not None:
            for t, used in enumerate(self.usage_profile(assignment)):
                if used > self.usage_limit:
                    out.append(
                        f"time step {t}: usage {used} exceeds limit {self.usage_limit} by {used - self.usage_limit}"
                    )
        if self.placement is not None:
            out.extend(self._placement_violations(assignment, offsets or {}))
        return out

    def is_feasible(self, assignment, offsets: dict[BufferKey, int] | None = None) -> bool:
        return not self.violations(assignment, offsets)

    def _placement_violations(self, assignment, offsets: dict[BufferKey, int]) -> list[str]:
        assert self.placement is not None
        cap, align = self.placement.capacity, self.placement.alignment
        out: list[str] = []
        bufs = self.buffers(assignment)
        for b in bufs:
            if b.key not in offsets:
                out.append(f"buffer {b.key}: no address")
                continue
            off = offsets[b.key]
            if off < 0 or off + b.size > cap:
                out.append(f"buffer {b.key}: [{off}, {off + b.size}) outside capacity {cap}")
            if off % align:
                out.append(f"buffer {b.key}: address {off} not a multiple of {align}")
        for a, b in self.address_links(assignment):
            if a in offsets and b in offsets and offsets[a] != offsets[b]:
                out.append(f"buffers {a} and {b} must share one address (in-place reuse): {offsets[a]} != {offsets[b]}")
        placed = sorted((b for b in bufs if b.key in offsets), key=lambda b: b.lower)
        for a_i, a in enumerate(placed):
            for b in placed[a_i + 1 :]:
                if b.lower >= a.upper:
                    break
                oa, ob = offsets[a.key], offsets[b.key]
                if oa < ob + b.size and ob < oa + a.size:
                    out.append(
                        f"buffers {a.key} and {b.key} overlap in address "
                        f"([{oa}, {oa + a.size}) and [{ob}, {ob + b.size})) while both live"
                    )
        return out

    def _check_shape(self, assignment) -> None:
        if len(assignment) != len(self.nodes):
            raise ValueError(f"assignment has {len(assignment)} entries, formulation has {len(self.nodes)} nodes")
        for i, (n, s) in enumerate(zip(self.nodes, assignment)):
            if not 0 <= s < n.num_candidates:
                raise ValueError(f"node {i} ({n.name}): candidate {s} out of range 0..{n.num_candidates - 1}")


def fill_members(groups: list[BufferSpec], offsets: dict[BufferKey, int]) -> dict[BufferKey, int]:
    """Offsets of every buffer of ``address_groups`` from those of the groups' keys."""
    out = dict(offsets)
    for g in groups:
        if g.key in offsets:
            out.update(dict.fromkeys(g.members, offsets[g.key]))
    return out


def affine_value(a: Affine, node: int, edges: tuple[Edge, ...], assignment) -> int:
    value = int(a.unary[assignment[node]])
    for k, table in a.edge_parts:
        e = edges[k]
        value += int(table[assignment[e.u], assignment[e.v]])
    return value


@dataclass
class Solution:
    """What a backend returns: an assignment, addresses, and how it got there."""

    assignment: tuple[int, ...]
    offsets: dict[BufferKey, int]
    status: str  # optimal | feasible | timeout | infeasible | error
    objective: int | None
    bound: int | None = None
    seconds: float = 0.0
    stats: dict = field(default_factory=dict)
    message: str = ""


def hint_start(hint) -> tuple[tuple[int, ...], dict[BufferKey, int]]:
    """A backend's hint as (assignment, offsets): a Solution's own, or a bare assignment without addresses."""
    if isinstance(hint, Solution):
        return tuple(int(s) for s in hint.assignment), dict(hint.offsets)
    return tuple(int(s) for s in hint), {}
