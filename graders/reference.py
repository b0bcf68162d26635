"""Expectations from a problem's reference solution, computed the way submissions are judged, cached.

For every test case the reference is exported with the same `export_case` the jail uses, its
residual signature and peak live bytes are read from its own artifacts, and its artifacts are run
on the hidden inputs with random cotangents. The results are cached on disk per problem version
and per deployment seed (`<cache>/<slug>/<version>-<seed id>/`), as JSON plus one file of raw
arrays (never pickle; see "the cache" below). Runs only in the trusted verifier process: this
imports `reference.py`.

The reference checks itself while it is built, once per version (`ReferenceCheckError`, one of
`SELF_CHECKS`): it imports, exports and runs (`runtime_error`); exporting every case fits the
time a submission gets for the same work in the jail (`time_limit`, the package's `[limits]
wall_time_limit_s`); its programs fit what the verifier lets any program hold (`memory_limit`);
a second export gives the same programs, or programs with bit-identical results
(`deterministic`); and in float64 its gradients are the derivatives of its own function along
random directions (`finite_difference`). Submissions are then judged against the reference's
gradients alone: a version whose reference fails is never used to grade anyone, and the failure
is cached beside its entry (`<entry>.failed.json`) so it is not rebuilt for every submission.

The cache's files are written and read by `graders.expectation_files`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import importlib.util
import json
import logging
import math
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from graders.artifact_limits import Aval, VerifyLimits, is_differentiable
from graders.checks.residuals import describe_residuals
from graders.evaluate import ArtifactRunError, CaseData, evaluate_cases
from graders.expectation import (
    CaseExpectation,
    Expectations,
    cache_dir,
    named_sources,
)
from graders.expectation_files import load_expectations, save_expectations
from graders.problem import Problem, case_arg_specs, hidden_inputs, leaf_names, random_cotangents
from graders.problem_spec import CaseSpec
from graders.untrusted.parse import deserialize, exported_avals
from graders.untrusted.reader import inspect_module
from graders.untrusted.result import ModuleInfo
from graders.verdict import ResidualFact
from jailside.export import export_case, residual_notes

# FD; 7: residuals carry their memory kind; 8: bwd_flops_exact, bwd_largest_value_bytes
log = logging.getLogger(__name__)


class ReferenceSolutionError(Exception):
    """The reference solution could not be exported or run: a fault of the problem (INTERNAL_ERROR)."""


SELF_CHECKS = ("finite_difference", "deterministic", "time_limit", "memory_limit", "runtime_error")


FD_STEP = 1e-9  # the float64 finite-difference step (scaled by max(1, max|x|) per leaf): small, so few relu


# kinks fall inside it (at 1e-6, 8 layers of 131k relus gave 0.7% in scan_layers_remat)
FD_TOLERANCE = 1e-3  # relative disagreement allowed in float64 (measured on the bank's references: at most


class ReferenceCheckError(ReferenceSolutionError):
    """The reference failed self-checks: a fault of the problem's author.

    Attributes:
        failures: (check, message) per failed self-check, `check` one of `SELF_CHECKS` and
            `message` what went wrong, for the author (naming the `[limits]` key to raise where one
            applies). The determinism and finite-difference checks both run before this is raised.
        check, message: the first failure's.
    """

    def __init__(self, check: str, message: str, *, more: list[tuple[str, str]] | None = None):
        self.failures = [(check, message), *(more or [])]
        assert all(c in SELF_CHECKS for c, _ in self.failures), self.failures
        super().__init__("\n".join(f"reference.py: {c}: {m}" for c, m in self.failures))
        self.check, self.message = check, message


def import_file(path: Path, module_name: str) -> Any:
    """Imports the Python file `path` as the module `module_name` (registered in sys.modules, so
    pickling and dataclasses inside it work): a reference.py, trusted, in a verifier child or an
    author's own process (`graders.tree_spec`).

    Raises:
        ReferenceSolutionError: no loader for the file. Whatever running it raises.
    """
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ReferenceSolutionError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def checkpoint_disabled() -> Iterator[None]:
    """Makes `jax.checkpoint` (and its aliases) the identity while a module is imported and traced,
    to see what the same function saves without any checkpoint."""
    import jax
    import jax.ad_checkpoint

    def identity_checkpoint(fun: Callable[..., Any] | None = None, **_: Any) -> Any:
        return fun if fun is not None else (lambda f: f)

    saved = {
        (mod, name): getattr(mod, name)
        for mod in (jax, jax.ad_checkpoint)
        for name in ("checkpoint", "remat")
        if hasattr(mod, name)
    }
    try:
        for mod, name in saved:
            setattr(mod, name, identity_checkpoint)
        yield
    finally:
        for (mod, name), value in saved.items():
            setattr(mod, name, value)


def _variant_facts(fn: Callable[..., Any], specs: list[dict[str, Any]]) -> tuple[int, ModuleInfo] | None:
    """(residual bytes, bwd ModuleInfo) of a variant of the reference, or None when it fails."""
    try:
        fwd_blob, bwd_blob, n_out = export_case(fn, specs)
        fwd = deserialize(fwd_blob)
        return sum(a.nbytes for a in exported_avals(fwd.out_avals)[n_out:]), inspect_module(deserialize(bwd_blob))
    except Exception:  # noqa: BLE001 - a comparison point only: the verdict never depends on it
        return None


def _everything_recomputed(fn: Callable[..., Any], specs: list[dict[str, Any]]) -> Callable[..., Any]:
    """`fn` under one plain `jax.checkpoint`: saves the inputs and recomputes everything."""
    import jax

    static = tuple(i for i, s in enumerate(specs) if s["kind"] == "static")
    return jax.checkpoint(fn, static_argnums=static)


def _float64_specs(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def widen(spec: dict[str, Any]) -> dict[str, Any]:
        if spec["kind"] == "array":
            return {**spec, "dtype": "float64"} if is_differentiable(spec["dtype"]) else spec
        if spec["kind"] == "list":
            return {**spec, "items": [widen(i) for i in spec["items"]]}
        if spec["kind"] == "dict":
            return {**spec, "items": {k: widen(i) for k, i in spec["items"].items()}}
        return spec

    return [widen(s) for s in specs]


def _max_error(reference: np.ndarray, truth: np.ndarray) -> float:
    """max|reference - truth| over the finite elements, in float64 (0.0 when there are none)."""
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(np.asarray(reference, np.float64) - np.asarray(truth, np.float64))
    finite = diff[np.isfinite(diff)]
    return float(np.max(finite)) if finite.size else 0.0


def _float64_truth(
    fn: Callable[..., Any], specs: list[dict[str, Any]], expectation: CaseExpectation, n_out: int
) -> list[tuple[float, float, float]] | None:
    """Evaluates the reference in float64 on the case's hidden inputs and cotangents (upcast), and
    at inputs shifted by `FD_STEP` along the case's random directions.

    Stores the float32 reference's own largest error per output, gradient and (when the float64
    residuals line up with the float32 ones) residual: the scale tolerances are calibrated on
    (docs/ARCHITECTURE.md, "Tolerances"). Leaves them empty when the reference cannot run in
    float64: checks then use the problem's fixed tolerance.

    Returns:
        Per hidden input, (central difference, analytic directional derivative) in float64: the
        reference's finite-difference self-check; None when the reference cannot run in float64
        with every input and output in float64 (the check is then skipped).
    """
    import jax

    try:
        with jax.enable_x64(True):
            fwd_blob, bwd_blob, n64 = export_case(fn, _float64_specs(specs))
            fwd, bwd = deserialize(fwd_blob), deserialize(bwd_blob)
            out64 = exported_avals(fwd.out_avals)
            res64 = out64[n64:]
            same_residuals = [a.shape for a in res64] == [tuple(r.shape) for r in expectation.residuals]
            if n64 != n_out:
                return None
            all_f64 = all(a.dtype == "float64" for a in [*exported_avals(fwd.in_avals), *out64[:n_out]])
            (truth,) = evaluate_cases(
                [
                    CaseData(
                        fwd=fwd,
                        bwd=bwd,
                        n_out=n_out,
                        step=FD_STEP,
                        directions=[[np.asarray(d, np.float64) for d in ds] for ds in expectation.fd_directions]
                        or None,
                        inputs=[[np.asarray(x, np.float64) for x in xs] for xs in expectation.inputs],
                        cotangents=[[np.asarray(c, np.float64) for c in cts] for cts in expectation.cotangents],
                    )
                ]
            )
        outputs = [
            [_max_error(r, t) for r, t in zip(expectation.outputs[k], outs, strict=True)]
            for k, outs in enumerate(truth.outputs)
        ]
        gradients = [
            [_max_error(r, t) for r, t in zip(expectation.gradients[k], grads, strict=True)]
            for k, grads in enumerate(truth.gradients)
        ]
        # float64 may save other residuals than float32 (another count): errors only where they line up
        residuals = [
            [_max_error(r, t) for r, t in zip(expectation.residual_values[k], res, strict=True)]
            for k, res in enumerate(truth.residuals)
            if same_residuals
        ]
    except Exception:  # noqa: BLE001 - the float64 evaluation is a calibration aid; the fixed tolerance stands in
        return None
    expectation.output_errors, expectation.gradient_errors = outputs, gradients
    if same_residuals:
        expectation.residual_errors = residuals
    return truth.fd if all_f64 else None


def fd_disagreement(fd: float, analytic: float, noise: float = 0.0) -> float:
    """How far a central difference and an analytic directional derivative disagree beyond the
    central difference's rounding `noise` (`graders.evaluate.fd_opinion`), relative to the larger of
    the two (0.0 when both are below 1e-12: no slope to speak of)."""
    scale = max(abs(fd), abs(analytic))
    if not math.isfinite(fd) or not math.isfinite(analytic):
        return math.inf
    return 0.0 if scale < 1e-12 else max(0.0, abs(fd - analytic) - max(0.0, noise)) / scale


def _check_finite_difference(case: str, fd: list[tuple[float, float, float]]) -> None:
    """Raises `ReferenceCheckError("finite_difference")` when, in float64, the reference's gradient
    along a random direction disagrees with its own function's rate of change there."""
    for k, (central, analytic, noise) in enumerate(fd):
        disagreement = fd_disagreement(central, analytic, noise)
        if disagreement > FD_TOLERANCE:
            raise ReferenceCheckError(
                "finite_difference",
                f"on case {case!r} (hidden input {k + 1} of {len(fd)}), in float64, the reference's gradient "
                f"says the function changes at rate {analytic:.6g} along a random direction, but the function "
                f"itself changes at rate {central:.6g} (relative difference {disagreement:.2%}, allowed "
                f"{FD_TOLERANCE:.1%}): its backward pass does not differentiate its forward pass. Look for a "
                f"stop_gradient, a custom_vjp whose backward rule is wrong, or a value computed outside JAX.",
            )


