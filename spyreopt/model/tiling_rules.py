"""The tiling attribute of a layout and its legality rules (shared by candidates and the loop planner).

A tiled layout runs its op inside a loop over ``tiles`` tiles of iteration dim
``dim``: tile ``t`` of extent ``E`` is ``[t*E/T, (t+1)*E/T)`` and the layout's
core division applies within each tile.
"""

from __future__ import annotations

from dataclasses import dataclass

from spyreopt.model.layout import Box
from spyreopt.model.opspace import OpSpace

TILE_COUNTS = (2, 4, 8, 16, 32, 64)  # powers of two up to a cap: enough range, few candidates


@dataclass(frozen=True)
class Tile:
    dim: int  # iteration dim index (``OpSpace.dims``)
    tiles: int
    base: int  # index of the untiled layout this one tiles (same division and stick)
    accumulate: bool  # the dim is a reduction (a matmul's k): the output is an on-chip accumulator
    staged: bool = False  # the operands without the tiled dim are loaded on chip once, not re-read per tile
    tile_bytes: int = 0  # per core: one tile of the output (the whole slice for an accumulator)
    staged_parts: tuple[tuple[str, int], ...] = ()  # per staged tensor, its bytes per core (held for the loop)

    @property
    def staged_bytes(self) -> int:
        return sum(b for _, b in self.staged_parts)


def invariant(space: OpSpace, tile: Tile, j: int) -> bool:
    """Operand j does not vary with the tile: every iteration reads all of it (or it is staged)."""
    return tile.dim not in space.operand_maps[j]


def first_tile(box: Box, dim: int, tiles: int) -> Box:
    """A core's block in tile 0 along ``dim`` (tiles are equal, whole-stick blocks, so every tile's block is
    this one shifted: same runs, same DMA requests)."""
    lo, hi = box[dim]
    return box[:dim] + ((lo // tiles, hi // tiles),) + box[dim + 1 :]


def rereads(space: OpSpace, tile: Tile | None, j: int) -> int:
    """How many times a tiled op reads operand j from device memory: every iteration unless it varies with
    the tile (one tile each) or is staged (loaded once)."""
    return tile.tiles if tile is not None and not tile.staged and invariant(space, tile, j) else 1


def tile_reason(space: OpSpace, kind: str, factors: tuple[int, ...], units: tuple[int, ...], dim: int, tiles: int):
    """Why ``tiles`` tiles of iteration dim ``dim`` are illegal for a division, or None when legal.

    The extent must split into ``tiles`` x ``parts`` equal blocks of whole split units (sticks on a stick
    dim); only a matmul may tile its reduction (with an accumulator), and then not also split it over cores.
    """
    name = space.dims[dim]
    if kind in ("reshape", "view"):
        return f"a {kind} is not tiled"
    if space.reduction[dim] and kind != "matmul":
        return f"dim {name} is reduced by a {kind}: only a matmul accumulates over a tiled reduction"
    extent, unit, parts = space.extents[dim], units[dim], factors[dim]
    if tiles < 2 or extent % (tiles * parts * unit):
        what = f"{tiles} tiles x {parts} parts" + (f" of whole {unit}-element sticks" if unit > 1 else "")
        return f"extent {extent} of dim {name} does not split into {what}"
    return None
