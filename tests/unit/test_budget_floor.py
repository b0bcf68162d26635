"""The floor of a budget problem (`graders.budget.optimum.no_remat_floor`): the fewest bytes a
policy that recomputes nothing keeps, and the refusal of a budget at or above it
(`graders.reference.budget_facts`, docs/ARCHITECTURE.md "Budget problems")."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import pytest

from graders.budget.graph import ForwardGraph
from graders.budget.optimum import least_recompute, no_remat_floor
from graders.reference.budget_facts import budget_facts, refuse_budget_without_remat
from graders.reference.failures import ReferenceCheckError


def tanh_layer() -> ForwardGraph:
    """x (8 bytes) and w (8), z = x @ w (16, 100 FLOPs), t = tanh(z) (16, 10 FLOPs), and a 32-byte
    derivative factor read from t at no cost: the backward pass reads x, w and the factor."""
    return ForwardGraph(
        costs=[0, 0, 100, 10, 0],
        sizes=[8, 8, 16, 16, 32],
        operands=[(), (), (0, 1), (2,), (3,)],
        inputs=frozenset({0, 1}),
        needed=frozenset({0, 1, 4}),
    )


def test_a_free_factor_is_rebuilt_from_a_smaller_kept_value() -> None:
    graph = tanh_layer()
    # keeping every needed node takes 48 bytes; keeping t (16) and rebuilding the factor for free, 32
    assert sum(graph.sizes[v] for v in graph.needed) == 48
    assert no_remat_floor(graph) == 32
    kept = least_recompute(graph, 32)
    assert (kept.recompute_flops, kept.saved) == (0, frozenset({0, 1, 3}))
    # one byte below the floor, nothing that recomputes 0 FLOPs fits
    below = least_recompute(graph, 31)
    assert below.recompute_flops is not None and below.recompute_flops > 0


def test_every_needed_node_with_a_cost_is_kept() -> None:
    graph = ForwardGraph(
        costs=[0, 5, 7],
        sizes=[8, 12, 20],
        operands=[(), (0,), (1,)],
        inputs=frozenset({0}),
        needed=frozenset({0, 1, 2}),
    )
    assert no_remat_floor(graph) == 40
    assert least_recompute(graph, 39).recompute_flops == 5  # a (12 bytes) rebuilt from x


def test_a_graph_that_needs_nothing_has_no_floor() -> None:
    graph = ForwardGraph(costs=[0, 3], sizes=[8, 8], operands=[(), (0,)], inputs=frozenset({0}), needed=frozenset())
    assert no_remat_floor(graph) == 0


def test_a_residual_budget_at_the_floor_is_refused_one_byte_below_is_not() -> None:
    with pytest.raises(ReferenceCheckError) as raised:
        refuse_budget_without_remat("large", 901_120, "residuals", 901_120, 16_384)
    assert raised.value.check == "memory_limit"
    message = raised.value.message
    assert "'large'" in message and "901,120 bytes (residuals)" in message and "fits it" in message
    assert "that recomputes nothing" in message and "below 901,120 bytes" in message
    refuse_budget_without_remat("large", 901_119, "residuals", 901_120, 16_384)  # needs remat: no error


def test_a_peak_budget_is_refused_up_to_the_floor_plus_the_cotangents() -> None:
    with pytest.raises(ReferenceCheckError) as raised:
        refuse_budget_without_remat("large", 917_504, "peak", 901_120, 16_384)
    assert raised.value.check == "memory_limit"
    assert "917,504" in raised.value.message and "16,384" in raised.value.message
    assert "below 917,504 bytes" in raised.value.message
    # the floor alone is no peak a program that recomputes nothing reaches: its cotangents are live too
    refuse_budget_without_remat("large", 917_503, "peak", 901_120, 16_384)
    refuse_budget_without_remat("large", 901_120, "peak", 901_120, 16_384)


def _layer(w: Any, x: Any) -> Any:
    return jnp.tanh(x @ w)


SPECS = [
    {"kind": "array", "name": "w", "shape": [4, 4], "dtype": "float32"},
    {"kind": "array", "name": "x", "shape": [2, 4], "dtype": "float32"},
]


def test_budget_facts_records_the_floor_and_refuses_a_budget_at_it() -> None:
    # residuals: w (64 bytes), x (32) and tanh's derivative factor (32), free to rebuild from tanh's
    # output (32): a floor of 128; the output's cotangent is f32[2,4], 32 bytes
    reference = {"bytes": 96, "peak_bytes": 150, "flops": 64}
    with pytest.raises(ReferenceCheckError, match="at or above 128 bytes"):
        budget_facts(_layer, SPECS, "tiny", 128, reference, ["w", "x"])
    facts = budget_facts(_layer, SPECS, "tiny", 127, reference, ["w", "x"])
    assert (facts["floor_bytes"], facts["cotangent_bytes"]) == (128, 32)
    assert facts["optimum"]["flops"] > 0
    with pytest.raises(ReferenceCheckError, match="at or above 160 bytes"):
        budget_facts(_layer, SPECS, "tiny", 160, reference, ["w", "x"], budget_of="peak")
    peak = budget_facts(_layer, SPECS, "tiny", 159, reference, ["w", "x"], budget_of="peak")
    assert (peak["floor_bytes"], peak["cotangent_bytes"], peak["optimum"]["label"]) == (128, 32, "the reference")


def test_a_peak_budget_bounds_the_recomputation_of_every_schedule() -> None:
    """Every residual is live when the backward pass starts, beside the cotangents: within a peak of
    P bytes a schedule keeps at most P - cotangent bytes, so the residual optimum there is a bound."""
    from graders.reference.budget_facts import peak_bound

    graph = tanh_layer()  # floor 32 (x, w, t), 16 bytes of cotangent: a peak budget must be below 48
    # within 31 bytes of residuals only x and w fit: z and t are rebuilt (110 FLOPs)
    assert peak_bound(graph, 47, 16).bound_flops == least_recompute(graph, 31).recompute_flops == 110
    assert peak_bound(graph, 47, 16).optimal
    assert peak_bound(graph, 30, 16).recompute_flops is None  # x and w alone are 16: nothing fits 14


def test_the_panel_says_what_is_proven_about_a_peak_budgets_best_schedule() -> None:
    from graders.checks.budget import proven_bound

    assert proven_bound({"flops": 10, "measured": 3, "bound_flops": 10, "optimal": True}).endswith(
        "recomputes less (proven)"
    )
    gap = proven_bound({"flops": 900, "measured": 3, "bound_flops": 640, "optimal": False})
    assert "recomputes less than 640 FLOPs (proven:" in gap and "live when the backward pass starts" in gap
    assert proven_bound({"flops": 900, "optimal": True, "bound_flops": 900}) == ""  # a residual budget: solved
