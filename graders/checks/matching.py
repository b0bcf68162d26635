"""Matching residuals by value: which value the submission saves is which of the reference's
(`match_residuals`, a maximum one-to-one matching over every hidden input)."""

from __future__ import annotations

import numpy as np

from graders.checks.comparison import CaseRun, compare_calibrated
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


def match_residuals(run: CaseRun, *, spec: ProblemSpec) -> list[int | None]:
    """A one-to-one matching of the submission's residuals to the reference's, by value.

    A submitted residual i may match reference residual j when both have the same aval and
    `residuals_equal` holds on every hidden input. The matching is maximum (augmenting paths,
    Kuhn's algorithm), so two residuals of one aval saved in swapped order still match.

    Returns:
        Per submitted residual, the index of its reference residual, or None.
    """
    exp = run.expected
    sub_values, ref_values = run.residual_values, exp.residual_values
    n_sub, n_ref = len(run.residuals), len(exp.residuals)
    candidates: list[list[int]] = []
    for i, fact in enumerate(run.residuals):
        same_aval = [
            j
            for j in range(n_ref)
            if exp.residuals[j].shape == fact.shape
            and exp.residuals[j].dtype == fact.dtype
            and (exp.residuals[j].memory_kind == fact.memory_kind or not spec.memory.compare_kinds)
        ]
        candidates.append(sorted(same_aval, key=lambda j: (j != i, j)))  # try the same position first
    cache: dict[tuple[int, int], bool] = {}

    def equal(i: int, j: int) -> bool:
        if (i, j) not in cache:
            tol = spec.tolerance_for(run.residuals[i].dtype)
            cache[(i, j)] = all(
                residuals_equal(sub_values[k][i], ref_values[k][j], error_of(exp.residual_errors, k, j), tol)
                for k in range(min(len(sub_values), len(ref_values)))
            )
        return cache[(i, j)]

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
