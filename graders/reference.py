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
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from graders.artifacts import Aval, ModuleInfo, deserialize, exported_avals, flat_call, inspect_module
from graders.checks.residuals import describe_residuals
from graders.evaluate import evaluate_vjp
from graders.expectation import ARRAY_FIELDS, CaseExpectation, Expectations, named_sources
from graders.problem import Problem, case_arg_specs, hidden_inputs, leaf_names, random_cotangents
from graders.verdict import ResidualFact
from jailside.export import export_case, residual_notes

CACHE_FORMAT = 3


class ReferenceSolutionError(Exception):
    """The reference solution could not be exported or run: a fault of the problem (INTERNAL_ERROR)."""


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


def _run_artifacts(fwd_blob: bytes, bwd_blob: bytes) -> tuple[Callable[..., Any], Callable[..., Any], Any, Any]:
    fwd, bwd = deserialize(fwd_blob), deserialize(bwd_blob)
    return flat_call(fwd), flat_call(bwd), fwd, bwd


# --- building -------------------------------------------------------------------------------------

def _variant_facts(fn: Callable[..., Any], specs: list[dict[str, Any]]) -> tuple[int, ModuleInfo] | None:
    """(residual bytes, bwd ModuleInfo) of a variant of the reference, or None when it fails."""
    try:
        fwd_blob, bwd_blob, n_out = export_case(fn, specs)
        fwd = deserialize(fwd_blob)
        return sum(a.nbytes for a in exported_avals(fwd.out_avals)[n_out:]), inspect_module(deserialize(bwd_blob))
    except Exception:  # a comparison point only: the verdict never depends on it
        return None


def _everything_recomputed(fn: Callable[..., Any], specs: list[dict[str, Any]]) -> Callable[..., Any]:
    """`fn` under one plain `jax.checkpoint`: saves the inputs and recomputes everything."""
    import jax

    static = tuple(i for i, s in enumerate(specs) if s["kind"] == "static")
    return jax.checkpoint(fn, static_argnums=static)


