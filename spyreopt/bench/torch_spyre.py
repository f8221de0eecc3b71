"""The torch-spyre capture suite (``benchmarks/bench_torch_spyre.py``): every graph at four capacities, the default method and an exact backend.

Per graph and capacity: the reference's spill traffic (where its answer is valid there), ours from the
default method (1 s per graph) and from an exact backend (``exact_limit`` per graph) with its status,
each answer judged; at the reference's own capacity also the smallest capacity at which ours matches
the reference (``torch_spyre_sweep``'s bisection, with the exact backend). Every answer is judged valid (``solve_graph`` raises otherwise). Capacities: each graph's reference capacity and half of it; for a
graph without an answer torch-spyre's planning share and a quarter of it; and the planning share for all.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from spyreopt.formats.torch_spyre import PLANNING_SHARE, read_captures
from spyreopt.formats.torch_spyre_judge import judge
from spyreopt.integrations.torch_spyre import reference_capacity, solve_graph
from spyreopt.integrations.torch_spyre_sweep import smallest_matching

FILES = ("cooptimization_captures.json", "cooptimization_captures_regen.json")


@dataclass(frozen=True)
class Row:
    file: str
    graph: str
    buffers: int
    setting: str
    capacity: int
    reference: int | None  # the reference's spill where valid at this capacity
    ours: int
    ours_status: str
    ours_s: float
    exact: int | None
    exact_status: str
    exact_s: float
    matching: int | None = None  # smallest capacity at which ours matches the reference


def settings(graph) -> list[tuple[str, int]]:
    ref = reference_capacity(graph)
    if ref is not None:
        return [("reference", ref), ("half reference", ref // 2), ("planning share", PLANNING_SHARE)]
    return [("planning share", PLANNING_SHARE), ("quarter share", PLANNING_SHARE // 4)]


def suite(directory: Path, *, time_limit: float = 1.0, exact: str | None = "exact", exact_limit: float = 60.0,
          seed: int = 0, files=FILES, progress: bool = False) -> list[Row]:  # fmt: skip
    rows = []
    for name in files:
        for g in read_captures(Path(directory) / name):
            for setting, cap in settings(g):
                theirs = judge(g, g.reference, cap) if g.reference is not None else None
                ref = theirs.spill if theirs is not None and theirs.valid else None
                ours = solve_graph(g, cap, time_limit=time_limit, seed=seed)
                ex = solve_graph(g, cap, backend=exact, time_limit=exact_limit, seed=seed) if exact else None
                match = None
                if setting == "reference" and ref is not None:  # by the exact backend: proven where it proves
                    match = smallest_matching(g, ref, 128, cap, exact, exact_limit if exact else time_limit, seed, {})
                rows.append(Row(name, g.label, len(g.buffers), setting, cap, ref, ours.verdict.spill, ours.status,
                                ours.seconds, ex.verdict.spill if ex else None, ex.status if ex else "-",
                                ex.seconds if ex else 0.0, match))  # fmt: skip
                if progress:
                    print(f"  {name} {g.label} {setting}: ours {ours.verdict.spill} ({ours.seconds:.2f} s)", flush=True)
    return rows


def markdown(rows: list[Row]) -> str:
    lines = [
        "| file | graph | buffers | capacity | setting | reference spill | ours (default) | status | s | exact | status "
        "| s | ours matches reference from |",
        "| --- | --- | ---: | ---: | --- | ---: | ---: | --- | ---: | ---: | --- | ---: | ---: |",
    ]
    for r in rows:
        ref = "-" if r.reference is None else f"{r.reference:,}"
        ex = "-" if r.exact is None else f"{r.exact:,}"
        match = "" if r.matching is None else f"{r.matching:,}"
        lines.append(
            f"| {r.file.removeprefix('cooptimization_')} | {r.graph} | {r.buffers} | {r.capacity:,} | {r.setting} "
            f"| {ref} | {r.ours:,} | {r.ours_status} | {r.ours_s:.2f} | {ex} | {r.exact_status} | {r.exact_s:.2f} "
            f"| {match} |"
        )
    return "\n".join(lines)


def timed(directory: Path, time_limit: float = 1.0) -> dict:
    """Warm seconds per graph (default method, reference capacity or the planning share), max and total."""
    per = []
    for name in FILES:
        for g in read_captures(Path(directory) / name):
            cap = reference_capacity(g) or PLANNING_SHARE
            t = time.perf_counter()
            solve_graph(g, cap, time_limit=time_limit)
            per.append(time.perf_counter() - t)
    return {"graphs": len(per), "max_s": max(per), "total_s": sum(per)}


def main(argv: list[str] | None = None) -> int:
    """``python benchmarks/bench_torch_spyre.py --data DIR``: the suite's table (DIR holds
    ``torch-spyre-captures/``; default ``$SPYREOPT_DATA``)."""
    import argparse
    import json
    from dataclasses import asdict

    from spyreopt.bench.data import data_dir

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("--data", help="directory holding torch-spyre-captures/ (default: $SPYREOPT_DATA)")
    p.add_argument("--time-limit", type=float, default=1.0, help="default method, seconds per graph")
    p.add_argument(
        "--exact", default="exact", help="exact backend: exact (cpsat, then milp), cpsat or milp; none to skip"
    )
    p.add_argument("--exact-limit", type=float, default=60.0, help="exact backend, seconds per graph")
    p.add_argument("--markdown", help="write the table here")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args(argv)
    start = time.perf_counter()
    directory = data_dir(args.data, "torch-spyre-captures")
    exact = None if args.exact == "none" else args.exact
    rows = suite(directory, time_limit=args.time_limit, exact=exact, exact_limit=args.exact_limit, progress=True)
    warm = timed(directory, args.time_limit)
    text = markdown(rows) + (
        f"\n\ndefault method, warm: {warm['graphs']} graphs, at most {warm['max_s']:.2f} s per graph, "
        f"{warm['total_s']:.1f} s for both files; the whole run {time.perf_counter() - start:.0f} s"
    )
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in rows], indent=1))
    return 0
