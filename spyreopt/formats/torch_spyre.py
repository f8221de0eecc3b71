"""torch-spyre co-optimiser captures: read and check them, write answers in their ``solved`` form.

A capture file is ``{case: [graph, ...]}``; a graph is ``{"inputs": [buffer, ...], "solved": [answer, ...]}``
as torch-spyre's test suite dumps the buffers its ``CoOptimizingAllocator`` hands to its solver
(``docs/torch-spyre.md`` lists every field, every rule and where each rule comes from). This module is
only the format: ``read_captures`` checks a document into plain data (``CaptureGraph``), a
``FormatError`` naming the case, graph, buffer and field otherwise; ``to_solved`` writes answers back.
The Formulation these graphs compile into is ``formats.torch_spyre_model``; the judge of an answer,
written from the rules alone, is ``formats.torch_spyre_judge``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from math import prod
from os import PathLike
from pathlib import Path
from typing import Any

from spyreopt.errors import FormatError

PLANNING_SHARE = 1_625_344
"""torch-spyre's planning share of one core's 2 MiB scratchpad, in bytes."""


@dataclass(frozen=True)
class Division:
    """One candidate core division of a buffer's producing op: (stride, factor) pairs as in the capture."""

    output: tuple[tuple[int, int], ...]
    reduction: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class CaptureBuffer:
    """One buffer of a graph, exactly as the capture gives it (``size`` -1: unknown to the capture)."""

    name: str
    size: int
    uses: tuple[int, ...]
    first_use_is_read: bool
    in_place_parents: tuple[str, ...]
    residency_reason: str | None
    boundary_cost: int
    parents: tuple[str, ...]
    divisions: tuple[Division, ...]
    matches: dict[str, frozenset[tuple[int, int]]]  # parent -> {(parent division, this division)}


def cores(b: CaptureBuffer, d: int) -> int:
    """Cores the producing op runs on under division ``d`` (output and reduction splits)."""
    div = b.divisions[d]
    return prod(f for _, f in div.output) * prod(f for _, f in div.reduction)


@dataclass(frozen=True)
class Answer:
    """One buffer's entry of a ``solved`` list."""

    name: str
    division: int
    address: int | None
    resident: bool


@dataclass(frozen=True)
class CaptureGraph:
    case: str
    index: int
    buffers: tuple[CaptureBuffer, ...]
    reference: tuple[Answer, ...] | None  # None when the capture carries no answer (an empty ``solved``)

    @property
    def label(self) -> str:
        return f"{self.case}[{self.index}]"

    def by_name(self) -> dict[str, int]:
        return {b.name: i for i, b in enumerate(self.buffers)}


# ---- reading ---------------------------------------------------------------------
def read_captures(source: str | PathLike | dict) -> list[CaptureGraph]:
    """Every graph of a capture file (path or parsed document), in file order, checked."""
    where = "captures"
    if not isinstance(source, dict):
        where = str(source)
        try:
            source = json.loads(Path(source).read_text())
        except OSError as exc:
            raise FormatError(f"{where}: cannot read: {exc}") from exc
        except json.JSONDecodeError as exc:
            raise FormatError(f"{where}: not valid JSON: {exc}") from exc
    if not isinstance(source, dict) or not source:
        raise FormatError(f"{where}: expected an object {{case: [graph, ...]}} with at least one case")
    graphs = []
    for case, items in source.items():
        if not isinstance(items, list):
            raise FormatError(f"{where}: case {case!r}: expected a list of graphs, got {type(items).__name__}")
        for index, g in enumerate(items):
            graphs.append(_graph(g, case, index, f"{where}: case {case!r} graph {index}"))
    return graphs