def _same_values(a: Any, b: Any) -> bool:
    """Bit-identical results of two evaluations (NaN equal to NaN): outputs, residuals, gradients."""
    for field_a, field_b in ((a.outputs, b.outputs), (a.residuals, b.residuals), (a.gradients, b.gradients)):
        for xs, ys in zip(field_a, field_b, strict=True):
            if len(xs) != len(ys) or not all(
                np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True) for x, y in zip(xs, ys, strict=True)
            ):
                return False
    return True


def _export(fn: Callable[..., Any], specs: list[dict[str, Any]], case: str) -> tuple[bytes, bytes, int]:
    """`export_case` of the reference on one case.

    Raises:
        ReferenceCheckError: runtime_error, with what the reference raised.
    """
    try:
        return export_case(fn, specs)
    except MemoryError:
        raise ReferenceCheckError(
            "memory_limit", f"exporting the reference on case {case!r} ran out of memory: make the case smaller"
        ) from None
    except Exception as exc:
        raise ReferenceCheckError(
            "runtime_error", f"exporting the reference on case {case!r} raised {type(exc).__name__}: {exc}"
        ) from exc


def _import_reference(problem: Problem) -> tuple[Callable[..., Any], Callable[..., Any] | None]:
    """(the reference's entry point, the same imported with checkpoints disabled or None when that fails).

    Raises:
        ReferenceCheckError: runtime_error, when reference.py or its entry point cannot be imported.
    """
    try:
        module = import_file(problem.reference_path, f"_remat_reference_{problem.slug}")
        fn = getattr(module, problem.spec.entry_point)
    except Exception as exc:
        raise ReferenceCheckError(
            "runtime_error",
            f"importing reference.py and finding {problem.spec.entry_point!r} raised {type(exc).__name__}: {exc}",
        ) from exc
    plain_fn = None
    try:
        with checkpoint_disabled():
            plain_module = import_file(problem.reference_path, f"_remat_reference_plain_{problem.slug}")
            plain_fn = getattr(plain_module, problem.spec.entry_point)
    except Exception:  # noqa: BLE001 - a reference that needs its checkpoints: no plain comparison
        plain_fn = None
    return fn, plain_fn


