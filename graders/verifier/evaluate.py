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

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from graders.verifier.collectives import Communication, communication
from graders.verifier.fd import fd_opinion, shifted_inputs
from graders.verifier.placement import device_layout, device_pieces, piece_bytes, placed
from graders.verifier.xla_memory import xla_memory

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
        mesh, leaf_names: the problem's mesh (a MeshDict) and its input leaves' names, when it
            has one: the inputs are placed on it (`graders.verifier.placement`).
    """

    fwd: Any
    bwd: Any
    n_out: int
    inputs: Sequence[Sequence[np.ndarray]]
    cotangents: Sequence[Sequence[np.ndarray]]
    directions: Sequence[Sequence[np.ndarray]] | None
    step: float
    peak_bytes: int = 0
    mesh: dict[str, Any] | None = None
    leaf_names: Sequence[str] | None = None


@dataclass
class CaseValues:
    """What one case's artifacts returned, per hidden input k.

    Attributes:
        outputs: per k, fwd's primal outputs; residuals: per k, fwd's other outputs (on a mesh,
            each one's pieces stacked by device, `placement.device_pieces`); gradients:
            per k, bwd's outputs for the k-th cotangent (numpy arrays in the artifacts' dtypes).
        fd: per k, (central difference, analytic directional derivative, rounding noise of the
            central difference) in float64 (`fd_opinion`); (nan, nan, 0) when the case has no
            directions.
        residual_layouts: on a mesh, per residual, where each device keeps its piece
            (`graders.verifier.placement.device_layout`); empty on one device.
        bwd_communication: on a mesh, the collectives of the compiled bwd and the bytes each
            device receives through them (`graders.verifier.collectives`); None on one device.
        xla_memory: on a mesh, XLA's per-device figures of the compiled programs
            (`graders.verifier.xla_memory`): {"fwd": {...}, "bwd": {...}, "primal_output_bytes":
            the primal outputs' bytes per device, "outputs": how many arrays fwd returns}; empty on
            one device.
    """

    outputs: list[list[np.ndarray]] = field(default_factory=list)
    residuals: list[list[np.ndarray]] = field(default_factory=list)
    gradients: list[list[np.ndarray]] = field(default_factory=list)
    fd: list[tuple[float, float, float]] = field(default_factory=list)
    residual_layouts: list[dict[str, Any]] = field(default_factory=list)
    bwd_communication: Communication | None = None
    xla_memory: dict[str, Any] = field(default_factory=dict)


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


def _points(case: CaseData) -> list[tuple[int, str, list[Any]]]:
    """The inputs fwd runs on for one case: (k, "x" | "plus" | "minus", input leaves), numpy
    arrays, or JAX arrays placed on the problem's mesh when it has one."""
    points: list[tuple[int, str, list[Any]]] = []
    for k, xs in enumerate(case.inputs):
        points.append((k, "x", list(xs)))
        if case.directions is not None:
            points.append((k, "plus", shifted_inputs(xs, case.directions[k], case.step)))
            points.append((k, "minus", shifted_inputs(xs, case.directions[k], -case.step)))
    if case.mesh is None:
        return points
    names = case.leaf_names or []
    return [(k, kind, placed(leaves, case.mesh, names)) for k, kind, leaves in points]


def _mesh_figures(case: CaseData, fwd: Any, bwd: Any, returned: Sequence[Any]) -> tuple[Communication, dict[str, Any]]:
    """What a mesh case's compiled programs communicate and hold per device: the collectives of
    its bwd (`graders.verifier.collectives`) and XLA's figures of both (`CaseValues.xla_memory`);
    `returned` is what its fwd returned for one input."""
    assert case.mesh is not None
    communicated = communication(bwd.as_text(), math.prod(case.mesh["axes"].values()))
    primal = sum(piece_bytes(o) for o in returned[: case.n_out])
    memory = {"fwd": xla_memory(fwd), "bwd": xla_memory(bwd), "primal_output_bytes": primal, "outputs": len(returned)}
    return communicated, memory


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
    communicated: Communication | None = None
    memory: dict[str, Any] = {}
    outputs: list[dict[tuple[int, str], list[np.ndarray]]] = [{} for _ in cases]
    residuals: list[list[list[np.ndarray]]] = [[] for _ in cases]
    gradients: list[list[list[np.ndarray]]] = [[] for _ in cases]
    layouts: list[list[dict[str, Any]]] = [[] for _ in cases]
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
            if cases[0].mesh is not None:  # a mesh case has programs of its own (`_groups`)
                communicated, memory = _mesh_figures(cases[0], fwd, bwd, returned[0])
        for i, (case, outs, grads) in enumerate(zip(cases, returned, _run(bwd, bwd_args, indices[0]), strict=True)):
            pieces = np.asarray if case.mesh is None else device_pieces  # on a mesh, what each device keeps
            residuals[i].append(kept := [pieces(r) for r in outs[case.n_out :]])
            if case.mesh is not None and not layouts[i]:  # the pieces just read, not read again
                layouts[i] = [device_layout(r, k) for r, k in zip(outs[case.n_out :], kept, strict=True)]
            gradients[i].append([np.asarray(g) for g in grads])

    values = []
    for i, case in enumerate(cases):
        v = CaseValues(residual_layouts=layouts[i], bwd_communication=communicated, xla_memory=memory)
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
    inputs, all with or all without directions), consecutive, and together within the budget. A
    case on a mesh has programs of its own, so its compiled bwd's collectives are its own."""
    by_schedule: dict[tuple[int, bool], list[list[int]]] = {}
    singles: list[list[int]] = []
    for i, c in enumerate(cases):
        if c.mesh is not None:
            singles.append([i])
            continue
        chunks = by_schedule.setdefault((len(c.inputs), c.directions is not None), [[]])
        last = chunks[-1]
        if (
            last
            and max_group_bytes is not None
            and sum(cases[j].peak_bytes for j in last) + c.peak_bytes > max_group_bytes
        ):
            chunks.append(last := [])
        last.append(i)
    return [chunk for chunks in by_schedule.values() for chunk in chunks if chunk] + singles


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
