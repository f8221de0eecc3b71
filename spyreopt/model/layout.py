"""Stick layouts: padding to whole sticks, device-memory address spans, contiguous runs.

A tensor with stick dim ``d`` is stored stick-tiled: ``[sticks(d), other dims in
order..., elements of one stick]``. So a split along the stick dim is a
contiguous range of whole tiles, and a split along any other dim is strided
across every tile: that is what makes the per-core span limit bite.
"""

from __future__ import annotations

from functools import lru_cache
from math import ceil, prod

Box = tuple[tuple[int, int], ...]  # per dim a half-open [lo, hi)


def elems_per_stick(elem_bytes: int, stick_bytes: int) -> int:
    return max(stick_bytes // elem_bytes, 1)


def num_sticks(extent: int, elem_bytes: int, stick_bytes: int) -> int:
    return ceil(extent * elem_bytes / stick_bytes)


def padded_bytes(extents: tuple[int, ...], stick_dim: int, elem_bytes: int, stick_bytes: int) -> int:
    """Bytes of a block of ``extents`` once its stick dim is padded to whole sticks."""
    other = prod(e for i, e in enumerate(extents) if i != stick_dim)
    return other * num_sticks(extents[stick_dim], elem_bytes, stick_bytes) * stick_bytes


def box_extents(box: Box) -> tuple[int, ...]:
    return tuple([hi - lo for lo, hi in box])  # a list first: a generator is slower on a handful of dims


@lru_cache(maxsize=1 << 16)
def box_padded_bytes(box: Box, stick_dim: int, elem_bytes: int, stick_bytes: int) -> int:
    return padded_bytes(box_extents(box), stick_dim, elem_bytes, stick_bytes)


def _address(index: tuple[int, ...], shape: tuple[int, ...], stick_dim: int, elem_bytes: int, stick_bytes: int) -> int:
    eps = elems_per_stick(elem_bytes, stick_bytes)
    outer = index[stick_dim] // eps
    linear = outer
    for i, (x, n) in enumerate(zip(index, shape)):
        if i != stick_dim:
            linear = linear * n + x
    return linear * stick_bytes + (index[stick_dim] % eps) * elem_bytes


def _aligned(box: Box, stick_dim: int, eps: int) -> tuple[tuple[int, ...], int]:
    """What spans and runs depend on: the extents and the offset of the stick dim within its stick."""
    return box_extents(box), box[stick_dim][0] % eps


def _box_at(extents: tuple[int, ...], offset: int, stick_dim: int) -> Box:
    return tuple((offset, offset + e) if d == stick_dim else (0, e) for d, e in enumerate(extents))


@lru_cache(maxsize=1 << 16)
def span_bytes(box: Box, shape: tuple[int, ...], stick_dim: int, elem_bytes: int, stick_bytes: int) -> int:
    """Device-memory address range a core touches to read or write ``box`` of the tensor (each core's box is
    checked for every layout that gives it that box: cached)."""
    ext, offset = _aligned(box, stick_dim, elems_per_stick(elem_bytes, stick_bytes))
    return _span(ext, offset, shape, stick_dim, elem_bytes, stick_bytes)


@lru_cache(maxsize=1 << 16)
def _span(ext: tuple[int, ...], offset: int, shape, stick_dim: int, elem_bytes: int, stick_bytes: int) -> int:
    box = _box_at(ext, offset, stick_dim)  # the span is the same wherever the box lies (same stick offset)
    first = _address(tuple(lo for lo, _ in box), shape, stick_dim, elem_bytes, stick_bytes)
    last = _address(tuple(hi - 1 for _, hi in box), shape, stick_dim, elem_bytes, stick_bytes)
    return last - first + elem_bytes


def contiguous_runs(part: Box, whole: Box, stick_dim: int, elem_bytes: int, stick_bytes: int) -> int:
    """How many contiguous runs ``part`` forms inside the stick-tiled layout of ``whole``."""
    eps = elems_per_stick(elem_bytes, stick_bytes)
    return _runs(*_aligned(part, stick_dim, eps), *_aligned(whole, stick_dim, eps), stick_dim, eps)


@lru_cache(maxsize=1 << 16)
def _runs(part_ext, part_offset: int, whole_ext, whole_offset: int, stick_dim: int, eps: int) -> int:
    part, whole = _box_at(part_ext, part_offset, stick_dim), _box_at(whole_ext, whole_offset, stick_dim)

    def units(box: Box, d: int) -> int:
        lo, hi = box[d]
        return ceil(hi / eps) - lo // eps if d == stick_dim else hi - lo

    order = [stick_dim] + [d for d in range(len(whole)) if d != stick_dim]
    runs = 1
    for pos in range(len(order) - 1, -1, -1):
        d = order[pos]
        if units(part, d) != units(whole, d):
            for outer in order[:pos]:
                runs *= units(part, outer)
            return runs
    return runs


def intersect(a: Box, b: Box) -> Box | None:
    out = tuple((max(x0, y0), min(x1, y1)) for (x0, x1), (y0, y1) in zip(a, b))
    return None if any(lo >= hi for lo, hi in out) else out
