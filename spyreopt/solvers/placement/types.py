"""The placement problem's vocabulary: buffers in, offsets out.

Kept free of solver code so that every method, the validator and the CSV
reader share one definition of what a legal buffer is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Integral
from typing import Literal

from spyreopt.errors import FormatError

Status = Literal["placed", "infeasible", "timeout"]


class PlacementInputError(FormatError):
    """Malformed placement input; the message names the buffer (or CSV row) and the field."""


@dataclass(frozen=True)
class Buffer:
    """A buffer live over the half-open time range [lower, upper), needing `size` bytes.

    `offset` set means pre-placed: every method must keep it there.
    """

    id: str
    lower: int
    upper: int
    size: int
    alignment: int = 1
    offset: int | None = None

    def __post_init__(self) -> None:
        for name in ("lower", "upper", "size", "alignment", "offset"):
            value = getattr(self, name)
            if value is None and name == "offset":
                continue
            if not isinstance(value, Integral) or isinstance(value, bool):
                raise PlacementInputError(f"buffer {self.id!r}: {name} must be an integer, got {value!r}")
            object.__setattr__(self, name, int(value))  # numpy integers become plain ints
        if self.lower >= self.upper:
            raise PlacementInputError(f"buffer {self.id!r}: lifetime [{self.lower}, {self.upper}) is empty")
        if self.size <= 0:
            raise PlacementInputError(f"buffer {self.id!r}: size must be positive, got {self.size}")
        if self.alignment <= 0:
            raise PlacementInputError(f"buffer {self.id!r}: alignment must be positive, got {self.alignment}")
        if self.offset is not None and self.offset < 0:
            raise PlacementInputError(f"buffer {self.id!r}: offset must be >= 0, got {self.offset}")


@dataclass
class PlacementResult:
    """What a placement method found; `offsets` is set only when status is "placed"."""

    status: Status
    offsets: dict[str, int] | None
    method: str
    seconds: float
    stats: dict = field(default_factory=dict)
    message: str = ""
