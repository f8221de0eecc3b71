"""Every bad input is answered in one line: the file, field or option and what is wrong; exit status 2; no
traceback; nothing accepted silently.

The command-line cases run in-process (``spyreopt.cli.main`` with an argv, its output captured), so the corpus
stays fast; a few run as real processes to check that no traceback reaches stderr there either.
"""

from __future__ import annotations

import copy
import gzip
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

import spyreopt as so
from spyreopt.cli import main
from spyreopt.errors import SpyreoptError
from spyreopt.formats.iopddl import load_iopddl
from spyreopt.model.graph import Graph
from spyreopt.model.plan import Plan

DATA = Path(__file__).parent / "data" / "iopddl"
B = DATA / "asplos-2025-iopddl-B.json.gz"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("bad")
    (d / "empty.json").write_text("")
    (d / "trunc.json").write_text('{"name": "g", "ops": [')
    (d / "list.json").write_text("[1, 2, 3]")
    (d / "bin.json").write_bytes(gzip.compress(b"not text"))
    (d / "trunc.json.gz").write_bytes(B.read_bytes()[:200])
    (d / "empty.csv").write_text("")
    (d / "badhdr.csv").write_text("a,b\n1,2\n")
    (d / "neg.csv").write_text("id,lower,upper,size\n0,0,10,-5\n")
    (d / "ok.1024.csv").write_text("id,lower,upper,size\n0,0,10,64\n")
    (d / "pin.json").write_text("{not json")
    doc = json.loads(gzip.decompress(B.read_bytes()))
    for name, edit in {
        "negcost": lambda p: p["nodes"]["costs"][0].__setitem__(0, -1),
        "negedge": lambda p: p["edges"]["costs"][0].__setitem__(0, -3),
        "negusage": lambda p: p["nodes"]["usages"][0].__setitem__(0, -3),
        "nonodes": lambda p: p.pop("nodes"),
        "badlimit": lambda p: p.__setitem__("usage_limit", -1),
    }.items():
        bad = copy.deepcopy(doc)
        edit(bad["problem"])
        (d / f"{name}.json").write_text(json.dumps(bad))
    return d


