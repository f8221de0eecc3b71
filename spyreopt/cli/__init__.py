"""The ``spyreopt`` command: one subcommand per module in ``spyreopt.cli``.

Only the module of the subcommand being run is imported (with its solvers,
OR-Tools, Dask or matplotlib); the others are listed from ``COMMANDS`` alone, so
``spyreopt --help`` and ``spyreopt place --help`` start in a fraction of a second.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from spyreopt import limits
from spyreopt.errors import FormatError, GraphError, SpyreoptError

# subcommand -> (module of spyreopt.cli that registers it, its one-line help as that module gives it)
COMMANDS = {
    "workloads": ("solve", "list the built-in workloads and model presets"),
    "solve": ("solve", "plan a built-in workload, a graph JSON or a model preset and print the plan"),
    "show": ("show", "print a plan and draw its scratchpad and cost pictures"),
    "explain": (
        "explain",
        "explain a plan: each op's best rejected alternatives and their cost, each edge not in place",
    ),
    "simulate": ("simulate", "simulate a plan JSON and print total and per-op simulated microseconds"),
    "place": ("place", "assign scratchpad offsets to buffers (MiniMalloc CSV)"),
    "iopddl": ("iopddl", "solve an IOPDDL contest instance (JSON or JSON.gz)"),
    "torch-spyre": (
        "torch_spyre",
        "solve torch-spyre co-optimiser captures (JSON), judge ours and the capture's answer per graph",
    ),
    "bench": ("bench", "benchmark backends against baselines, bounds and published results"),
    "cache": ("cache", "plan cache: show statistics or clear it"),
    "sweep": ("sweep", "plan workloads over hardware variants and backends; write one results table"),
    "fit": (
        "fit",
        "fit the cost model to the simulator or a CSV of measurements; print the held-out error per op family",
    ),
    "reproduce": ("reproduce", "rebuild the published Spyre device measurements and print predicted next to published"),
}


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error answered in one line (the command, the option and what is wrong), status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser, with full arguments for the subcommand named first in ``argv`` (every one if ``argv`` is None)."""
    parser = Parser(prog="spyreopt", description="Plan tensor programs for the Spyre accelerator.")
    sub = parser.add_subparsers(dest="command", required=True)
    if argv is None:
        chosen = list(dict.fromkeys(module for module, _ in COMMANDS.values()))
    else:
        first = next((a for a in argv if not a.startswith("-")), None)
        chosen = [COMMANDS[first][0]] if first in COMMANDS else []
    for module in chosen:
        importlib.import_module(f"spyreopt.cli.{module}").add_parser(sub)
    for name, (_, text) in COMMANDS.items():
        if name not in sub.choices:  # listed in --help; its module loads when it is the command
            sub.add_parser(name, help=text)
    return parser


def main(argv: list[str] | None = None) -> int:
    program = argv is None  # run as the program: its limits count from process start (``limits.command``)
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    try:
        with limits.command(from_process_start=program):
            return int(args.func(args) or 0)
    except SpyreoptError as exc:
        print(f"spyreopt {args.command}: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:  # a file that cannot be read or written
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"spyreopt {args.command}: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2


def read_file(path, parse):
    """``parse`` of a file's text; a bad file's error names it (an unreadable one raises OSError, which names it)."""
    try:
        return parse(path.read_text())
    except UnicodeDecodeError:
        raise FormatError(f"{path}: not a text (JSON) file") from None
    except (FormatError, GraphError) as exc:
        raise type(exc)(f"{path}: {exc}") from None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


if __name__ == "__main__":
    sys.exit(main())
