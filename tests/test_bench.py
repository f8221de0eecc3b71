"""``spyreopt bench``: external data only from --data or SPYREOPT_DATA, and a suite that runs on the vendored instances."""

from __future__ import annotations

from pathlib import Path

import pytest

from spyreopt.bench.data import ENV, data_dir
from spyreopt.cli import main
from spyreopt.errors import FormatError

DATA = Path(__file__).parent / "data"


def test_data_comes_from_the_argument_or_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(FormatError, match="pass --data DIR or set SPYREOPT_DATA"):
        data_dir(None, "iopddl")
    assert data_dir(DATA, "iopddl") == DATA / "iopddl"
    monkeypatch.setenv(ENV, str(DATA))
    assert data_dir(None, "minimalloc", "challenging") == DATA / "minimalloc" / "challenging"
    with pytest.raises(FormatError, match="is not a directory"):
        data_dir(tmp_path, "iopddl")


def test_a_suite_without_data_is_a_clear_error(monkeypatch, capsys):
    monkeypatch.delenv(ENV, raising=False)
    assert main(["bench", "--suite", "minimalloc", "--quiet"]) == 2
    assert "SPYREOPT_DATA" in capsys.readouterr().err


def test_unknown_suite(capsys):
    assert main(["bench", "--suite", "spyre,nope", "--quiet"]) == 2
    assert "unknown suite(s) ['nope']" in capsys.readouterr().err  # one line on stderr, like every bad input


def test_iopddl_suite_on_the_vendored_instances(capsys):
    assert (
        main(
            ["bench", "--suite", "iopddl", "--backends", "anneal", "--time-limit", "5", "--data", str(DATA), "--quiet"]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "| asplos-2025-iopddl-B |" in out and "| asplos-2025-iopddl-G |" in out
    # the default method (the contest engine) gets a row per instance, judged feasible, under the limit given
    assert "| B | 816 | contest | feasible |" in out and "| G | 816 | contest | feasible |" in out
    assert "limit 5 s" in out
