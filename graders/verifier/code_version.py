"""The version of the judging code itself, as one digest of its source: what a cached verifier
result must have been produced by to be served again (`graders.verifier.client.ResultCache`)."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

JUDGING_PACKAGES = ("graders", "jailside")
"""The packages whose code decides a verdict: the checks, the verifier, the artifact reader, the
reference's expectations and the jail side's export."""


@functools.cache
def judging_code_digest(root: Path | None = None) -> str:
    """sha256 (hex, 64 characters) of every `.py` file of `JUDGING_PACKAGES` under `root` (default:
    this checkout), by relative path and content, in sorted order.

    A result cached by an older judge would otherwise be served after the checks change (measured:
    a recompute bound changed while the cache key held only a hand-bumped format number, and the
    old WRONG_POLICY came back for the same program). Reads about 1.5 MB once per process.
    """
    base = root if root is not None else Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    for package in JUDGING_PACKAGES:
        for path in sorted((base / package).rglob("*.py")):
            h.update(str(path.relative_to(base)).encode() + b"\0")
            h.update(path.read_bytes() + b"\0")
    return h.hexdigest()
