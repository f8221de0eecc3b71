"""Does the cost model order plans the way the simulator does? Pairs counted so ties cannot pad the claim.

Two plans with the same predicted cost (or the same simulated time, e.g. two
backends returning one plan) say nothing about ranking; only *ordered* pairs,
separated by more than a tolerance on both sides, can agree or disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations


@dataclass(frozen=True)
class RankAgreement:
    pairs: int  # every pair of plans
    ordered: int  # pairs whose predicted costs and simulated times both differ by more than the tolerance
    inversions: int  # ordered pairs that prediction and simulation order oppositely

    @property
    def tied(self) -> int:
        return self.pairs - self.ordered

    def __add__(self, other: RankAgreement) -> RankAgreement:
        return RankAgreement(self.pairs + other.pairs, self.ordered + other.ordered, self.inversions + other.inversions)

    def summary(self) -> str:
        return f"{self.inversions} inversions in {self.ordered} ordered pairs ({self.tied} of {self.pairs} pairs tied)"


def rank_agreement(predicted: Sequence[float], simulated: Sequence[float], tolerance: float = 0.01) -> RankAgreement:
    """Compare every pair of plans; a relative gap at or below ``tolerance`` on either side is a tie."""
    if len(predicted) != len(simulated):
        raise ValueError(f"rank_agreement: {len(predicted)} predicted values but {len(simulated)} simulated")
    ordered = inversions = pairs = 0
    for i, j in combinations(range(len(predicted)), 2):
        pairs += 1
        dp = _gap(predicted[i], predicted[j])
        ds = _gap(simulated[i], simulated[j])
        if abs(dp) > tolerance and abs(ds) > tolerance:
            ordered += 1
            inversions += (dp > 0) != (ds > 0)
    return RankAgreement(pairs, ordered, inversions)


def total(agreements: Iterable[RankAgreement]) -> RankAgreement:
    out = RankAgreement(0, 0, 0)
    for a in agreements:
        out = out + a
    return out


def _gap(a: float, b: float) -> float:
    top = max(abs(a), abs(b))
    return 0.0 if top == 0 else (a - b) / top
