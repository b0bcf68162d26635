"""Residuals judged up to layout: the same values with their axes split, permuted or merged.

A program may keep a value in another layout than the reference does without saving anything
else: q, k, v projected straight into heads-first `[B, H, T, e]` instead of `[B, T, H, e]`, a
weight kept transposed, `[B*T, D]` instead of `[B, T, D]`. Such a residual holds the same numbers
and bytes, so it is the same residual (docs/ARCHITECTURE.md, "Two axes of a policy"). A layout
here is exactly: split some axes of the reference's shape into adjacent factors, permute the
axes, merge adjacent axes into the submission's shape. Any other reordering (reversed, rolled,
shuffled, or a reshape that re-splits across axes) is another value: nothing here compares sorted
values or histograms, which would accept those.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

MAX_ATOMS = 6  # axes of a refined shape whose permutations are tried (6! = 720)
MAX_REFINEMENTS = 32  # ways of splitting the reference's axes tried per pair of shapes
SAMPLE_POSITIONS = 32  # elements compared before a whole candidate layout is
SCREENS_PER_CASE = 20_000  # candidate layouts screened per case, over every pair of residuals
WHOLE_COMPARISONS_PER_CASE = 256  # candidates compared whole per case (each passed a screen)


@dataclass
class LayoutBudget:
    """What one case's layout search may still do, so the work is bounded whatever a submission
    saves (many residuals of one size, shapes with many small axes): past it, a pair of residuals
    is compared in the reference's own layout only. Counted in candidates, not seconds, so the
    verdict does not depend on the machine."""

    screens: int = SCREENS_PER_CASE
    whole: int = WHOLE_COMPARISONS_PER_CASE


@dataclass(frozen=True)
class Layout:
    """A map from the reference's layout to the submission's: `reference.reshape(split)`, then
    `transpose(permutation)`, then `reshape(target)`."""

    split: tuple[int, ...]
    permutation: tuple[int, ...]
    target: tuple[int, ...]

    def apply(self, value: np.ndarray) -> np.ndarray:
        """The reference's value in the submission's layout (a view where numpy can make one)."""
        return value.reshape(self.split).transpose(self.permutation).reshape(self.target)

    def is_identity(self, source: list[int] | tuple[int, ...], target: list[int] | tuple[int, ...]) -> bool:
        """Whether the layout leaves the value as it is (the same shape, axes in order)."""
        return tuple(source) == tuple(target) and self.permutation == tuple(range(len(self.permutation)))

    def reference_positions(self, positions: np.ndarray) -> np.ndarray:
        """For flat positions of the submission's value, the flat positions of the reference's
        value that `apply` puts there (no copy of the value)."""
        permuted = tuple(self.split[p] for p in self.permutation)
        index = np.unravel_index(positions, permuted)
        original = [index[self.permutation.index(axis)] for axis in range(len(self.split))]
        return np.ravel_multi_index(original, self.split)


MAX_SPLITS_PER_AXIS = 16  # ways of reading one axis as adjacent factors


def _splits(dim: int, hints: set[int]) -> list[tuple[int, ...]]:
    """Ways to read one axis of size `dim` as adjacent axes: itself, or an ordered product of sizes
    from `hints` (and what is left), at most MAX_ATOMS factors and MAX_SPLITS_PER_AXIS ways,
    found iteratively (`[B*T*H, e]` read as `[B, T, H, e]` when the other shape has B, T and H)."""
    found: list[tuple[int, ...]] = [(dim,)]
    stack: list[tuple[tuple[int, ...], int]] = [((), dim)]  # (factors so far, what is left)
    while stack and len(found) < MAX_SPLITS_PER_AXIS:
        head, rest = stack.pop()
        for a in sorted(hints, reverse=True):
            if 1 < a < rest and rest % a == 0 and len(head) + 2 <= MAX_ATOMS:
                for option in ((*head, a, rest // a), (*head, rest // a, a)):
                    if option not in found:
                        found.append(option)
                stack.append(((*head, a), rest // a))
    return found[:MAX_SPLITS_PER_AXIS]


def _hints(source: tuple[int, ...], target: tuple[int, ...]) -> set[int]:
    """Sizes an axis of `source` may split into: the target's axes, and the common factors of each
    pair of axes (`[B*T, H*e]` against `[B*H, T*e]` shares B when T and H share nothing)."""
    hints = {d for d in target if d > 1}
    for r in source:
        for t in target:
            g = math.gcd(r, t)
            hints.update(x for x in (g, r // g, t // g) if x > 1)
    return hints


def _groups_into(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether `target` is `shape` with runs of adjacent axes merged (sizes 1 ignored)."""
    dims = [d for d in shape if d != 1]
    want = [d for d in target if d != 1]
    i = 0
    for t in want:
        product = 1
        while i < len(dims) and product < t:
            product *= dims[i]
            i += 1
        if product != t:
            return False
    return i == len(dims)