# (argv with {d} for the files' directory and {B} for a good IOPDDL instance, a word the one line must contain)
CLI = [
    (["solve", "missing.json"], "missing.json"),
    (["solve", "{d}/empty.json"], "empty.json"),
    (["solve", "{d}/trunc.json"], "trunc.json"),
    (["solve", "{d}/list.json"], "expected an object"),
    (["solve", "{d}/bin.json"], "bin.json"),
    (["solve", "mlp", "--time-limit", "-1"], "--time-limit"),
    (["solve", "mlp", "--time-limit", "0"], "--time-limit"),
    (["solve", "mlp", "--time-limit", "nan"], "--time-limit"),
    (["solve", "mlp", "--time-limit", "abc"], "--time-limit"),
    (["solve", "nosuch"], "nosuch"),
    (["solve", "mlp", "--backend", "nope"], "nope"),
    (["solve", "mlp", "--bogus"], "--bogus"),
    (["solve", "model:llama-3-8b", "--seq", "0"], "seq"),
    (["solve", "model:llama-3-8b", "--seq", "-5"], "seq"),
    (["solve", "model:nosuch"], "nosuch"),
    (["solve", "mlp", "--pin", "missing.json"], "missing.json"),
    (["solve", "mlp", "--pin", "{d}/pin.json"], "pin.json"),
    (["solve", "mlp", "--forbid", "nonsense"], "nonsense"),
    (["solve", "mlp", "--seq", "4"], "--seq"),
    (["solve", "mlp", "--decompose", "bogus"], "--decompose"),
    (["solve", "model:llama-3-8b", "--layers", "0"], "layers"),
    (["solve", "model:llama-3-8b", "--phase", "decode", "--context", "-1"], "context"),
    (["solve", "mlp", "--seed", "x"], "--seed"),
    (["solve"], "target"),
    (["show", "missing.json"], "missing.json"),
    (["show", "{d}/empty.json"], "empty.json"),
    (["show", "{d}/trunc.json"], "trunc.json"),
    (["show", "{d}/list.json"], "list.json"),
    (["simulate", "missing.json"], "missing.json"),
    (["simulate", "{d}/empty.json"], "empty.json"),
    (["simulate", "{d}/trunc.json"], "trunc.json"),
    (["simulate", "{d}/list.json"], "list.json"),
    (["place", "missing.1024.csv", "--out", "{d}/o.csv"], "missing.1024.csv"),
    (["place", "{d}/empty.csv", "--capacity", "10", "--out", "{d}/o.csv"], "empty.csv"),
    (["place", "{d}/badhdr.csv", "--capacity", "10", "--out", "{d}/o.csv"], "header"),
    (["place", "{d}/neg.csv", "--capacity", "10", "--out", "{d}/o.csv"], "size"),
    (["place", "{d}/ok.1024.csv", "--capacity", "0", "--out", "{d}/o.csv"], "--capacity"),
    (["place", "{d}/ok.1024.csv", "--capacity", "-5", "--out", "{d}/o.csv"], "--capacity"),
    (["place", "{d}/ok.1024.csv", "--time-limit", "-1", "--out", "{d}/o.csv"], "--time-limit"),
    (["place", "{d}/ok.1024.csv", "--time-limit", "0", "--out", "{d}/o.csv"], "--time-limit"),
    (["place", "{d}/badhdr.csv", "--out", "{d}/o.csv"], "--capacity"),
    (["place", "{d}/ok.1024.csv", "--method", "bogus", "--out", "{d}/o.csv"], "--method"),
    (["iopddl", "missing.json", "--out", "{d}/s.json"], "missing.json"),
    (["iopddl", "{d}/empty.json", "--out", "{d}/s.json"], "empty"),
    (["iopddl", "{d}/trunc.json.gz", "--out", "{d}/s.json"], "gzip"),
    (["iopddl", "{d}/trunc.json", "--out", "{d}/s.json"], "JSON"),
    (["iopddl", "{d}/list.json", "--out", "{d}/s.json"], "problem"),
    (["iopddl", "{d}/nonodes.json", "--out", "{d}/s.json"], "problem.nodes"),
    (["iopddl", "{d}/negcost.json", "--out", "{d}/s.json"], "problem.nodes.costs[0][0]"),
    (["iopddl", "{d}/negedge.json", "--out", "{d}/s.json"], "problem.edges.costs[0]"),
    (["iopddl", "{d}/negusage.json", "--out", "{d}/s.json"], "problem.nodes.usages[0][0]"),
    (["iopddl", "{d}/badlimit.json", "--out", "{d}/s.json"], "usage_limit"),
    (["iopddl", "{B}", "--time-limit", "-1", "--out", "{d}/s.json"], "--time-limit"),
    (["iopddl", "{B}", "--time-limit", "0", "--out", "{d}/s.json"], "--time-limit"),
    (["iopddl", "{B}", "--backend", "bogus", "--out", "{d}/s.json"], "bogus"),
    (["iopddl", "{B}"], "--out"),
    (["bench", "--suite", "bogus"], "bogus"),
    (["bench", "--suite", "minimalloc", "--data", "/nonexistent"], "/nonexistent"),
    (["bench", "--suite", "spyre", "--time-limit", "-1"], "--time-limit"),
    (["bench", "--suite", "spyre", "--backends", "nope"], "nope"),
    (["cache", "stats", "--dir", "/nonexistent"], "/nonexistent"),
    (["cache", "bogus", "--dir", "/tmp"], "bogus"),
    (["sweep", "--workloads", "nosuch"], "nosuch"),
    (["sweep", "--backends", "nope"], "nope"),
    (["sweep", "--lx-bytes", "abc"], "--lx-bytes"),
    (["sweep", "--time-limit", "-1"], "--time-limit"),
    (["sweep", "--cores", "0"], "cores"),
    (["fit", "--csv", "missing.csv"], "missing.csv"),
    (["fit", "--samples", "0"], "--samples"),
    (["fit", "--holdout", "1.5"], "--holdout"),
    (["reproduce", "--coefficients", "missing.json"], "missing.json"),
    (["reproduce", "--only", "bogus"], "--only"),
    (["reproduce", "--time-limit", "-1"], "time_limit"),
    (["nosuch-command"], "nosuch-command"),
    ([], "command"),
]


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    assert len(lines) == 1, f"expected one line, got {len(lines)}: {lines[:5]}"
    return lines[0]


