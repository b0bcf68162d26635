"""Expectations from a problem's reference solution, computed the way submissions are judged, cached.

For every test case the reference is exported with the same `export_case` the jail uses, its
residual signature and peak live bytes are read from its own artifacts, and its artifacts are run
on the hidden inputs with random cotangents. The results are cached on disk per problem version
and per deployment seed (`<cache>/<slug>/<version>-<seed id>/`), as JSON plus an `.npz` file
(never pickle). Runs only in the trusted verifier process: this imports `reference.py`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from graders.artifacts import Aval, deserialize, exported_avals, flat_call, inspect_module
from graders.checks.gradients import directional_derivatives
from graders.checks.residuals import describe_residuals
from graders.problem import Problem, case_arg_specs, hidden_inputs, leaf_names, random_cotangents
from graders.verdict import ResidualAval
from sandbox.runner import export_case, residual_notes

CACHE_FORMAT = 1


class ReferenceSolutionError(Exception):
    """The reference solution could not be exported or run: a fault of the problem (INTERNAL_ERROR)."""


@dataclass
class CaseExpectation:
    """What the reference does on one test case.

    Attributes:
        name, dims, static: the case.
        arg_specs: the argument avals as the jail receives them.
        input_avals: fwd's input leaves; output_avals: the primal output leaves.
        residuals: the reference's saved residuals, with `print_saved_residuals` notes.
        fwd_peak_bytes, bwd_peak_bytes: peak live bytes of its artifacts (graders/artifacts.py).
        plain_residual_bytes, plain_bwd_peak_bytes: the same function with every `jax.checkpoint`
            removed (None when that variant fails), for comparison in feedback.
        inputs, cotangents, outputs, gradients: per hidden input k, one array per leaf.
        fd_directions: per k, a random direction per input leaf; fd_step: the step along it;
        fd_reference_error: per k, the reference's own relative finite-difference error.
    """

    name: str
    dims: dict[str, int]
    static: dict[str, Any]
    arg_specs: list[dict[str, Any]]
    input_avals: list[Aval]
    output_avals: list[Aval]
    residuals: list[ResidualAval]
    fwd_peak_bytes: int
    bwd_peak_bytes: int
    plain_residual_bytes: int | None
    plain_bwd_peak_bytes: int | None
    fd_step: float
    fd_reference_error: list[float]
    inputs: list[list[np.ndarray]] = field(default_factory=list, repr=False)
    cotangents: list[list[np.ndarray]] = field(default_factory=list, repr=False)
    outputs: list[list[np.ndarray]] = field(default_factory=list, repr=False)
    gradients: list[list[np.ndarray]] = field(default_factory=list, repr=False)
    fd_directions: list[list[np.ndarray]] = field(default_factory=list, repr=False)

    @property
    def residual_bytes(self) -> int:
        return sum(r.nbytes for r in self.residuals)


ARRAY_FIELDS = ("inputs", "cotangents", "outputs", "gradients", "fd_directions")


@dataclass
class Expectations:
    """The reference's expectations for every case of one problem version."""

    slug: str
    version: str
    jax_version: str
    leaf_names: list[str]
    cases: list[CaseExpectation]


def seed_id(seed: bytes) -> str:
    """A short public name for a secret seed (does not reveal it)."""
    return hashlib.sha256(b"remat-judge seed id\0" + seed).hexdigest()[:12]


def cache_dir(cache_root: Path, problem: Problem, seed: bytes) -> Path:
    return cache_root / problem.slug / f"{problem.version}-{seed_id(seed)}"


# --- loading the reference -----------------------------------------------------------------------

def _import_file(path: Path, module_name: str) -> Any:
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

    saved = {(mod, name): getattr(mod, name) for mod in (jax, jax.ad_checkpoint)
             for name in ("checkpoint", "remat") if hasattr(mod, name)}
    try:
        for mod, name in saved:
            setattr(mod, name, identity_checkpoint)
        yield
    finally:
        for (mod, name), value in saved.items():
            setattr(mod, name, value)


