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
One process builds a version at a time (`graders.reference.cache_builds`: the others wait and read).

The self-checks are in `graders.reference.self_checks`, the errors they raise and the record of a
failed one in `graders.reference.failures`; the cache's files are written and read by
`graders.reference.expectation_files`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from graders.artifact_limits import Aval, VerifyLimits
from graders.checks.budget import budgeted_bytes
from graders.checks.described import describe_residuals
from graders.checks.residuals import with_layouts
from graders.problems.hidden_inputs import case_arg_specs, hidden_inputs, leaf_names, random_cotangents
from graders.problems.problem import Problem
from graders.problems.spec import CaseSpec
from graders.reference.budget_facts import budget_facts
from graders.reference.cache_builds import cached_or_built
from graders.reference.expectation import (
    CaseExpectation,
    Expectations,
    cache_dir,
    named_sources,
)
from graders.reference.failures import ReferenceCheckError, ReferenceSolutionError
from graders.reference.plain import checkpoint_disabled
from graders.reference.schedules import measure_schedules, schedule_table
from graders.reference.self_checks import (
    FD_STEP,
    check_deterministic,
    check_peak_memory,
    export_within_budget,
    finite_difference_pass,
    run_reference,
)
from graders.reference.variants import everything_recomputed, variant_facts
from graders.untrusted.parse import deserialize, exported_avals
from graders.untrusted.reader import inspect_module
from graders.untrusted.result import ModuleInfo
from graders.verdict import ResidualFact
from graders.verifier.evaluate import CaseData
from jailside.export import residual_notes


def import_file(path: Path, module_name: str) -> Any:
    """Imports the Python file `path` as the module `module_name` (registered in sys.modules, so
    pickling and dataclasses inside it work): a reference.py, trusted, in a verifier child or an
    author's own process (`graders.problems.tree_spec`).

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


def _import_reference(
    problem: Problem,
) -> tuple[Callable[..., Any], Callable[..., Any] | None, dict[str, Callable[..., Any]]]:
    """(the reference's entry point, the same imported with checkpoints disabled or None when that
    fails, its named schedules: `graders.reference.schedules.schedule_table`).

    Raises:
        ReferenceCheckError: runtime_error, when reference.py or its entry point cannot be imported.
    """
    try:
        module = import_file(problem.reference_path, f"_remat_reference_{problem.slug}")
        fn = getattr(module, problem.spec.entry_point)
        table = schedule_table(module)
    except ReferenceCheckError:
        raise
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
    return fn, plain_fn, table


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
    mesh: dict[str, Any] | None,
) -> CaseExpectation:
    """The expectation of one case without its hidden inputs and values, with its variants' facts."""
    plain = None
    if plain_fn is not None:
        with checkpoint_disabled():
            plain = variant_facts(plain_fn, specs, mesh)
    # one checkpoint around the function with its own removed: each value recomputed once, not
    # once per level of nesting (the reference's inner checkpoints replayed inside the outer one)
    outer = everything_recomputed(plain_fn if plain_fn is not None else fn, specs)
    with checkpoint_disabled() if plain_fn is not None else contextlib.nullcontext():
        full = variant_facts(outer, specs, mesh)
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
        fwd_flops=fwd_info.flops,
        plain_residual_bytes=plain.residual_bytes if plain else None,
        plain_bwd_peak_bytes=plain.bwd_info.peak_live_bytes if plain else None,
        plain_bwd_flops=plain.bwd_info.flops if plain else None,
        plain_recompute_flops=plain.bwd_info.recompute_flops if plain else None,
        plain_bwd_received_bytes=plain.bwd_received_bytes if plain else None,
        plain_bwd_device_bytes=plain.bwd_device_bytes if plain else None,
        full_remat_bytes=full.residual_bytes if full else None,
        full_remat_bwd_peak_bytes=full.bwd_info.peak_live_bytes if full else None,
        full_remat_bwd_flops=full.bwd_info.flops if full else None,
        full_remat_recompute_flops=full.bwd_info.recompute_flops if full else None,
        full_remat_bwd_received_bytes=full.bwd_received_bytes if full else None,
        full_remat_bwd_device_bytes=full.bwd_device_bytes if full else None,
        fd_step=FD_STEP,
        fd_reference_error=[],
        bwd_flops_exact=bwd_info.flops_exact,
        bwd_residual_flops=bwd_info.residual_flops,
        bwd_recompute_flops=bwd_info.recompute_flops,
        bwd_recomputed=dict(bwd_info.recomputed_signatures),
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


