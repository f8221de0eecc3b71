"""A time limit is a deadline from the start: of the process (the command line) or of the ``so.solve`` call.

One clock covers loading, compiling kernels, building the problem, presolve and search: a slow or cold
phase shrinks what follows, never the deadline. ``deadline(limit)`` makes the deadline active for the code
it encloses (a context variable, so nested solves share the earliest one); ``current()`` is what every
stage asks for the time left.

Budgets stay deterministic: a stage's *planned* share is a function of the limit and the problem's size at
the nominal rates of ``spyreopt.rates`` (never measured at run time), so a run whose stages all finish within their plan gives the same
plan on every machine. Only when the clock is shorter than the plan does a stage get cut, and then the
``Deadline`` records it (``cut``), as it records a fallback (another, faster method answered): a plan
carries both in ``plan.stats["limits"]`` = ``{"cut": [{"stage", "by", "reached_us"}], "fallback": None|str}``
and says so in its message; ``spyreopt ... --strict`` turns either into a non-zero exit status.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from spyreopt.errors import SolverError
from spyreopt.rates import BUILD_SECONDS_PER_OP, FINISH_SECONDS_PER_OP, STARTUP_SECONDS

PAST_DEADLINE = "deadline"  # the stage recorded when the answer itself came after the deadline

SEARCH_SHARE = 0.8  # of the limit left after the nominal build and finish: what the search stages may plan
MIN_SEARCH_SECONDS = 0.2  # the planned search budget never goes below this (the clock then cuts it, said so)

_ACTIVE: ContextVar[Deadline | None] = ContextVar("spyreopt_deadline", default=None)


def check_limit(value, what: str = "time_limit") -> float:
    """``value`` as a positive finite number of seconds, else a SolverError naming ``what``."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise SolverError(f"{what} must be a number of seconds, got {value!r}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise SolverError(f"{what} must be a positive, finite number of seconds, got {value!r}")
    return seconds


def process_age() -> float:
    """Seconds since this process started (interpreter start-up and imports count). On Linux from the kernel's
    start tick and uptime, both since boot (psutil's create_time adds a boot time rounded to the second)."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime, in clock ticks
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(uptime - ticks / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError):
        import psutil  # elsewhere: psutil's create time

        return max(time.time() - psutil.Process().create_time(), 0.0)


def process_start() -> float:
    """When this process started, on the ``time.perf_counter`` clock."""
    return time.perf_counter() - process_age()


_COMMAND_START: ContextVar[float | None] = ContextVar("spyreopt_command_start", default=None)


@contextmanager
def command(from_process_start: bool) -> Iterator[None]:
    """A command's limits count from process start when it is the program (``spyreopt ...``), and from this
    call when Python calls it in a longer-lived process (a notebook, a test), whose start-up is not its own."""
    token = _COMMAND_START.set(process_start() if from_process_start else time.perf_counter())
    try:
        yield
    finally:
        _COMMAND_START.reset(token)


def command_start() -> float:
    """When the running command started (``command``), on the ``time.perf_counter`` clock; the process start
    outside one."""
    start = _COMMAND_START.get()
    return process_start() if start is None else start


def after_startup(time_limit: float) -> float:
    """The limit a command plans its stages on: less the nominal start-up, never below half the limit (the
    deadline stays ``time_limit`` from process start; only the plan shrinks, deterministically)."""
    return max(time_limit - STARTUP_SECONDS, 0.5 * time_limit)


def search_budget(time_limit: float, ops: int, *, built: bool = True) -> float:
    """The planned search seconds of a problem of ``ops`` compute ops under ``time_limit``: what is left after
    the nominal build (when ``built``: the problem is built inside the limit) and finish, times ``SEARCH_SHARE``."""
    pre = (BUILD_SECONDS_PER_OP * ops if built else 0.0) + FINISH_SECONDS_PER_OP * ops
    return max(SEARCH_SHARE * (time_limit - pre), MIN_SEARCH_SECONDS)


@dataclass
class Deadline:
    """The wall-clock end (``time.perf_counter``) of one limit, and what it cut."""

    at: float
    limit: float
    cuts: list[dict] = field(default_factory=list)
    fallback: str | None = None

    def left(self) -> float:
        return max(self.at - time.perf_counter(), 0.0)

    def cut(self, stage: str, by: str = "clock", reached_us: float | None = None) -> None:
        """Record that ``stage`` stopped before its planned work (``by`` "clock") or its work budget was spent
        short of what the method normally reaches (``by`` "work")."""
        reached = None if reached_us is None else float(reached_us)
        for c in self.cuts:  # one entry per (stage, by): the last result reached is kept
            if (c["stage"], c["by"]) == (stage, by):
                c["reached_us"] = reached if reached is not None else c["reached_us"]
                return
        self.cuts.append({"stage": stage, "by": by, "reached_us": reached})

    def fall_back(self, method: str) -> None:
        """Record that ``method`` answered instead of the requested one (the first fallback is kept)."""
        self.fallback = self.fallback or method

    def report(self) -> dict:
        return {"cut": [dict(c) for c in self.cuts], "fallback": self.fallback}


def current() -> Deadline | None:
    """The active deadline, None outside every ``deadline`` block."""
    return _ACTIVE.get()


@contextmanager
def deadline(limit: float, *, start: float | None = None) -> Iterator[Deadline]:
    """Make the deadline ``limit`` seconds after ``start`` (default: now) active, or the enclosing one when
    that ends earlier; an inner block's cuts and fallback reach the enclosing deadline too."""
    outer = _ACTIVE.get()
    at = (time.perf_counter() if start is None else start) + limit
    d = Deadline(min(at, outer.at) if outer is not None else at, limit)
    token = _ACTIVE.set(d)
    try:
        yield d
    finally:
        _ACTIVE.reset(token)
        if outer is not None:
            for c in d.cuts:
                outer.cut(**c)
            if d.fallback:
                outer.fall_back(d.fallback)


def attach(plan, d: Deadline) -> None:
    """Record the deadline's cuts and fallback in ``plan.stats["limits"]`` (merged with what is there) and say
    in the message that the result is below what the method normally reaches."""
    if d.left() <= 0:  # answered after the deadline (the build or start-up alone overran it): said so
        d.cut(PAST_DEADLINE, "clock", plan.cost_us)
    old = plan.stats.get("limits") or {"cut": [], "fallback": None}
    for c in old["cut"]:
        d.cut(**c)
    if old["fallback"]:
        d.fall_back(old["fallback"])
    plan.stats["limits"] = d.report()
    text = summary(plan.stats["limits"])
    if text and text not in (plan.message or ""):
        plan.message = f"{plan.message}; {text}" if plan.message else text


def limited(report: dict | None) -> bool:
    """True when a result is below what its method normally reaches: a stage cut or a fallback."""
    return bool(report and (report.get("cut") or report.get("fallback")))


def summary(report: dict | None) -> str:
    """One phrase for a limits report, empty when nothing was cut."""
    if not limited(report):
        return ""
    parts = []
    for c in report["cut"]:
        reached = "" if c["reached_us"] is None else f" at {c['reached_us']:,.3f} us"
        parts.append(
            f"answered after the deadline{reached}"
            if c["stage"] == PAST_DEADLINE
            else f"{c['stage']} cut by the {c['by']}{reached}"
        )
    if report["fallback"]:
        parts.append(f"fallback: {report['fallback']} answered")
    return "limited (below what the method normally reaches): " + ", ".join(parts)