def evaluate_vjp(fwd_call: Callable[..., Any], bwd_call: Callable[..., Any], inputs: list[np.ndarray],
                 cotangents: list[np.ndarray], directions: list[np.ndarray], *, n_out: int,
                 step: float) -> tuple[list[np.ndarray], list[np.ndarray], tuple[float, float]]:
    """Runs one exported fwd/bwd pair on one hidden input: the reference's and a submission's
    artifacts go through this same function, so they are compared like for like.

    Args:
        fwd_call, bwd_call: flat calls of the two artifacts (`graders.artifacts.flat_call`).
        inputs: one array per input leaf; cotangents: one per primal output; directions: one per
            input leaf, for the finite-difference opinion.
        n_out: number of primal outputs of fwd; step: the finite-difference step.

    Returns:
        (primal outputs, gradients, (central difference, analytic directional derivative)).
    """
    results = fwd_call(*inputs)
    outputs = [np.asarray(r) for r in results[:n_out]]
    gradients = [np.asarray(g) for g in bwd_call(*results[n_out:], *cotangents)]
    fd = directional_derivatives(fwd_call, inputs, directions, cotangents, gradients, n_out=n_out, step=step)
    return outputs, gradients, fd


def _run_artifacts(fwd_blob: bytes, bwd_blob: bytes) -> tuple[Callable[..., Any], Callable[..., Any], Any, Any]:
    fwd, bwd = deserialize(fwd_blob), deserialize(bwd_blob)
    return flat_call(fwd), flat_call(bwd), fwd, bwd


# --- building -------------------------------------------------------------------------------------

def build_expectations(problem: Problem, *, seed: bytes) -> Expectations:
    """Exports and runs the reference on every case.

    Raises:
        ReferenceSolutionError: the reference fails to import, export or run.
    """
    import jax

    try:
        module = _import_file(problem.reference_path, f"_remat_reference_{problem.slug}")
        fn = getattr(module, problem.spec.entry_point)
    except Exception as exc:
        raise ReferenceSolutionError(f"{problem.reference_path}: {type(exc).__name__}: {exc}") from exc
    plain_fn = None
    try:
        with checkpoint_disabled():
            plain_module = _import_file(problem.reference_path, f"_remat_reference_plain_{problem.slug}")
            plain_fn = getattr(plain_module, problem.spec.entry_point)
    except Exception:
        plain_fn = None
    k_inputs = problem.spec.verify.inputs_per_case
    cases = []
    for case in problem.spec.cases:
        specs = case_arg_specs(problem.spec, case)
        try:
            fwd_blob, bwd_blob, n_out = export_case(fn, specs)
        except Exception as exc:
            raise ReferenceSolutionError(f"exporting the reference on case {case.name!r}: {type(exc).__name__}: {exc}") from exc
        fwd_call, bwd_call, fwd, bwd = _run_artifacts(fwd_blob, bwd_blob)
        out_avals = exported_avals(fwd.out_avals)
        residuals = describe_residuals(out_avals[n_out:], residual_notes(fn, specs), hide_source=True)
        plain_res_bytes = plain_peak = None
        if plain_fn is not None:
            try:
                with checkpoint_disabled():
                    p_fwd, p_bwd, p_n = export_case(plain_fn, specs)
                p_fwd_exp, p_bwd_exp = deserialize(p_fwd), deserialize(p_bwd)
                plain_res_bytes = sum(a.nbytes for a in exported_avals(p_fwd_exp.out_avals)[p_n:])
                plain_peak = inspect_module(p_bwd_exp).peak_live_bytes
            except Exception:
                plain_res_bytes = plain_peak = None
        expectation = CaseExpectation(
            name=case.name, dims=dict(case.dims), static=dict(case.static), arg_specs=specs,
            input_avals=exported_avals(fwd.in_avals), output_avals=out_avals[:n_out], residuals=residuals,
            fwd_peak_bytes=inspect_module(fwd).peak_live_bytes, bwd_peak_bytes=inspect_module(bwd).peak_live_bytes,
            plain_residual_bytes=plain_res_bytes, plain_bwd_peak_bytes=plain_peak,
            fd_step=1e-3, fd_reference_error=[],
        )
        for k in range(k_inputs):
            xs = hidden_inputs(problem.spec, case, seed=seed, version=problem.version, index=k)
            cts = random_cotangents([(a.shape, a.dtype) for a in expectation.output_avals], seed=seed,
                                    slug=problem.slug, version=problem.version, case=case.name, index=k)
            directions = random_cotangents([(a.shape, a.dtype) for a in expectation.input_avals], seed=seed,
                                           slug=problem.slug, version=problem.version,
                                           case=case.name + "/fd-direction", index=k)
            outs, grads, (fd, analytic) = evaluate_vjp(fwd_call, bwd_call, xs, cts, directions, n_out=n_out,
                                                       step=expectation.fd_step)
            expectation.inputs.append(xs)
            expectation.cotangents.append(cts)
            expectation.outputs.append(outs)
            expectation.gradients.append(grads)
            expectation.fd_directions.append(directions)
            expectation.fd_reference_error.append(abs(fd - analytic) / (abs(analytic) + 1e-12))
        cases.append(expectation)
    return Expectations(slug=problem.slug, version=problem.version, jax_version=jax.__version__,
                        leaf_names=leaf_names(problem.spec), cases=cases)


