"""Cost-model fitting: the terms reproduce the planner's model, the fit recovers known
coefficients and improves on wrong ones, the held-out split is deterministic, the CSV
and coefficient files round-trip, and the new model terms match the simulator's mechanisms."""

import json
import random
from dataclasses import replace
from importlib import resources

import numpy as np
import pytest

import spyreopt as so
from spyreopt.calibrate import fit as F
from spyreopt.calibrate import sampling as smp
from spyreopt.cli import main
from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.errors import FormatError
from spyreopt.hw.sim_flows import ring_path
from spyreopt.hw.sim_machine import requests
from spyreopt.model.candidates import OpCandidates, dma_requests
from spyreopt.model.edge_analysis import ring_traffic
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.layout import box_padded_bytes
from spyreopt.model.problem import Problem

HW = HardwareSpec()


@pytest.fixture(scope="module")
def configs():
    return smp.random_configs(8, seed=11)


@pytest.fixture(scope="module")
def simulated():
    samples, rejected = smp.simulate_samples(smp.random_configs(6, seed=5))
    assert rejected == []
    return samples


def _evaluate_target(config: smp.Config, coef: Coefficients) -> tuple[float, list[str]]:
    """The planner's own prediction of a configuration's target (µs), and its edge modes."""
    p = Problem(config.graph(), HW, coef, fixed=config.decision_map())
    a = p.normalize([0] * len(p.ops))
    assert p.formulation.evaluate(a) == p.total_ps(a)
    ev = p.evaluate(a)
    quantity, _, op = config.target.partition(":")
    modes = [p.pair(k, a[e.producer], a[e.consumer]).mode for k, e in enumerate(p.edges)]
    if quantity == "total":
        return sum(b.total for b in ev.values()), modes
    return (ev[op].total if quantity == "op" else getattr(ev[op], quantity)), modes


def _random_coefficients(seed: int) -> Coefficients:
    rng = np.random.default_rng(seed)
    c = Coefficients.load().to_dict()
    for k, v in c.items():
        lo, hi = F.BOUNDS[k]
        c[k] = float(np.clip(v * rng.uniform(0.5, 1.5), lo, hi)) if v > 0 else v
    c["overlap_gamma"] = float(rng.uniform(0.3, 1.0))
    c["hbm_core_ns_per_byte"] = float(rng.uniform(0.005, 0.05))  # the per-core DMA floor active (0 by default)
    return Coefficients.from_dict(c)


def test_terms_reproduce_the_planners_prediction(configs):
    """predict() on the coefficient-free terms equals Problem.evaluate for any coefficients (fixed edge modes)."""
    t = F.terms(configs)
    reference_modes = [_evaluate_target(c, smp.reference_coefficients())[1] for c in configs]
    compared = 0
    for coef in (smp.reference_coefficients(), Coefficients.load(), _random_coefficients(1), _random_coefficients(2)):
        predicted = F.predict_us(coef, t)
        for n, config in enumerate(configs):
            expected, modes = _evaluate_target(config, coef)
            if modes != reference_modes[n]:  # these coefficients flip a relayout/spill choice: another plan
                continue
            assert predicted[n] == pytest.approx(expected, abs=2e-5), (config, coef)
            compared += 1
    assert compared >= 0.9 * 4 * len(configs)
    assert {c.family for c in configs} == set(smp.FAMILIES)


def test_fit_recovers_known_coefficients(configs):
    truth = _random_coefficients(7)
    t = F.terms(configs)
    samples = [smp.Sample(c, float(m)) for c, m in zip(configs, F.predict_us(truth, t))]
    result = F.fit(samples, holdout=0.0)
    assert all(row.rms_rel < 1e-3 and row.max_rel < 5e-3 for row in result.table), result.format()
    got, want = result.coefficients.to_dict(), truth.to_dict()
    # the terms every family exercises are identified exactly by noise-free data
    for name in ("hbm_bytes_per_ns", "hbm_request_ns", "hbm_latency_ns", "op_overhead_ns", "restick_latency_ns"):
        assert got[name] == pytest.approx(want[name], rel=0.02), name
    assert result.stats["cost"] < 1e-6
    # the start was far off: public figures without the new terms
    assert max(row.rms_rel for row in result.start_table) > 0.1


def test_fit_improves_on_a_perturbed_coefficient_set(simulated):
    wrong = replace(
        Coefficients.load(), hbm_bytes_per_ns=90.0, hbm_latency_ns=600.0, restick_bytes_per_ns=60.0,
        relayout_link_bytes_per_ns=400.0, op_overhead_ns=50.0,
    )  # fmt: skip
    before = {r.family: r.rms_rel for r in F.evaluate(wrong, simulated)}
    result = F.fit(simulated, holdout=0.0, start=wrong)
    after = {r.family: r.rms_rel for r in result.table}
    assert {r.family: r.rms_rel for r in result.start_table} == pytest.approx(before)
    for family in smp.FAMILIES:
        assert after[family] < before[family], (family, before[family], after[family])
    assert max(after.values()) < 0.15 < min(before.values())


