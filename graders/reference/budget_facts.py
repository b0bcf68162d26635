"""What a budget problem's expectations add (docs/ARCHITECTURE.md, "Budget problems"): per case,
the least recomputation any checkpoint policy reaches within the case's budget and the whole
frontier, from the reference's forward program with every checkpoint removed. Built once per
version in the reference's child, cached with the expectations."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graders.budget.extract import forward_graph
from graders.budget.graph import ForwardGraph
from graders.budget.measured import best_within, peak_frontier
from graders.budget.optimum import Solution, frontier, least_recompute
from graders.reference.failures import ReferenceCheckError
from graders.reference.plain import checkpoint_disabled
from graders.untrusted.parse import deserialize
from jailside.export import export_case

MAX_SAVED_LABELS = 64  # values of the optimum named in the expectation, in program order


def _graph(plain_fn: Callable[..., Any], specs: list[dict[str, Any]], names: list[str]) -> ForwardGraph:
    # jax.checkpoint is looked up when the function runs: disabled while it is traced too
    with checkpoint_disabled():
        fwd_blob, _, n_out = export_case(plain_fn, specs, None)
    return forward_graph(deserialize(fwd_blob), n_out, arg_names=names)


def solution_point(solution: Solution) -> dict[str, Any]:
    """One frontier point as expectations and `problems frontier` keep it."""
    return {
        "bytes": solution.saved_bytes,
        "flops": solution.recompute_flops,
        "bound_flops": solution.bound_flops,
        "optimal": solution.optimal,
    }


def _peak_facts(
    case: str, budget: int, reference: dict[str, Any], schedules: list[dict[str, Any]], forward_flops: int
) -> dict[str, Any]:
    """A budget on the backward pass's peak: the optimum is the best measured schedule within it
    (`graders.budget.measured`), the reference among them."""
    # the named schedules first: on a tie the optimum is named by the schedule the statement lists
    candidates = [*schedules, {"label": "the reference", **reference}]
    best = best_within(candidates, budget)
    if best is None:  # the reference fits (checked first): unreachable but for a changed check
        raise ReferenceCheckError("runtime_error", f"case {case!r}: no measured schedule fits the budget")
    return {
        "budget_bytes": budget,
        "budget_of": "peak",
        "optimum": {
            "bytes": best["bytes"],
            "flops": best["flops"],
            "bound_flops": None,
            "optimal": False,
            "measured": len(schedules),
            "label": best["label"],
            "saved": [],
        },
        "frontier": peak_frontier(candidates),
        "forward_flops": forward_flops,
        "schedules": schedules,
    }


def _reference_fits(case: str, budget: int, reference: dict[str, Any], budget_of: str) -> None:
    """Raises ReferenceCheckError (memory_limit) when the reference is over its own budget."""
    kept = reference["peak_bytes"] if budget_of == "peak" else reference["bytes"]
    if kept > budget:
        what = "peaks at" if budget_of == "peak" else "keeps"
        raise ReferenceCheckError(
            "memory_limit",
            f"case {case!r}: the reference {what} {kept:,} bytes ({budget_of}), over the case's own "
            f"budget of {budget:,} (memory.budgets)",
        )


def budget_facts(
    plain_fn: Callable[..., Any] | None,
    specs: list[dict[str, Any]],
    case: str,
    budget: int,
    reference: dict[str, Any],
    names: list[str],
    *,
    budget_of: str = "residuals",
    schedules: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The optimum of one case of a budget problem.

    Args:
        plain_fn: the reference imported with its checkpoints disabled
            (`graders.reference.build.checkpoint_disabled`); its export is what the optimum reads.
        specs: the case's argument specs; case: its name, for messages.
        budget: the case's budget in bytes (of residuals kept on the device, or of the backward
            pass's static peak: `budget_of`).
        reference: the reference's own point: {"bytes": residual bytes a budget counts,
            "peak_bytes": its backward pass's static peak, "flops": its recomputation}.
        names: the input leaves' names, in order (`graders.problems.hidden_inputs.leaf_names`).
        budget_of: "residuals" (the optimum solved over every choice of saved values,
            `graders.budget.optimum`) or "peak" (the best of the reference and `schedules`).
        schedules: the reference's named schedules measured (`graders.reference.schedules`).

    Returns:
        {"budget_bytes", "budget_of", "optimum": {"bytes", "flops", "bound_flops", "optimal", "saved":
        [labels], ...}, "frontier": [{"bytes", "flops", "bound_flops", "optimal"}, ...], "forward_flops",
        "schedules": the measured schedules}.

    Raises:
        ReferenceCheckError: memory_limit when the reference is over its own budget; runtime_error
            when the reference cannot run without its checkpoints or no policy fits the budget.
    """
    _reference_fits(case, budget, reference, budget_of)
    if plain_fn is None:
        raise ReferenceCheckError(
            "runtime_error",
            "a budget problem's reference must also run with its checkpoints removed: the optimum is read "
            "from that program",
        )
    graph = _graph(plain_fn, specs, names)
    if budget_of == "peak":
        return _peak_facts(case, budget, reference, list(schedules or []), sum(graph.costs))
    best = least_recompute(graph, budget)
    if best.recompute_flops is None:
        raise ReferenceCheckError(
            "runtime_error", f"case {case!r}: no checkpoint policy fits the budget of {budget:,} bytes"
        )
    saved = [graph.labels[v] for v in sorted(best.saved)][:MAX_SAVED_LABELS]
    return {
        "budget_bytes": budget,
        "budget_of": "residuals",
        "optimum": {**solution_point(best), "seconds": round(best.seconds, 3), "saved": saved},
        "frontier": [solution_point(p) for p in frontier(graph)],
        "forward_flops": sum(graph.costs),
        "schedules": list(schedules or []),
    }
