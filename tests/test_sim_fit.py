"""Calibrating the simulator on device rows (spyreopt.calibrate.sim_fit) and the calibrated default machine."""

from __future__ import annotations

import json
from dataclasses import replace
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

import spyreopt as so
from spyreopt.calibrate import sim_fit, sweep_eval
from spyreopt.calibrate.sweep import read_sweep
from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.hw.sim_machine import DEVICE_FILE, SimParams, device_params
from spyreopt.hw.simulator import simulate

SAMPLE = Path(__file__).parent / "data" / "spyre-device" / "sweep_sample.csv"  # vendored (tests/data/SOURCE.md)


@pytest.fixture(scope="module")
def rows() -> sim_fit.SimRows:
    data = sweep_eval.load(read_sweep(SAMPLE))
    _, picks = sweep_eval.predict(Coefficients.load(str(resources.files("spyreopt.costmodel") / "spyre_device.json")),
                                  data)  # fmt: skip
    return sim_fit.build(data, picks)


def test_the_subsample_is_seeded_capped_per_family_and_only_from_training_rows(rows):
    train = np.arange(0, len(rows.data.mapped), 2)
    a = sim_fit.subsample(rows, train, per_family=2, seed=0)
    assert np.array_equal(a, sim_fit.subsample(rows, train, per_family=2, seed=0))
    assert set(a) <= set(train)
    fams = [rows.data.families[i] for i in a]
    assert max(fams.count(f) for f in set(fams)) <= 2
    assert all(rows.plan_of[i] >= 0 for i in a)


def test_a_fit_lowers_its_training_error_and_stays_in_bounds(rows):
    every = np.arange(len(rows.data.mapped))
    measured = rows.data.measured_us

    def loss(params: SimParams) -> float:
        rel = sim_fit.simulate_rows(rows, params, every) / measured - 1
        return float(np.nanmean(np.abs(rel)))

    start = replace(SimParams(), **sim_fit.START)
    fit = sim_fit.fit_params(rows, every, max_nfev=12)
    assert loss(fit.params) < loss(start)
    for n in sim_fit.FREE:
        lo, hi = sim_fit.BOUNDS[n]
        assert lo <= getattr(fit.params, n) <= hi, n
    assert sim_fit.fit_params(rows, every, max_nfev=12).params == fit.params  # deterministic


def test_held_out_rows_are_predicted_by_fits_that_never_saw_their_shape_group(rows, monkeypatch):
    seen = []
    real = sim_fit.fit_params

    def spy(r, train, seed=0, max_nfev=sim_fit.MAX_NFEV):
        seen.append({rows.data.groups[i] for i in train})
        return real(r, train, seed, max_nfev=2)

    monkeypatch.setattr(sim_fit, "fit_params", spy)
    held, fits = sim_fit.cross_validate(rows, k=3, seed=0, log=lambda _: None)
    folds = sweep_eval.folds(rows.data.groups, 3, 0)
    assert len(fits) == 3
    for n, groups in enumerate(seen):
        assert not groups & {rows.data.groups[i] for i in np.flatnonzero(folds == n)}
    assert np.isfinite(held[rows.plan_of >= 0]).any()


def test_the_shipped_calibration_names_its_command_and_changes_the_machine():
    doc = json.loads(resources.files("spyreopt.hw").joinpath(DEVICE_FILE).read_text())
    assert doc["source"].startswith("spyreopt fit --sweep") and "--target simulator" in doc["source"]
    assert set(doc["params"]) == set(sim_fit.FREE)
    params = device_params()
    assert all(getattr(params, n) == v for n, v in doc["params"].items())
    plan = so.solve(so.workloads.get("softmax"), backend="greedy", seed=0)
    assert simulate(plan) == simulate(plan, SimParams())  # the default machine is the published figures'
    assert simulate(plan, params).time_us != simulate(plan).time_us
    assert {r["family"] for r in doc["fit"]["families_held_out"]} >= {"pointwise", "all"}


def test_the_simulator_fit_cli_reports_held_out_figures_and_writes_the_file(tmp_path, capsys, monkeypatch):
    from spyreopt.cli import main

    monkeypatch.setattr(sim_fit, "MAX_NFEV", 2)
    out = tmp_path / "sim.json"
    code = main(["fit", "--sweep", str(SAMPLE), "--target", "simulator", "--folds", "2", "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0
    assert "held out" in text and "uncalibrated" in text
    doc = json.loads(out.read_text())
    assert doc["source"].endswith(f"--out {out}") and set(doc["params"]) == set(sim_fit.FREE)
