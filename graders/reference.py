"""Expectations from a problem's reference solution, computed the way submissions are judged, cached.

For every test case the reference is exported with the same `export_case` the jail uses, its
residual signature and peak live bytes are read from its own artifacts, and its artifacts are run
on the hidden inputs with random cotangents. The results are cached on disk per problem version
and per deployment seed (`<cache>/<slug>/<version>-<seed id>/`), as JSON plus one file of raw
arrays (never pickle; see "the cache" below). Runs only in the trusted verifier process: this
imports `reference.py`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import math
import mmap
import os
import shutil
import struct
import sys
import tempfile
import zlib
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from graders.artifacts import Aval, ModuleInfo, deserialize, exported_avals, inspect_module
from graders.checks.residuals import describe_residuals
from graders.evaluate import ArtifactRunError, CaseData, evaluate_cases
from graders.expectation import ARRAY_FIELDS, CaseExpectation, Expectations, named_sources
from graders.limits import VerifyLimits
from graders.problem import Problem, _np_dtype, case_arg_specs, hidden_inputs, leaf_names, random_cotangents
from graders.verdict import ResidualFact
from jailside.export import export_case, residual_notes

CACHE_FORMAT = 5  # 4: arrays.bin (mapped, checksummed) instead of arrays.npz; 5: evaluate.COMPILER_OPTIONS
log = logging.getLogger(__name__)


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
            fwd, bwd = deserialize(fwd_blob), deserialize(bwd_blob)
            res64 = exported_avals(fwd.out_avals)[n64:]
            same_residuals = [a.shape for a in res64] == [tuple(r.shape) for r in expectation.residuals]
            if n64 != n_out:
                return
            (truth,) = evaluate_cases([CaseData(
                fwd=fwd, bwd=bwd, n_out=n_out, directions=None, step=0.0,
                inputs=[[np.asarray(x, np.float64) for x in xs] for xs in expectation.inputs],
                cotangents=[[np.asarray(c, np.float64) for c in cts] for cts in expectation.cotangents])])
        outputs = [[_max_error(r, t) for r, t in zip(expectation.outputs[k], outs)]
                   for k, outs in enumerate(truth.outputs)]
        gradients = [[_max_error(r, t) for r, t in zip(expectation.gradients[k], grads)]
                     for k, grads in enumerate(truth.gradients)]
        residuals = [[_max_error(r, t) for r, t in zip(expectation.residual_values[k], res)]
                     for k, res in enumerate(truth.residuals)]
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
    cases, artifacts = [], []
    for case in problem.spec.cases:
        specs = case_arg_specs(problem.spec, case)
        try:
            fwd_blob, bwd_blob, n_out = export_case(fn, specs)
        except Exception as exc:
            raise ReferenceSolutionError(f"exporting the reference on case {case.name!r}: {type(exc).__name__}: {exc}") from exc
        fwd, bwd = deserialize(fwd_blob), deserialize(bwd_blob)
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
            expectation.inputs.append(hidden_inputs(problem.spec, case, seed=seed, version=problem.version, index=k))
            expectation.cotangents.append(random_cotangents(
                [(a.shape, a.dtype) for a in expectation.output_avals], seed=seed, slug=problem.slug,
                version=problem.version, case=case.name, index=k))
            expectation.fd_directions.append(random_cotangents(
                [(a.shape, a.dtype) for a in expectation.input_avals], seed=seed, slug=problem.slug,
                version=problem.version, case=case.name + "/fd-direction", index=k))
        cases.append(expectation)
        artifacts.append(CaseData(fwd=fwd, bwd=bwd, n_out=n_out, inputs=expectation.inputs,
                                  cotangents=expectation.cotangents, directions=expectation.fd_directions,
                                  step=expectation.fd_step,
                                  peak_bytes=max(fwd_info.peak_live_bytes, bwd_info.peak_live_bytes)))
    # run as the verifier runs a submission's (the grouping of cases changes no value)
    try:
        values = evaluate_cases(artifacts, max_group_bytes=VerifyLimits().max_peak_live_bytes)
    except ArtifactRunError as exc:
        raise ReferenceSolutionError(f"running the reference on case {cases[exc.case].name!r}: {exc}") from exc
    for expectation, got, data in zip(cases, values, artifacts):
        expectation.outputs, expectation.residual_values, expectation.gradients = got.outputs, got.residuals, got.gradients
        expectation.fd_reference_error = [abs(fd - analytic) / (abs(analytic) + 1e-12) for fd, analytic in got.fd]
    for case, expectation, data in zip(problem.spec.cases, cases, artifacts):
        _float64_errors(fn, case_arg_specs(problem.spec, case), expectation, data.n_out)
    return Expectations(slug=problem.slug, version=problem.version, jax_version=jax.__version__,
                        leaf_names=names, cases=cases)


# --- the cache -------------------------------------------------------------------------------------
#
# A cache entry is a directory holding `meta.json` (every fact, and where each array lies) and
# `arrays.bin`: a 64-byte header, then every array's raw bytes (C order, native byte order), each
# at a 64-byte aligned offset. The header holds a magic string, the format, the CRC-32 of
# meta.json's bytes, the CRC-32 and length of everything after the header. Loading maps
# arrays.bin read-only (`mmap`) and makes each array a read-only view of it: no copy, no parse,
# and pages shared by every process reading the same entry. A file that is short, of another
# format, or whose checksums disagree (a partial write, corruption, a meta.json from another
# build) makes the entry unreadable: it is rebuilt, never trusted.

DATA_FILE, META_FILE = "arrays.bin", "meta.json"
DATA_MAGIC = b"RJEXPECT"
_HEADER = struct.Struct("<8sIIIQ")  # magic, format, crc32(meta.json), crc32(data), data bytes
HEADER_BYTES = 64
ALIGNMENT = 64


def _jax_version() -> str:
    """The installed JAX's version, without importing JAX when nothing has (it takes ~0.4 s)."""
    jax = sys.modules.get("jax")
    if jax is not None and hasattr(jax, "__version__"):
        return str(jax.__version__)
    return importlib.metadata.version("jax")


