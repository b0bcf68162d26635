"""A budget problem's named schedules (docs/ARCHITECTURE.md, "Budget problems"): the programs an
author lists in reference.py's `SCHEDULES`, `{label: function}`, each with the entry point's
signature and the reference's values. Each is exported and read in the reference's child exactly as
a submission is (residual bytes on the device, the backward pass's static peak, its recomputation),
so a student who writes the same schedule lands on the same point.

They are the uniform heuristics on the panel's plane ("checkpoint every layer", "every √n-th"), and
on a budget of the backward pass's peak they are the candidates of the optimum: the least
recomputation among the reference and the schedules that fit (`graders.reference.budget_facts`).
A schedule that fails to export or be read is an author's mistake and fails the build."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from graders.reference.failures import ReferenceCheckError
from graders.reference.variants import variant_facts

MAX_SCHEDULES = 128  # each costs an export and a read of both programs per case (0.05 s for a 6-layer chain)
MAX_LABEL = 60  # characters: a label is drawn beside its point


def schedule_table(module: Any) -> dict[str, Callable[..., Any]]:
    """reference.py's `SCHEDULES` checked: {} when it has none.

    Raises:
        ReferenceCheckError: runtime_error, when `SCHEDULES` is not a dict of at most
            `MAX_SCHEDULES` callables under non-empty labels of at most `MAX_LABEL` characters.
    """
    table = getattr(module, "SCHEDULES", None)
    if table is None:
        return {}
    if not isinstance(table, Mapping) or len(table) > MAX_SCHEDULES:
        raise ReferenceCheckError(
            "runtime_error", f"reference.py's SCHEDULES must be a dict of at most {MAX_SCHEDULES} {{label: function}}"
        )
    for label, fn in table.items():
        if not isinstance(label, str) or not 0 < len(label) <= MAX_LABEL or not callable(fn):
            raise ReferenceCheckError(
                "runtime_error",
                f"reference.py's SCHEDULES: {str(label)[:MAX_LABEL]!r} must be a label of 1 to {MAX_LABEL} "
                "characters naming a function with the entry point's signature",
            )
    return dict(table)


def measure_schedules(
    table: Mapping[str, Callable[..., Any]], specs: list[dict[str, Any]], case: str
) -> list[dict[str, Any]]:
    """Each schedule of `table` on one case, in the table's order.

    Returns:
        [{"label", "bytes": residual bytes kept on the device, "peak_bytes": the backward pass's
        static peak live bytes, "flops": its recomputation in FLOPs}, ...], as the judge measures a
        submission (`graders.reference.variants.variant_facts`).

    Raises:
        ReferenceCheckError: runtime_error, when a schedule cannot be exported or read.
    """
    points = []
    for label, fn in table.items():
        variant = variant_facts(fn, specs, None)
        if variant is None:
            raise ReferenceCheckError(
                "runtime_error", f"case {case!r}: the schedule {label!r} of SCHEDULES could not be exported or read"
            )
        points.append(
            {
                "label": label,
                "bytes": variant.residual_bytes,
                "peak_bytes": variant.bwd_info.peak_live_bytes,
                "flops": variant.bwd_info.recompute_flops,
            }
        )
    return points
