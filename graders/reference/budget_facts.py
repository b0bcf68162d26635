"""What a budget problem's expectations add (docs/ARCHITECTURE.md, "Budget problems"): per case,
the least recomputation any checkpoint policy reaches within the case's budget and the whole
frontier, from the reference's forward program with every checkpoint removed, and the floor: the
fewest bytes a program that recomputes nothing keeps (`no_remat_floor`), below which every budget
must lie (peak budgets: below it plus the outputs' cotangents), or no program would need remat.
Built once per version in the reference's child, cached with the expectations."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graders.budget.extract import forward_graph
from graders.budget.graph import ForwardGraph
from graders.budget.measured import best_within, peak_frontier
from graders.budget.optimum import Solution, frontier, least_recompute, no_remat_floor
from graders.reference.failures import ReferenceCheckError
from graders.reference.plain import checkpoint_disabled
from graders.untrusted.parse import deserialize, exported_avals
from jailside.export import export_case

MAX_SAVED_LABELS = 64  # values of the optimum named in the expectation, in program order


def forward_of(plain_fn: Callable[..., Any], specs: list[dict[str, Any]], names: list[str]) -> tuple[ForwardGraph, int]:
    """(the forward program's graph, bytes of its primal outputs' cotangents) of `plain_fn` exported
    on the case `specs` with every checkpoint removed; `names`: the input leaves' names, in order.

    Raises:
        Whatever exporting or reading the program raises."""
    # jax.checkpoint is looked up when the function runs: disabled while it is traced too
    with checkpoint_disabled():
        fwd_blob, _, n_out = export_case(plain_fn, specs, None)
    exported = deserialize(fwd_blob)
    cotangent = sum(a.nbytes for a in exported_avals(exported.out_avals)[:n_out])
    return forward_graph(exported, n_out, arg_names=names), cotangent


def refuse_budget_without_remat(case: str, budget: int, budget_of: str, floor: int, cotangent: int) -> None:
    """Refuses a budget that a program recomputing nothing fits.

    Args:
        case: the case's name, for the message.
        budget: the case's budget in bytes (of residuals or of the backward pass's peak: `budget_of`).
        budget_of: "residuals" or "peak".
        floor: bytes a policy that recomputes nothing must keep (`no_remat_floor`).
        cotangent: bytes of the primal outputs' cotangents, which a backward pass holds at its start
            beside what was kept (so its peak is at least floor + cotangent).

    Raises:
        ReferenceCheckError: memory_limit when `budget` >= floor (residuals), or >= floor +
            cotangent (peak): no program would need remat.
    """
    limit = floor + cotangent if budget_of == "peak" else floor
    if budget < limit:
        return
    plus = (
        f" plus the outputs' cotangents ({cotangent:,}), which its backward pass holds at its start"
        if budget_of == "peak"
        else ""
    )
    raise ReferenceCheckError(
        "memory_limit",
        f"case {case!r}: the budget of {budget:,} bytes ({budget_of}) is at or above {limit:,} bytes: the least a "
        f"program that recomputes nothing keeps ({floor:,}: every value the backward pass reads, less what is "
        f"free to rebuild){plus}. Such a program fits it, its backward pass freeing each value as it goes, so "
        f"no program needs remat; a budget below {limit:,} bytes would need it (memory.budgets)",
    )


def solution_point(solution: Solution) -> dict[str, Any]:
    """One frontier point as expectations and `problems frontier` keep it."""
    return {
        "bytes": solution.saved_bytes,
        "flops": solution.recompute_flops,
        "bound_flops": solution.bound_flops,
        "optimal": solution.optimal,
    }


def peak_bound(graph: ForwardGraph, budget: int, cotangent: int) -> Solution:
    """A proven lower bound on the recomputation of any schedule of the reference's program whose
    backward pass peaks within `budget` bytes: every residual is live when the backward pass starts,
    beside the outputs' cotangents (`cotangent` bytes), so such a schedule keeps at most
    `budget - cotangent` bytes of residuals, and the least any policy within that needs
    (`least_recompute`: `bound_flops`, "at least" when HiGHS stopped early) no schedule beats. A
    schedule-aware model (memory per backward stage) would tighten it; this one is the bound the
    residual model proves."""
    return least_recompute(graph, max(0, budget - cotangent))


def _peak_facts(
    case: str, budget: int, reference: dict[str, Any], schedules: list[dict[str, Any]], graph: ForwardGraph,
    cotangent: int,
) -> dict[str, Any]:  # fmt: skip
    """A budget on the backward pass's peak: the optimum is the best measured schedule within it
    (`graders.budget.measured`), the reference among them, and the proven bound (`peak_bound`)."""
    # the named schedules first: on a tie the optimum is named by the schedule the statement lists
    candidates = [*schedules, {"label": "the reference", **reference}]
    best = best_within(candidates, budget)
    if best is None:  # the reference fits (checked first): unreachable but for a changed check
        raise ReferenceCheckError("runtime_error", f"case {case!r}: no measured schedule fits the budget")
    bound = peak_bound(graph, budget, cotangent)
    return {
        "budget_bytes": budget,
        "budget_of": "peak",
        "optimum": {
            "bytes": best["bytes"],
            "flops": best["flops"],
            # a schedule the judge measured is a policy of the model, so the bound is at most its
            # recomputation; min() keeps the claim true should the two counts ever part
            "bound_flops": min(bound.bound_flops, best["flops"]) if bound.recompute_flops is not None else None,
            "optimal": best["flops"] <= bound.bound_flops and bound.recompute_flops is not None,
            "measured": len(schedules),
            "label": best["label"],
            "saved": [],
        },
        "frontier": peak_frontier(candidates),
        "forward_flops": sum(graph.costs),
        "schedules": schedules,
    }


def _residual_facts(case: str, budget: int, graph: ForwardGraph, schedules: list[dict[str, Any]]) -> dict[str, Any]:
    """A budget on residual bytes: the optimum solved over every choice of saved values, and the frontier."""
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
        "schedules": the measured schedules, "floor_bytes": bytes a policy that recomputes nothing
        keeps (`no_remat_floor`), "cotangent_bytes": bytes of the primal outputs' cotangents}.

    Raises:
        ReferenceCheckError: memory_limit when the reference is over its own budget, or when a
            program that recomputes nothing fits the budget (`refuse_budget_without_remat`);
            runtime_error when the reference cannot run without its checkpoints or no policy fits
            the budget.
    """
    _reference_fits(case, budget, reference, budget_of)
    if plain_fn is None:
        raise ReferenceCheckError(
            "runtime_error",
            "a budget problem's reference must also run with its checkpoints removed: the optimum is read "
            "from that program",
        )
    graph, cotangent = forward_of(plain_fn, specs, names)
    floor = no_remat_floor(graph)
    refuse_budget_without_remat(case, budget, budget_of, floor, cotangent)
    sizes = {"floor_bytes": floor, "cotangent_bytes": cotangent}
    if budget_of == "peak":
        return {**_peak_facts(case, budget, reference, list(schedules or []), graph, cotangent), **sizes}
    return {**_residual_facts(case, budget, graph, list(schedules or [])), **sizes}
