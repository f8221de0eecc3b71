"""The judge of a torch-spyre answer, written from the capture rules alone (never through the Formulation).

``judge(graph, answers, capacity)`` checks every rule of ``docs/torch-spyre.md`` and prices the answer:

* answers: exactly one per buffer, its division index within the buffer's menu;
* eligibility: a buffer with a residency reason, or of unknown size (-1), is not resident;
* address: a resident buffer has an address, a spilled one none; addresses are whole 128-byte sticks;
* capacity: ``address + footprint <= capacity`` (capacity counted in whole sticks, as torch-spyre's
  solver works: ``capacity // 128`` units), footprint = ``ceil(size / product of output splits)``
  rounded up to whole sticks;
* match: a resident buffer's division and each of its children's divisions form a pair of the child's
  ``cd_parent_matches`` list for it (torch-spyre's slicing gate holds for every consumer, resident or not);
* overlap: two resident buffers live at one step do not share a byte, except an in-place share;
* in-place: a share is a child at its in-place parent's address, both resident, with equal footprints
  and a matching pair of divisions; each buffer takes at most one parent's slot and hands its own to at
  most one child.

The spill traffic is ``(max(0, len(uses) - 1) + (0 if graph output else 1)) * size`` bytes per
buffer not resident (0 for a size of -1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

from spyreopt.formats.torch_spyre import Answer, CaptureGraph

STICK = 128
RULES = ("answers", "division", "eligibility", "address", "alignment", "capacity", "match", "overlap", "in-place")


@dataclass(frozen=True)
class Verdict:
    valid: bool
    spill: int  # bytes of device-memory traffic the answer costs
    height: int  # max(address + footprint) over resident buffers: the smallest capacity it fits
    violations: tuple[tuple[str, str], ...] = ()  # (rule, message), the first one first
    unknown_size: tuple[str, ...] = field(default=())  # buffers of size -1 (pinned off chip, cost 0)

    @property
    def rule(self) -> str | None:
        return self.violations[0][0] if self.violations else None

    @property
    def message(self) -> str:
        return f"{self.violations[0][0]}: {self.violations[0][1]}" if self.violations else "valid"


def footprint(size: int, output_factors) -> int:
    """Per-core bytes of a buffer sliced over ``prod(output_factors)`` cores, in whole sticks."""
    per_core = -(-size // prod(output_factors))
    return -(-per_core // STICK) * STICK


def traffic(size: int, uses, is_output: bool) -> int:
    if size < 0:
        return 0
    return (max(0, len(uses) - 1) + (0 if is_output else 1)) * size


def judge(graph: CaptureGraph, answers, capacity: int | None) -> Verdict:
    """Valid or every rule broken (first one first), the spill traffic and the height; ``capacity`` None
    judges everything but the capacity."""
    bufs = {b.name: b for b in graph.buffers}
    bad: list[tuple[str, str]] = []
    by: dict[str, Answer] = {}
    for a in answers:
        if a.name not in bufs:
            bad.append(("answers", f"{a.name!r} is not a buffer of {graph.label}"))
        elif a.name in by:
            bad.append(("answers", f"{a.name!r} is answered twice"))
        else:
            by[a.name] = a
    missing = [n for n in bufs if n not in by]
    if missing:
        bad.append(("answers", f"no answer for {', '.join(map(repr, missing))}"))
    fp: dict[str, int] = {}
    for name, a in by.items():
        b = bufs[name]
        if not 0 <= a.division < len(b.divisions):
            bad.append(("division", f"{name}: chosen_division {a.division} out of range 0..{len(b.divisions) - 1}"))
            continue
        if not a.resident:
            if a.address is not None:
                bad.append(("address", f"{name}: not resident but has address {a.address}"))
            continue
        if b.residency_reason is not None or b.size < 0:
            why = b.residency_reason if b.residency_reason is not None else "size unknown (-1)"
            bad.append(("eligibility", f"{name}: resident although it may not reside ({why})"))
            continue
        if a.address is None:
            bad.append(("address", f"{name}: resident without an address"))
            continue
        size = footprint(b.size, [f for _, f in b.divisions[a.division].output])
        if a.address < 0 or a.address % STICK:
            bad.append(("alignment", f"{name}: address {a.address} is not a non-negative multiple of {STICK}"))
        if capacity is not None and a.address + size > capacity // STICK * STICK:
            bad.append(("capacity", f"{name}: [{a.address}, {a.address + size}) exceeds capacity {capacity}"))
        fp[name] = size
    bad += _matches(graph, by, fp)
    bad += _overlaps(graph, by, fp)
    spill = sum(
        traffic(b.size, b.uses, b.boundary_cost != 0) for b in graph.buffers if b.name in by and b.name not in fp
    )
    height = max((by[n].address + s for n, s in fp.items()), default=0)
    unknown = tuple(b.name for b in graph.buffers if b.size < 0)
    order = {r: k for k, r in enumerate(RULES)}
    bad.sort(key=lambda v: order[v[0]])
    return Verdict(not bad, spill, height, tuple(bad), unknown)


def _matches(graph: CaptureGraph, by: dict[str, Answer], fp: dict[str, int]) -> list[tuple[str, str]]:
    """A resident parent's division must pair with every child's division in that child's match list."""
    out = []
    for c in graph.buffers:
        for p in dict.fromkeys(c.parents):
            if p not in fp or c.name not in by:
                continue
            pair = (by[p].division, by[c.name].division)
            if pair not in c.matches.get(p, frozenset()):
                out.append(("match", f"{p} is resident and the pair {pair} of {p} -> {c.name} is not in "
                                     f"{c.name}'s cd_parent_matches for {p}"))  # fmt: skip
    return out


