"""Running exported fwd/bwd pairs on hidden inputs: the reference's artifacts and a submission's go
through these same functions, so they are compared like for like.

XLA compiles are most of a verification's CPU (measured with bench/floor.py), and each compile
pays a fixed cost (about 40 ms of CPU) whatever its size. So a submission's artifacts are compiled into two
executables, whatever its number of cases: one runs every case's fwd artifact
(`[inputs of case i] -> [fwd outputs of case i]`), the other every case's bwd artifact
(`[residuals and cotangent of case i] -> [gradients of case i]`). fwd runs on each hidden input
x_k and on x_k ± h·max(1, max|x_k|)·v_k for the finite-difference opinion, bwd on the residuals
fwd returned at x_k (kept on the device) and the k-th cotangent.

fwd and bwd are deliberately not one program: XLA would then fuse fwd's computations into bwd's
(recomputing a residual inside a bwd kernel instead of reading it), which changes a gradient's
last bits (measured on checkpoint_dot_policy's wrong/exact_zero_extra_residuals.py). Compiled
apart, every value is bit for bit what each artifact computes on its own; the cases in one
program share no data, so nothing crosses between them either. (Measured over the 13 problems'
references: 12% less CPU than two executables per case, the same as one executable for
everything, which has to run bwd at the shifted inputs too.)

What the artifacts do when traced, lowered, compiled or run is theirs: any exception there
becomes `ArtifactRunError` (a RUNTIME_ERROR verdict for a submission). Exceptions of our own code
(building the inputs, the numpy arithmetic of the finite-difference opinion) propagate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from graders.artifact_limits import is_differentiable

# XLA options of every program compiled here, the reference's and the submissions' alike (so they
# stay compared like for like; the expectation cache's format names them). Measured on
# checkpoint_dot_policy's three cases (2 cores, JAX 0.10.2): the fwd program compiles in 40 ms of
# CPU instead of 160 ms, and runs as fast at the problems' sizes (dots and reductions call the
# same Eigen kernels; only the elementwise loops between them are left unoptimised). Values move
# by about one float32 ulp against the default options, which the calibrated tolerances absorb.
#   xla_cpu_use_fusion_emitters=False: XLA's older loop emitters, which generate less LLVM IR;
#   xla_backend_optimization_level=0: no LLVM optimisation passes over the generated IR.
COMPILER_OPTIONS: dict[str, Any] = {"xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 0}


class ArtifactRunError(Exception):
    """An artifact failed while it was traced, lowered, compiled or run.

    Attributes:
        case: index (into the `cases` given to `evaluate_cases`) of the case whose artifact failed.
    """

    def __init__(self, message: str, case: int):
        super().__init__(message)
        self.case = case


@dataclass
class CaseData:
    """One case's artifacts and what to evaluate them on.

    Attributes:
        fwd, bwd: deserialized `jax.export.Exported` artifacts, `fwd(*input leaves) -> [*outputs,
            *residuals]` and `bwd(*residuals, *cotangent leaves) -> [*gradient leaves]`, whose
            avals agree (the verifier checks it first).
        n_out: number of primal outputs of fwd.
        inputs: per hidden input k, one array per input leaf (fwd's input avals).
        cotangents: per k, one array per primal output (its aval).
        directions: per k, one array per input leaf: v_k of the finite-difference opinion; None
            to skip it.
        step: h, the finite-difference step (dimensionless: scaled by max(1, max|x|) per leaf).
        peak_bytes: the larger static peak live bytes of fwd and bwd (`ModuleInfo.peak_live_bytes`),
            for `evaluate_cases`' memory budget; 0 when unknown.
    """

    fwd: Any
    bwd: Any
    n_out: int
    inputs: Sequence[Sequence[np.ndarray]]
    cotangents: Sequence[Sequence[np.ndarray]]
    directions: Sequence[Sequence[np.ndarray]] | None
    step: float
    peak_bytes: int = 0


@dataclass
class CaseValues:
    """What one case's artifacts returned, per hidden input k.

    Attributes:
        outputs: per k, fwd's primal outputs; residuals: per k, fwd's other outputs; gradients:
            per k, bwd's outputs for the k-th cotangent (numpy arrays in the artifacts' dtypes).
        fd: per k, (central difference, analytic directional derivative, rounding noise of the
            central difference) in float64 (`fd_opinion`); (nan, nan, 0) when the case has no
            directions.
    """

    outputs: list[list[np.ndarray]] = field(default_factory=list)
    residuals: list[list[np.ndarray]] = field(default_factory=list)
    gradients: list[list[np.ndarray]] = field(default_factory=list)
    fd: list[tuple[float, float, float]] = field(default_factory=list)


# --- the finite-difference opinion (numpy only) ---------------------------------------------------


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


# --- the compiled program -------------------------------------------------------------------------


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:300]}"


def _flat_apply(exported: Any, leaves: Sequence[Any]) -> list[Any]:
    """`exported.call` on one array per input leaf, whatever pytrees its exporter used (the runner
    exports flat lists; a forged artifact might not), returning its output leaves."""
    # JAX only in the verifier child, imported after its lock-down
    import jax

    args, kwargs = jax.tree_util.tree_unflatten(exported.in_tree, list(leaves))
    return jax.tree_util.tree_leaves(exported.call(*args, **kwargs))


def _compile(args: Sequence[Sequence[Any]], cases: Sequence[CaseData], indices: Sequence[int], artifact: str) -> Any:
    """The program `[leaves of case i] -> [output leaves of case i's artifact]` ("fwd" or "bwd")
    for the avals of `args`, traced, lowered and compiled: one executable for every case.

    Raises:
        ArtifactRunError: naming `indices[i]` when case i's artifact failed while traced, or
            `indices[0]` when the program failed while lowered or compiled.
    """
    # JAX only in the verifier child, imported after its lock-down
    import jax

    def program(per_case: Sequence[Sequence[Any]]) -> list[list[Any]]:
        results = []
        for case, index, leaves in zip(cases, indices, per_case, strict=True):
            try:
                results.append(_flat_apply(getattr(case, artifact), leaves))
            except MemoryError:
                raise
            except Exception as exc:  # noqa: BLE001 - XLA raises many kinds for a program that fails to run
                raise ArtifactRunError(_describe(exc), index) from None
        return results

    traced = jax.jit(program).trace(args)  # our code: what it raises, except the artifacts', propagates
    try:
        return traced.lower().compile(compiler_options=COMPILER_OPTIONS)
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - XLA raises many kinds for a program that fails to compile
        raise ArtifactRunError(_describe(exc), indices[0]) from None


def _run(compiled: Any, args: Any, index: int) -> list[list[Any]]:
    """One call of a compiled program, waited for (so a failure of the run is raised here).

    Raises:
        ArtifactRunError: naming `index`.
    """
    # JAX only in the verifier child, imported after its lock-down
    import jax

    try:
        return cast("list[list[Any]]", jax.block_until_ready(compiled(args)))  # JAX types it Any
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - XLA raises many kinds for a program that fails to run
        raise ArtifactRunError(_describe(exc), index) from None


def _points(case: CaseData) -> list[tuple[int, str, list[np.ndarray]]]:
    """The inputs fwd runs on for one case: (k, "x" | "plus" | "minus", input leaves)."""
    points: list[tuple[int, str, list[np.ndarray]]] = []
    for k, xs in enumerate(case.inputs):
        points.append((k, "x", list(xs)))
        if case.directions is not None:
            points.append((k, "plus", shifted_inputs(xs, case.directions[k], case.step)))
            points.append((k, "minus", shifted_inputs(xs, case.directions[k], -case.step)))
    return points


def _run_group(cases: Sequence[CaseData], indices: Sequence[int]) -> list[CaseValues]:
    """Evaluates `cases` (as many hidden inputs each, all with or all without directions) with two
    compiled programs: every case's fwd in one, every case's bwd in the other.

    Raises:
        ArtifactRunError: naming `indices[i]` when case i's artifact failed while traced; naming
            `indices[0]` when a program failed while lowered, compiled or run (the caller finds
            the culprit of a group of several cases by running them one by one).
    """
    points = [_points(c) for c in cases]
    fwd = _compile([p[0][2] for p in points], cases, indices, "fwd")
    bwd = None
    outputs: list[dict[tuple[int, str], list[np.ndarray]]] = [{} for _ in cases]
    residuals: list[list[list[np.ndarray]]] = [[] for _ in cases]
    gradients: list[list[list[np.ndarray]]] = [[] for _ in cases]
    for j in range(len(points[0])):
        returned = _run(fwd, [p[j][2] for p in points], indices[0])
        for i, (case, p, outs) in enumerate(zip(cases, points, returned, strict=True)):
            outputs[i][p[j][:2]] = [np.asarray(o) for o in outs[: case.n_out]]
        if points[0][j][1] != "x":
            continue
        k = points[0][j][0]
        bwd_args = [[*outs[case.n_out :], *case.cotangents[k]] for case, outs in zip(cases, returned, strict=True)]
        if bwd is None:
            bwd = _compile(bwd_args, cases, indices, "bwd")
        for i, (case, outs, grads) in enumerate(zip(cases, returned, _run(bwd, bwd_args, indices[0]), strict=True)):
            residuals[i].append([np.asarray(r) for r in outs[case.n_out :]])
            gradients[i].append([np.asarray(g) for g in grads])

    values = []
    for i, case in enumerate(cases):
        v = CaseValues()
        for k, xs in enumerate(case.inputs):
            v.outputs.append(outputs[i][(k, "x")])
            v.residuals.append(residuals[i][k])
            v.gradients.append(gradients[i][k])
            if case.directions is None:
                v.fd.append((float("nan"), float("nan"), 0.0))
            else:
                v.fd.append(
                    fd_opinion(
                        outputs[i][(k, "plus")],
                        outputs[i][(k, "minus")],
                        xs,
                        case.directions[k],
                        case.cotangents[k],
                        gradients[i][k],
                        step=case.step,
                    )
                )
        values.append(v)
    return values


def _groups(cases: Sequence[CaseData], max_group_bytes: int | None) -> list[list[int]]:
    """Indices of the cases that share programs: the same schedule of points (as many hidden
    inputs, all with or all without directions), consecutive, and together within the budget."""
    by_schedule: dict[tuple[int, bool], list[list[int]]] = {}
    for i, c in enumerate(cases):
        chunks = by_schedule.setdefault((len(c.inputs), c.directions is not None), [[]])
        last = chunks[-1]
        if (
            last
            and max_group_bytes is not None
            and sum(cases[j].peak_bytes for j in last) + c.peak_bytes > max_group_bytes
        ):
            chunks.append(last := [])
        last.append(i)
    return [chunk for chunks in by_schedule.values() for chunk in chunks]


def evaluate_cases(cases: Sequence[CaseData], *, max_group_bytes: int | None = None) -> list[CaseValues]:
    """Runs every case's fwd and bwd on its hidden inputs (and fwd on the shifted inputs of the
    finite-difference opinion) with two compiled programs for all of them (one of every fwd, one
    of every bwd).

    Cases with different numbers of hidden inputs, or with and without directions, get programs
    of their own, and so do cases past the memory budget: one program's cases may all hold their
    peak at once. When a program of several cases fails to lower, compile or run, the cases are
    run one by one to name the failing one. Grouping changes no value: the cases of one program
    share no data.

    Args:
        cases: the cases, in order.
        max_group_bytes: the most bytes the `peak_bytes` of one program's cases may add up to (a
            case above it alone gets programs of its own); None: no budget.

    Returns:
        One CaseValues per case, in order.

    Raises:
        ArtifactRunError: an artifact raised while traced, lowered, compiled or run; `case` names
            the first failing case of the first group that fails (the cases of every problem form
            one group unless the budget splits them).
        MemoryError: as raised. Anything raised by our own code propagates as it is.
    """
    values: list[CaseValues | None] = [None] * len(cases)
    for members in _groups(cases, max_group_bytes):
        if not cases[members[0]].inputs:
            for i in members:
                values[i] = CaseValues()
            continue
        try:
            got = _run_group([cases[i] for i in members], members)
        except ArtifactRunError:
            if len(members) == 1:
                raise
            got = [_run_group([cases[i]], [i])[0] for i in members]  # raises for the failing case
        for i, v in zip(members, got, strict=True):
            values[i] = v
    return [v for v in values if v is not None]
