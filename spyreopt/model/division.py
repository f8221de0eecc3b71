"""Work divisions: split factors per iteration dim, their legality, and per-core slices.

A division is legal when each factor divides its extent (the stick dim counted
in whole sticks), the product is at most the core count, at most one reduction
dim is split (only a matmul's k: it adds a partial-sum reduction) and every
tensor's per-core span is within the span limit (checked by the caller, which
knows the tensors' layouts).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from math import prod

from spyreopt.model.layout import Box
from spyreopt.model.opspace import OpSpace


@dataclass(frozen=True)
class Division:
    factors: tuple[int, ...]  # per iteration dim
    chunks: tuple[int, ...]  # elements per core along each dim (last chunk may be shorter)

    @property
    def cores(self) -> int:
        return prod(self.factors)

    def as_dict(self, space: OpSpace) -> dict[str, int]:
        return {name: f for name, f in zip(space.dims, self.factors)}


def label(division: dict[str, int]) -> str:
    """How a division reads everywhere (tables, plots, errors): ``d0:16 x d1:2``, ``b:16 x k:2``, or ``unsplit``.

    Named dims with a colon, so a split never reads as one long number (``d016xd12``).
    """
    return " x ".join(f"{d}:{f}" for d, f in division.items() if f > 1) or "unsplit"


def legal_factors(extent: int, unit: int) -> list[int]:
    """Factors that split ``extent`` into equal whole ``unit`` blocks (unit = elements per stick or 1)."""
    units = -(-extent // unit)
    return [f for f in range(1, units + 1) if units % f == 0]


def enumerate_divisions(space: OpSpace, units: tuple[int, ...], cores: int) -> list[Division]:
    """Every division with legal factors, product <= cores, and at most one reduction split."""
    options = []
    for extent, unit, red, splittable in zip(space.extents, units, space.reduction, space.splittable_reduction):
        if red and not splittable:
            options.append([1])
        else:
            options.append([f for f in legal_factors(extent, unit) if f <= cores])
    out = []
    for factors in product(*options):
        if prod(factors) > cores:
            continue
        if sum(1 for f, red in zip(factors, space.reduction) if red and f > 1) > 1:
            continue
        chunks = tuple((-(-e // u) // f) * u for e, u, f in zip(space.extents, units, factors))
        out.append(Division(tuple(factors), chunks))
    return out


def core_index(div: Division, core: int) -> tuple[int, ...]:
    """Row-major multi-index of a core over the division's factors."""
    idx = []
    for f in reversed(div.factors):
        idx.append(core % f)
        core //= f
    return tuple(reversed(idx))


def iteration_box(space: OpSpace, div: Division, core: int) -> Box:
    return tuple(
        (i * c, min((i + 1) * c, e)) for i, c, e in zip(core_index(div, core), div.chunks, space.extents)
    )


def project(box: Box, dim_map: tuple[int | None, ...]) -> Box:
    """An operand's (or the output's) slice of an iteration box; broadcast dims read their one element."""
    return tuple((0, 1) if d is None else box[d] for d in dim_map)


def owners(space: OpSpace, div: Division) -> list[int]:
    """Cores that hold a final output slice: a k-split reduces partial sums onto k-index 0."""
    return [
        c
        for c in range(div.cores)
        if all(i == 0 for i, red in zip(core_index(div, c), space.reduction) if red)
    ]


def reduction_split(space: OpSpace, div: Division) -> int:
    return prod(f for f, red in zip(div.factors, space.reduction) if red)