def _graph(g: Any, case: str, index: int, where: str) -> CaptureGraph:
    if not isinstance(g, dict):
        raise FormatError(f"{where}: expected an object with 'inputs' and 'solved'")
    raw = _field(g, "inputs", list, where)
    if not raw:
        raise FormatError(f"{where}: field inputs: no buffers")
    buffers = [_buffer(b, f"{where} buffer {i}") for i, b in enumerate(raw)]
    names = [b.name for b in buffers]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise FormatError(f"{where} buffer {dup!r}: field name: appears twice in the graph")
    by = {b.name: b for b in buffers}
    for b in buffers:
        _cross_check(b, by, f"{where} buffer {b.name!r}")
    solved = g.get("solved", [])
    if not isinstance(solved, list):
        raise FormatError(f"{where}: field solved: expected a list, got {type(solved).__name__}")
    reference = tuple(_answer(a, f"{where} answer {i}") for i, a in enumerate(solved)) if solved else None
    return CaptureGraph(case, index, tuple(buffers), reference)


def _buffer(b: Any, where: str) -> CaptureBuffer:
    if not isinstance(b, dict):
        raise FormatError(f"{where}: expected an object, got {type(b).__name__}")
    name = _field(b, "name", str, where)
    where = f"{where.rsplit(' buffer ', 1)[0]} buffer {name!r}"
    size = _int(_field(b, "size", int, where), "size", where)
    if size <= 0 and size != -1:
        raise FormatError(f"{where}: field size: {size} is neither a positive byte count nor -1 (unknown)")
    uses = tuple(_int(u, "uses", where) for u in _field(b, "uses", list, where))
    if not uses:
        raise FormatError(f"{where}: field uses: empty; a buffer is live from its first use")
    if any(u < 0 for u in uses) or any(a >= b2 for a, b2 in zip(uses, uses[1:])):
        raise FormatError(f"{where}: field uses: {list(uses)} is not strictly increasing non-negative op steps")
    divisions = tuple(_division(d, f"{where}: field core_divisions[{k}]") for k, d in
                      enumerate(_field(b, "core_divisions", list, where)))  # fmt: skip
    if not divisions:  # placement only: torch-spyre's footprint is then the whole size (``min_footprint``)
        divisions = (Division((), ()),)
    reason = b.get("residency_reason")
    if reason is not None and not isinstance(reason, str):
        raise FormatError(f"{where}: field residency_reason: expected a string or null, got {reason!r}")
    first = _field(b, "first_use_is_read", bool, where)
    matches_raw = _field({"cd_parent_matches": {}, **b}, "cd_parent_matches", dict, where)  # absent: no pair
    matches = {}
    for parent, pairs in matches_raw.items():
        at = f"{where}: field cd_parent_matches[{parent!r}]"
        if not isinstance(pairs, list):
            raise FormatError(f"{at}: expected a list of [parent_division, this_division] pairs")
        got = set()
        for pair in pairs:
            if not (isinstance(pair, list) and len(pair) == 2):
                raise FormatError(f"{at}: {pair!r} is not a [parent_division, this_division] pair")
            pd, cd = (_int(x, f"cd_parent_matches[{parent!r}]", where) for x in pair)
            if not 0 <= cd < len(divisions):
                raise FormatError(f"{at}: this division index {cd} out of range 0..{len(divisions) - 1}")
            got.add((pd, cd))
        matches[parent] = frozenset(got)
    return CaptureBuffer(
        name=name,
        size=size,
        uses=uses,
        first_use_is_read=first,
        in_place_parents=tuple(_names(b, "in_place_parents", where)),
        residency_reason=reason,
        boundary_cost=_int(_field(b, "boundary_cost", int, where), "boundary_cost", where),
        parents=tuple(_names(b, "parents", where)),
        divisions=divisions,
        matches=matches,
    )


