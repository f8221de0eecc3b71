"""Rank agreement between prediction and simulation counts ordered pairs only (issue 16)."""

import pytest

from spyreopt.costmodel.ranking import RankAgreement, rank_agreement, total


def test_tied_pairs_are_not_counted_as_agreement():
    # three backends returning one plan, and one better plan: 6 pairs, 3 ordered, none inverted
    a = rank_agreement([10.0, 10.0, 10.0, 5.0], [11.0, 11.0, 11.0, 5.5])
    assert a == RankAgreement(pairs=6, ordered=3, inversions=0) and a.tied == 3


def test_an_inversion_and_the_tolerance():
    assert rank_agreement([1.0, 2.0], [2.0, 1.0]).inversions == 1
    assert rank_agreement([1.0, 1.005], [1.0, 0.5]) == RankAgreement(1, 0, 0)  # a 0.5% gap is a tie at 1%
    assert rank_agreement([1.0, 1.005], [1.0, 0.5], tolerance=0.001).inversions == 1


def test_totals_and_errors():
    assert total([RankAgreement(3, 2, 1), RankAgreement(1, 1, 0)]).summary() == (
        "1 inversions in 3 ordered pairs (1 of 4 pairs tied)"
    )
    with pytest.raises(ValueError, match="2 predicted values but 1 simulated"):
        rank_agreement([1.0, 2.0], [1.0])
