"""The optimum of a budget on the backward pass's peak: the least recomputation among measured
schedules (docs/ARCHITECTURE.md, "Budget problems").

The single-stage model of `graders.budget.optimum` chooses which values to keep; a peak also
depends on when the backward pass rebuilds and frees them, which JAX decides from how checkpoints
nest. The static peak of the program JAX emits is not a sum the model could predict: a 16-layer
scan split into two checkpointed levels of n1 x n2 steps peaks at 1,343,504, 1,212,432 and
1,376,288 bytes for 8 x 2, 4 x 4 and 2 x 8 (measured, jax 0.10.2), which no form a*n1 + b*n2 + c
fits with a carry's 16,384 bytes. So the candidates are programs, measured as submissions are, and
the optimum is the best of them that fits: "the least of the schedules measured", which a student
may beat (the score is capped at 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def peak_frontier(points: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The measured points no other beats on both peak and recomputation, as frontier points
    {"bytes": peak bytes, "flops", "bound_flops": None, "optimal": False, "label"}, the most bytes
    first: the least recomputation measured within each budget is that of the first point whose
    bytes fit it."""
    best: list[dict[str, Any]] = []
    ordered = sorted(
        (p for p in points if p.get("peak_bytes") is not None and p.get("flops") is not None),
        key=lambda p: (int(p["peak_bytes"]), int(p["flops"])),
    )
    least: int | None = None
    for p in ordered:
        if least is None or int(p["flops"]) < least:
            least = int(p["flops"])
            best.append(
                {
                    "bytes": int(p["peak_bytes"]),
                    "flops": least,
                    "bound_flops": None,
                    "optimal": False,
                    "label": p.get("label"),
                }
            )
    return best[::-1]


def best_within(points: Sequence[Mapping[str, Any]], budget: int) -> dict[str, Any] | None:
    """The frontier point (`peak_frontier`) of least recomputation whose peak fits `budget`
    (bytes): the least recomputation measured within it, at the lowest peak that reaches it (the
    earlier point on a full tie); None when nothing fits."""
    return next((p for p in peak_frontier(points) if p["bytes"] <= budget), None)