def save_expectations(exp: Expectations, directory: Path) -> None:
    """Writes `meta.json` and `arrays.bin` into `directory` atomically (rename of a temp dir).

    When `directory` appeared meanwhile (another process built the same entry), keeps that one.

    Raises:
        OSError: the files cannot be written (nothing is left behind).
    """
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=directory.parent))
    try:
        arrays: list[np.ndarray] = []
        offset = HEADER_BYTES

        def place(a: np.ndarray) -> dict[str, Any]:
            nonlocal offset
            a = np.asarray(a, order="C")  # (not ascontiguousarray: it makes 0-d arrays 1-d)
            if not a.dtype.isnative:
                a = a.astype(a.dtype.newbyteorder("="))
            offset = -(-offset // ALIGNMENT) * ALIGNMENT
            entry = {"offset": offset, "shape": list(a.shape), "dtype": a.dtype.name}
            arrays.append(a)
            offset += a.nbytes
            return entry

        meta_cases = []
        for c in exp.cases:
            d = asdict(c)
            for name in ARRAY_FIELDS:
                d[name] = [[place(a) for a in leaves] for leaves in getattr(c, name)]
            d["input_avals"] = [[list(a.shape), a.dtype] for a in c.input_avals]
            d["output_avals"] = [[list(a.shape), a.dtype] for a in c.output_avals]
            d["residuals"] = [r.model_dump() for r in c.residuals]
            meta_cases.append(d)
        meta = {"format": CACHE_FORMAT, "slug": exp.slug, "version": exp.version, "jax_version": exp.jax_version,
                "byteorder": sys.byteorder, "leaf_names": exp.leaf_names, "cases": meta_cases}
        meta_bytes = json.dumps(meta, indent=1).encode()
        (tmp / META_FILE).write_bytes(meta_bytes)
        crc, position = 0, HEADER_BYTES
        with open(tmp / DATA_FILE, "wb") as f:
            f.write(bytes(HEADER_BYTES))
            for a in arrays:
                pad = -position % ALIGNMENT
                chunk = bytes(pad) + a.tobytes()
                crc = zlib.crc32(chunk, crc)
                f.write(chunk)
                position += len(chunk)
            f.seek(0)
            f.write(_HEADER.pack(DATA_MAGIC, CACHE_FORMAT, zlib.crc32(meta_bytes), crc, position - HEADER_BYTES))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        os.rename(tmp, directory)
    except OSError:  # another process finished first; its result is the same
        shutil.rmtree(tmp, ignore_errors=True)


class _Unreadable(Exception):
    """A cache entry that must not be trusted (the message says why)."""


def _map_data(path: Path, meta_bytes: bytes) -> mmap.mmap:
    """arrays.bin mapped read-only, after checking its header and checksums against meta.json.

    Raises:
        _Unreadable: short, of another format, or a checksum disagrees.
        OSError: it cannot be opened or mapped.
    """
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < HEADER_BYTES:
            raise _Unreadable(f"{path.name} is {size} bytes, shorter than its header")
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    magic, fmt, meta_crc, data_crc, length = _HEADER.unpack_from(data, 0)
    if magic != DATA_MAGIC or fmt != CACHE_FORMAT:
        raise _Unreadable(f"{path.name} is not of cache format {CACHE_FORMAT}")
    if length != size - HEADER_BYTES:
        raise _Unreadable(f"{path.name} holds {size - HEADER_BYTES} bytes of data, its header says {length}")
    if zlib.crc32(meta_bytes) != meta_crc:
        raise _Unreadable(f"{META_FILE} does not belong to this {path.name}")
    with memoryview(data) as view, view[HEADER_BYTES:] as body:
        if zlib.crc32(body) != data_crc:
            raise _Unreadable(f"{path.name} is corrupt (checksum)")
    return data


def _array(data: mmap.mmap, entry: dict[str, Any]) -> np.ndarray:
    """A read-only view of one array of the mapped data (validated against the data's bounds)."""
    offset, shape, dtype = int(entry["offset"]), tuple(int(d) for d in entry["shape"]), _np_dtype(entry["dtype"])
    count = math.prod(shape)
    if offset < HEADER_BYTES or min(shape, default=0) < 0 or offset + count * dtype.itemsize > len(data):
        raise _Unreadable(f"an array lies outside {DATA_FILE}")
    return np.frombuffer(data, dtype=dtype, count=count, offset=offset).reshape(shape)


def load_expectations(directory: Path) -> Expectations | None:
    """Reads a cache entry, without importing JAX.

    Arrays are read-only views of the mapped `arrays.bin` (`np.frombuffer` over a read-only
    `mmap`), in the dtypes and shapes they were saved with.

    Returns:
        The expectations; None when the entry is absent, of another format, JAX version or byte
        order, or unreadable (short, corrupt, inconsistent: logged, and rebuilt by
        `ensure_expectations`).
    """
    try:
        meta_bytes = (directory / META_FILE).read_bytes()
    except OSError:
        return None
    try:
        meta = json.loads(meta_bytes)
        if not isinstance(meta, dict) or meta.get("format") != CACHE_FORMAT:
            return None
        if meta.get("jax_version") != _jax_version() or meta.get("byteorder") != sys.byteorder:
            return None
        data = _map_data(directory / DATA_FILE, meta_bytes)
        cases = []
        for d in meta["cases"]:
            d = dict(d)
            arrays = {name: [[_array(data, e) for e in leaves] for leaves in d.pop(name)] for name in ARRAY_FIELDS}
            d["input_avals"] = [Aval(tuple(s), t) for s, t in d["input_avals"]]
            d["output_avals"] = [Aval(tuple(s), t) for s, t in d["output_avals"]]
            d["residuals"] = [ResidualFact(**r) for r in d["residuals"]]
            cases.append(CaseExpectation(**d, **arrays))
        return Expectations(slug=meta["slug"], version=meta["version"], jax_version=meta["jax_version"],
                            leaf_names=meta["leaf_names"], cases=cases)
    except (_Unreadable, OSError, ValueError, KeyError, TypeError, IndexError, AttributeError, OverflowError,
            struct.error) as exc:
        log.warning("cached expectations in %s are unreadable, rebuilding: %s: %s", directory,
                    type(exc).__name__, str(exc)[:300])
        return None


def ensure_expectations(problem: Problem, *, seed: bytes, cache_root: Path) -> Expectations:
    """The cached expectations of `problem`, built and stored first when missing.

    Raises:
        ReferenceSolutionError: building failed.
    """
    directory = cache_dir(cache_root, problem, seed)
    found = load_expectations(directory)
    if found is not None:
        return found
    shutil.rmtree(directory, ignore_errors=True)  # stale (another format or JAX version) or unreadable
    built = build_expectations(problem, seed=seed)
    try:
        save_expectations(built, directory)
    except OSError as exc:  # a cache we cannot write costs time, not correctness
        log.warning("cannot cache the expectations of %s in %s: %s", problem.slug, directory, exc)
    return built
