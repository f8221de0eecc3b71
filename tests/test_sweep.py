"""The device-sweep importer and its evaluation (spyreopt.calibrate.sweep, sweep_eval; docs/device-sweep.md)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from spyreopt.calibrate import sweep_eval
from spyreopt.calibrate.sweep import SweepRow, program, read_sweep
from spyreopt.cli import main
from spyreopt.costmodel.coefficients import default
from spyreopt.errors import FormatError
from spyreopt.model.problem import Problem

SAMPLE = Path(__file__).parent / "data" / "spyre-device" / "sweep_sample.csv"  # vendored (tests/data/SOURCE.md)


@pytest.fixture(scope="module")
def rows() -> list[SweepRow]:
    assert SAMPLE.exists(), f"{SAMPLE} is missing: the vendored test data (tests/data/SOURCE.md) must be in the clone"
    return read_sweep(SAMPLE)


@pytest.fixture(scope="module")
def data(rows):
    return sweep_eval.load(rows)


def test_every_row_is_mapped_or_says_why(rows, data):
    progs = data.programs
    assert len(progs) == len(rows)
    for r, p in zip(rows, progs):
        assert (p.unmapped is None) == bool(p.configs), r.id
        if r.failed:
            assert p.unmapped.startswith("failed"), r.id
        elif r.kernel_us is None:
            assert p.unmapped == "no timing (0 us)", r.id
    reasons = {r.op: p.unmapped for r, p in zip(rows, progs) if p.unmapped}
    assert "nested tiling" in reasons["mm_nested_m_k"]
    assert "gives no N" in reasons["matmul_row_tiling"]  # a tiled matmul's bytes count its loop's re-reads
    timed = [p for r, p in zip(rows, progs) if r.kernel_us is not None]
    assert sum(p.unmapped is None for p in timed) >= 0.9 * len(timed)


def test_derived_shapes_move_the_recorded_bytes(rows, data):
    """N of a matmul, (B, N) of a batched one: the program's inputs and output are exactly io_hbm_bytes."""
    checked = 0
    for r, p in zip(rows, data.programs):
        if p.unmapped is None and r.op in ("mm", "mmwd", "bmm_wd") and r.cols >= 64:
            g = p.configs[0].graph()
            moved = sum(t.nbytes for t in g.tensors.values() if t.producer is None or t.name in g.outputs)
            assert moved == r.io_bytes, (r.id, p.what)
            checked += 1
    assert checked >= 8


def test_a_row_is_priced_as_the_planner_prices_its_cheapest_configuration(data):
    """The fit's terms (tiled loops included) give exactly the Problem's own cost of each configuration."""
    coef = default()
    us, pick = sweep_eval.predict(coef, data)
    ends = np.append(data.starts[1:], len(data.index))
    configs = [c for i in data.mapped for c in data.programs[i].configs]
    tiled = 0
    for n in range(len(data.mapped)):
        costs = []
        for config in configs[data.starts[n] : ends[n]]:
            problem = Problem(config.graph(), coefficients=coef, fixed=config.decision_map(), stage_masks={})
            a = problem.normalize([0] * len(problem.ops))
            costs.append(sum(b.total for b in problem.evaluate(a).values()))
            tiled += any(d[3] is not None for _, d in config.decisions)
        assert us[n] == pytest.approx(min(costs), rel=1e-6, abs=1e-6)
        assert pick[n] == data.starts[n] + int(np.argmin(costs))
    assert tiled > 0


def _row(op: str, cores: int, measured: float, rows: int = 512) -> SweepRow:
    return SweepRow(f"{op}:{cores}", op, rows, 1024, 0, 1, cores, measured, 0.0, 0, False)


def test_a_tie_counts_against_the_model():
    rows = [_row("neg", 8, 100.0), _row("neg", 16, 101.0), _row("neg", 32, 150.0)]
    idx = np.arange(3)
    ok = sweep_eval.decisions(rows, idx, np.array([50.0, 50.2, 60.0]))  # tied: 100 and 101, the slowest is 101
    assert (ok.groups, ok.right) == (1, 1) and ok.mean_regret == pytest.approx(0.01)
    bad = sweep_eval.decisions(rows, idx, np.array([50.0, 70.0, 50.1]))  # tied: 100 and 150
    assert (bad.groups, bad.right) == (1, 0) and bad.mean_regret == pytest.approx(0.5)
    repeated = rows + [_row("neg", 8, 300.0), _row("neg", 8, 100.0)]  # one configuration: the median of its times
    med = sweep_eval.decisions(repeated, np.arange(5), np.array([50.0, 60.0, 70.0, 50.0, 50.0]))
    assert med.mean_regret == pytest.approx(0.0)
    single = sweep_eval.decisions(rows[:1], np.arange(1), np.array([1.0]))  # one configuration: no decision
    assert single.groups == 0


def test_folds_keep_a_shape_group_together(data):
    f = sweep_eval.folds(data.groups, k=3, seed=0)
    assert np.array_equal(f, sweep_eval.folds(data.groups, k=3, seed=0))
    for g in set(data.groups):
        assert len({int(x) for x, h in zip(f, data.groups) if h == g}) == 1
    assert len(set(f.tolist())) == 3


def test_fit_is_deterministic_and_fits_its_rows(data):
    train = np.arange(len(data.mapped))
    a = sweep_eval.fit_rows(data, train, free=("hbm_bytes_per_ns", "vector_elems_per_ns_per_core", "op_overhead_ns"))
    b = sweep_eval.fit_rows(data, train, free=("hbm_bytes_per_ns", "vector_elems_per_ns_per_core", "op_overhead_ns"))
    assert a.coefficients == b.coefficients
    start = sweep_eval.fit_rows(data, train, free=())
    err = lambda c: np.sqrt(np.mean((sweep_eval.predict(c, data)[0] / data.measured_us - 1) ** 2))  # noqa: E731
    assert err(a.coefficients) < err(start.coefficients)


def test_reproduce_sweep_writes_one_record_per_row(tmp_path, capsys, rows):
    out = tmp_path / "sweep.json"
    assert main(["reproduce", "--sweep", str(SAMPLE), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "torch-spyre RMS" in text and "mean regret" in text and "not mapped:" in text
    records = json.loads(out.read_text())
    assert [r["id"] for r in records] == [r.id for r in rows]
    for rec in records:
        assert set(rec) == {"id", "op", "predicted_us", "simulated_us", "unmapped"}
        assert (rec["predicted_us"] is None) == (rec["unmapped"] is not None)
    assert sum(r["simulated_us"] is not None for r in records) >= 0.8 * sum(r["unmapped"] is None for r in records)


def test_bad_sweep_files_are_format_errors(tmp_path):
    with pytest.raises(FormatError, match="does not exist"):
        read_sweep(tmp_path / "nope.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("id,op,rows\n1,add,64\n")
    with pytest.raises(FormatError, match="missing column"):
        read_sweep(bad)
    text = SAMPLE.read_text().splitlines()
    head = text[0].split(",")
    cells = text[1].split(",")
    cells[head.index("rows")] = "many"
    bad.write_text("\n".join([text[0], ",".join(cells)]) + "\n")
    with pytest.raises(FormatError, match="line 2: column 'rows'"):
        read_sweep(bad)


def test_unknown_kernel_is_listed_not_dropped(rows):
    from dataclasses import replace

    p = program(replace(rows[0], op="flash_attention"))
    assert p.unmapped and "flash_attention" in p.unmapped
