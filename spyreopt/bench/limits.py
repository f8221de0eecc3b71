"""``spyreopt bench --suite limits``: does a time limit hold from process start, and is the plan never worse than
greedy's at the same limit?

Every case runs the command a user would, in a fresh process, and is timed from before the process starts
to after it (and every child it forked) exits:

* ``spyreopt solve W --backend B --time-limit T --out PLAN`` for every built-in workload, every backend given
  and ``T`` in ``SOLVE_LIMITS``: the wall must be within ``SLACK * T + GRACE`` seconds, and the plan's cost at
  most greedy's at the same ``T`` (the ``hbm`` and ``independent`` baselines are reference points, only timed);
* ``spyreopt iopddl FILE --time-limit T`` with a cold numba cache (``NUMBA_CACHE_DIR`` set to a new, empty
  directory: numba then finds none of its compiled kernels) for ``T`` in ``IOPDDL_LIMITS``, on the
  instances B and G and the first production instance of the data directory.

The machine's load (1-minute average) is noted on every row: wall times on a shared machine are pessimistic.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tqdm import tqdm

from spyreopt import workloads
from spyreopt.bench.report import Row

SOLVE_LIMITS = (0.3, 1.0, 5.0)
IOPDDL_LIMITS = (3.0, 10.0, 60.0)
SLACK, GRACE = 1.1, 0.5  # the acceptance bound on the wall: SLACK * T + GRACE seconds
BASELINES = ("hbm", "independent")


def _command(*args: str, env: dict | None = None) -> tuple[float, subprocess.CompletedProcess]:
    """Run ``python -m spyreopt ARGS`` in a fresh process; wall seconds from before its start to after its exit."""
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "spyreopt", *args], capture_output=True, text=True, env={**os.environ, **(env or {})}
    )
    return time.perf_counter() - began, done


def _load() -> str:
    return f"load {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""


def solve_rows(backends: list[str], limits=SOLVE_LIMITS, names=None, progress: bool = True) -> list[Row]:
    """One row per (workload, T, backend); greedy runs first at each T (the others are compared with it)."""
    order = ["greedy"] + [b for b in backends if b != "greedy"]
    cases = [(w, t, b) for w in (names or workloads.names()) for t in limits for b in order]
    rows, greedy = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for w, t, b in tqdm(cases, disable=not progress, desc="limits", unit="run", leave=False):
            out = Path(tmp, "plan.json")
            out.unlink(missing_ok=True)
            wall, done = _command("solve", w, "--backend", b, "--time-limit", str(t), "--out", str(out))
            bound = SLACK * t + GRACE
            if done.returncode != 0 or not out.exists():
                rows.append(Row("limits", f"{w} T={t:g}", b, "error", None, None, None, wall, False, 0,
                                (done.stderr.strip().splitlines() or ["no output"])[-1][:200]))  # fmt: skip
                continue
            plan = json.loads(out.read_text())
            cost = plan["cost_us"]
            if b == "greedy":
                greedy[(w, t)] = cost
            ref = greedy.get((w, t))
            worse = b not in BASELINES and ref is not None and cost > ref * (1 + 1e-9)
            report = plan.get("stats", {}).get("limits") or {}
            limited = bool(report.get("cut") or report.get("fallback"))
            note = (
                f"wall {wall:.2f} s {'<=' if wall <= bound else '>'} {bound:.2f}; greedy {ref:.3f}"
                + ("; WORSE than greedy" if worse else "")
                + (f"; plan from {plan['backend']}" if plan["backend"] != b else "")
                + ("; limited" if limited else "")
                + ("; baseline" if b in BASELINES else "")
                + f"; {_load()}"
            )
            ok = wall <= bound and not worse
            rows.append(Row("limits", f"{w} T={t:g}", b, plan["status"], cost, None, None, wall, ok,
                            len(plan["ops"]), note))  # fmt: skip
    return rows


def iopddl_rows(files: list[Path], limits=IOPDDL_LIMITS, progress: bool = True) -> list[Row]:
    """One row per (instance, T): the default contest command with a cold numba cache."""
    rows = []
    cases = [(f, t) for f in files for t in limits]
    for f, t in tqdm(cases, disable=not progress, desc="limits iopddl", unit="run", leave=False):
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp, "solution.json")
            args = ("iopddl", str(f), "--time-limit", str(t), "--out", str(out))
            wall, done = _command(*args, env={"NUMBA_CACHE_DIR": cache})
        bound = SLACK * t + GRACE
        lines = done.stdout.splitlines()
        score = next((ln.split("score:")[1].strip() for ln in lines if "score:" in ln), "n/a")
        method = next((ln.split("method:")[1].split("time limit")[0].strip() for ln in lines if "method:" in ln), "")
        cost = next((float(ln.split(":")[1]) for ln in lines if ln.startswith("cost:")), None)
        status = "feasible" if done.returncode == 0 else f"exit {done.returncode}"
        note = f"cold cache; wall {wall:.2f} s {'<=' if wall <= bound else '>'} {bound:.2f}; score {score}; {method}"
        if done.returncode not in (0, 1):
            note += "; " + (done.stderr.strip().splitlines() or [""])[-1][:160]
        rows.append(Row("limits-iopddl", f"{f.name.split('.')[0]} T={t:g}", "contest", status, cost, None, None,
                        wall, wall <= bound and done.returncode == 0, 0, note + f"; {_load()}"))  # fmt: skip
    return rows


def iopddl_files(directory: Path) -> list[Path]:
    """B and G, and the first production instance when the directory has a ``production`` folder."""
    picked = [p for p in sorted(directory.glob("*.json.gz")) if p.name.split(".")[0][-1:] in ("B", "G")]
    production = sorted(Path(directory, "production").glob("*.json.gz"))
    return picked + production[:1]
