"""Benchmark rows and their tables: one ``Row`` per (suite, instance, backend), as Markdown or JSON."""

from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass


@dataclass
class Row:
    suite: str
    workload: str
    backend: str
    status: str
    cost_us: float | None
    simulated_us: float | None
    bound_us: float | None
    solve_s: float
    valid: bool
    ops: int = 0
    note: str = ""

    @classmethod
    def failed(cls, suite: str, workload: str, backend: str, seconds: float, ops: int, exc: Exception) -> Row:
        """The row of a solve that raised: no cost, not valid, the error's first 200 characters as the note."""
        return cls(suite, workload, backend, "error", None, None, None, seconds, False, ops, str(exc)[:200])


def machine() -> str:
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def markdown(rows: list[Row], facts: dict | None = None) -> str:
    """A table per suite; the spyre suite also shows speedups against independent and hbm and the bound ratio."""
    out = [f"Machine: {machine()}", ""]
    by_suite: dict[str, list[Row]] = {}
    for r in rows:
        by_suite.setdefault(r.suite, []).append(r)
    for suite, srows in by_suite.items():
        out.append(f"### {suite}")
        out.append("")
        if suite == "spyre":
            out.extend(_spyre_table(srows))
        else:
            out.append("| workload | ops | backend | status | cost | solve s | valid | note |")
            out.append("|---|---|---|---|---|---|---|---|")
            for r in srows:
                out.append(
                    f"| {r.workload} | {r.ops} | {r.backend} | {r.status} | {_f(r.cost_us)} | {r.solve_s:.2f} | {r.valid} | {r.note} |"
                )
        out.append("")
    if facts:
        out.append("### targets")
        out.append("")
        for name, f in facts.items():
            if len(f) > 1:
                out.append(f"- {name}: " + ", ".join(f"{k}={v}" for k, v in f.items()))
        out.append("")
    return "\n".join(out)


def _f(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _spyre_table(rows: list[Row]) -> list[str]:
    out = [
        "| workload | backend | status | predicted µs | simulated µs | bound µs | vs independent (sim) | vs hbm (sim) | vs no-tiling (sim) | cost/lower bound | solve s | valid |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    by_wl: dict[str, dict[str, Row]] = {}
    for r in rows:
        by_wl.setdefault(r.workload, {})[r.backend] = r
    for wl, rs in by_wl.items():
        lb = rs.get("lower-bound")
        ind, hbm = rs.get("independent"), rs.get("hbm")
        for b, r in rs.items():
            if b == "lower-bound":
                continue
            vs_ind = _ratio(ind and ind.simulated_us, r.simulated_us)
            vs_hbm = _ratio(hbm and hbm.simulated_us, r.simulated_us)
            plain = rs.get(f"{b} no-tiling")  # the same backend with forbid tiling (tiled workloads only)
            vs_plain = _ratio(plain and plain.simulated_us, r.simulated_us)
            to_lb = _ratio(r.cost_us, lb and lb.bound_us)
            out.append(
                f"| {wl} | {b} | {r.status} | {_f(r.cost_us)} | {_f(r.simulated_us)} | {_f(r.bound_us if r.bound_us is not None else (lb and lb.bound_us))} "
                f"| {vs_ind} | {vs_hbm} | {vs_plain} | {to_lb} | {r.solve_s:.2f} | {r.valid} |"
            )
    return out


def _ratio(num: float | None, den: float | None) -> str:
    return "-" if not num or not den else f"{num / den:.2f}x"


def to_json(rows: list[Row], facts: dict | None = None) -> dict:
    return {"machine": machine(), "rows": [asdict(r) for r in rows], "facts": facts or {}}
