"""MiniMalloc CSV: `id,lower,upper,size[,alignment][,offset]`, or `end` (inclusive) instead of `upper`."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from os import PathLike
from pathlib import Path

from spyreopt.solvers.placement.types import Buffer, PlacementInputError


def read_csv(path_or_text: str | PathLike[str]) -> list[Buffer]:
    """Buffers from a CSV file, or from CSV text when given a string containing a newline."""
    if isinstance(path_or_text, str) and "\n" in path_or_text:
        text, source = path_or_text, "CSV text"
    else:
        path = Path(path_or_text)
        try:
            text = path.read_text()
        except OSError as e:
            raise PlacementInputError(f"cannot read {path}: {e.strerror}") from e
        source = str(path)
    return _parse(text, source)


def _parse(text: str, source: str) -> list[Buffer]:
    rows = csv.reader(io.StringIO(text))
    header = next(rows, None)
    if header is None:
        raise PlacementInputError(f"{source}: empty file, expected a header id,lower,upper,size")
    columns = {name.strip().lower(): k for k, name in enumerate(header)}
    inclusive = "upper" not in columns and "end" in columns
    upper_col = "end" if inclusive else "upper"
    for required in ("id", "lower", upper_col, "size"):
        if required not in columns:
            raise PlacementInputError(f"{source}: header has no {required!r} column (got {','.join(header)})")
    buffers: list[Buffer] = []
    seen: set[str] = set()
    for line, row in enumerate(rows, start=2):
        if not any(cell.strip() for cell in row):
            continue

        def field(name: str, row=row, line=line) -> str:
            k = columns.get(name)
            return row[k].strip() if k is not None and k < len(row) else ""

        def integer(name: str, field=field, line=line) -> int:
            value = field(name)
            try:
                return int(value)
            except ValueError:
                raise PlacementInputError(
                    f"{source}: row {line}, field {name!r}: expected an integer, got {value!r}"
                ) from None

        ident = field("id")
        if not ident:
            raise PlacementInputError(f"{source}: row {line}, field 'id': missing")
        if ident in seen:
            raise PlacementInputError(f"{source}: row {line}, field 'id': duplicate id {ident!r}")
        seen.add(ident)
        upper = integer(upper_col) + (1 if inclusive else 0)
        alignment = integer("alignment") if field("alignment") else 1
        offset = integer("offset") if field("offset") else None
        try:
            buffers.append(Buffer(ident, integer("lower"), upper, integer("size"), alignment, offset))
        except PlacementInputError as e:
            raise PlacementInputError(f"{source}: row {line}: {e}") from None
    return buffers


def write_csv(buffers: Sequence[Buffer], offsets: Mapping[str, int], path: str | PathLike[str]) -> None:
    """The buffers with an `offset` column; `alignment` is written only when some buffer needs it."""
    with_alignment = any(b.alignment != 1 for b in buffers)
    with open(path, "w", newline="") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(["id", "lower", "upper", "size"] + (["alignment"] if with_alignment else []) + ["offset"])
        for b in buffers:
            extra = [b.alignment] if with_alignment else []
            out.writerow([b.id, b.lower, b.upper, b.size, *extra, offsets[b.id]])
