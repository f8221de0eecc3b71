"""The README stays a guide (its commands those CI runs) and docs/formats.md names every field the JSON has."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from pathlib import Path

import spyreopt as so
from spyreopt.model.plan import Plan
from spyreopt.model.plan_data import EdgePlan, LoopPlan, OpPlan, TensorPlan

ROOT = Path(__file__).resolve().parents[1]


def test_readme_is_a_short_guide_whose_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    test_command = 'python3 -m venv .venv && .venv/bin/pip install -q -e ".[dev,torch]" && .venv/bin/python -m pytest'
    assert ci.endswith(test_command.removeprefix("python3 -m venv .venv && ")) and test_command in readme
    assert "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/spyreopt solve softmax" in readme


def test_every_relative_link_in_the_docs_resolves():
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.name}: broken link {target}"


def test_formats_doc_names_every_field_of_both_formats():
    doc = re.sub(r"```.*?```", "", (ROOT / "docs" / "formats.md").read_text(), flags=re.S)  # code blocks out
    documented = {w for quoted in re.findall(r"`([^`]+)`", doc) for w in re.findall(r"[a-z_]+", quoted)}
    for cls in (Plan, OpPlan, TensorPlan, EdgePlan, LoopPlan):
        missing = {f.name for f in fields(cls)} - documented
        assert not missing, f"{cls.__name__}: {missing} not in docs/formats.md"
    plan = so.solve(so.workloads.get("softmax"), backend="greedy")
    data = json.loads(plan.to_json())
    assert set(data) <= documented
    assert set(data["hardware"]) <= documented, set(data["hardware"]) - documented
    graph = data["graph"]
    assert set(graph) | {k for op in graph["ops"] for k in op} | {k for x in graph["leaves"] for k in x} <= documented
