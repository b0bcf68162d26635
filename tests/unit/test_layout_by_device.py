"""Layouts of values stacked by device (`graders.checks.layout.find_layout(..., by_device=True)`):
each device's piece may be in another layout, but no element may come from another device's piece."""

from __future__ import annotations

import numpy as np

from graders.checks.layout import find_layout


def _equal(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.array_equal(a, b))


def test_a_value_split_over_other_axes_is_not_the_same_pieces() -> None:
    """The global (8, 8) value split over 2 devices by rows, and by columns: the same global
    numbers, the same piece bytes, but device 0 keeps other elements (measured on held-out files:
    a sequence-parallel hidden split over features was ACCEPTED before `by_device`)."""
    value = np.arange(64, dtype=np.float32).reshape(8, 8)
    by_rows = np.stack([value[:4], value[4:]])  # what the policy's devices keep, (2, 4, 8)
    by_columns = np.stack([value[:, :4], value[:, 4:]])  # (2, 8, 4)
    assert find_layout(by_columns, by_rows, _equal, by_device=True) is None


def test_each_devices_piece_in_another_layout_is_the_same_residual() -> None:
    value = np.arange(2 * 4 * 6, dtype=np.float32).reshape(2, 4, 6)
    transposed = value.transpose(0, 2, 1).copy()  # each piece kept transposed
    merged = value.reshape(2, 24)  # each piece flattened
    for got in (transposed, merged):
        layout = find_layout(got, value, _equal, by_device=True)
        assert layout is not None and np.array_equal(layout.apply(value), got)
    swapped = value[::-1].copy()  # the pieces on each other's devices
    assert find_layout(swapped, value, _equal, by_device=True) is None
