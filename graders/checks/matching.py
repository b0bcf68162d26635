"""Matching residuals by value: which value the submission saves is which of the reference's
(`match_residuals`, a maximum one-to-one matching over every hidden input)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from graders.checks.comparison import CaseRun, compare_calibrated, is_bookkeeping
from graders.checks.layout import Layout, LayoutBudget, find_layout
from graders.problems.spec import ProblemSpec, Tolerance
from graders.reference.expectation import error_of
from graders.verdict import ResidualFact

MASK_MISMATCH_FRACTION = 0.005  # bool/int residuals: share of elements that may differ (float noise at 0)


def residuals_equal(got: np.ndarray, reference: np.ndarray, reference_error: float | None, tol: Tolerance) -> bool:
    """Whether a submitted residual holds the same value as a reference residual on one input.

    Floats: within the calibrated tolerance (`compare_calibrated`). Bool and integer values (masks,
    indices): equal except for at most MASK_MISMATCH_FRACTION of the elements (at least one), which
    float noise next to a threshold can flip; a different mask differs in a large share.
    """
    if got.shape != reference.shape or got.dtype != reference.dtype:
        return False
    if got.dtype.kind in "biu":
        allowed = max(1, int(MASK_MISMATCH_FRACTION * got.size))
        return int(np.count_nonzero(got != reference)) <= allowed
    return compare_calibrated(got, reference, reference_error, tol).passed


def _candidates(run: CaseRun, spec: ProblemSpec) -> list[list[int]]:
    """Per submitted residual, the reference residuals it may be: same dtype and size (so the same
    bytes; on a mesh, of the pieces stacked by device), same memory kind unless the problem does
    not compare kinds, neither one bookkeeping; the same shape first, then the same position."""
    exp = run.expected
    found: list[list[int]] = []
    for i, fact in enumerate(run.residuals):
        same_size = [
            j
            for j, ref in enumerate(exp.residuals)
            if ref.dtype == fact.dtype
            and ref.aval.nbytes == fact.aval.nbytes
            and (ref.memory_kind == fact.memory_kind or not spec.memory.compare_kinds)
            and not is_bookkeeping(ref)
            and not is_bookkeeping(fact)
        ]
        found.append(sorted(same_size, key=lambda j: (exp.residuals[j].shape != fact.shape, j != i, j)))
    return found


def _same_values(run: CaseRun, spec: ProblemSpec, i: int, j: int, budget: LayoutBudget) -> Layout | None:
    """The layout in which reference residual j holds submitted residual i's values on every
    hidden input (`graders.checks.layout`: the identity when the shapes agree and so do the
    values), or None."""
    exp = run.expected
    sub_values, ref_values = run.residual_values, exp.residual_values
    inputs = range(min(len(sub_values), len(ref_values)))
    if not inputs:
        return None
    tol = spec.tolerance_for(run.residuals[i].dtype)
    error = [error_of(exp.residual_errors, k, j) for k in inputs]

    def equal_on(k: int) -> Callable[[np.ndarray, np.ndarray], bool]:
        return lambda got, ref: residuals_equal(got, ref, error[k], tol)

    on_mesh = run.residuals[i].device_shape is not None  # values stacked by device: pieces compared
    layout = find_layout(sub_values[0][i], ref_values[0][j], equal_on(0), budget, by_device=on_mesh)
    if layout is None:
        return None
    for k in inputs[1:]:
        if not equal_on(k)(sub_values[k][i], layout.apply(ref_values[k][j])):
            return None
    return layout


def match_residuals(run: CaseRun, *, spec: ProblemSpec) -> list[int | None]:
    """A one-to-one matching of the submission's residuals to the reference's, by value.

    A submitted residual i may match reference residual j when both have the same dtype, size and
    memory kind and i holds j's values on every hidden input, in j's layout or another one (its
    axes split, permuted or merged: `graders.checks.layout`); bookkeeping residuals
    (`is_bookkeeping`) match nothing. The matching is maximum (augmenting paths, Kuhn's
    algorithm), so two residuals of one aval saved in swapped order still match. Sets
    `ResidualFact.layout` on a submitted residual matched in another layout.

    Returns:
        Per submitted residual, the index of its reference residual, or None.
    """
    exp = run.expected
    n_sub = len(run.residuals)
    candidates = _candidates(run, spec)
    cache: dict[tuple[int, int], Layout | None] = {}
    budget = LayoutBudget()

    def equal(i: int, j: int) -> bool:
        if (i, j) not in cache:
            cache[(i, j)] = _same_values(run, spec, i, j, budget)
        return cache[(i, j)] is not None

    owner: dict[int, int] = {}  # reference index -> submitted index
    for start in range(n_sub):
        # iterative augmenting-path search from `start`
        parent: dict[int, tuple[int, int | None]] = {}  # ref j -> (sub i that reached it, previous ref)
        stack: list[tuple[int, int | None]] = [(start, None)]
        seen: set[int] = set()
        found: int | None = None
        while stack and found is None:
            i, via = stack.pop()
            for j in candidates[i]:
                if j in seen or not equal(i, j):
                    continue
                seen.add(j)
                parent[j] = (i, via)
                if j not in owner:
                    found = j
                    break
                stack.append((owner[j], j))
        j_cur: int | None = found
        while j_cur is not None:
            i, previous = parent[j_cur]
            owner[j_cur] = i
            j_cur = previous
    by_sub = {i: j for j, i in owner.items()}
    for i, j in by_sub.items():
        layout = cache.get((i, j))
        ref = exp.residuals[j]
        if layout is not None and not layout.is_identity(ref.shape, run.residuals[i].shape):
            run.residuals[i].layout = f"the same values as the policy's {ref.short()} in another layout"
    return [by_sub.get(i) for i in range(n_sub)]


def with_matches(facts: list[ResidualFact], matched: list[bool] | None) -> list[ResidualFact]:
    """Copies of the reference's facts (shared by every run) marked with what the submission saves."""
    if matched is None:
        return facts
    return [f.model_copy(update={"matched": m}) for f, m in zip(facts, matched, strict=True)]


def match_values(run: CaseRun, *, spec: ProblemSpec) -> int:
    """Returns how many reference residuals the submission's match by value, marking `matched` on both sides."""
    expected, submitted = run.expected.residuals, run.residuals
    matching = match_residuals(run, spec=spec)
    matched_refs = {j for j in matching if j is not None}
    run.expected_matched = [j in matched_refs for j in range(len(expected))]
    for fact, j in zip(submitted, matching, strict=True):
        fact.matched = j is not None
    return len(matched_refs)