def test_holdout_split_is_deterministic_and_per_family(simulated):
    train, test = F.split(simulated, 0.3, seed=4)
    assert (train, test) == F.split(simulated, 0.3, seed=4)
    assert (train, test) != F.split(simulated, 0.3, seed=5)
    assert sorted(train + test) == list(range(len(simulated)))
    for family in smp.FAMILIES:
        n_test = sum(simulated[n].config.family == family for n in test)
        n_all = sum(s.config.family == family for s in simulated)
        assert n_test == round(0.3 * n_all)
    assert F.split(simulated, 0.0, seed=4) == (list(range(len(simulated))), [])
    with pytest.raises(ValueError, match="holdout"):
        F.split(simulated, 1.0, seed=0)


def test_device_rows_have_their_own_holdout(simulated):
    """``device_holdout=0``: every published row trains the fit; the simulator families keep their split."""
    dev = [smp.Sample(replace(s.config, family=F.DEVICE_PREFIX + "x"), s.measured_us) for s in simulated[:10]]
    samples = simulated + dev
    train, test = F.split(samples, 0.3, seed=4, device_holdout=0.0)
    assert all(n in train for n in range(len(simulated), len(samples)))
    assert [n for n in test if n < len(simulated)] == F.split(simulated, 0.3, seed=4)[1]
    _, held = F.split(samples, 0.3, seed=4)
    assert sum(n >= len(simulated) for n in held) == 3
    with pytest.raises(ValueError, match="holdout"):
        F.split(samples, 0.3, seed=0, device_holdout=1.0)


def test_fit_is_deterministic_and_scores_held_out(simulated):
    a = F.fit(simulated, holdout=0.3, seed=2)
    b = F.fit(simulated, holdout=0.3, seed=2)
    assert a.coefficients == b.coefficients and repr(a.table) == repr(b.table)  # (nan Spearman on 2 samples)
    assert [r.n_test for r in a.table] == [2] * len(smp.FAMILIES)
    assert [r.family for r in a.table] == list(smp.FAMILIES)


def test_csv_round_trip(tmp_path, simulated):
    path = tmp_path / "samples.csv"
    smp.write_csv(simulated, path)
    assert smp.read_csv(path) == simulated
    header = path.read_text().splitlines()[0]
    assert header == ",".join(smp.COLUMNS)


@pytest.mark.parametrize(
    "column, value, message",
    [
        ("family", "conv", "column 'family'"),
        ("shapes", "12xq", "column 'shapes'"),
        ("decisions", "mm=2x4x1/1/dram", "residency 'dram'"),
        ("target", "op", "column 'target'"),
        ("measured_us", "-1", "positive"),
        ("kind", "exp", "kind 'exp'"),
    ],
)
def test_csv_errors_name_line_and_column(tmp_path, simulated, column, value, message):
    matmul = next(s for s in simulated if s.config.family == "matmul")
    row = {**smp.config_row(matmul.config), "measured_us": "1.5", column: value}
    path = tmp_path / "bad.csv"
    path.write_text(",".join(smp.COLUMNS) + "\n" + ",".join(row[c] for c in smp.COLUMNS) + "\n")
    with pytest.raises(FormatError, match=message) as err:
        smp.read_csv(path)
    assert "line 2" in str(err.value)


def test_csv_decisions_must_name_the_graphs_ops(tmp_path, simulated):
    s = next(s for s in simulated if s.config.family == "pointwise")
    row = {**smp.config_row(s.config), "measured_us": "2.0", "decisions": "zz=1x1/1/hbm"}
    path = tmp_path / "ops.csv"
    path.write_text(",".join(smp.COLUMNS) + "\n" + ",".join(row[c] for c in smp.COLUMNS) + "\n")
    with pytest.raises(FormatError, match="the pointwise graph has ops"):
        smp.read_csv(path)


