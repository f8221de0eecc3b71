"""Values in scratchpad, stick by stick: the stick-tiled encoding of a slice and
per-core scratchpads that hold raw sticks at addresses.

A slice with stick dim ``d`` is stored as ``[sticks(d), other dims in order...,
elements of one stick]`` (``model.layout``), padded to whole sticks. A reader
decodes whatever sticks sit at an address with the box and stick it expects:
a plan that put a different slice there reads wrong numbers, as on the device.
"""

from __future__ import annotations

import numpy as np

from spyreopt.errors import PlanError


def encode(values: np.ndarray, stick: int, eps: int) -> np.ndarray:
    """[n_sticks, eps] rows of a slice in stick-tiled order (zero padding in the last stick)."""
    ext = values.shape
    s = -(-ext[stick] // eps)
    pad = [(0, 0)] * values.ndim
    pad[stick] = (0, s * eps - ext[stick])
    a = np.pad(values, pad).reshape(ext[:stick] + (s, eps) + ext[stick + 1 :])
    others = [d if d < stick else d + 1 for d in range(values.ndim) if d != stick]
    return a.transpose([stick] + others + [stick + 1]).reshape(-1, eps)


def decode(rows: np.ndarray, extents: tuple[int, ...], stick: int, eps: int) -> np.ndarray:
    """The slice of ``extents`` read back from stick-tiled rows."""
    n = len(extents)
    s = -(-extents[stick] // eps)
    others = [extents[d] for d in range(n) if d != stick]
    a = rows.reshape([s] + others + [eps])
    # axes of a: 0 = stick tile, 1..n-1 = other dims in order, n = within-stick
    perm = list(range(1, stick + 1)) + [0, n] + list(range(stick + 1, n))
    padded = extents[:stick] + (s * eps,) + extents[stick + 1 :]
    full = a.transpose(perm).reshape(padded)
    return full[tuple(slice(0, e) for e in extents)]


class RawScratchpad:
    """Each core's planner region as rows of sticks (float32 values, NaN where never written)."""

    def __init__(self, cores: int, capacity: int, stick_bytes: int, width: int):
        self.cores, self.sb, self.width = cores, stick_bytes, width
        self.rows = capacity // stick_bytes
        self._mem: dict[int, np.ndarray] = {}

    def _core(self, core: int) -> np.ndarray:
        if core not in self._mem:
            self._mem[core] = np.full((self.rows, self.width), np.nan, dtype=np.float32)
        return self._mem[core]

    def _span(self, core: int, address: int | None, n: int, what: str) -> slice:
        if address is None:
            raise PlanError(f"core {core}: {what} has no scratchpad address")
        if address % self.sb:
            raise PlanError(f"core {core}: {what} at address {address} is not a multiple of the {self.sb}-byte stick")
        lo = address // self.sb
        if lo < 0 or lo + n > self.rows:
            raise PlanError(
                f"core {core}: {what} at [{address}, {address + n * self.sb}) lies outside the scratchpad "
                f"({self.rows * self.sb} bytes)"
            )
        return slice(lo, lo + n)

    def write(self, core: int, address: int | None, values: np.ndarray, stick: int, eps: int, what: str) -> None:
        rows = encode(values, stick, eps)
        self._core(core)[self._span(core, address, len(rows), what), :eps] = rows

    def read(
        self, core: int, address: int | None, extents: tuple[int, ...], stick: int, eps: int, what: str
    ) -> np.ndarray:
        n = -(-extents[stick] // eps)
        for d, e in enumerate(extents):
            if d != stick:
                n *= e
        return decode(self._core(core)[self._span(core, address, n, what), :eps], extents, stick, eps)
