"""The optimum of a budget problem (`graders.budget.optimum`): against brute force on random DAGs,
and on chains whose answer is known in closed form."""

from __future__ import annotations

import itertools
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from graders.budget.graph import ForwardGraph
from graders.budget.optimum import frontier, least_recompute


def brute_force(graph: ForwardGraph, budget: int) -> int | None:
    """The least recomputation over every subset of nodes saved (2^n policies)."""
    best = None
    for k in range(len(graph) + 1):
        for saved in itertools.combinations(range(len(graph)), k):
            kept = frozenset(saved)
            if graph.bytes_of(kept) > budget:
                continue
            cost = graph.recompute_of(kept)
            if cost is not None and (best is None or cost < best):
                best = cost
    return best


@st.composite
def dags(draw: st.DrawFn) -> ForwardGraph:
    n = draw(st.integers(2, 9))
    inputs = frozenset(range(draw(st.integers(1, 2))))
    operands: list[tuple[int, ...]] = []
    for v in range(n):
        if v in inputs:
            operands.append(())
            continue
        reads = draw(st.lists(st.integers(0, v - 1), min_size=1, max_size=3, unique=True))
        operands.append(tuple(reads))
    costs = [0 if v in inputs else draw(st.integers(0, 50)) for v in range(n)]
    sizes = [draw(st.integers(1, 16)) for _ in range(n)]
    needed = frozenset(draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True)))
    return ForwardGraph(costs=costs, sizes=sizes, operands=operands, inputs=inputs, needed=needed)


@settings(max_examples=60, deadline=None)
@given(graph=dags(), share=st.floats(0.0, 1.0))
def test_the_optimum_is_brute_forces_on_random_dags(graph: ForwardGraph, share: float) -> None:
    budget = int(share * sum(graph.sizes))
    found = least_recompute(graph, budget, time_limit_s=5.0)
    expected = brute_force(graph, budget)
    assert found.recompute_flops == expected
    if expected is not None:
        assert found.optimal and found.saved_bytes <= budget
        assert graph.recompute_of(found.saved) == expected  # the policy it names runs at that cost


@settings(max_examples=20, deadline=None)
@given(graph=dags())
def test_the_frontier_is_every_budget_where_more_bytes_buy_less_recomputation(graph: ForwardGraph) -> None:
    points = frontier(graph, time_limit_s=5.0)
    assert points, "saving every needed value is always a policy"
    assert points[0].recompute_flops == 0
    for a, b in itertools.pairwise(points):
        assert b.saved_bytes < a.saved_bytes and b.recompute_flops > a.recompute_flops  # type: ignore[operator]
    for p in points:  # each is the optimum at its budget, and one byte less costs more
        assert brute_force(graph, p.saved_bytes) == p.recompute_flops
        below = brute_force(graph, p.saved_bytes - 1)
        assert below is None or below > p.recompute_flops  # type: ignore[operator]


def _chain(costs: list[int], size: int = 4) -> ForwardGraph:
    """x -> v1 -> ... -> vn, every layer's output read by the backward pass (a tanh chain)."""
    n = len(costs) + 1
    return ForwardGraph(
        costs=[0, *costs],
        sizes=[size] * n,
        operands=[(), *[(i - 1,) for i in range(1, n)]],
        inputs=frozenset({0}),
        needed=frozenset(range(n)),
    )


def test_on_a_chain_the_optimum_saves_the_costliest_layers() -> None:
    """Every unsaved output of a chain is recomputed once from the saved one before it, so saving k
    outputs recomputes the rest: the optimum keeps the k costliest (closed form)."""
    costs = [64, 4, 4, 64, 4, 4, 64, 4, 4, 64, 4, 4]
    graph = _chain(costs)
    for k in range(len(costs) + 1):
        found = least_recompute(graph, 4 * (k + 1))  # x and k outputs
        assert found.recompute_flops == sum(costs) - sum(sorted(costs, reverse=True)[:k])


def test_every_sqrt_n_th_layer_is_an_upper_bound_and_far_from_the_optimum_on_uneven_costs() -> None:
    """Chen et al.'s sqrt(n) checkpoints are a policy, so never below the optimum; on layers of
    uneven cost at the textbook places they recompute many times more (BUDGET.md's chain)."""
    costs = [4, 64, 4] * 4
    graph = _chain(costs)
    step = round(math.sqrt(len(costs)))
    heuristic = frozenset({0, *range(step, len(costs) + 1, step)})
    cost = graph.recompute_of(heuristic)
    found = least_recompute(graph, graph.bytes_of(heuristic))
    assert cost is not None and found.recompute_flops is not None
    assert found.recompute_flops <= cost
    assert cost >= 2 * found.recompute_flops


def test_no_policy_fits_when_the_needed_arguments_are_over_the_budget() -> None:
    graph = _chain([10, 10])
    assert least_recompute(graph, 3).recompute_flops is None  # x alone takes 4 bytes