def _overlaps(graph: CaptureGraph, by: dict[str, Answer], fp: dict[str, int]) -> list[tuple[str, str]]:
    bufs = {b.name: b for b in graph.buffers}
    live = {n: (bufs[n].uses[0], bufs[n].uses[-1] + 1) for n in fp}
    out = []
    shares_in: dict[str, list[str]] = {}
    shares_out: dict[str, list[str]] = {}
    names = sorted(fp, key=lambda n: (live[n][0], n))
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if live[b][0] >= live[a][1]:
                break
            lo_a, lo_b = by[a].address, by[b].address
            if not (lo_a < lo_b + fp[b] and lo_b < lo_a + fp[a]):
                continue
            parent, child = (a, b) if a in bufs[b].in_place_parents else (b, a)
            if parent not in bufs[child].in_place_parents or lo_a != lo_b:
                out.append(("overlap", f"{a} [{lo_a}, {lo_a + fp[a]}) and {b} [{lo_b}, {lo_b + fp[b]}) overlap "
                                       f"while both live (steps {max(live[a][0], live[b][0])}.."
                                       f"{min(live[a][1], live[b][1]) - 1})"))  # fmt: skip
                continue
            if fp[parent] != fp[child]:
                out.append(("in-place", f"{child} takes {parent}'s slot at {lo_a} with a footprint of "
                                        f"{fp[child]} bytes against {fp[parent]}"))  # fmt: skip
                continue
            pair = (by[parent].division, by[child].division)
            if pair not in bufs[child].matches.get(parent, frozenset()):
                out.append(("in-place", f"{child} takes {parent}'s slot under divisions {pair}, not a matching pair"))
                continue
            shares_in.setdefault(child, []).append(parent)
            shares_out.setdefault(parent, []).append(child)
    for child, parents in shares_in.items():
        if len(parents) > 1:
            out.append(("in-place", f"{child} takes the slots of {len(parents)} parents ({', '.join(parents)})"))
    for parent, children in shares_out.items():
        if len(children) > 1:
            out.append(("in-place", f"{parent} hands its slot to {len(children)} children ({', '.join(children)})"))
    return out