def candidate_layouts(source: tuple[int, ...], target: tuple[int, ...]) -> Iterator[Layout]:
    """Every layout (split, permute, merge) that takes `source` to `target`, the identity's
    relatives first; at most MAX_REFINEMENTS splittings of at most MAX_ATOMS axes each."""
    if math.prod(source) != math.prod(target):
        return
    hints = _hints(source, target)
    dims = [d for d in source if d != 1]
    per_axis = [_splits(d, hints) if d not in target else [(d,)] for d in dims]
    for n, choice in enumerate(itertools.product(*per_axis)):
        if n >= MAX_REFINEMENTS:
            return
        split = tuple(d for part in choice for d in part)
        if len(split) > MAX_ATOMS:
            continue
        for permutation in itertools.permutations(range(len(split))):
            if _groups_into(tuple(split[p] for p in permutation), target):
                yield Layout(split or (1,), permutation or (0,), target)


def _per_device(source: tuple[int, ...], target: tuple[int, ...]) -> Iterator[Layout]:
    """The layouts of `candidate_layouts` between two values stacked by device (`[devices,
    *piece]`) that keep the device axis where it is: each device's piece in another layout, no
    element moved to another device's piece."""
    if not source or not target or source[0] != target[0]:
        return
    devices = source[0]
    for layout in candidate_layouts(source[1:], target[1:]):
        yield Layout((devices, *layout.split), (0, *(p + 1 for p in layout.permutation)), (devices, *layout.target))


def find_layout(
    got: np.ndarray,
    reference: np.ndarray,
    equal: Callable[[np.ndarray, np.ndarray], bool],
    budget: LayoutBudget | None = None,
    *,
    by_device: bool = False,
) -> Layout | None:
    """The layout in which `reference` holds the values of `got`, or None.

    Args:
        got: the submission's residual on one hidden input (any shape).
        reference: the reference's residual on the same input, of the same dtype and size.
        equal: whether two arrays of one shape hold the same values (the residual tolerance).
        budget: what the case's search may still do (`LayoutBudget`, spent here); None: a fresh one.
        by_device: both are stacked by device (`[devices, *piece]`, a problem on a mesh): only
            layouts of each device's piece count, never one that takes an element from another
            device's piece (a value split over features where the policy splits it over the batch
            holds the same global numbers, but no device keeps what the policy's device keeps).

    The reference's own layout is tried first when the shapes agree, whatever is left of the
    budget. Other candidates are screened on SAMPLE_POSITIONS elements at fixed, spread
    positions, then compared whole; the first whole match wins (None past the caps).
    """
    if got.dtype != reference.dtype or got.size != reference.size or got.size == 0:
        return None
    budget = budget if budget is not None else LayoutBudget()
    same_shape = got.shape == reference.shape
    if same_shape and equal(got, reference):
        return Layout(tuple(reference.shape) or (1,), tuple(range(max(1, reference.ndim))), tuple(got.shape))
    flat = got.reshape(-1)
    step = max(1, got.size // SAMPLE_POSITIONS)
    positions = np.arange(0, got.size, step)[:SAMPLE_POSITIONS]
    search = _per_device if by_device else candidate_layouts
    for layout in search(tuple(reference.shape), tuple(got.shape)):
        if same_shape and layout.is_identity(reference.shape, got.shape):
            continue  # compared above
        if budget.screens <= 0 or budget.whole <= 0:
            return None
        budget.screens -= 1
        if not equal(flat[positions], reference.reshape(-1)[layout.reference_positions(positions)]):
            continue
        budget.whole -= 1
        if equal(got, layout.apply(reference)):
            return layout
    return None
