"""Scratchpad address placement: offsets for buffers with fixed lifetimes, within a capacity.

Methods: "bestfit" (fast heuristic), "search" (exact, canonical-solution search
after MiniMalloc), "cpsat" (OR-Tools CP-SAT), and "auto" (those three in turn).
Every returned placement has passed the independent `validate`.
"""

from spyreopt.solvers.placement.api import METHODS, minimize_capacity, place
from spyreopt.solvers.placement.csvio import read_csv, write_csv
from spyreopt.solvers.placement.types import Buffer, PlacementInputError, PlacementResult
from spyreopt.solvers.placement.validate import ValidationIssue, validate

__all__ = [
    "METHODS",
    "Buffer",
    "PlacementInputError",
    "PlacementResult",
    "ValidationIssue",
    "minimize_capacity",
    "place",
    "read_csv",
    "validate",
    "write_csv",
]
