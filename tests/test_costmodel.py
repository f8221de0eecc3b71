"""The analytic cost model against hand-computed values."""

import math

import pytest

from spyreopt.calibrate.sampling import reference_coefficients
from spyreopt.costmodel import analytic as cm
from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.errors import FormatError

C = reference_coefficients()  # the public figures (the shipped default is fitted to the simulator)


def test_device_memory_formula():
    assert cm.hbm_ns(C, 150_000, 0) == pytest.approx(1000.0)
    assert cm.hbm_ns(C, 1000, 1000) == pytest.approx(2000 / 150 + 0.00574 * 1000)


def test_balanced_traffic_is_about_105_gbps():
    x = 1 << 20
    assert 2 * x / cm.hbm_ns(C, x, x) == pytest.approx(105, rel=0.01)


def test_matmul_rate_and_row_underfill():
    assert cm.pe_efficiency(C, 2) == pytest.approx(0.50, abs=0.02)
    assert cm.pe_efficiency(C, 4) == pytest.approx(0.63, abs=0.02)
    assert cm.pe_efficiency(C, 8) == pytest.approx(0.72, abs=0.02)
    macs = 1140 * 1000
    assert cm.matmul_compute_ns(C, macs, 8) == pytest.approx(1000 / cm.pe_efficiency(C, 8))


def test_overlap_gamma_one_is_max():
    assert cm.overlap(C, 3.0, 5.0) == 5.0
    assert cm.overlap(C, 7.0, 5.0) == 7.0


def test_relayout_formula():
    runs, split, span = 10, 4, 547 * 100
    expected = runs * (-1.14 + 3.92 * math.log2(split)) + 100
    assert cm.relayout_ns(C, runs, split, span) == pytest.approx(expected)


def test_restick_rate():
    assert cm.restick_ns(C, 116_000, 0) == pytest.approx(1000.0)


def test_fixed_point_is_picoseconds():
    assert cm.ps(1.2345) == 1234 or cm.ps(1.2345) == 1235
    assert cm.COST_UNIT_US == 1e-6


def test_coefficient_file_errors_name_the_field(tmp_path):
    bad = dict(C.to_dict())
    bad["hbm_bytes_per_ns"] = "fast"
    with pytest.raises(FormatError, match="hbm_bytes_per_ns"):
        Coefficients.from_dict(bad)
    del bad["hbm_bytes_per_ns"]
    with pytest.raises(FormatError, match="missing"):
        Coefficients.from_dict(bad)
