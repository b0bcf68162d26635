"""The expectations' cache on disk: one entry per problem version and deployment seed.

A cache entry is a directory holding `meta.json` (every fact, and where each array lies) and
`arrays.bin`: a 64-byte header, then every array's raw bytes (C order, native byte order), each
at a 64-byte aligned offset. The header holds a magic string, the format, the CRC-32 of
meta.json's bytes, the CRC-32 and length of everything after the header. Loading maps
arrays.bin read-only (`mmap`) and makes each array a read-only view of it: no copy, no parse,
and pages shared by every process reading the same entry. A file that is short, of another
format, or whose checksums disagree (a partial write, corruption, a meta.json from another
build) makes the entry unreadable: it is rebuilt, never trusted.
"""

from __future__ import annotations

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
from typing import Any

import numpy as np

from graders.artifact_limits import Aval, np_dtype
from graders.reference.expectation import (
    ARRAY_FIELDS,
    DATA_FILE,
    META_FILE,
    CaseExpectation,
    Expectations,
)
from graders.verdict import ResidualFact
from jailside.frameworks import framework_versions

log = logging.getLogger(__name__)
CACHE_FORMAT = 21  # 4: arrays.bin (mapped, checksummed); 5: evaluate.COMPILER_OPTIONS; 6: self-checked, float64;
# 9: backward FLOPs without dead code, untaken branches and folded constants (graders.untrusted.flops);
# 10: bwd_residual_flops; 11: gradients of float input leaves only (an integer leaf has none);
# 12: recompute as forward work redone (bwd_recompute_flops, bwd_recomputed); 13: bwd_recomputed
# holds every recomputed signature, not the costliest 8; 14: residuals' per-device layout on a mesh;
# 15: the backward pass's collectives on a mesh; 16: fwd_flops (the recompute bound's formulation allowance);
# 17: variants per device and their communication, XLA's memory_analysis, same_pieces on a mesh;
# 18: a budget problem's optimum and frontier; 19: budget_of (a budget of the peak) and the measured SCHEDULES;
# 20: bookkeeping read from the artifacts (ResidualFact.left_out: argument dependence, branch selectors);
# 21: a budget's no-remat floor and cotangent bytes, and a peak budget's proven bound


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


def _write_arrays(path: Path, arrays: list[np.ndarray], meta_bytes: bytes) -> None:
    """Writes `arrays.bin` at `path`: the header (magic, format, CRC-32 of `meta_bytes`, CRC-32 and
    length of the rest), then each array's raw bytes at the next `ALIGNMENT`-byte offset.

    Raises:
        OSError: the file cannot be written.
    """
    crc, position = 0, HEADER_BYTES
    with open(path, "wb") as f:
        f.write(bytes(HEADER_BYTES))
        for a in arrays:
            pad = -position % ALIGNMENT
            chunk = bytes(pad) + a.tobytes()
            crc = zlib.crc32(chunk, crc)
            f.write(chunk)
            position += len(chunk)
        f.seek(0)
        f.write(_HEADER.pack(DATA_MAGIC, CACHE_FORMAT, zlib.crc32(meta_bytes), crc, position - HEADER_BYTES))


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
        meta = {
            "format": CACHE_FORMAT,
            "slug": exp.slug,
            "version": exp.version,
            "jax_version": exp.jax_version,
            "frameworks": framework_versions(),
            "byteorder": sys.byteorder,
            "leaf_names": exp.leaf_names,
            "cases": meta_cases,
        }
        meta_bytes = json.dumps(meta, indent=1).encode()
        (tmp / META_FILE).write_bytes(meta_bytes)
        _write_arrays(tmp / DATA_FILE, arrays, meta_bytes)
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
    offset, shape, dtype = int(entry["offset"]), tuple(int(d) for d in entry["shape"]), np_dtype(entry["dtype"])
    count = math.prod(shape)
    if offset < HEADER_BYTES or min(shape, default=0) < 0 or offset + count * dtype.itemsize > len(data):
        raise _Unreadable(f"an array lies outside {DATA_FILE}")
    return np.frombuffer(data, dtype=dtype, count=count, offset=offset).reshape(shape)


def _case_from_meta(d: dict[str, Any], data: mmap.mmap) -> CaseExpectation:
    """One case of `meta.json`, its arrays read from the mapped `arrays.bin` (`data`).

    Raises:
        Whatever malformed metadata raises (KeyError, TypeError, ValueError, _Unreadable, ...):
        `load_expectations` takes the entry as unreadable.
    """
    d = dict(d)
    arrays = {name: [[_array(data, e) for e in leaves] for leaves in d.pop(name)] for name in ARRAY_FIELDS}
    d["input_avals"] = [Aval(tuple(s), t) for s, t in d["input_avals"]]
    d["output_avals"] = [Aval(tuple(s), t) for s, t in d["output_avals"]]
    d["residuals"] = [ResidualFact(**r) for r in d["residuals"]]
    return CaseExpectation(
        **d,
        inputs=arrays["inputs"],
        cotangents=arrays["cotangents"],
        outputs=arrays["outputs"],
        gradients=arrays["gradients"],
        residual_values=arrays["residual_values"],
        fd_directions=arrays["fd_directions"],
    )


def _of_this_install(meta: object) -> bool:
    """Whether a parsed `meta.json` is of this cache format, JAX version, byte order and model
    libraries' versions (a framework reference saves what its version does)."""
    return (
        isinstance(meta, dict)
        and meta.get("format") == CACHE_FORMAT
        and meta.get("jax_version") == _jax_version()
        and meta.get("byteorder") == sys.byteorder
        and meta.get("frameworks") == framework_versions()
    )


def is_current(directory: Path) -> bool:
    """Whether the cache entry at `directory` is there for this install (its `meta.json` reads and
    is of this format, JAX, byte order and model libraries), from `meta.json` alone: a quick look
    that maps and checksums nothing (`load_expectations` still checks the arrays when it reads)."""
    try:
        return _of_this_install(json.loads((directory / META_FILE).read_bytes()))
    except (OSError, ValueError):
        return False


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
        if not _of_this_install(meta):
            return None
        data = _map_data(directory / DATA_FILE, meta_bytes)
        cases = [_case_from_meta(d, data) for d in meta["cases"]]
        return Expectations(
            slug=meta["slug"],
            version=meta["version"],
            jax_version=meta["jax_version"],
            leaf_names=meta["leaf_names"],
            cases=cases,
        )
    except (
        _Unreadable,
        OSError,
        ValueError,
        KeyError,
        TypeError,
        IndexError,
        AttributeError,
        OverflowError,
        struct.error,
    ) as exc:
        log.warning(
            "cached expectations in %s are unreadable, rebuilding: %s: %s",
            directory,
            type(exc).__name__,
            str(exc)[:300],
        )
        return None