def _export_within_budget(
    fn: Callable[..., Any],
    specs: list[dict[str, Any]],
    case: str,
    export_s: float,
    export_budget_s: float | None,
) -> tuple[bytes, bytes, int, float]:
    """`_export` of one case and the export seconds so far including it.

    Raises:
        ReferenceCheckError: as `_export`, or time_limit when the seconds so far exceed the budget.
    """
    t0 = time.monotonic()
    fwd_blob, bwd_blob, n_out = _export(fn, specs, case)
    export_s += time.monotonic() - t0
    if export_budget_s is not None and export_s > export_budget_s:
        raise ReferenceCheckError(
            "time_limit",
            f"exporting the reference took {export_s:.1f} s by case {case!r}, more than "
            f"the {export_budget_s:g} s a submission gets for exporting every case in the jail "
            f"([limits] wall_time_limit_s): a submission as fast as the reference would be "
            f"judged TIME_LIMIT_EXCEEDED. Make the reference (or the cases) faster, or raise "
            f"wall_time_limit_s in problem.toml's [limits].",
        )
    return fwd_blob, bwd_blob, n_out, export_s


def _check_peak_memory(case: str, fwd_info: ModuleInfo, bwd_info: ModuleInfo, limits: VerifyLimits) -> None:
    """Raises `ReferenceCheckError("memory_limit")` when either program holds more than the verifier allows."""
    for kind, info in (("forward", fwd_info), ("backward", bwd_info)):
        if info.peak_live_bytes > limits.max_peak_live_bytes:
            raise ReferenceCheckError(
                "memory_limit",
                f"on case {case!r} the reference's {kind} program holds "
                f"{info.peak_live_bytes:,} bytes live at once, more than the "
                f"{limits.max_peak_live_bytes:,} the verifier lets any exported program hold "
                f"(a submission like it is judged MEMORY_LIMIT_EXCEEDED): make the case smaller.",
            )


