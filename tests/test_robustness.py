"""Bad input, garbage JSON and infeasibility: only typed errors, each with a diagnosis."""

import contextlib
import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spyreopt as so
from spyreopt.errors import FormatError, GraphError, InfeasibleError, SpyreoptError
from spyreopt.formats.iopddl import load_iopddl
from spyreopt.solvers.registry import solve_formulation
from spyreopt.testing.formulations import random_formulation

IOPDDL_B = Path(__file__).parent / "data" / "iopddl" / "asplos-2025-iopddl-B.json.gz"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


def _mutations(base: dict):
    """Garbage built from a real document: fields dropped, retyped or replaced at every level."""
    keys = st.sampled_from(sorted(base))
    return st.tuples(keys, json_values)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(json_values)
def test_garbage_graph_json_gives_only_typed_errors(value):
    with pytest.raises(SpyreoptError):
        so.Graph.from_json(json.dumps(value))


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(json_values)
def test_garbage_plan_json_gives_only_typed_errors(value):
    with pytest.raises(SpyreoptError):
        so.Plan.from_json(json.dumps(value))


@pytest.fixture(scope="module")
def mlp_docs():
    g = so.workloads.get("mlp")
    return g.to_dict(), json.loads(so.solve(g).to_json())


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_mutated_graph_and_plan_json_never_crash(mlp_docs, data):
    graph_doc, plan_doc = mlp_docs
    for doc, load in ((graph_doc, so.Graph.from_json), (plan_doc, so.Plan.from_json)):
        doc = json.loads(json.dumps(doc))
        target = doc
        section = data.draw(st.sampled_from(["top", "ops", "leaves", "tensors", "edges"]))
        if section != "top" and isinstance(doc.get(section), list) and doc[section]:
            target = doc[section][data.draw(st.integers(0, len(doc[section]) - 1))]
        key, value = data.draw(_mutations(target))
        if data.draw(st.booleans()):
            target.pop(key)
        else:
            target[key] = value
        try:
            loaded = load(json.dumps(doc))
        except SpyreoptError:
            continue
        if isinstance(loaded, so.Plan):  # loaded fine: validation must still give only typed errors
            with contextlib.suppress(SpyreoptError):  # anything else propagates and fails the test
                loaded.validate()


def test_typed_error_for_dangling_tensor_in_json():
    doc = so.workloads.get("mlp").to_dict()
    doc["outputs"].append("ghost")
    with pytest.raises(GraphError, match="ghost"):
        so.Graph.from_json(json.dumps(doc))


def test_typed_error_for_tensor_used_before_produced():
    doc = so.workloads.get("swiglu").to_dict()
    doc["ops"][0], doc["ops"][-1] = doc["ops"][-1], doc["ops"][0]
    with pytest.raises(GraphError, match="used before it is produced"):
        so.Graph.from_json(json.dumps(doc))


def test_device_memory_too_small_is_diagnosed():
    with pytest.raises(InfeasibleError) as info:
        so.solve(so.workloads.get("mlp"), hardware=so.HardwareSpec(device_memory_bytes=1 << 20))
    d = info.value.diagnosis
    assert d["over"] == d["usage"] - d["limit"] > 0 and d["min_capacity"] == d["usage"]
    assert "time step 0" in str(info.value) and "w1" in str(info.value)


def test_iopddl_usage_limit_below_minimum_is_diagnosed():
    f = dataclasses.replace(load_iopddl(IOPDDL_B), usage_limit=1000)
    with pytest.raises(InfeasibleError) as info:
        solve_formulation(f, "greedy", time_limit=5)
    d = info.value.diagnosis
    assert d["limit"] == 1000 and d["over"] == d["usage"] - 1000 and d["buffers"]
    msg = str(info.value)
    assert f"time step {d['time_step']}" in msg and "smallest limit" in msg
    # the diagnosed minimum is achievable in the sense that it is a true lower bound: one above it is not rejected up front
    g = dataclasses.replace(f, usage_limit=d["min_capacity"])
    from spyreopt.solvers.feasibility import check_usage_feasible

    check_usage_feasible(g)


def test_random_formulation_with_zero_limit_still_solves_or_diagnoses():
    f = random_formulation(3, num_nodes=6, tight=0.0)
    sol = solve_formulation(f, "greedy", time_limit=5)
    assert f.is_feasible(sol.assignment, sol.offsets)


def test_hardware_spec_errors_name_the_field():
    with pytest.raises(FormatError, match="cores"):
        so.HardwareSpec(cores=0)
    with pytest.raises(FormatError, match="unknown field"):
        so.HardwareSpec.from_dict({"warp_drive": 1})