def test_coefficient_file_loads_and_cli_refits_from_csv(tmp_path, simulated, capsys):
    csv_path, out = tmp_path / "m.csv", tmp_path / "c.json"
    smp.write_csv(simulated, csv_path)
    assert main(["fit", "--csv", str(csv_path), "--holdout", "0.3", "--seed", "2", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    for family in smp.FAMILIES:
        assert family in text
    assert "RMS rel err" in text and "Spearman" in text
    loaded = Coefficients.load(out)
    assert loaded == F.fit(simulated, holdout=0.3, seed=2).coefficients
    assert f"--csv {csv_path} --seed 2 --holdout 0.3" in out.read_text()


def test_shipped_coefficients_say_how_to_reproduce_them(simulated):
    """The shipped file says how it was made, and its coefficients predict configurations it never saw.

    Scored on the ``simulated`` configurations, drawn with a seed the shipped fit did not use (it used
    seed 0). With 12 per family (seed 2026) the shipped ones score 1.7-8.8% RMS and Spearman >= 0.97
    per family (one swap among 6 is 0.94); the public figures 4-35% and down to 0.6.
    """
    data = json.loads(resources.files("spyreopt.costmodel").joinpath("spyre_default.json").read_text())
    assert data["source"].startswith("spyreopt fit --samples ")
    shipped = Coefficients.from_dict(data["coefficients"])
    assert shipped == Coefficients.load()
    assert len({s.config.family for s in simulated}) == 7
    scores = F.evaluate(shipped, simulated)
    assert [r.family for r in scores if r.rms_rel > 0.10 or r.spearman < 0.9] == [], F.format_table(scores)


def test_device_fit_says_how_to_reproduce_it_and_its_held_out_error():
    """The device fit (``spyreopt fit --sweep``) records its command and its cross-validated error, never its
    training error, and a fit without each published experiment (what ``spyreopt reproduce`` prints as held out)."""
    data = json.loads(resources.files("spyreopt.costmodel").joinpath("spyre_device.json").read_text())
    assert data["source"].startswith("spyreopt fit --sweep ") and "--folds 5 --seed 0" in data["source"]
    assert "held-out" in data["fit"]["expected_error"]
    families = {r["family"]: r for r in data["fit"]["families"]}
    assert families["all"]["mapped"] >= 0.9 * families["all"]["rows"]
    assert set(data["fit"]["held_out_coefficients"]) == {"softmax", "decode", "relayout"}
    device = Coefficients.load(resources.files("spyreopt.costmodel").joinpath("spyre_device.json"))
    assert device != Coefficients.load()  # not the planner's default (docs/device-model.md)


def test_dma_requests_match_the_simulators_count():
    r = random.Random(3)
    for _ in range(300):
        shape = tuple(r.choice([1, 3, 16, 64, 100, 256]) for _ in range(r.randint(1, 3)))
        stick = r.randrange(len(shape))
        box = []
        for d in shape:
            lo = r.randrange(d)
            box.append((lo, r.randint(lo + 1, d)))
        box = tuple(box)
        eb = r.choice([1, 2, 4])
        assert (
            dma_requests(box, shape, stick, eb, HW)
            == requests(box, tuple((0, d) for d in shape), stick, eb, 128, 32)[1]
        )


def _brute_force_links(prod_lay, reads, tensor):
    load, ingress = {}, {}
    hops = 0
    for c, box in reads:
        for o, obox in prod_lay.owner_boxes.items():
            part = tuple((max(a, x), min(b, y)) for (a, b), (x, y) in zip(obox, box))
            if o == c or any(lo >= hi for lo, hi in part):
                continue
            nbytes = box_padded_bytes(part, prod_lay.stick, tensor.elem_bytes, HW.stick_bytes)
            path = ring_path(o, c, HW.cores)
            hops = max(hops, len(path))
            ingress[c] = ingress.get(c, 0) + nbytes
            for link in path:
                load[link] = load.get(link, 0) + nbytes
    return max(load.values(), default=0), hops, max(ingress.values(), default=0)


@pytest.mark.parametrize("shape", [(256, 512), (64, 4096), (32, 256), (4, 16, 128)])
def test_ring_traffic_matches_the_simulators_routes(shape):
    """The busiest link and the longest route, against the simulator's own routing, for every layout pair."""
    g = so.Graph("r")
    y = g.pointwise("exp", g.input("x", shape), name="p")
    g.output(g.pointwise("neg", y, name="c"))
    coef = Coefficients.load()
    prod_c = OpCandidates(g, g.ops["p"], HW, coef, 64)
    cons_c = OpCandidates(g, g.ops["c"], HW, coef, 64)
    tensor = g.tensors[y]
    checked = 0
    for pl in prod_c.layouts:
        for cl in cons_c.layouts:
            if pl.stick == cl.stick:
                assert ring_traffic(pl, cl.reads[0], tensor, HW) == _brute_force_links(pl, cl.reads[0], tensor)
                checked += 1
    assert checked > 10


def test_k_split_writes_after_the_partial_sums():
    """A k split's output write is additive (not hidden under compute): the breakdown puts it in memory."""
    g = so.Graph("k")
    g.output(g.matmul(g.input("a", (256, 2048)), g.input("b", (2048, 256)), name="mm"))
    coef = Coefficients.load()
    split = Problem(g, HW, coef, fixed={"mm": ((1, 2, 8), 1, "hbm")})
    whole = Problem(g, HW, coef, fixed={"mm": ((8, 4, 1), 1, "hbm")})
    for p in (split, whole):
        a = p.normalize([0])
        b = p.evaluate(a)["mm"]
        assert p.formulation.evaluate(a) * 1e-6 == pytest.approx(b.total, abs=1e-9)
    u = split.unary_parts(0, split.normalize([0])[0])
    assert u.split_write > 0 and whole.unary_parts(0, 0).split_write == 0
