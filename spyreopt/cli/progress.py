"""A progress line on stderr for the commands that take seconds on a whole model (simulate, explain)."""

from __future__ import annotations

import sys
import time


class Progress:
    """``simulate: 640 of 1,286 steps (3.1 s)`` on stderr: every half second on a terminal (two otherwise) and
    at the end."""

    def __init__(self, command: str, unit: str, start: float | None = None):
        self.command, self.unit = command, unit
        self.start = time.perf_counter() if start is None else start
        self.shown = self.start
        self.tty = sys.stderr.isatty()

    def __call__(self, done: int, total: int) -> None:
        now = time.perf_counter()
        if done < total and now - self.shown < (0.5 if self.tty else 2.0):
            return
        self.shown = now
        end = "\n" if done >= total or not self.tty else "\r"
        text = f"{self.command}: {done:,} of {total:,} {self.unit} ({now - self.start:.1f} s)"
        print(text, end=end, file=sys.stderr, flush=True)
