"""``spyreopt torch-spyre FILE.json``: solve torch-spyre's own allocator problems, judge both answers."""

from __future__ import annotations

import argparse
import json
import sys
import time

from spyreopt.errors import FormatError

HELP = "solve torch-spyre co-optimiser captures (JSON), judge ours and the capture's answer per graph"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "torch-spyre",
        help=HELP,
        description="Plan every graph of a torch-spyre capture file (per buffer: core division, residency, "
        "scratchpad address), judge our answer and the capture's own with the independent judge, and print per "
        "graph the buffers, the reference's spill bytes and ours, the status (optimal: proven by an exact "
        "backend, over the capture's division menus at that capacity, addresses included) and the seconds. "
        "Exit code 0 when every answer is valid, 2 on bad input.",
    )
    p.add_argument("file", help="capture JSON ({case: [{inputs, solved}, ...]})")
    p.add_argument(
        "--capacity",
        default="reference",
        help="bytes per core, or 'reference' (default): each graph gets the smallest capacity at which its own "
        "answer is valid (1,625,344, torch-spyre's planning share, for a graph without one)",
    )
    p.add_argument("--backend", default=None, help="default: the default method (anneal, then cpsat); exact: cpsat, "
                   "then milp, until one proves; or any backend name")  # fmt: skip
    p.add_argument("--time-limit", type=float, default=1.0, help="seconds per graph (default 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--objective", choices=("spill", "time"), default="spill", help="spill bytes (torch-spyre's) or "
                   "the cost model's predicted spill time, ties toward fewer cores")  # fmt: skip
    p.add_argument("--out", help="write the file back with our answers as each graph's solved list")
    p.add_argument("--sweep", metavar="CASE", help="capacity sweep of one case (CASE or CASE[i]) instead")
    p.add_argument("--plot", default="torch_spyre_sweep.png", help="--sweep: where to save the plot")
    p.set_defaults(func=run)


def _capacity(text: str) -> int | None:
    if text == "reference":
        return None
    try:
        value = int(text.replace(",", "").replace("_", ""))
    except ValueError:
        raise FormatError(f"--capacity: expected a byte count or 'reference', got {text!r}") from None
    if value <= 0:
        raise FormatError(f"--capacity: must be positive, got {value}")
    return value


def run(args: argparse.Namespace) -> int:
    from spyreopt.formats.torch_spyre import PLANNING_SHARE, read_captures, write_solved
    from spyreopt.formats.torch_spyre_judge import judge
    from spyreopt.formats.torch_spyre_time import predict
    from spyreopt.integrations.torch_spyre import reference_capacity, solve_graph

    start = time.perf_counter()
    capacity = _capacity(args.capacity)
    graphs = read_captures(args.file)
    if args.sweep:
        return _sweep(args, graphs)
    print(f"{'graph':<20} {'buffers':>7} {'capacity':>10} {'reference':>12} {'ours':>12}  {'status':<9} {'s':>6}")
    solved, ok = {}, True
    for g in graphs:
        ref_cap = reference_capacity(g)
        cap = capacity if capacity is not None else (ref_cap if ref_cap is not None else PLANNING_SHARE)
        theirs = judge(g, g.reference, cap) if g.reference is not None else None
        r = solve_graph(g, cap, backend=args.backend, time_limit=args.time_limit, seed=args.seed,
                        objective=args.objective)  # fmt: skip
        solved[(g.case, g.index)] = r.answers
        ref = "-" if theirs is None else (str(theirs.spill) if theirs.valid else f"invalid:{theirs.rule}")
        print(f"{g.label:<20} {len(g.buffers):>7} {r.capacity:>10} {ref:>12} {r.verdict.spill:>12}  "
              f"{r.status:<9} {r.seconds:>6.2f}")  # fmt: skip
        if theirs is not None and not theirs.valid:
            print(f"    reference breaks {theirs.message}")
        if "without the in-place shares" in r.over:
            print(f"    {r.status}: {r.over}")
        for note in r.notes:
            print(f"    note: {note}")
        if args.objective == "time":
            t_ours, c_ours = predict(g, r.answers)
            t_ref = "" if theirs is None else "reference {:.2f} us ({} cores), ".format(*predict(g, g.reference))
            print(f"    predicted spill time: {t_ref}ours {t_ours:.2f} us ({c_ours} cores)")
        if r.verdict.unknown_size:
            print(f"    size unknown (-1), pinned off chip at no cost: {', '.join(r.verdict.unknown_size)}")
        ok = ok and r.verdict.valid
    print(f"status optimal: proven by an exact backend over each graph's division menus at its capacity, "
          f"addresses included; {time.perf_counter() - start:.1f} s in all")  # fmt: skip
    if args.out:
        with open(args.file) as fh:
            write_solved(json.load(fh), solved, args.out)
        print(f"answers: {args.out}")
    return 0 if ok else 1


def _sweep(args, graphs) -> int:
    from spyreopt.integrations.torch_spyre_sweep import plot, sweep, table

    want = args.sweep
    chosen = [g for g in graphs if want in (g.case, g.label)]
    if not chosen:
        print(f"spyreopt torch-spyre: no case {want!r}; cases: {', '.join(g.label for g in graphs)}", file=sys.stderr)
        return 2
    rows = sweep(chosen[0], backend=args.backend, time_limit=args.time_limit, seed=args.seed)
    print(table(chosen[0], rows))
    plot(chosen[0], rows, args.plot)
    print(f"plot: {args.plot}")
    return 0
