"""``spyreopt cache stats|clear --dir DIR``: inspect or empty a plan cache directory."""

from __future__ import annotations

import argparse
from pathlib import Path

from spyreopt.cache import PlanCache
from spyreopt.errors import FormatError


def add_parser(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("cache", help="plan cache: show statistics or clear it")
    c.add_argument("action", choices=["stats", "clear"])
    c.add_argument("--dir", required=True, help="the cache directory (as given to `spyreopt solve --cache`)")
    c.set_defaults(func=_cache)


def _cache(args: argparse.Namespace) -> int:
    directory = Path(args.dir)
    if args.action == "stats" and not directory.is_dir():
        raise FormatError(f"--dir {directory}: no such cache directory")
    with PlanCache(directory) as cache:
        if args.action == "clear":
            print(f"cleared {cache.clear()} plans from {directory}")
            return 0
        stats = cache.stats()
    print(
        f"{directory}: entries {stats.entries}, bytes {stats.bytes}, hits {stats.hits}, misses {stats.misses}, stale {stats.stale}"
    )
    return 0