def _case_expectation(
    case: CaseSpec,
    specs: list[dict[str, Any]],
    fn: Callable[..., Any],
    plain_fn: Callable[..., Any] | None,
    *,
    fwd: Any,
    fwd_info: ModuleInfo,
    bwd_info: ModuleInfo,
    output_avals: list[Aval],
    residuals: list[ResidualFact],
) -> CaseExpectation:
    """The expectation of one case without its hidden inputs and values, with its variants' facts."""
    plain = None
    if plain_fn is not None:
        with checkpoint_disabled():
            plain = _variant_facts(plain_fn, specs)
    full = _variant_facts(_everything_recomputed(fn, specs), specs)
    return CaseExpectation(
        name=case.name,
        dims=dict(case.dims),
        static=dict(case.static),
        arg_specs=specs,
        input_avals=exported_avals(fwd.in_avals),
        output_avals=output_avals,
        residuals=residuals,
        fwd_peak_bytes=fwd_info.peak_live_bytes,
        bwd_peak_bytes=bwd_info.peak_live_bytes,
        bwd_flops=bwd_info.flops,
        plain_residual_bytes=plain[0] if plain else None,
        plain_bwd_peak_bytes=plain[1].peak_live_bytes if plain else None,
        plain_bwd_flops=plain[1].flops if plain else None,
        full_remat_bytes=full[0] if full else None,
        full_remat_bwd_peak_bytes=full[1].peak_live_bytes if full else None,
        full_remat_bwd_flops=full[1].flops if full else None,
        fd_step=FD_STEP,
        fd_reference_error=[],
        bwd_flops_exact=bwd_info.flops_exact,
        bwd_residual_flops=bwd_info.residual_flops,
        bwd_largest_value_bytes=bwd_info.largest_value_bytes,
        bwd_largest_value_elements=bwd_info.largest_value_elements,
    )


