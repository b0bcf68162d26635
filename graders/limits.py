"""Caps on untrusted artifacts, checked before they run (plain dataclasses, no JAX)."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True)
class ReadLimits:
    """Caps on reading one module, enforced while it is walked.

    Attributes:
        max_ops: operations in the module (all functions and regions).
        max_depth: nesting of regions inside regions (a `case` in a `while` body is depth 2).
        max_call_depth: length of the longest chain of `func.call`s from `main`.
    """

    max_ops: int = 50_000
    max_depth: int = 64
    max_call_depth: int = 64


@dataclass(frozen=True)
class VerifyLimits:
    """Caps on untrusted artifacts, checked before they run.

    Attributes:
        max_artifact_bytes: serialized size of one artifact.
        max_ops: operations in one module (all functions and regions).
        max_peak_live_bytes: the static peak live bytes of one artifact; above it the verdict is
            MEMORY_LIMIT_EXCEEDED without running it.
        max_depth: nesting of regions in one module; max_call_depth: longest chain of calls.
    """

    max_artifact_bytes: int = 8 * MIB
    max_ops: int = 50_000
    max_peak_live_bytes: int = 1024 * MIB
    max_depth: int = 64
    max_call_depth: int = 64

    @property
    def read_limits(self) -> ReadLimits:
        return ReadLimits(max_ops=self.max_ops, max_depth=self.max_depth, max_call_depth=self.max_call_depth)
