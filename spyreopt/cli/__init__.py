"""The ``spyreopt`` command: one subcommand per module in ``spyreopt.cli``."""

from __future__ import annotations

import argparse
import importlib
import sys

from spyreopt.errors import SpyreoptError

SUBCOMMANDS = ["solve", "show", "simulate", "place", "iopddl", "bench", "cache", "sweep", "fit"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spyreopt", description="Plan tensor programs for the Spyre accelerator.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in SUBCOMMANDS:
        importlib.import_module(f"spyreopt.cli.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except SpyreoptError as exc:
        print(f"spyreopt {args.command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