# --- the cache -------------------------------------------------------------------------------------

def save_expectations(exp: Expectations, directory: Path) -> None:
    """Writes `meta.json` and `arrays.npz` into `directory` atomically (rename of a temp dir)."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=directory.parent))
    arrays: dict[str, np.ndarray] = {}
    meta_cases = []
    for c in exp.cases:
        d = asdict(c)
        for name in ARRAY_FIELDS:
            d.pop(name)
            for k, leaves in enumerate(getattr(c, name)):
                for i, a in enumerate(leaves):
                    arrays[f"{c.name}/{name}/{k}/{i}"] = a
            d[f"n_{name}"] = [len(leaves) for leaves in getattr(c, name)]
        d["input_avals"] = [[list(a.shape), a.dtype] for a in c.input_avals]
        d["output_avals"] = [[list(a.shape), a.dtype] for a in c.output_avals]
        d["residuals"] = [r.model_dump() for r in c.residuals]
        meta_cases.append(d)
    meta = {"format": CACHE_FORMAT, "slug": exp.slug, "version": exp.version, "jax_version": exp.jax_version,
            "leaf_names": exp.leaf_names, "cases": meta_cases}
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
    np.savez(tmp / "arrays.npz", **arrays)
    try:
        os.rename(tmp, directory)
    except OSError:  # another process finished first; its result is the same
        shutil.rmtree(tmp, ignore_errors=True)


def load_expectations(directory: Path) -> Expectations | None:
    """Reads a cache entry; None when absent, from another format, or from another JAX version."""
    import jax

    try:
        meta = json.loads((directory / "meta.json").read_text())
        if meta.get("format") != CACHE_FORMAT or meta.get("jax_version") != jax.__version__:
            return None
        arrays = np.load(directory / "arrays.npz", allow_pickle=False)
    except (OSError, ValueError):
        return None
    cases = []
    for d in meta["cases"]:
        counts = {name: d.pop(f"n_{name}") for name in ARRAY_FIELDS}
        d["input_avals"] = [Aval(tuple(s), t) for s, t in d["input_avals"]]
        d["output_avals"] = [Aval(tuple(s), t) for s, t in d["output_avals"]]
        d["residuals"] = [ResidualAval(**r) for r in d["residuals"]]
        c = CaseExpectation(**d)
        for name, per_k in counts.items():
            setattr(c, name, [[arrays[f"{c.name}/{name}/{k}/{i}"] for i in range(n)] for k, n in enumerate(per_k)])
        cases.append(c)
    return Expectations(slug=meta["slug"], version=meta["version"], jax_version=meta["jax_version"],
                        leaf_names=meta["leaf_names"], cases=cases)


def ensure_expectations(problem: Problem, *, seed: bytes, cache_root: Path) -> Expectations:
    """The cached expectations of `problem`, built and stored first when missing.

    Raises:
        ReferenceSolutionError: building failed.
    """
    directory = cache_dir(cache_root, problem, seed)
    found = load_expectations(directory)
    if found is not None:
        return found
    shutil.rmtree(directory, ignore_errors=True)  # stale: another cache format or JAX version
    built = build_expectations(problem, seed=seed)
    save_expectations(built, directory)
    return built
