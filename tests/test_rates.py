"""The machine-calibrated rates: one module holds them, and ``spyreopt bench --suite rates`` measures each."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import spyreopt
from spyreopt import rates
from spyreopt.bench.rates import rate_rows

ROOT = Path(spyreopt.__file__).parent
RATE = re.compile(r"_PER_SECOND|SECONDS_PER_")  # the names of rates: units a second, seconds a unit


def test_every_rate_is_defined_in_rates_only():
    """A module-level constant named like a rate, or named as one of ``spyreopt.rates``, lives there only."""
    names = {n for n in vars(rates) if n.isupper()}
    elsewhere = []
    for path in ROOT.rglob("*.py"):
        if path == ROOT / "rates.py":
            continue
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            for t in targets:
                if isinstance(t, ast.Name) and (t.id in names or RATE.search(t.id)):
                    elsewhere.append(f"{path.relative_to(ROOT)}: {t.id}")
    assert not elsewhere, f"rates defined outside spyreopt.rates: {elsewhere}"


def test_the_rates_suite_measures_each_rate_it_names():
    rows = rate_rows(names=("mlp",))
    assert {r.workload for r in rows} == {
        "build_s_per_op", "finish_s_per_op", "window_units_per_s", "anneal_look_s", "cpsat_dtime_per_s",
    }  # fmt: skip
    for r in rows:
        assert r.valid and r.suite == "rates" and r.ops > 0
        measured = float(r.note.split("measured ")[1].split(",")[0])
        assert measured > 0, r
