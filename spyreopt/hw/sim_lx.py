"""What every core's scratchpad holds, address by address, and the checks on it.

An entry is a slice (tensor, box, stick layout) at ``[lo, hi)`` on one core,
live until its free step. Writes must be stick-aligned, inside the planner's
region and clear of every live entry; reads must find exactly the slice they
need at the address. Every rejection names op, buffer, core, address and step.
"""

from __future__ import annotations

from dataclasses import dataclass

from spyreopt.errors import PlanError
from spyreopt.model.layout import Box


@dataclass(frozen=True)
class Entry:
    label: str  # "tensor 'x'" or "copy of 'x' for 'op'"
    tensor: str
    box: Box
    stick: int
    lo: int
    hi: int
    free_step: int  # released before this step


def _where(op: str, step: int, core: int) -> str:
    return f"op {op!r} at step {step}, core {core}"


class ScratchpadState:
    def __init__(self, cores: int, capacity: int, alignment: int):
        self.capacity, self.alignment = capacity, alignment
        self.entries: list[list[Entry]] = [[] for _ in range(cores)]
        self.reserved = [0] * cores  # bytes a tiled loop holds without a plan address (staged copies, prefetch)

    def used(self, core: int) -> int:
        return sum(e.hi - e.lo for e in self.entries[core]) + self.reserved[core]

    def reserve(self, core: int, nbytes: int, what: str) -> None:
        """Hold ``nbytes`` on ``core`` for a buffer the plan gives no address (a loop's staged tensor or an
        accumulator kept only on chip): PlanError if it does not fit beside what is live."""
        if self.used(core) + nbytes > self.capacity:
            raise PlanError(
                f"core {core}: {what} needs {nbytes} bytes, but {self.used(core)} of the {self.capacity}-byte "
                f"scratchpad are live"
            )
        self.reserved[core] += nbytes

    def unreserve(self, core: int, nbytes: int) -> None:
        self.reserved[core] -= nbytes

    def drop(self, tensors: set[str]) -> None:
        """Free every entry holding one of ``tensors`` (a loop's tile buffers before the next tile lands)."""
        for core, live in enumerate(self.entries):
            self.entries[core] = [e for e in live if e.tensor not in tensors]

    def release(self, step: int) -> None:
        """Free every entry whose lifetime ended before ``step``."""
        for core, live in enumerate(self.entries):
            self.entries[core] = [e for e in live if e.free_step > step]

    def write(self, core: int, entry: Entry, op: str, step: int) -> None:
        where = _where(op, step, core)
        if entry.lo is None:
            raise PlanError(f"{where}: {entry.label} is resident but has no scratchpad address")
        if entry.lo % self.alignment:
            raise PlanError(
                f"{where}: {entry.label} at address {entry.lo} is not a multiple of the {self.alignment}-byte stick"
            )
        if entry.lo < 0 or entry.hi > self.capacity:
            raise PlanError(
                f"{where}: {entry.label} at [{entry.lo}, {entry.hi}) lies outside the scratchpad "
                f"(planner capacity {self.capacity} bytes)"
            )
        if self.reserved[core] and self.used(core) + entry.hi - entry.lo > self.capacity:
            raise PlanError(
                f"{where}: writing {entry.label} ({entry.hi - entry.lo} bytes) overflows the scratchpad: "
                f"{self.used(core)} bytes live, {self.reserved[core]} of them held by a loop without an address"
            )
        for e in self.entries[core]:
            if e.lo < entry.hi and entry.lo < e.hi:
                raise PlanError(
                    f"{where}: writing {entry.label} at [{entry.lo}, {entry.hi}) overwrites live {e.label} "
                    f"at [{e.lo}, {e.hi}) (live until step {e.free_step})"
                )
        self.entries[core].append(entry)

    def take(self, core: int, address: int | None, tensor: str, box: Box, step: int) -> Entry | None:
        """Remove and return the entry holding exactly ``box`` of ``tensor`` at ``address`` on ``core`` when it
        dies at ``step`` (its last reader runs there), else None: what an in-place write may overwrite."""
        for n, e in enumerate(self.entries[core]):
            if e.lo == address and e.tensor == tensor and e.box == box and e.free_step == step + 1:
                return self.entries[core].pop(n)
        return None

    def read(
        self, core: int, address: int | None, tensor: str, box: Box, stick: int, op: str, step: int, what: str
    ) -> Entry:
        """The entry holding exactly ``box`` of ``tensor`` at ``address`` on ``core``, or PlanError."""
        where = _where(op, step, core)
        if address is None:
            raise PlanError(f"{where}: reads {what} from scratchpad, but it has no scratchpad address")
        for e in self.entries[core]:
            if e.lo == address and e.tensor == tensor and e.box == box:
                if e.stick != stick:
                    raise PlanError(
                        f"{where}: {what} at address {address} is stored with stick dim {e.stick}, the op needs stick dim {stick}"
                    )
                return e
        there = [e for e in self.entries[core] if e.lo <= address < e.hi]
        held = (
            f"{there[0].label} box {list(there[0].box)} at [{there[0].lo}, {there[0].hi})" if there else "nothing live"
        )
        raise PlanError(f"{where}: reads {what} box {list(box)} at address {address}, but the scratchpad holds {held}")