@pytest.mark.parametrize(("argv", "names"), CLI, ids=[" ".join(a)[:60] or "(none)" for a, _ in CLI])
def test_command_line_answers_bad_input_in_one_line(argv, names, files, capsys):
    args = [a.format(d=files, B=B) for a in argv]
    try:
        code = main(args)
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, f"exit status {code}: {err}"
    assert names in _one_line(err)


API = [
    (lambda g: so.solve(g, backend="greedy", nonsense_option=3), "nonsense_option"),
    (lambda g: so.solve(g, backend="cpsat", nonsense_option=3), "nonsense_option"),
    (lambda g: so.solve(g, backend="hbm", nonsense_option=3), "nonsense_option"),
    (lambda g: so.solve(g, nonsense_option=3), "nonsense_option"),
    (lambda g: so.solve(g, backend="greedy", time_limit=-1), "time_limit"),
    (lambda g: so.solve(g, time_limit=0), "time_limit"),
    (lambda g: so.solve(g, backend="anneal", time_limit=math.nan), "time_limit"),
    (lambda g: so.solve(g, backend="greedy", time_limit=math.inf), "time_limit"),
    (lambda g: so.solve(g, backend="greedy", time_limit="soon"), "time_limit"),
    (lambda g: so.solve(g, backend="nope"), "nope"),
    (lambda g: so.solve(g, backend="greedy", decompose="layers", time_limit=-1), "time_limit"),
    (lambda g: so.workloads.get("nope"), "nope"),
    (lambda g: so.presets.get("nope"), "nope"),
    (lambda g: so.presets.get("llama-3-8b", seq=0), "seq"),
    (lambda g: Plan.from_json(""), "plan JSON"),
    (lambda g: Graph.from_json("{"), "graph JSON"),
    (lambda g: load_iopddl({"problem": {"nodes": {}, "edges": {"nodes": [], "costs": []}}}), "problem.nodes"),
]


@pytest.mark.parametrize(("call", "names"), API, ids=[n for _, n in API])
def test_api_rejects_bad_input_with_a_typed_one_line_error(call, names):
    with pytest.raises(SpyreoptError) as info:
        call(so.workloads.get("mlp"))
    assert names in str(info.value) and "\n" not in str(info.value)


def test_bad_input_corpus_is_large():
    assert len(CLI) + len(API) >= 60


@pytest.mark.parametrize(
    "argv",
    [
        ["solve", "missing.json"],
        ["iopddl", "{d}/trunc.json.gz", "--out", "{d}/s.json"],
        ["solve", "mlp", "--time-limit", "-1"],
    ],
)
def test_no_traceback_reaches_stderr_of_a_real_process(argv, files):
    args = [a.format(d=files) for a in argv]
    done = subprocess.run([sys.executable, "-m", "spyreopt", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    _one_line(done.stderr)


def test_scores_print_enough_digits_to_tell_one_from_nearly_one():
    from spyreopt.formats.iopddl import format_score, score

    b = "asplos-2025-iopddl-B"
    assert format_score(score(b, 532_844, True)) != format_score(score(b, 532_843, True)) == "1.000000"
    assert format_score(score(b, 0, True)) == format_score(score(b, 2, False)) == f"{0.0:.6f}"
