"""Work divisions: split factors per iteration dim, their legality, and per-core slices.

A factor ``f`` splits a dim of ``U`` units (whole sticks on a dim some tensor is
stuck on, else elements) into parts of ``ceil(U/f)`` units, the last one shorter
when ``f`` does not divide ``U``. A factor is legal when it divides ``U`` (even
parts), or when it is a power of two up to the core count (or the core count)
whose parts are all non-empty (``ceil(U / ceil(U/f)) == f``): a dim of 769
sticks (Granite's vocabulary) has only 1 and 769 as divisors, yet 16 parts of 49
sticks (the last 34) split it. Powers of two divide any power-of-two extent, so
such shapes get exactly the candidates they had, and other extents gain at most
``log2(cores) + 1`` factors per dim (a 3- or 7-way uneven split is not offered,
nor accepted as a pin). A division is legal when every factor is, the product
is at most the core count, at most one reduction dim is split (only a matmul's
k: it adds a partial-sum reduction) and every tensor's per-core span is within
the span limit (checked by the caller, which knows the tensors' layouts).

Costs take the largest part (core 0's), which sets the op's time; bytes moved
and written count every part as it is. The simulator (``hw.sim_slices``) slices
the same way and accepts any factor that leaves no part empty.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from math import prod

from spyreopt.errors import PlanError
from spyreopt.model.layout import Box
from spyreopt.model.opspace import OpSpace


@dataclass(frozen=True)
class Division:
    factors: tuple[int, ...]  # per iteration dim
    chunks: tuple[int, ...]  # elements per core along each dim (the last part may be shorter)

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


def parse_label(text: str, dims: tuple[str, ...]) -> tuple[int, ...]:
    """The factors of a division written as ``label`` writes it (for pins: ``"b:16 x k:2"``), in ``dims`` order."""
    factors = dict.fromkeys(dims, 1)
    for part in [] if text.strip() == "unsplit" else text.split(" x "):
        name, sep, value = part.strip().partition(":")
        if not sep or name not in factors or not value.isdigit() or int(value) < 1:
            raise PlanError(f"division {text!r}: {part.strip()!r} is not dim:factor over the dims {list(dims)}")
        factors[name] = int(value)
    return tuple(factors.values())


def chunk(extent: int, unit: int, factor: int) -> int:
    """Elements per part when ``factor`` splits ``extent`` in whole ``unit`` blocks (unit = elements per stick
    or 1): ``ceil(units / factor)`` units, the last part shorter."""
    units = -(-extent // unit)
    return -(-units // factor) * unit


def fills(extent: int, unit: int, factor: int) -> bool:
    """Whether ``factor`` parts of ``chunk`` elements each hold some of ``extent`` (no part is empty)."""
    units = -(-extent // unit)
    return 1 <= factor <= units and -(-units // (chunk(extent, unit, factor) // unit)) == factor


def legal_factors(extent: int, unit: int, cores: int) -> list[int]:
    """The factors the enumeration offers a dim: the divisors of its unit count up to ``cores``, and the
    powers of two up to ``cores`` (and ``cores``) that leave no part empty."""
    units = -(-extent // unit)
    even = {f for f in range(1, min(units, cores) + 1) if units % f == 0}
    powers = {1 << i for i in range(cores.bit_length()) if 1 << i <= cores} | {cores}
    return sorted(even | {f for f in powers if fills(extent, unit, f)})


def enumerate_divisions(space: OpSpace, units: tuple[int, ...], cores: int) -> list[Division]:
    """Every division with offered factors, product <= cores, and at most one reduction split."""
    options = []
    for extent, unit, red, splittable in zip(space.extents, units, space.reduction, space.splittable_reduction):
        if red and not splittable:
            options.append([1])
        else:
            options.append(legal_factors(extent, unit, cores))
    out = []
    for factors in product(*options):
        if prod(factors) > cores:
            continue
        if sum(1 for f, red in zip(factors, space.reduction) if red and f > 1) > 1:
            continue
        chunks = tuple(chunk(e, u, f) for e, u, f in zip(space.extents, units, factors))
        out.append(Division(tuple(factors), chunks))
    return out


def largest(space: OpSpace, div: Division) -> tuple[int, ...]:
    """Elements of the largest part along each dim (core 0's): the slice that sets the op's time."""
    return tuple(min(c, e) for c, e in zip(div.chunks, space.extents))


def core_index(div: Division, core: int) -> tuple[int, ...]:
    """Row-major multi-index of a core over the division's factors."""
    idx = []
    for f in reversed(div.factors):
        idx.append(core % f)
        core //= f
    return tuple(reversed(idx))


def iteration_box(space: OpSpace, div: Division, core: int) -> Box:
    return tuple((i * c, min((i + 1) * c, e)) for i, c, e in zip(core_index(div, core), div.chunks, space.extents))


def project(box: Box, dim_map: tuple[int | None, ...]) -> Box:
    """An operand's (or the output's) slice of an iteration box; broadcast dims read their one element."""
    return tuple((0, 1) if d is None else box[d] for d in dim_map)


def owners(space: OpSpace, div: Division) -> list[int]:
    """Cores that hold a final output slice: a k-split reduces partial sums onto k-index 0."""
    return [c for c in range(div.cores) if all(i == 0 for i, red in zip(core_index(div, c), space.reduction) if red)]


def reduction_split(space: OpSpace, div: Division) -> int:
    return prod(f for f, red in zip(div.factors, space.reduction) if red)
