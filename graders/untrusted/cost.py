"""What one run of an untrusted program costs, in FLOPs, split by what the work is for.

`graders.untrusted.flops` fills these in; docs/ARCHITECTURE.md ("Two axes of a policy") says which
figure the recompute check judges and why.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, fields

FLOP_CAP = 1 << 62


def _capped(value: int) -> int:
    return min(value, FLOP_CAP)


@dataclass(frozen=True)
class Cost:
    """FLOPs of one run, bounded, in three figures, each as `high` (the costliest branch wherever
    only the run picks one) and `*_low` (the cheapest). They are equal when every branch index
    and loop trip count is known; an unknown loop counts once in both (so `high` is then no upper
    bound: the counter's `exact` says so).

    Attributes:
        high, low: every op that runs.
        residual, residual_low: ops that depend on no cotangent (work on the residuals alone:
            forward values rebuilt and derivative factors such as cos(z) from a saved z).
        recompute, recompute_low: of those, the ops that repeat an operation of the forward
            program (the same op on the same types, `graders.untrusted.signature`): the forward
            work the backward pass does again.
    """

    high: int = 0
    residual: int = 0
    low: int = 0
    residual_low: int = 0
    recompute: int = 0
    recompute_low: int = 0

    @staticmethod
    def of(flops: int, *, residual: bool, recompute: bool = False) -> Cost:
        """One op's cost: `flops` in every figure it belongs to."""
        r = flops if residual else 0
        c = flops if recompute else 0
        return Cost(flops, r, flops, r, c, c)

    def __add__(self, other: Cost) -> Cost:
        return Cost(*(_capped(getattr(self, f.name) + getattr(other, f.name)) for f in fields(self)))

    def times(self, n: int) -> Cost:
        return Cost(*(_capped(getattr(self, f.name) * n) for f in fields(self)))

    @staticmethod
    def either(costs: list[Cost]) -> Cost:
        """One of `costs` runs, which one only the run decides: the high figures of the costliest,
        the low figures of the cheapest, figure by figure."""
        values = {}
        for f in fields(Cost):
            pick = min if f.name == "low" or f.name.endswith("_low") else max
            values[f.name] = pick(getattr(c, f.name) for c in costs)
        return Cost(**values)


def scaled(counts: Counter[str], n: int) -> Counter[str]:
    """`counts` times `n` (a loop body's recomputed FLOPs per operation, times its trip count)."""
    return Counter({k: _capped(v * n) for k, v in counts.items()})
