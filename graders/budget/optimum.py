"""The least recomputation a checkpoint policy can reach within a memory budget, solved as an
integer program with `scipy.optimize.milp` (HiGHS), and the whole frontier of budget against least
recomputation (docs/ARCHITECTURE.md, "Budget problems").

The model is the choice a `jax.checkpoint` policy makes (Checkmate, Jain et al., MLSys 2020, with
one recomputation stage: the backward pass rebuilds what it needs once, as a policy's backward
pass does). For every node v of a `ForwardGraph`, two binary variables: s_v (v is saved) and r_v
(v is recomputed in the backward pass).

    minimize    sum_v cost_v * r_v
    subject to  sum_v size_v * s_v <= budget
                s_v + r_v >= 1              for every node the backward pass needs
                s_u + r_u - r_v >= 0        for every operand u of every node v (a recomputed node
                                            reads what is saved or recomputed)
                r_v = 0                     for every argument (it cannot be recomputed)

A second solve, with the least recomputation fixed, finds the fewest bytes that reach it, so a
frontier point is where a budget starts to pay. Written here rather than taken from a library:
the model is the judge's own (what a policy is), the solver is HiGHS through scipy.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_array

from graders.budget.graph import ForwardGraph, ancestors

DEFAULT_TIME_LIMIT_S = 10.0  # per solve; where HiGHS stops early the proven bound is reported
MAX_FRONTIER_POINTS = 64


@dataclass(frozen=True)
class Solution:
    """The best policy found within one budget.

    Attributes:
        recompute_flops: FLOPs its backward pass redoes (None when no policy fits the budget).
        saved_bytes: bytes it keeps (the fewest that reach `recompute_flops`).
        saved: the nodes it keeps.
        optimal: HiGHS proved it optimal; otherwise `bound_flops` is the proven least recompute any
            policy within the budget needs ("at least"), and `recompute_flops` what the best policy
            found when the time limit struck costs.
        bound_flops: the proven lower bound on the least recomputation (equal when optimal).
        seconds: wall time of the solves.
    """

    recompute_flops: int | None
    saved_bytes: int
    saved: frozenset[int]
    optimal: bool
    bound_flops: int
    seconds: float


def _relevant(graph: ForwardGraph) -> list[int]:
    """The nodes that matter: the needed ones and everything they read, in program order."""
    return sorted(ancestors(graph.needed, graph.operands))


def _constraints(graph: ForwardGraph, nodes: list[int]) -> tuple[coo_array, np.ndarray]:
    """The needed-node and operand rows (all `>= lower`) over [s..., r...] of `nodes`."""
    index = {v: i for i, v in enumerate(nodes)}
    n = len(nodes)
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    lower: list[float] = []
    for v in nodes:
        if v in graph.needed:
            rows += [len(lower)] * 2
            cols += [index[v], n + index[v]]
            vals += [1.0, 1.0]
            lower.append(1.0)
        if v in graph.inputs:
            continue
        for u in set(graph.operands[v]):
            rows += [len(lower)] * 3
            cols += [index[u], n + index[u], n + index[v]]
            vals += [1.0, 1.0, -1.0]
            lower.append(0.0)
    return coo_array((vals, (rows, cols)), shape=(len(lower), 2 * n)), np.array(lower)


def _solve(c: np.ndarray, constraints: list[LinearConstraint], upper: np.ndarray, time_limit_s: float) -> Any:
    return milp(
        c,
        constraints=constraints,
        integrality=np.ones_like(c),
        bounds=Bounds(np.zeros_like(c), upper),
        options={"time_limit": max(0.1, time_limit_s), "mip_rel_gap": 0.0, "disp": False},
    )


def least_recompute(graph: ForwardGraph, budget_bytes: int, *, time_limit_s: float = DEFAULT_TIME_LIMIT_S) -> Solution:
    """The policy with the least recomputation whose saved bytes fit `budget_bytes`, and of those
    the one that keeps the fewest bytes.

    Args:
        graph: the forward program (`ForwardGraph`).
        budget_bytes: bytes the saved values may take (per device on a mesh).
        time_limit_s: wall seconds for each of the two solves (HiGHS's `time_limit`).

    Returns:
        A `Solution`; `recompute_flops` None when no policy fits (the needed arguments alone are
        over the budget), `optimal` False when a solve stopped at its time limit.
    """
    start = time.monotonic()
    nodes = _relevant(graph)
    n = len(nodes)
    costs = np.array([graph.costs[v] for v in nodes], dtype=float)
    sizes = np.array([graph.sizes[v] for v in nodes], dtype=float)
    zeros = np.zeros(n)
    matrix, lower = _constraints(graph, nodes)
    structure = [LinearConstraint(matrix, lower, np.inf)] if matrix.shape[0] else []
    upper = np.ones(2 * n)
    upper[n:] = [0.0 if v in graph.inputs else 1.0 for v in nodes]
    budget = LinearConstraint(np.concatenate([sizes, zeros])[None, :], -np.inf, budget_bytes)
    first = _solve(np.concatenate([zeros, costs]), [*structure, budget], upper, time_limit_s)
    if first.x is None:  # infeasible, or no policy found in time
        bound = getattr(first, "mip_dual_bound", None)
        return Solution(None, 0, frozenset(), first.status == 2, _floor(bound), time.monotonic() - start)
    flops = int(round(float(np.dot(costs, np.round(first.x[n:])))))
    optimal = first.status == 0
    bound = flops if optimal else _floor(getattr(first, "mip_dual_bound", None))
    cap = LinearConstraint(np.concatenate([zeros, costs])[None, :], -np.inf, flops + 0.5)
    second = _solve(np.concatenate([sizes, zeros]), [*structure, budget, cap], upper, time_limit_s)
    # HiGHS's tolerances can let a cheap node through a row of large coefficients (measured: one
    # FLOP over the cap on an attention block), so each candidate policy is costed exactly
    # (`ForwardGraph.recompute_of`) and the best one within the budget kept
    best: tuple[int, int, frozenset[int]] | None = None
    for found in (first, second):
        if found.x is None:
            continue
        saved = frozenset(v for v, kept in zip(nodes, np.round(found.x[:n]), strict=True) if kept > 0.5)
        recomputed = graph.recompute_of(saved)
        if recomputed is None or graph.bytes_of(saved) > budget_bytes:
            continue
        candidate = (recomputed, graph.bytes_of(saved), saved)
        if best is None or candidate[:2] < best[:2]:
            best = candidate
    if best is None:  # no solution within the tolerances: reported as none found in time
        return Solution(None, 0, frozenset(), False, _floor(bound), time.monotonic() - start)
    recomputed, nbytes, saved = best
    return Solution(recomputed, nbytes, saved, optimal, min(bound, recomputed), time.monotonic() - start)


def no_remat_floor(graph: ForwardGraph, *, time_limit_s: float = DEFAULT_TIME_LIMIT_S) -> int:
    """The fewest bytes a policy that recomputes nothing must keep, in bytes (per device on a mesh).

    A policy of the model (`least_recompute`) over the reference's forward program with its
    checkpoints removed, recomputing 0 FLOPs: every needed node is kept, or rebuilt at no cost from
    kept values (a derivative factor such as `1 - tanh(x)**2` from a kept `tanh(x)`, which the
    model already allows). A residual budget at or above this floor, or a peak budget at or above
    it plus the primal outputs' cotangents, lets a program that recomputes nothing fit
    (`graders.reference.budget_facts`). What it covers is the model's programs only: a hand-written
    program outside the model (a bit-packed mask, a value stored in a narrower dtype) may keep fewer.

    It is `least_recompute`'s saved bytes at a budget of every needed node, where the least
    recomputation is 0 and the second solve finds the fewest bytes reaching it. Should a solve stop
    at `time_limit_s` first, the bytes of the 0-FLOP policy found (at worst every needed node): an
    upper bound, so a budget at or above it still lets a program that recomputes nothing fit.

    Raises:
        nothing: keeping every needed node is always a 0-FLOP policy (a graph that needs no node
        has a floor of 0, with no solve).
    """
    if not graph.needed:
        return 0
    everything = sum(graph.sizes[v] for v in graph.needed)
    found = least_recompute(graph, everything, time_limit_s=time_limit_s)
    if found.recompute_flops != 0:  # a solve stopped before it found the 0-FLOP policy
        return everything
    return found.saved_bytes


def _floor(bound: object) -> int:
    """A solver's proven lower bound as whole FLOPs (0 when it gives none)."""
    try:
        value = float(bound)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0
    return max(0, math.floor(value + 1e-6)) if math.isfinite(value) else 0


def frontier(
    graph: ForwardGraph, *, time_limit_s: float = DEFAULT_TIME_LIMIT_S, max_points: int = MAX_FRONTIER_POINTS
) -> list[Solution]:
    """Every point where a larger budget buys less recomputation, from recomputing nothing (the
    needed values all saved) down to the fewest bytes any policy can keep, fewest recomputation
    first; at most `max_points` (the cheapest bytes last reached is where it stops).

    Each point is a `least_recompute` at one byte below the previous point's bytes.
    """
    points: list[Solution] = []
    budget = sum(graph.sizes[v] for v in graph.needed)
    while len(points) < max_points:
        found = least_recompute(graph, budget, time_limit_s=time_limit_s)
        if found.recompute_flops is None:
            break
        if points and found.recompute_flops == points[-1].recompute_flops:
            points[-1] = found  # the same recomputation for fewer bytes: the earlier point is no breakpoint
        else:
            points.append(found)
        if found.saved_bytes == 0:
            break
        budget = found.saved_bytes - 1
    return points