def _float64_specs(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def widen(spec: dict[str, Any]) -> dict[str, Any]:
        if spec["kind"] == "array":
            return {**spec, "dtype": "float64"}
        if spec["kind"] == "list":
            return {**spec, "items": [widen(i) for i in spec["items"]]}
        return spec

    return [widen(s) for s in specs]


def _max_error(reference: np.ndarray, truth: np.ndarray) -> float:
    """max|reference - truth| over the finite elements, in float64 (0.0 when there are none)."""
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(np.asarray(reference, np.float64) - np.asarray(truth, np.float64))
    finite = diff[np.isfinite(diff)]
    return float(np.max(finite)) if finite.size else 0.0


def _float64_errors(fn: Callable[..., Any], specs: list[dict[str, Any]], expectation: CaseExpectation,
                    n_out: int) -> None:
    """Evaluates the reference in float64 on the case's hidden inputs and cotangents (upcast) and
    stores the float32 reference's own largest error per output, gradient and (when the float64
    residuals line up with the float32 ones) residual: the scale tolerances are calibrated on
    (DESIGN.md, "Tolerances"). Leaves them empty when the reference cannot run in float64: checks
    then use the problem's fixed tolerance."""
    import jax

    try:
        with jax.enable_x64(True):
            fwd_blob, bwd_blob, n64 = export_case(fn, _float64_specs(specs))
            fwd_call, bwd_call, fwd, _ = _run_artifacts(fwd_blob, bwd_blob)
            res64 = exported_avals(fwd.out_avals)[n64:]
            same_residuals = [a.shape for a in res64] == [tuple(r.shape) for r in expectation.residuals]
            if n64 != n_out:
                return
            outputs, gradients, residuals = [], [], []
            for k, (xs, cts) in enumerate(zip(expectation.inputs, expectation.cotangents)):
                outs, res, grads, _ = evaluate_vjp(fwd_call, bwd_call, [np.asarray(x, np.float64) for x in xs],
                                                   [np.asarray(c, np.float64) for c in cts], None,
                                                   n_out=n_out, step=0.0)
                outputs.append([_max_error(r, t) for r, t in zip(expectation.outputs[k], outs)])
                gradients.append([_max_error(r, t) for r, t in zip(expectation.gradients[k], grads)])
                residuals.append([_max_error(r, t) for r, t in zip(expectation.residual_values[k], res)])
    except Exception:  # the float64 evaluation is a calibration aid; the fixed tolerance stands in
        return
    expectation.output_errors, expectation.gradient_errors = outputs, gradients
    if same_residuals:
        expectation.residual_errors = residuals


def build_expectations(problem: Problem, *, seed: bytes) -> Expectations:
    """Exports and runs the reference on every case, in float32 (as judged) and float64 (the truth).

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
    names = leaf_names(problem.spec)
    k_inputs = problem.spec.verify.inputs_per_case
    cases = []
    for case in problem.spec.cases:
        specs = case_arg_specs(problem.spec, case)
        try:
            fwd_blob, bwd_blob, n_out = export_case(fn, specs)
        except Exception as exc:
            raise ReferenceSolutionError(f"exporting the reference on case {case.name!r}: {type(exc).__name__}: {exc}") from exc
        fwd_call, bwd_call, fwd, bwd = _run_artifacts(fwd_blob, bwd_blob)
        fwd_info, bwd_info = inspect_module(fwd), inspect_module(bwd)
        out_avals = exported_avals(fwd.out_avals)
        residuals = describe_residuals(out_avals[n_out:], residual_notes(fn, specs),
                                       sources=named_sources(fwd_info.sources[n_out:], names), hide_source=True)
        plain = None
        if plain_fn is not None:
            with checkpoint_disabled():
                plain = _variant_facts(plain_fn, specs)
        full = _variant_facts(_everything_recomputed(fn, specs), specs)
        expectation = CaseExpectation(
            name=case.name, dims=dict(case.dims), static=dict(case.static), arg_specs=specs,
            input_avals=exported_avals(fwd.in_avals), output_avals=out_avals[:n_out], residuals=residuals,
            fwd_peak_bytes=fwd_info.peak_live_bytes, bwd_peak_bytes=bwd_info.peak_live_bytes,
            bwd_flops=bwd_info.flops,
            plain_residual_bytes=plain[0] if plain else None,
            plain_bwd_peak_bytes=plain[1].peak_live_bytes if plain else None,
            plain_bwd_flops=plain[1].flops if plain else None,
            full_remat_bytes=full[0] if full else None,
            full_remat_bwd_peak_bytes=full[1].peak_live_bytes if full else None,
            full_remat_bwd_flops=full[1].flops if full else None,
            fd_step=1e-3, fd_reference_error=[],
        )
        for k in range(k_inputs):
            xs = hidden_inputs(problem.spec, case, seed=seed, version=problem.version, index=k)
            cts = random_cotangents([(a.shape, a.dtype) for a in expectation.output_avals], seed=seed,
                                    slug=problem.slug, version=problem.version, case=case.name, index=k)
            directions = random_cotangents([(a.shape, a.dtype) for a in expectation.input_avals], seed=seed,
                                           slug=problem.slug, version=problem.version,
                                           case=case.name + "/fd-direction", index=k)
            outs, res, grads, (fd, analytic) = evaluate_vjp(fwd_call, bwd_call, xs, cts, directions, n_out=n_out,
                                                            step=expectation.fd_step)
            expectation.inputs.append(xs)
            expectation.cotangents.append(cts)
            expectation.outputs.append(outs)
            expectation.residual_values.append(res)
            expectation.gradients.append(grads)
            expectation.fd_directions.append(directions)
            expectation.fd_reference_error.append(abs(fd - analytic) / (abs(analytic) + 1e-12))
        _float64_errors(fn, specs, expectation, n_out)
        cases.append(expectation)
    return Expectations(slug=problem.slug, version=problem.version, jax_version=jax.__version__,
                        leaf_names=names, cases=cases)


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
        d["residuals"] = [ResidualFact(**r) for r in d["residuals"]]
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
