"""What a budget problem's expectations add (docs/ARCHITECTURE.md, "Budget problems"): per case,
the least recomputation any checkpoint policy reaches within the case's budget and the whole
frontier, from the reference's forward program with every checkpoint removed. Built once per
version in the reference's child, cached with the expectations."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graders.budget.extract import forward_graph
from graders.budget.graph import ForwardGraph
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


def budget_facts(
    plain_fn: Callable[..., Any] | None,
    specs: list[dict[str, Any]],
    case: str,
    budget: int,
    reference_bytes: int,
    names: list[str],
) -> dict[str, Any]:
    """The optimum of one case of a budget problem.

    Args:
        plain_fn: the reference imported with its checkpoints disabled
            (`graders.reference.build.checkpoint_disabled`); its export is what the optimum reads.
        specs: the case's argument specs; case: its name, for messages.
        budget: the case's budget (bytes of residuals kept on the device).
        reference_bytes: what the reference itself keeps there.
        names: the input leaves' names, in order (`graders.problems.hidden_inputs.leaf_names`).

    Returns:
        {"budget_bytes", "optimum": {"bytes", "flops", "bound_flops", "optimal", "seconds", "saved": [labels]},
        "frontier": [{"bytes", "flops", "bound_flops", "optimal"}, ...], "forward_flops"}.

    Raises:
        ReferenceCheckError: memory_limit when the reference is over its own budget; runtime_error
            when the reference cannot run without its checkpoints or no policy fits the budget.
    """
    if reference_bytes > budget:
        raise ReferenceCheckError(
            "memory_limit",
            f"case {case!r}: the reference keeps {reference_bytes:,} bytes of residuals, over the case's own "
            f"budget of {budget:,} (memory.budgets)",
        )
    if plain_fn is None:
        raise ReferenceCheckError(
            "runtime_error",
            "a budget problem's reference must also run with its checkpoints removed: the optimum is read "
            "from that program",
        )
    graph = _graph(plain_fn, specs, names)
    best = least_recompute(graph, budget)
    if best.recompute_flops is None:
        raise ReferenceCheckError(
            "runtime_error", f"case {case!r}: no checkpoint policy fits the budget of {budget:,} bytes"
        )
    saved = [graph.labels[v] for v in sorted(best.saved)][:MAX_SAVED_LABELS]
    return {
        "budget_bytes": budget,
        "optimum": {**solution_point(best), "seconds": round(best.seconds, 3), "saved": saved},
        "frontier": [solution_point(p) for p in frontier(graph)],
        "forward_flops": sum(graph.costs),
    }
