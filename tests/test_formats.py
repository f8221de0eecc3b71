"""Graph and plan JSON carry a version that readers check; the builder explains itself."""

from __future__ import annotations

import json
import pydoc

import pytest

import spyreopt as so
from spyreopt.cli import main
from spyreopt.model.graph import GRAPH_VERSION
from spyreopt.model.plan_data import PLAN_VERSION


def _plan():
    return so.solve(so.workloads.get("mlp"), backend="greedy")


def test_graph_and_plan_json_carry_their_version():
    plan = _plan()
    data = json.loads(plan.to_json())
    assert data["version"] == PLAN_VERSION and data["graph"]["version"] == GRAPH_VERSION
    assert so.Plan.from_json(plan.to_json()) == plan


def test_files_without_a_version_still_load():
    plan = _plan()
    data = json.loads(plan.to_json())
    del data["version"], data["graph"]["version"]
    old = so.Plan.from_json(json.dumps(data))
    assert [o.division for o in old.ops] == [o.division for o in plan.ops]
    old.validate()
    g = json.loads(so.workloads.get("softmax").to_json())
    del g["version"]
    assert len(so.Graph.from_dict(g).ops) == 5


@pytest.mark.parametrize("version", [2, "1", None])
def test_an_unknown_version_is_one_line_naming_it(version, tmp_path, capsys):
    data = json.loads(_plan().to_json())
    data["version"] = version
    with pytest.raises(
        so.FormatError, match=rf"plan JSON: version {version!r} is not supported; this spyreopt reads version 1"
    ):
        so.Plan.from_json(json.dumps(data))
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    assert main(["explain", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f"version {version!r}" in err
    g = json.loads(so.workloads.get("mlp").to_json())
    g["version"] = version
    with pytest.raises(so.FormatError, match=rf"graph JSON: version {version!r} is not supported"):
        so.Graph.from_dict(g)


def test_repr_summary_and_public_function_lists():
    g = so.workloads.get("mlp")
    assert repr(g) == "<Graph 'mlp': 3 ops (2 matmul, 1 pointwise), 3 inputs and weights, 1 output>"
    text = g.summary()
    assert "pointwise gelu" in text and "gelu(up): [128, 1024] fp16" in text and "(output)" in text
    assert "weight w1: [256, 1024] fp16" in text
    assert "gelu" in so.POINTWISE_FUNCTIONS and "mean" in so.REDUCTIONS and "bf16" in so.DTYPES
    with pytest.raises(so.GraphError, match="unknown pointwise function"):
        so.Graph("x").pointwise("nope", "a")


def test_every_public_builder_method_has_its_own_docstring():
    for name in ("input", "weight", "output", "matmul", "pointwise", "reduce", "permute", "transpose", "reshape",
                 "softmax", "layernorm", "rmsnorm", "summary", "to_dict", "from_dict", "to_json", "from_json"):  # fmt: skip
        doc = getattr(so.Graph, name).__doc__
        assert doc and len(doc) > 30, name
    assert "# ----" not in pydoc.render_doc(so.Graph)
    assert "Raises GraphError" in so.Graph.matmul.__doc__


def test_workloads_lists_every_builtin_with_a_description(capsys):
    assert main(["workloads"]) == 0
    out = capsys.readouterr().out
    for name in [*so.workloads.names(), *so.workloads.EXTRA]:
        line = next((x for x in out.splitlines() if x.split()[:1] == [name]), None)
        assert line is not None, name
        assert len(line.split("ops", 1)[1].strip()) > 10, line  # a one-line description
