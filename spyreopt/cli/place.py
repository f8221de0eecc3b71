"""`spyreopt place FILE.csv --out OUT.csv`: scratchpad addresses for a MiniMalloc CSV."""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

from spyreopt.solvers.placement import METHODS, PlacementInputError, place, read_csv, validate, write_csv

EXIT_PLACED, EXIT_INFEASIBLE, EXIT_BAD_INPUT, EXIT_TIMEOUT = 0, 1, 2, 3


def add_parser(subparsers) -> None:
    """Register the `place` subcommand; its handler returns the exit code."""
    p = subparsers.add_parser(
        "place",
        help="assign scratchpad offsets to buffers (MiniMalloc CSV)",
        description="Place buffers with fixed lifetimes at offsets within a capacity. "
        f"Exit codes: {EXIT_PLACED} placed and validated, {EXIT_INFEASIBLE} infeasible, "
        f"{EXIT_BAD_INPUT} bad input, {EXIT_TIMEOUT} out of time.",
    )
    p.add_argument("file", help="CSV with columns id,lower,upper,size[,alignment][,offset]")
    p.add_argument("--capacity", type=int, help="bytes available (default: the number in a name like A.1048576.csv)")
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds (default 60)")
    p.add_argument("--method", choices=METHODS, default="auto")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="CSV to write, with an offset column")
    p.set_defaults(func=run)


def capacity_from_name(path: str) -> int | None:
    """The capacity MiniMalloc benchmark names carry: `A.1048576.csv` -> 1048576."""
    match = re.search(r"\.(\d+)\.csv$", Path(path).name)
    return int(match.group(1)) if match else None


def run(args: argparse.Namespace) -> int:
    """Solve, validate, write; the message on failure says why."""
    capacity = args.capacity if args.capacity is not None else capacity_from_name(args.file)
    if capacity is None:
        print(f"place: no --capacity given and none in the file name {args.file!r}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if capacity <= 0:
        print(f"place: --capacity must be a positive number of bytes, got {capacity}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not math.isfinite(args.time_limit) or args.time_limit <= 0:
        print(
            f"place: --time-limit must be a positive, finite number of seconds, got {args.time_limit}", file=sys.stderr
        )
        return EXIT_BAD_INPUT
    try:
        buffers = read_csv(args.file)
        result = place(buffers, capacity, method=args.method, time_limit=args.time_limit, seed=args.seed)
    except PlacementInputError as e:
        print(f"place: bad input: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if result.status != "placed":
        print(f"place: {result.status} ({result.method}, {result.seconds:.2f} s): {result.message}", file=sys.stderr)
        return EXIT_INFEASIBLE if result.status == "infeasible" else EXIT_TIMEOUT
    issues = validate(buffers, result.offsets, capacity)
    if issues:
        print(f"place: invalid placement from {result.method}: {issues[0].message}", file=sys.stderr)
        return EXIT_INFEASIBLE
    write_csv(buffers, result.offsets, args.out)
    print(
        f"placed {len(buffers)} buffers in capacity {capacity} (height {result.stats['height']}) "
        f"by {result.method} in {result.seconds:.2f} s; wrote {args.out}"
    )
    return EXIT_PLACED
