"""``spyreopt workloads`` and ``spyreopt solve WORKLOAD | GRAPH.json | model:PRESET``."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from spyreopt import limits, workloads
from spyreopt.cli import read_file
from spyreopt.errors import GraphError, SpyreoptError
from spyreopt.limits import check_limit
from spyreopt.model.graph import Graph
from spyreopt.model.plan_summary import summary_line
from spyreopt.model.plan_table import edge_lines, notes
from spyreopt.model.restrict import load_pin
from spyreopt.solvers.registry import names as backend_names
from spyreopt.solving.entry import solve

MODEL_PREFIX = "model:"


def load_graph(target: str, args: argparse.Namespace | None = None) -> Graph:
    """A built-in workload name, a path to a graph JSON file, or ``model:PRESET`` (shaped by --seq etc.)."""
    if target.startswith(MODEL_PREFIX):
        from spyreopt.presets import get as preset

        seq, phase, context, layers = (getattr(args, k, None) for k in ("seq", "phase", "context", "layers"))
        return preset(target[len(MODEL_PREFIX) :], phase=phase or "prefill", seq=seq, context=context, layers=layers)
    if args is not None and any(getattr(args, k, None) is not None for k in ("seq", "phase", "context", "layers")):
        raise GraphError(f"--seq, --phase, --context and --layers shape a model: preset, not {target!r}")
    path = Path(target)
    if path.suffix == ".json" or path.exists():
        return read_file(path, Graph.from_json)
    return workloads.get(target)


def add_parser(sub: argparse._SubParsersAction) -> None:
    w = sub.add_parser("workloads", help="list the built-in workloads and model presets")
    w.set_defaults(func=_workloads)
    s = sub.add_parser("solve", help="plan a built-in workload, a graph JSON or a model preset and print the plan")
    s.add_argument("target", help="workload name (see `spyreopt workloads`), graph.json, or model:PRESET")
    s.add_argument(
        "--backend", default="auto", help=f"auto (default: chooses per problem), {', '.join(backend_names())}"
    )
    s.add_argument("--time-limit", type=float, default=10.0, help="seconds from the start, the problem build included")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", help="write the plan JSON here")
    s.add_argument("--cache", metavar="DIR", help="plan cache directory: reuse the plan of an identical problem")
    s.add_argument("--decompose", choices=["layers"], help="solve each distinct repeated layer once")
    s.add_argument("--pin", metavar="FILE.json", help='{op: {"division": {dim: parts}, "residency": "lx"|"hbm"}}')
    s.add_argument("--forbid", default="", help="capabilities, e.g. relayout,staging (see spyreopt.model.restrict)")
    s.add_argument(
        "--no-baselines", action="store_true", help="skip the independent and hbm baselines beside the total"
    )
    s.add_argument(
        "--strict", action="store_true", help="exit 3 when the plan is below what the method normally reaches "
        "(a stage cut by the clock, or a faster method's plan answering: plan.stats['limits'])",
    )  # fmt: skip
    m = s.add_argument_group("model presets (model:NAME)")
    m.add_argument("--phase", choices=["prefill", "decode"], help="prefill (default) or one decode step")
    m.add_argument("--seq", type=int, help="tokens: prefill length (default 2048) or new tokens per decode step (1)")
    m.add_argument("--context", type=int, help="decode: cached positions attended (default 4096)")
    m.add_argument("--layers", type=int, help="override the preset's depth")
    m.add_argument("--table", action="store_true", help="print the per-op table for a model too (long)")
    s.set_defaults(func=_solve)


def _workloads(args: argparse.Namespace) -> int:
    from spyreopt.presets import PRESETS

    scale = {name: "model scale, tiled loops" for name in workloads.TILED}
    for name in [*workloads.names(), *workloads.EXTRA]:
        g = workloads.get(name)
        doc = " ".join((workloads.get_builder(name).__doc__ or "").split())
        first = doc.split(". ")[0].rstrip(".")
        first = first if len(first) <= 100 else first[:97].rstrip() + "..."
        extra = f" [{scale[name]}]" if name in scale else ""
        print(f"{name:20s} {len(g.ops):4d} ops   {first}{extra}")
    for name, p in PRESETS.items():
        print(f"model:{name:14s} {p.layers:4d} layers  hidden {p.hidden}, {p.heads}/{p.kv_heads} heads ({p.source})")
    return 0


def baselines(graph: Graph, decompose: str | None = None) -> dict[str, float]:
    """The cost (µs) of the ``independent`` and ``hbm`` baselines: one pass each (each distinct layer once for a
    model preset, which for these two gives the whole graph's plan); a baseline that fails is left out."""
    out = {}
    for name in ("independent", "hbm"):
        try:
            out[name] = solve(graph, backend=name, decompose=decompose).cost_us
        except SpyreoptError:
            continue
    return out


def _solve(args: argparse.Namespace) -> int:
    """0 when a plan was printed; 2 on bad input; 3 under ``--strict`` when the plan is limited."""
    check_limit(args.time_limit, "--time-limit")
    start = limits.command_start()
    with limits.deadline(args.time_limit, start=start):  # the limit counts from process start: loading included
        graph = load_graph(args.target, args)
        plan = solve(
            graph, backend=args.backend, time_limit=limits.after_startup(args.time_limit), seed=args.seed, cache=args.cache,
            decompose=args.decompose, pin=load_pin(args.pin) if args.pin else None, forbid=args.forbid,
        )  # fmt: skip
    is_model = args.target.startswith(MODEL_PREFIX)
    print(f"{graph.name}: {len(graph.ops)} ops")
    cached = plan.stats.get("timing", {}).get("cache")
    if cached:
        print(f"plan cache {args.cache}: {'hit' if cached['hit'] else 'miss'}")
    if not is_model or args.table:
        print(plan.table(summary=False))
    else:
        print("\n".join(edge_lines(plan)))
    wall = time.perf_counter() - start
    spent = wall >= args.time_limit  # the baselines count against the limit too: none once it is spent
    found = {} if args.no_baselines or spent else baselines(graph, decompose="layers" if is_model else None)
    print(summary_line(plan, found, f"{wall:.1f} s from process start"))
    if spent and not args.no_baselines:
        print("baselines: not computed, the time limit is spent (a longer limit shows them)")
    for line in notes(plan):
        print(line)
    if args.out:
        Path(args.out).write_text(plan.to_json())
        print(f"plan written to {args.out}")
    return 3 if args.strict and limits.limited(plan.stats.get("limits")) else 0