def _add_hidden_inputs(expectation: CaseExpectation, problem: Problem, case: CaseSpec, seed: bytes) -> None:
    """Appends the case's hidden inputs, random cotangents and finite-difference directions to `expectation`."""

    def draw(avals: list[Aval], stream: str, k: int) -> list[np.ndarray]:
        shapes = [(a.shape, a.dtype) for a in avals]
        return random_cotangents(shapes, seed=seed, slug=problem.slug, version=problem.version, case=stream, index=k)

    for k in range(problem.spec.verify.inputs_per_case):
        expectation.inputs.append(hidden_inputs(problem.spec, case, seed=seed, version=problem.version, index=k))
        expectation.cotangents.append(draw(expectation.output_avals, case.name, k))
        expectation.fd_directions.append(draw(expectation.input_avals, case.name + "/fd-direction", k))


def _expect_case(
    problem: Problem,
    case: CaseSpec,
    fn: Callable[..., Any],
    plain_fn: Callable[..., Any] | None,
    *,
    names: list[str],
    seed: bytes,
    limits: VerifyLimits,
    export_s: float,
    export_budget_s: float | None,
) -> tuple[CaseExpectation, CaseData, tuple[str, str], float]:
    """(expectation, programs to run, program digests, export seconds so far) of one case.

    Raises:
        ReferenceCheckError: runtime_error, time_limit or memory_limit.
    """
    specs = case_arg_specs(problem.spec, case)
    fwd_blob, bwd_blob, n_out, export_s = _export_within_budget(fn, specs, case.name, export_s, export_budget_s)
    fwd, bwd = deserialize(fwd_blob), deserialize(bwd_blob)
    fwd_info, bwd_info = inspect_module(fwd), inspect_module(bwd, cotangents=n_out)
    _check_peak_memory(case.name, fwd_info, bwd_info, limits)
    digest = (fwd_info.digest, bwd_info.digest)
    out_avals = exported_avals(fwd.out_avals)
    residuals = describe_residuals(
        out_avals[n_out:],
        residual_notes(fn, specs),
        sources=named_sources(fwd_info.sources[n_out:], names),
        hide_source=True,
        memory_kinds=fwd_info.memory_kinds[n_out:],
    )
    expectation = _case_expectation(
        case,
        specs,
        fn,
        plain_fn,
        fwd=fwd,
        fwd_info=fwd_info,
        bwd_info=bwd_info,
        output_avals=out_avals[:n_out],
        residuals=residuals,
    )
    _add_hidden_inputs(expectation, problem, case, seed)
    data = CaseData(
        fwd=fwd,
        bwd=bwd,
        n_out=n_out,
        inputs=expectation.inputs,
        cotangents=expectation.cotangents,
        directions=None,
        step=0.0,
        peak_bytes=max(fwd_info.peak_live_bytes, bwd_info.peak_live_bytes),
    )
    return expectation, data, digest, export_s


