"""Independent check of a placement: shares no code with the methods it checks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from spyreopt.solvers.placement.types import Buffer

KINDS = ("missing_offset", "moved_preplaced", "out_of_range", "overlap", "misaligned", "wrong_height")


@dataclass(frozen=True)
class ValidationIssue:
    """One broken rule: its kind (one of KINDS), the buffer ids involved, and a readable message."""

    kind: str
    ids: tuple[str, ...]
    message: str


def validate(
    buffers: Sequence[Buffer],
    offsets: Mapping[str, int],
    capacity: int,
    reported_height: int | None = None,
) -> list[ValidationIssue]:
    """Every rule the placement breaks; an empty list means it is valid."""
    issues: list[ValidationIssue] = []
    placed: list[tuple[Buffer, int]] = []
    for b in buffers:
        off = offsets.get(b.id)
        if off is None:
            issues.append(ValidationIssue("missing_offset", (b.id,), f"buffer {b.id!r} has no offset"))
            continue
        placed.append((b, off))
        if b.offset is not None and off != b.offset:
            issues.append(
                ValidationIssue("moved_preplaced", (b.id,), f"buffer {b.id!r} is pre-placed at {b.offset}, got {off}")
            )
        if off < 0 or off + b.size > capacity:
            issues.append(
                ValidationIssue(
                    "out_of_range",
                    (b.id,),
                    f"buffer {b.id!r} occupies [{off}, {off + b.size}), outside [0, {capacity})",
                )
            )
        if off % b.alignment:
            issues.append(
                ValidationIssue(
                    "misaligned", (b.id,), f"buffer {b.id!r} at offset {off} is not a multiple of {b.alignment}"
                )
            )
    issues.extend(_overlaps(placed))
    if reported_height is not None:
        height = max((off + b.size for b, off in placed), default=0)
        if height != reported_height:
            issues.append(
                ValidationIssue(
                    "wrong_height",
                    (),
                    f"reported height {reported_height} but the highest buffer ends at {height}",
                )
            )
    return issues


def _overlaps(placed: list[tuple[Buffer, int]]) -> list[ValidationIssue]:
    """Pairs live at the same time whose address ranges intersect (sweep over start times)."""
    issues = []
    active: list[tuple[Buffer, int]] = []
    for b, off in sorted(placed, key=lambda p: (p[0].lower, p[0].id)):
        active = [(a, o) for a, o in active if a.upper > b.lower]
        for a, o in active:
            if o < off + b.size and off < o + a.size:
                issues.append(
                    ValidationIssue(
                        "overlap",
                        (a.id, b.id),
                        f"buffers {a.id!r} [{o}, {o + a.size}) and {b.id!r} [{off}, {off + b.size}) "
                        f"overlap while both live in [{max(a.lower, b.lower)}, {min(a.upper, b.upper)})",
                    )
                )
        active.append((b, off))
    return issues
