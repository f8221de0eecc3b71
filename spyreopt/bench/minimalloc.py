"""The ``minimalloc`` suite: MiniMalloc's "challenging" production allocation problems (those in the data directory).

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

# Moffitt, "MiniMalloc", ASPLOS 2023: solve times of the C++ solver on the 11 challenging instances.
PUBLISHED_SECONDS = {
    "A": 4.9, "B": 3.7, "C": 0.64, "D": 2.7, "E": 3.7, "F": 5.4, "G": 1.2, "H": 1.8, "I": 3.9, "J": 0.88, "K": 0.63,
}  # fmt: skip


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


def run_process(command: list[str], repeats: int = 3) -> tuple[float, str]:
    """Median wall seconds of ``command`` from process start to exit (``repeats`` runs), and its last stdout."""
    import statistics
    import subprocess

    walls, out = [], ""
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        walls.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise FormatError(f"minimalloc: {command[0]} exited {done.returncode}: {done.stderr.strip()[-300:]}")
        out = done.stdout
    return statistics.median(walls), out


def side_by_side(path: Path, time_limit: float, minimalloc_cmd: str | None, repeats: int) -> dict:
    """``spyreopt place`` from process start (and the C++ MiniMalloc when ``minimalloc_cmd`` is given, a
    command template with {capacity}, {input} and {output}), alternating, median of ``repeats``: wall seconds,
    the placement's height and the live-bytes peak."""
    import sys
    import tempfile

    from spyreopt.solvers.placement.diagnose import peak
    from spyreopt.solvers.placement.sweep import sweep

    name, capacity = path.name.split(".")[0], int(path.name.split(".")[1])
    buffers = read_csv(path)
    row = {"instance": name, "buffers": len(buffers), "peak": peak(buffers, sweep(buffers))[0]}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.csv"
        ours = [
            sys.executable,
            "-m",
            "spyreopt",
            "place",
            str(path),
            "--out",
            str(out),
            "--time-limit",
            str(time_limit),
        ]
        row["spyreopt_s"], text = run_process(ours, repeats)
        height = re.search(r"height (\d+)", text)
        row["height"] = int(height.group(1)) if height else None
        if minimalloc_cmd:
            theirs = minimalloc_cmd.format(capacity=capacity, input=path, output=Path(tmp) / "theirs.csv").split()
            row["minimalloc_s"], _ = run_process(theirs, repeats)
    row["published_s"] = PUBLISHED_SECONDS.get(name)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="directory with minimalloc/challenging/*.csv (default: $SPYREOPT_DATA)")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=["auto"])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--instances", nargs="*", help="names like A B (default: all)")
    parser.add_argument(
        "--processes", action="store_true", help="time `spyreopt place` from process start (median of --repeats)"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--minimalloc-cmd",
        help="with --processes: the C++ MiniMalloc command beside it, e.g. "
        "'minimalloc --capacity={capacity} --input={input} --output={output}'",
    )
    args = parser.parse_args(argv)
    paths = instances(data_dir(args.data, "minimalloc", "challenging"), args.instances)
    if args.processes:
        print("| instance | buffers | spyreopt place s | MiniMalloc here s | MiniMalloc published s | height | peak |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for path in paths:
            r = side_by_side(path, args.time_limit, args.minimalloc_cmd, args.repeats)
            here = f"{r['minimalloc_s']:.2f}" if "minimalloc_s" in r else "not given"
            print(
                f"| {r['instance']} | {r['buffers']} | {r['spyreopt_s']:.2f} | {here} | {r['published_s']} "
                f"| {r['height']} | {r['peak']} |",
                flush=True,
            )
        return 0
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
