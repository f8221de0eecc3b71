"""Batch planning: many problems on any executor, results streamed back, failures kept per problem.

``solve_many`` runs each problem through ``solve`` (with ``cache=`` and
``decompose=`` if given) on a ``concurrent.futures.Executor``, a Dask
``distributed.Client`` or in this process (``executor=None``). Results come
back as they finish. Nothing is lost: a problem whose solve raises becomes an
error record (exception type and message), a task lost with its worker is
resubmitted up to ``retries`` times, and a task with no result within
``task_timeout`` seconds is cancelled and reported, so a sweep never hangs.

``hardware_variants`` and ``sweep_tasks`` build the grid of a design sweep
(workloads x hardware variants x backends); ``write_table`` writes the results.
"""

from __future__ import annotations

import concurrent.futures as cf
import csv
import json
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

from tqdm import tqdm

from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.errors import InfeasibleError, SolverError
from spyreopt.model.graph import Graph
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.plan import Plan
from spyreopt.solving.entry import solve

COLUMNS = ("workload", "hardware", "backend", "status", "cost_us", "solve_s", "valid", "error", "attempts")
POLL_SECONDS = 0.05  # only for executors whose futures neither concurrent.futures nor distributed can wait on


@dataclass(frozen=True)
class Task:
    """One problem: a graph and what to solve it with; ``meta`` labels are copied into its result row."""

    graph: Graph
    backend: str | None = None  # None: solve_many's backend
    hardware: HardwareSpec | None = None
    coefficients: Coefficients | None = None
    options: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Result:
    index: int  # position of the problem in the input
    meta: dict[str, Any]
    backend: str
    status: str  # the plan's status, or "error" / "infeasible" when no plan came back
    cost_us: float | None
    solve_s: float | None  # wall seconds of the solve call on the worker
    valid: bool  # the plan passed Plan.validate (solve checks every plan it returns)
    error: str | None  # "ExceptionType: message"
    attempts: int = 1
    plan: Plan | None = None

    def row(self) -> dict[str, Any]:
        base = {k: v for k, v in asdict(self).items() if k in COLUMNS}
        return {**self.meta, **base}


def run_task(task: Task, defaults: dict[str, Any], keep_plan: bool = False) -> Result:
    """Solve one task (runs on a worker); every exception becomes an error record."""
    opts = {**defaults, **task.options}
    backend = task.backend or opts.pop("backend", "greedy")
    opts.pop("backend", None)  # a Task's own backend wins over the default
    start = time.perf_counter()
    try:
        plan = solve(task.graph, backend, hardware=task.hardware, coefficients=task.coefficients, **opts)
    except Exception as exc:  # noqa: BLE001 - a failed problem is a result, never lost
        status = "infeasible" if isinstance(exc, InfeasibleError) else "error"
        return Result(0, dict(task.meta), backend, status, None, time.perf_counter() - start, False, _describe(exc))
    seconds = time.perf_counter() - start
    return Result(
        0, dict(task.meta), backend, plan.status, plan.cost_us, seconds, True, None, plan=plan if keep_plan else None
    )


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _as_task(problem: Graph | Task) -> Task:
    if isinstance(problem, Task):
        return problem
    if isinstance(problem, Graph):
        return Task(problem, meta={"workload": problem.name})
    raise SolverError(f"solve_many: expected a Graph or a batch.Task, got {type(problem).__name__}")


# ---- executors --------------------------------------------------------------------------------------


def _is_dask(executor: Any) -> bool:
    return type(executor).__module__.split(".")[0] == "distributed"


class _Engine:
    """The few calls that differ between concurrent.futures executors and a Dask Client."""

    def __init__(self, executor: Any):
        self.executor = executor
        self.dask = _is_dask(executor)

    def slots(self) -> int:
        if self.dask:
            return max(1, sum(self.executor.nthreads().values()))
        return max(1, getattr(self.executor, "_max_workers", None) or os.cpu_count() or 1)

    def submit(self, fn: Callable, *args: Any):
        if self.dask:  # pure=False: a resubmission is a new task, not the lost one's cached key
            return self.executor.submit(fn, *args, pure=False)
        return self.executor.submit(fn, *args)

    def wait_first(self, futures: list, timeout: float) -> set:
        """Futures among ``futures`` that are done, waiting at most ``timeout`` seconds for one."""
        if self.dask:
            import distributed

            try:
                return set(distributed.wait(futures, timeout=timeout, return_when="FIRST_COMPLETED").done)
            except TimeoutError:
                return {f for f in futures if f.done()}
        if all(isinstance(f, cf.Future) for f in futures):
            return cf.wait(futures, timeout=timeout, return_when=cf.FIRST_COMPLETED).done
        deadline = time.monotonic() + timeout
        while True:  # an executor-like object with its own future type: poll done()
            done = {f for f in futures if f.done()}
            if done or time.monotonic() >= deadline:
                return done
            time.sleep(POLL_SECONDS)


