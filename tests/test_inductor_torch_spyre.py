"""Decisions of a captured graph written in torch-spyre's ``solved`` form and judged by the torch-spyre judge."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

import spyreopt.integrations.inductor as si  # noqa: E402
from spyreopt.formats.torch_spyre import read_captures  # noqa: E402
from spyreopt.formats.torch_spyre_judge import judge  # noqa: E402
from spyreopt.integrations.inductor import examples  # noqa: E402
from spyreopt.integrations.inductor.torch_spyre import capture_inputs, solved  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_compiler")


@pytest.fixture(scope="module")
def block() -> si.CapturedGraph:
    torch._dynamo.reset()
    si.clear()
    model, inputs, _ = examples.get("block", "small")
    options = {"mode": "analysis", "backend": "greedy"}
    with torch.no_grad():
        torch.compile(model, backend="spyreopt", options=options, dynamic=False)(*inputs)
    (r,) = [x for x in si.plans() if x.graph is not None]
    assert r.error is None, r.error
    return r


def test_every_buffer_answered_with_our_decision_and_judged_valid(block):
    doc = capture_inputs(block)
    (graph,) = read_captures({"block": [doc]})
    decided = si.decisions(block)
    assert len(graph.buffers) >= 10
    handover = solved(block, graph)
    assert [a.name for a in handover.answers] == [b.name for b in graph.buffers]
    for a in handover.answers:
        writer = decided[a.name].writer
        assert a.resident == (writer.residency == "lx"), a
        assert a.address == (writer.address if a.resident else None)
        assert a.division == 0  # our division is entry 0 of the menu capture_inputs wrote
    assert all("device memory for later ones" in why for why in handover.unmatched.values())
    verdict = judge(graph, handover.answers, None)
    assert verdict.valid, verdict.message
    assert any(a.resident for a in handover.answers)
    # the solved list reads back as the capture's own answers, and a wrong address is caught
    (again,) = read_captures({"block": [doc | {"solved": handover.solved()}]})
    assert again.reference == handover.answers
    uses = {b.name: b.uses for b in graph.buffers}
    live = [a for a in handover.answers if a.resident]
    a, b = next(
        (a, b) for a in live for b in live if a.name < b.name and uses[a.name][0] < uses[b.name][0] < uses[a.name][-1]
    )
    moved = [dataclasses.replace(x, address=a.address) if x is b else x for x in handover.answers]
    assert judge(graph, moved, None).rule == "overlap"


def test_a_division_missing_from_the_menu_is_listed_and_answered_off_chip(block):
    doc = capture_inputs(block)
    split = next(b for b in doc["inputs"] if b["core_divisions"][0]["output_splits"])
    split["core_divisions"] = split["core_divisions"][1:]  # only the undivided entry is left
    for b in doc["inputs"]:  # the match lists keep to the shortened menu
        if split["name"] in b["cd_parent_matches"]:
            b["cd_parent_matches"][split["name"]] = []
    split["cd_parent_matches"] = {p: [] for p in split["parents"]}
    (graph,) = read_captures({"block": [doc]})
    handover = solved(block, graph)
    assert "not on torch-spyre's menu" in handover.unmatched[split["name"]]
    answer = next(a for a in handover.answers if a.name == split["name"])
    assert (answer.division, answer.resident, answer.address) == (0, False, None)