def _finite_difference_pass(
    fn: Callable[..., Any], problem: Problem, cases: list[CaseExpectation], artifacts: list[CaseData]
) -> ReferenceCheckError | None:
    """Runs each case in float64 (`_float64_truth`), recording its finite-difference disagreement
    in its expectation. Returns the first case's finite-difference failure, or None."""
    first: ReferenceCheckError | None = None
    for case, expectation, data in zip(problem.spec.cases, cases, artifacts, strict=True):
        fd = _float64_truth(fn, case_arg_specs(problem.spec, case), expectation, data.n_out)
        if fd is not None:
            expectation.fd_reference_error = [fd_disagreement(c, a, n) for c, a, n in fd]
            if first is None:
                try:
                    _check_finite_difference(case.name, fd)
                except ReferenceCheckError as failure:
                    first = failure
    return first


def build_expectations(
    problem: Problem, *, seed: bytes, export_budget_s: float | None = None, limits: VerifyLimits | None = None
) -> Expectations:
    """Exports and runs the reference on every case, in float32 (as judged) and float64 (the
    truth), checking it on the way (the module docstring's self-checks).

    Args:
        problem: the package.
        seed: the deployment's hidden-input seed.
        export_budget_s: the most wall seconds exporting every case once may take: the jail's
            `wall_time_limit_s` for this problem (a submission doing the same work in that time
            is judged TIME_LIMIT_EXCEEDED). None: no budget.
        limits: the verifier's caps on any program (default `VerifyLimits()`).

    Raises:
        ReferenceCheckError: a self-check failed (the message is for the package's author).
    """
    import jax

    limits = limits or VerifyLimits()
    fn, plain_fn = _import_reference(problem)
    names = leaf_names(problem.spec)
    cases: list[CaseExpectation] = []
    artifacts: list[CaseData] = []
    digests: list[tuple[str, str]] = []
    export_s = 0.0
    for case in problem.spec.cases:
        expectation, data, digest, export_s = _expect_case(
            problem,
            case,
            fn,
            plain_fn,
            names=names,
            seed=seed,
            limits=limits,
            export_s=export_s,
            export_budget_s=export_budget_s,
        )
        digests.append(digest)
        cases.append(expectation)
        artifacts.append(data)
    values = _run_reference(artifacts, cases, limits)
    failures: list[ReferenceCheckError] = []
    try:
        _check_deterministic(fn, problem, cases, artifacts, digests, values, limits)
    except ReferenceCheckError as failure:
        if failure.check != "deterministic":
            raise
        failures.append(failure)
    for expectation, got in zip(cases, values, strict=True):
        expectation.outputs, expectation.residual_values, expectation.gradients = (
            got.outputs,
            got.residuals,
            got.gradients,
        )
    fd_failure = _finite_difference_pass(fn, problem, cases, artifacts)
    if fd_failure is not None:
        failures.append(fd_failure)
    if failures:
        raise ReferenceCheckError(
            failures[0].check, failures[0].message, more=[(f.check, f.message) for f in failures[1:]]
        )
    return Expectations(
        slug=problem.slug, version=problem.version, jax_version=jax.__version__, leaf_names=names, cases=cases
    )


def _run_reference(artifacts: list[CaseData], cases: list[CaseExpectation], limits: VerifyLimits) -> list[Any]:
    """Runs the reference's programs as the verifier runs a submission's (the grouping of cases
    changes no value).

    Raises:
        ReferenceCheckError: runtime_error or memory_limit.
    """
    try:
        return evaluate_cases(artifacts, max_group_bytes=limits.max_peak_live_bytes)
    except ArtifactRunError as exc:
        raise ReferenceCheckError(
            "runtime_error", f"running the reference's exported programs on case {cases[exc.case].name!r} failed: {exc}"
        ) from exc
    except MemoryError:
        raise ReferenceCheckError(
            "memory_limit",
            "running the reference's exported programs ran out of the verifier's memory: make the cases smaller",
        ) from None


