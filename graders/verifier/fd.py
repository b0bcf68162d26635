"""The finite-difference opinion on a gradient (numpy only): the inputs shifted along a random
direction and the central difference of fwd's outputs there against the analytic directional
derivative the gradients give. `graders.verifier.evaluate` runs the programs; this is the
arithmetic on what they returned, the same for the reference's and a submission's."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from graders.artifact_limits import is_differentiable


def _scale(x: np.ndarray) -> float:
    """max(1, max|x|); 1 for an empty array (a dimension of size 0)."""
    return max(1.0, float(np.max(np.abs(x)))) if np.size(x) else 1.0


def shifted_inputs(inputs: Sequence[np.ndarray], directions: Sequence[np.ndarray], t: float) -> list[np.ndarray]:
    """x + t·max(1, max|x|)·v per leaf, in x's dtype (numpy arithmetic: t·scale is a Python float,
    so float32 leaves stay float32).

    Args:
        inputs: x, one array per input leaf; directions: v, the same shapes and dtypes.
        t: the signed step (±h).
    """
    return [
        np.asarray(x + t * _scale(x) * v, dtype=x.dtype) if is_differentiable(x.dtype.name) else x
        for x, v in zip(inputs, directions, strict=True)
    ]


def _differentiable(directions: Sequence[np.ndarray], inputs: Sequence[np.ndarray]) -> list[tuple[Any, Any]]:
    """(v, x) of the float input leaves: those bwd returns a gradient for, in order."""
    return [(v, x) for v, x in zip(directions, inputs, strict=True) if is_differentiable(x.dtype.name)]


FD_NOISE_ULPS = 16  # float64 epsilons of rounding per term of <u, f> that a central difference may carry


def fd_opinion(
    outputs_plus: Sequence[Any],
    outputs_minus: Sequence[Any],
    inputs: Sequence[np.ndarray],
    directions: Sequence[np.ndarray],
    cotangents: Sequence[np.ndarray],
    gradients: Sequence[np.ndarray],
    *,
    step: float,
) -> tuple[float, float, float]:
    """Two opinions on d/dt <u, f(x + t v)> at t = 0, in float64, and how far rounding alone can
    move the first.

    Args:
        outputs_plus, outputs_minus: the primal outputs of fwd at `shifted_inputs(x, v, ±h)`.
        inputs: x; directions: v (one per input leaf); cotangents: u (one per primal output);
        gradients: the VJP of u at x (bwd's output); step: h.

    Returns:
        (central difference (phi(h) - phi(-h)) / 2h with phi(t) = <u, f(x + t·scale·v)>,
        analytic sum_i <g_i, v_i>·scale_i, noise): `noise` is `FD_NOISE_ULPS` float64 epsilons of
        sum |u·f| at both points, over 2h: what rounding in f and in the sums can put into the
        difference. Where the derivative along v is tiny (a direction nearly orthogonal to the
        gradient), that noise is most of the central difference: measured, 1.3e-7 on a rate of
        4.9e-5 in checkpoint_stages, a 0.27% disagreement from rounding alone.
    """

    def phi(outs: Sequence[Any]) -> float:
        return float(
            sum(
                np.vdot(np.asarray(o, np.float64), np.asarray(u, np.float64))
                for o, u in zip(outs, cotangents, strict=True)
            )
        )

    def magnitude(outs: Sequence[Any]) -> float:
        return float(
            sum(
                np.sum(np.abs(np.asarray(o, np.float64) * np.asarray(u, np.float64)))
                for o, u in zip(outs, cotangents, strict=True)
            )
        )

    fd = (phi(outputs_plus) - phi(outputs_minus)) / (2 * step)
    noise = FD_NOISE_ULPS * float(np.finfo(np.float64).eps) * (magnitude(outputs_plus) + magnitude(outputs_minus))
    noise /= 2 * step
    analytic = float(
        sum(
            np.vdot(np.asarray(g, np.float64), np.asarray(v, np.float64)) * _scale(x)
            for g, (v, x) in zip(gradients, _differentiable(directions, inputs), strict=True)
        )
    )
    return fd, analytic, noise


def directional_derivatives(
    fwd_call: Callable[..., Any],
    inputs: Sequence[np.ndarray],
    directions: Sequence[np.ndarray],
    cotangents: Sequence[np.ndarray],
    gradients: Sequence[np.ndarray],
    *,
    n_out: int,
    step: float,
) -> tuple[float, float, float]:
    """`fd_opinion` with fwd evaluated by `fwd_call(*leaves) -> [*outputs, ...]` (any callable:
    the same arithmetic `evaluate_cases` applies to the outputs of its compiled program)."""
    plus = fwd_call(*shifted_inputs(inputs, directions, step))[:n_out]
    minus = fwd_call(*shifted_inputs(inputs, directions, -step))[:n_out]
    return fd_opinion(plus, minus, inputs, directions, cotangents, gradients, step=step)
