"""The ``minimalloc`` suite: the six "challenging" MiniMalloc production allocation problems.

Each instance is placed within the time limit by each method and checked with the
independent validator, next to MiniMalloc's published C++ solve time. Wall seconds
and this process's CPU seconds are both kept: on a shared machine the wall time
also counts other processes.
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Iterable
from pathlib import Path

from tqdm import tqdm

from spyreopt.bench.data import data_dir
from spyreopt.bench.report import Row
from spyreopt.errors import FormatError
from spyreopt.solvers.placement import METHODS, place, read_csv, validate

# Moffitt, "MiniMalloc", ASPLOS 2023: solve times of the C++ solver on these instances.
PUBLISHED_SECONDS = {"A": 4.9, "B": 3.7, "C": 0.64, "D": 2.7, "E": 3.7, "F": 5.4}


def instances(directory: Path, names: Iterable[str] | None = None) -> list[Path]:
    """The ``NAME.CAPACITY.csv`` files of ``directory`` (only ``names`` if given), sorted."""
    paths = sorted(directory.glob("*.csv"))
    if names:
        paths = [p for p in paths if p.name.split(".")[0] in set(names)]
    if not paths:
        raise FormatError(f"minimalloc: no NAME.CAPACITY.csv instances in {directory}")
    return paths


def run_one(path: Path, method: str, time_limit: float) -> dict:
    """Place one instance with one method; the validator's verdict and both clocks."""
    match = re.fullmatch(r"(\w+)\.(\d+)\.csv", path.name)
    if match is None:
        raise FormatError(f"minimalloc: {path.name!r} is not named NAME.CAPACITY.csv")
    name, capacity = match.group(1), int(match.group(2))
    buffers = read_csv(path)
    cpu = time.process_time()
    result = place(buffers, capacity, method=method, time_limit=time_limit)
    cpu = time.process_time() - cpu
    valid = result.status == "placed" and validate(buffers, result.offsets, capacity) == []
    return {
        "instance": name,
        "buffers": len(buffers),
        "method": method,
        "decided_by": result.method,
        "status": result.status,
        "seconds": result.seconds,
        "cpu_seconds": cpu,
        "minimalloc_s": PUBLISHED_SECONDS.get(name),
        "valid": valid,
        "nodes": result.stats.get("nodes", ""),
    }


def minimalloc_suite(time_limit: float, directory: Path, progress: bool = True) -> list[Row]:
    """Rows of ``spyreopt bench``: every instance placed by ``auto`` and validated independently."""
    rows = []
    for path in tqdm(instances(directory), disable=not progress, desc="minimalloc", unit="instance"):
        r = run_one(path, "auto", time_limit)
        published = r["minimalloc_s"]
        rows.append(
            Row("minimalloc", path.stem, f"place:{r['decided_by']}", r["status"], None, None, None, r["seconds"],
                r["valid"], r["buffers"], f"MiniMalloc {published} s" if published else "")
        )  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="directory with minimalloc/challenging/*.csv (default: $SPYREOPT_DATA)")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=["auto"])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--instances", nargs="*", help="names like A B (default: all)")
    args = parser.parse_args(argv)
    paths = instances(data_dir(args.data, "minimalloc", "challenging"), args.instances)
    header = "| instance | buffers | method | decided by | status | seconds | cpu s | MiniMalloc s | valid | nodes |"
    print(header)
    print("|" + "---|" * header.count(" | ") + "---|")
    all_valid = True
    for path in paths:
        for method in args.methods:
            r = run_one(path, method, args.time_limit)
            all_valid &= r["valid"]
            print(
                f"| {r['instance']} | {r['buffers']} | {r['method']} | {r['decided_by']} | {r['status']} "
                f"| {r['seconds']:.2f} | {r['cpu_seconds']:.2f} | {r['minimalloc_s']} | {'yes' if r['valid'] else 'NO'} | {r['nodes']} |",
                flush=True,
            )
    return 0 if all_valid else 1