def _cross_check(b: CaptureBuffer, by: dict[str, CaptureBuffer], where: str) -> None:
    """References between buffers: match keys and in-place parents are parents; indices fit the parent's
    menu; an in-place parent in the graph dies as its child is born and is read before it hands over
    (torch-spyre's ``_check_in_place_relationships`` and ``check_in_place_parent_is_read``)."""
    if b.name in b.parents:
        raise FormatError(f"{where}: field parents: the buffer lists itself")
    for parent, pairs in b.matches.items():
        if parent not in b.parents:
            raise FormatError(f"{where}: field cd_parent_matches: {parent!r} is not one of its parents")
        if parent in by:
            n = len(by[parent].divisions)
            bad = next((pd for pd, _ in sorted(pairs) if not 0 <= pd < n), None)
            if bad is not None:
                raise FormatError(
                    f"{where}: field cd_parent_matches[{parent!r}]: parent division index {bad} out of range 0..{n - 1}"
                )
    for parent in b.in_place_parents:
        if parent not in b.parents:
            raise FormatError(f"{where}: field in_place_parents: {parent!r} is not one of its parents")
        p = by.get(parent)
        if p is None:
            continue  # outside the problem, as torch-spyre skips it
        if p.uses[-1] != b.uses[0]:
            raise FormatError(
                f"{where}: field in_place_parents: {parent!r} last used at step {p.uses[-1]}, but an "
                f"in-place child must be born at its parent's last use (first use {b.uses[0]})"
            )
        if not (p.first_use_is_read or len(p.uses) > 1):
            raise FormatError(f"{where}: field in_place_parents: {parent!r} is computed and never read")


def _division(d: Any, where: str) -> Division:
    if not isinstance(d, dict):
        raise FormatError(f"{where}: expected an object with output_splits and reduction_splits")
    parts = []
    for key in ("output_splits", "reduction_splits"):
        splits = d.get(key, {})
        if not isinstance(splits, dict):
            raise FormatError(f"{where}.{key}: expected an object {{stride: factor}}")
        items = []
        for stride, factor in splits.items():
            try:
                s = int(stride)
            except ValueError:
                raise FormatError(f"{where}.{key}: stride {stride!r} is not an integer") from None
            if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
                raise FormatError(f"{where}.{key}[{stride}]: factor {factor!r} is not a positive integer")
            items.append((s, factor))
        parts.append(tuple(items))
    return Division(*parts)


def _answer(a: Any, where: str) -> Answer:
    if not isinstance(a, dict):
        raise FormatError(f"{where}: expected an object, got {type(a).__name__}")
    name = _field(a, "name", str, where)
    where = f"{where.rsplit(' answer ', 1)[0]} answer {name!r}"
    division = a.get("chosen_division", 0)
    division = 0 if division is None else _int(division, "chosen_division", where)  # None: the committed one
    address = a.get("address")
    if address is not None:
        address = _int(address, "address", where)
    return Answer(name, division, address, _field(a, "resident", bool, where))


def _field(d: dict, key: str, kind: type, where: str) -> Any:
    if key not in d:
        raise FormatError(f"{where}: field {key}: missing")
    value = d[key]
    ok = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
    if not ok:
        raise FormatError(f"{where}: field {key}: expected {kind.__name__}, got {value!r}")
    return value


def _int(x: Any, key: str, where: str) -> int:
    if isinstance(x, bool) or not isinstance(x, int):
        raise FormatError(f"{where}: field {key}: expected an integer, got {x!r}")
    return x


def _names(b: dict, key: str, where: str) -> list[str]:
    names = _field({key: [], **b}, key, list, where)  # absent: none
    if not all(isinstance(n, str) for n in names):
        raise FormatError(f"{where}: field {key}: expected a list of buffer names, got {names!r}")
    return names


# ---- writing ---------------------------------------------------------------------
def to_solved(answers: list[Answer] | tuple[Answer, ...]) -> list[dict]:
    """A graph's ``solved`` list exactly as the captures write it."""
    return [
        {"name": a.name, "chosen_division": a.division, "address": a.address, "resident": a.resident} for a in answers
    ]


def write_solved(source: dict, solved: dict[tuple[str, int], list[Answer]], path: str | PathLike) -> None:
    """The capture document with each solved graph's ``solved`` list replaced by ours; loads as a capture."""
    out = {case: [dict(g) for g in graphs] for case, graphs in source.items()}
    for (case, index), answers in solved.items():
        out[case][index]["solved"] = to_solved(answers)
    Path(path).write_text(json.dumps(out, indent=1) + "\n")