def _check_deterministic(
    fn: Callable[..., Any],
    problem: Problem,
    cases: list[CaseExpectation],
    artifacts: list[CaseData],
    digests: list[tuple[str, str]],
    values: list[Any],
    limits: VerifyLimits,
) -> None:
    """Exports the reference a second time: the same programs (normalized digests), or programs
    whose results on every hidden input are bit-identical to the first's.

    Raises:
        ReferenceCheckError: deterministic, when the results differ (randomness or state that the
            reference reads while it is traced: an unseeded numpy or Python random, the clock, a
            global that changes between calls).
    """
    changed: list[int] = []  # indices of the cases whose second export differs
    again: list[CaseData] = []
    for i, (case, data, first) in enumerate(zip(problem.spec.cases, artifacts, digests, strict=True)):
        fwd_blob, bwd_blob, n_out = _export(fn, case_arg_specs(problem.spec, case), case.name)
        fwd, bwd = deserialize(fwd_blob), deserialize(bwd_blob)
        if (inspect_module(fwd).digest, inspect_module(bwd).digest) == first:
            continue
        changed.append(i)
        again.append(dataclasses.replace(data, fwd=fwd, bwd=bwd, n_out=n_out))  # same inputs and cotangents
    if not again:
        return
    for i, second in zip(changed, _run_reference(again, [cases[j] for j in changed], limits), strict=True):
        if not _same_values(values[i], second):
            raise ReferenceCheckError(
                "deterministic",
                f"exported twice, the reference gives different results on case "
                f"{cases[i].name!r}: it reads randomness or changing state while it is traced (an "
                f"unseeded numpy or Python random, the clock, a global). Use jax.random with a "
                f"fixed key, or make the value an argument.",
            )


def failure_path(directory: Path) -> Path:
    """Where a version's failed self-check is kept: beside its cache entry."""
    return directory.with_name(directory.name + ".failed.json")


# self-checks whose failure depends on the package alone (not on how busy the machine is): cached
CACHED_FAILURES = ("finite_difference", "deterministic", "memory_limit", "runtime_error")


def recorded_failure(directory: Path) -> ReferenceCheckError | None:
    """The self-check failure recorded for the entry at `directory`, or None."""
    try:
        data = json.loads(failure_path(directory).read_text(encoding="utf-8"))
        failures = [(str(f["check"]), str(f["message"])) for f in data["failures"]]
        return ReferenceCheckError(*failures[0], more=failures[1:])
    except (OSError, ValueError, KeyError, TypeError, AssertionError):
        return None


def record_failure(directory: Path, failure: ReferenceCheckError) -> None:
    """Keeps `failure` beside the entry at `directory` (atomically; a cache we cannot write costs
    time, not correctness)."""
    path = failure_path(directory)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(
            json.dumps({"failures": [{"check": c, "message": m} for c, m in failure.failures]}), encoding="utf-8"
        )
        temporary.replace(path)
    except OSError as exc:
        log.warning("cannot record the reference failure of %s: %s", directory, exc)


def ensure_expectations(
    problem: Problem,
    *,
    seed: bytes,
    cache_root: Path,
    export_budget_s: float | None = None,
    limits: VerifyLimits | None = None,
) -> Expectations:
    """The cached expectations of `problem`, built (and self-checked) and stored first when missing.

    Raises:
        ReferenceCheckError: the reference failed a self-check, now or when this version was
            built before (`recorded_failure`: not rebuilt).
    """
    directory = cache_dir(cache_root, problem, seed)
    found = load_expectations(directory)
    if found is not None:
        return found
    failed = recorded_failure(directory)
    if failed is not None:
        raise failed
    shutil.rmtree(directory, ignore_errors=True)  # stale (another format or JAX version) or unreadable
    try:
        built = build_expectations(problem, seed=seed, export_budget_s=export_budget_s, limits=limits)
    except ReferenceCheckError as failure:
        if all(check in CACHED_FAILURES for check, _ in failure.failures):
            record_failure(directory, failure)
        raise
    try:
        save_expectations(built, directory)
    except OSError as exc:  # a cache we cannot write costs time, not correctness
        log.warning("cannot cache the expectations of %s in %s: %s", problem.slug, directory, exc)
    return built
