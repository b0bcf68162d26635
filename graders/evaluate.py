"""Running one exported fwd/bwd pair on one hidden input: the reference's artifacts and a
submission's go through these same functions, so they are compared like for like."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np


def _scale(x: np.ndarray) -> float:
    """max(1, max|x|); 1 for an empty array (a dimension of size 0)."""
    return max(1.0, float(np.max(np.abs(x)))) if np.size(x) else 1.0


def directional_derivatives(fwd_call: Callable[..., Any], inputs: Sequence[np.ndarray],
                            directions: Sequence[np.ndarray], cotangents: Sequence[np.ndarray],
                            gradients: Sequence[np.ndarray], *, n_out: int, step: float) -> tuple[float, float]:
    """Two opinions on d/dt <u, f(x + t v)> at t = 0.

    Args:
        fwd_call: the fwd artifact, `(*leaves) -> (*primal outputs, *residuals)`.
        inputs: x, one array per input leaf; directions: v, the same avals.
        cotangents: u, one per primal output; gradients: the VJP of u (the bwd artifact's output).
        n_out: number of primal outputs; step: h, scaled by max(1, max|x|) per leaf.

    Returns:
        (central difference (phi(h) - phi(-h)) / 2h in float64, analytic sum_i <g_i, v_i>).
    """

    def phi(t: float) -> float:
        shifted = [np.asarray(x + t * _scale(x) * v, dtype=x.dtype) for x, v in zip(inputs, directions)]
        outs = fwd_call(*shifted)[:n_out]
        return float(sum(np.vdot(np.asarray(o, np.float64), np.asarray(u, np.float64))
                         for o, u in zip(outs, cotangents)))

    fd = (phi(step) - phi(-step)) / (2 * step)
    analytic = float(sum(np.vdot(np.asarray(g, np.float64), np.asarray(v, np.float64)) * _scale(x)
                         for g, v, x in zip(gradients, directions, inputs)))
    return fd, analytic


def evaluate_vjp(fwd_call: Callable[..., Any], bwd_call: Callable[..., Any], inputs: list[np.ndarray],
                 cotangents: list[np.ndarray], directions: list[np.ndarray] | None, *, n_out: int,
                 step: float) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], tuple[float, float]]:
    """Runs one exported fwd/bwd pair on one hidden input.

    Args:
        fwd_call, bwd_call: flat calls of the two artifacts (`graders.artifacts.flat_call`).
        inputs: one array per input leaf; cotangents: one per primal output; directions: one per
            input leaf, for the finite-difference opinion (None: skip it).
        n_out: number of primal outputs of fwd; step: the finite-difference step.

    Returns:
        (primal outputs, residual values, gradients, (central difference, analytic directional
        derivative)); (nan, nan) when `directions` is None.
    """
    results = fwd_call(*inputs)
    outputs = [np.asarray(r) for r in results[:n_out]]
    residuals = [np.asarray(r) for r in results[n_out:]]
    gradients = [np.asarray(g) for g in bwd_call(*results[n_out:], *cotangents)]
    fd = (float("nan"), float("nan"))
    if directions is not None:
        fd = directional_derivatives(fwd_call, inputs, directions, cotangents, gradients, n_out=n_out, step=step)
    return outputs, residuals, gradients, fd