def solve_many(
    problems: Iterable[Graph | Task],
    executor: Any = None,
    *,
    backend: str = "greedy",
    progress: bool = True,
    retries: int = 2,
    task_timeout: float | None = None,
    max_in_flight: int | None = None,
    callback: Callable[[Result], None] | None = None,
    keep_plans: bool = False,
    **opts: Any,
) -> Iterator[Result]:
    """Solve every problem; yield a ``Result`` per problem as each finishes (call ``callback`` too).

    ``opts`` go to every ``solve`` (time_limit, seed, cache=<directory>,
    decompose="layers", backend options); a Task's own options override them.
    ``retries``: resubmissions of a task whose future failed (worker lost,
    ``KilledWorker``); an exception inside the solve is the problem's result
    and is not retried. ``task_timeout`` (default 3 x time_limit + 60 s): a task
    with no result that long after submission is cancelled and reported. At most
    ``max_in_flight`` tasks (default: the executor's worker slots) are
    submitted at once, so the timeout runs from about when a task starts.
    Returns a generator: nothing runs until it is iterated.
    """
    tasks = [_as_task(p) for p in problems]
    defaults = {"backend": backend, **opts}
    timeout = task_timeout if task_timeout is not None else 3 * float(opts.get("time_limit", 10.0)) + 60
    bar = tqdm(total=len(tasks), disable=not progress, desc="solve_many", unit="problem")
    errors = 0
    try:
        stream = (
            _inline(tasks, defaults, keep_plans)
            if executor is None
            else _drive(_Engine(executor), tasks, defaults, keep_plans, retries, timeout, max_in_flight)
        )
        for result in stream:
            errors += result.error is not None
            bar.update(1)
            bar.set_postfix(errors=errors, refresh=False)
            if callback is not None:
                callback(result)
            yield result
    finally:
        bar.close()


def _inline(tasks: list[Task], defaults: dict, keep_plans: bool) -> Iterator[Result]:
    for i, task in enumerate(tasks):
        result = run_task(task, defaults, keep_plans)
        result.index = i
        yield result


def _failed(i: int, task: Task, defaults: dict, error: str, attempts: int) -> Result:
    backend = task.backend or defaults.get("backend", "greedy")
    return Result(i, dict(task.meta), backend, "error", None, None, False, error, attempts)


def _drive(
    engine: _Engine,
    tasks: list[Task],
    defaults: dict,
    keep_plans: bool,
    retries: int,
    timeout: float,
    max_in_flight: int | None,
) -> Iterator[Result]:
    queue = deque(range(len(tasks)))
    attempts = [0] * len(tasks)
    running: dict[Any, tuple[int, float]] = {}  # future -> (task index, deadline)
    window = max_in_flight or engine.slots()
    try:
        while queue or running:
            while queue and len(running) < window:
                i = queue.popleft()
                attempts[i] += 1
                try:
                    running[engine.submit(run_task, tasks[i], defaults, keep_plans)] = (i, time.monotonic() + timeout)
                except Exception as exc:  # e.g. a broken process pool: report, keep going
                    yield _failed(i, tasks[i], defaults, _describe(exc), attempts[i])
            if not running:
                continue
            wait = max(0.0, min(d for _, d in running.values()) - time.monotonic())
            for fut in engine.wait_first(list(running), wait):
                i, _ = running.pop(fut)
                try:
                    result = fut.result()
                except (KeyboardInterrupt, SystemExit, GeneratorExit):
                    raise
                except BaseException as exc:  # the task was lost (worker died, cancelled), not the solve: retry
                    if attempts[i] <= retries:
                        queue.append(i)
                        continue
                    result = _failed(i, tasks[i], defaults, _describe(exc), attempts[i])
                result.index, result.attempts = i, attempts[i]
                yield result
            now = time.monotonic()
            for fut, (i, deadline) in list(running.items()):
                if now >= deadline:
                    del running[fut]
                    fut.cancel()
                    yield _failed(i, tasks[i], defaults, f"TaskTimeout: no result within {timeout:g} s", attempts[i])
    finally:  # the caller stopped early or something raised: do not leave work behind
        for fut in running:
            fut.cancel()


# ---- design sweeps ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    label: str
    hardware: HardwareSpec


def hardware_variants(
    base: HardwareSpec | None = None,
    *,
    lx_bytes: Iterable[int] = (),
    planner_fraction: Iterable[float] = (),
    cores: Iterable[int] = (),
) -> list[Variant]:
    """Every combination of the given scratchpad sizes, planner fractions and core counts (base values elsewhere)."""
    base = base or HardwareSpec()
    axes = {"lx_bytes": list(lx_bytes), "planner_fraction": list(planner_fraction), "cores": list(cores)}
    axes = {k: v for k, v in axes.items() if v}
    out = []
    for values in product(*axes.values()):
        changes = dict(zip(axes, values))
        label = ",".join(f"{k}={v}" for k, v in changes.items()) or base.name
        out.append(Variant(label, base.with_(**changes)))
    return out


def sweep_tasks(workloads: dict[str, Graph], variants: list[Variant], backends: Iterable[str]) -> list[Task]:
    """workloads x hardware variants x backends, each labelled for the results table."""
    return [
        Task(g, backend=b, hardware=v.hardware, meta={"workload": name, "hardware": v.label})
        for name, g in workloads.items()
        for v in variants
        for b in backends
    ]


def write_table(
    results: Iterable[Result], csv_path: str | Path | None = None, json_path: str | Path | None = None
) -> list[dict]:
    """Rows in input order, written as CSV and/or JSON; returns the rows."""
    rows = [r.row() for r in sorted(results, key=lambda r: r.index)]
    extra = sorted({k for row in rows for k in row} - set(COLUMNS))
    columns = list(COLUMNS) + extra
    if csv_path is not None:
        with open(csv_path, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=columns)
            writer.writeheader()
            writer.writerows(rows)
    if json_path is not None:
        Path(json_path).write_text(json.dumps(rows, indent=1))
    return rows