def _budget(
    problem: Problem,
    case: str,
    specs: list[dict[str, Any]],
    plain_fn: Callable[..., Any] | None,
    residuals: list[ResidualFact],
    bwd_info: ModuleInfo,
    names: list[str],
    schedules: Mapping[str, Callable[..., Any]],
) -> dict[str, Any]:
    """A budget problem's facts of one case: its optimum and frontier (`budget_facts`), with the
    reference's named schedules measured."""
    memory = problem.spec.memory
    reference = {
        "bytes": budgeted_bytes(residuals),
        "peak_bytes": bwd_info.peak_live_bytes,
        "flops": bwd_info.recompute_flops,
    }
    measured = measure_schedules(schedules, specs, case)
    return budget_facts(
        plain_fn, specs, case, memory.budgets[case], reference, names, budget_of=memory.budget_of, schedules=measured
    )


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
    schedules: Mapping[str, Callable[..., Any]],
) -> tuple[CaseExpectation, CaseData, tuple[str, str], float]:
    """(expectation, programs to run, program digests, export seconds so far) of one case.

    Raises:
        ReferenceCheckError: runtime_error, time_limit or memory_limit.
    """
    specs = case_arg_specs(problem.spec, case)
    mesh, axes = problem.spec.mesh_plain, problem.spec.mesh_axes
    fwd_blob, bwd_blob, n_out, export_s = export_within_budget(fn, specs, case.name, export_s, export_budget_s, mesh)
    fwd, bwd = deserialize(fwd_blob), deserialize(bwd_blob)
    fwd_info = inspect_module(fwd, mesh_axes=axes)
    bwd_info = inspect_module(bwd, cotangents=n_out, forward_ops=fwd_info.op_signatures, mesh_axes=axes)
    check_peak_memory(case.name, fwd_info, bwd_info, limits)
    digest = (fwd_info.digest, bwd_info.digest)
    out_avals = exported_avals(fwd.out_avals)
    notes = residual_notes(fn, specs, mesh)
    sources = named_sources(fwd_info.sources[n_out:], names)
    kinds = fwd_info.memory_kinds[n_out:]
    residuals = describe_residuals(
        out_avals[n_out:], notes, sources=sources, hide_source=True, memory_kinds=kinds,
        depends=fwd_info.depends_on_arguments[n_out:],
        selectors=bwd_info.selector_arguments[: len(out_avals) - n_out],
    )  # fmt: skip
    expectation = _case_expectation(
        case, specs, fn, plain_fn, fwd=fwd, fwd_info=fwd_info, bwd_info=bwd_info,
        output_avals=out_avals[:n_out], residuals=residuals, mesh=mesh,
    )  # fmt: skip
    if problem.spec.memory.rule == "budget":
        expectation.budget = _budget(problem, case.name, specs, plain_fn, residuals, bwd_info, names, schedules)
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
        mesh=mesh,
        leaf_names=names,
    )
    return expectation, data, digest, export_s


def _expect_cases(
    problem: Problem,
    fn: Callable[..., Any],
    plain_fn: Callable[..., Any] | None,
    *,
    names: list[str],
    seed: bytes,
    limits: VerifyLimits,
    export_budget_s: float | None,
    schedules: Mapping[str, Callable[..., Any]],
) -> tuple[list[CaseExpectation], list[CaseData], list[tuple[str, str]]]:
    """(expectation, programs to run, program digests) of every case in order (`_expect_case`),
    the export seconds counted across the cases against `export_budget_s`.

    Raises:
        ReferenceCheckError: runtime_error, time_limit or memory_limit.
    """
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
            schedules=schedules,
        )
        digests.append(digest)
        cases.append(expectation)
        artifacts.append(data)
    return cases, artifacts, digests


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
    # JAX only in the child that builds expectations: the server imports this package
    import jax

    limits = limits or VerifyLimits()
    fn, plain_fn, schedules = _import_reference(problem)
    names = leaf_names(problem.spec)
    cases, artifacts, digests = _expect_cases(
        problem, fn, plain_fn, names=names, seed=seed, limits=limits, export_budget_s=export_budget_s,
        schedules=schedules,
    )  # fmt: skip
    values = run_reference(artifacts, cases, limits)
    failures: list[ReferenceCheckError] = []
    try:
        check_deterministic(fn, problem, cases, artifacts, digests, values, limits)
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
        expectation.residuals = with_layouts(expectation.residuals, got.residual_layouts)
        if got.bwd_communication is not None:
            expectation.bwd_collectives = got.bwd_communication.counts
            expectation.bwd_received_bytes = got.bwd_communication.received_bytes
        expectation.xla_memory = got.xla_memory
    fd_failure = finite_difference_pass(fn, problem, cases, artifacts)
    if fd_failure is not None:
        failures.append(fd_failure)
    if failures:
        raise ReferenceCheckError(
            failures[0].check, failures[0].message, more=[(f.check, f.message) for f in failures[1:]]
        )
    return Expectations(
        slug=problem.slug, version=problem.version, jax_version=jax.__version__, leaf_names=names, cases=cases
    )


def ensure_expectations(
    problem: Problem,
    *,
    seed: bytes,
    cache_root: Path,
    export_budget_s: float | None = None,
    limits: VerifyLimits | None = None,
) -> Expectations:
    """The cached expectations of `problem`, built (and self-checked) and stored first when missing,
    one builder at a time (`graders.reference.cache_builds.cached_or_built`: a build of the same
    version in another process is waited for and read, not repeated).

    Raises:
        ReferenceCheckError: the reference failed a self-check, now or when this version was
            built before (`recorded_failure`: not rebuilt).
    """
    return cached_or_built(
        cache_dir(cache_root, problem, seed),
        lambda: build_expectations(problem, seed=seed, export_budget_s=export_budget_s, limits=limits),
    )
