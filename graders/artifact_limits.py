"""Plain, JAX-free definitions shared by the modules that read artifacts and those that judge them:
the caps on untrusted artifacts (`VerifyLimits`, `ReadLimits`) and the aval of one array (`Aval`).

This module, like graders/reference/expectation.py, graders/checks/*, graders/verdict.py and
graders/problems/problem.py, imports nothing that imports jax or jaxlib, not even inside functions (an
import-linter contract checks it): the server and the result cache use these types without
paying for, or trusting, a JAX import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

MIB = 1024 * 1024


@dataclass(frozen=True)
class ReadLimits:
    """Caps on reading one module, enforced while it is walked (graders/untrusted/).

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
    """Caps on untrusted artifacts, checked before they run (graders/verifier/verify.py).

    Attributes:
        max_artifact_bytes: serialized size of one artifact, in bytes.
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
        """The caps that apply while one module is read."""
        return ReadLimits(max_ops=self.max_ops, max_depth=self.max_depth, max_call_depth=self.max_call_depth)


@dataclass(frozen=True, order=True)
class Aval:
    """Shape and dtype of one array.

    The one aval type of the judge: the untrusted reader returns these, a `ResidualFact` has one
    (`.aval`), and residual signatures are multisets of them. Ordered by (shape, dtype), so
    messages list them in a stable order.

    Attributes:
        shape: static dimensions (no symbolic ones: graders/untrusted/ refuses those).
        dtype: a numpy dtype name ("float32", "bool", ...) or "bfloat16".
    """

    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        """Bytes of one value (bool as one byte, as XLA stores it).

        Raises:
            TypeError: `dtype` is not a dtype numpy (or ml_dtypes, for bfloat16) knows.
        """
        return math.prod(self.shape) * np_dtype(self.dtype).itemsize

    def short(self) -> str:
        """`f32[16,8]`, as `print_saved_residuals` writes avals."""
        return f"{_ABBREV.get(self.dtype, self.dtype)}[{','.join(str(d) for d in self.shape)}]"

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(str(d) for d in self.shape)}]"


_ABBREV = {
    "float32": "f32",
    "float64": "f64",
    "float16": "f16",
    "bfloat16": "bf16",
    "int32": "i32",
    "int64": "i64",
    "bool": "bool",
    "uint8": "u8",
    "int8": "i8",
}


DIFFERENTIABLE_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64"})


def is_differentiable(dtype: str) -> bool:
    """Whether a leaf of this dtype has a gradient: float leaves do; integer leaves (an RNG key's
    data, a step count) have a `float0` cotangent in JAX, which the exported backward program
    leaves out (`jailside.export.export_case`)."""
    return dtype in DIFFERENTIABLE_DTYPES


def np_dtype(name: str) -> np.dtype[Any]:
    """The numpy dtype of a dtype name ("float32", "bool", ...; "bfloat16" from ml_dtypes).

    Raises:
        TypeError: numpy knows no dtype of that name.
    """
    if name == "bfloat16":
        # ml_dtypes (JAX's bfloat16) only when a bfloat16 is read: the server imports this module
        import ml_dtypes

        return cast("np.dtype[Any]", np.dtype(ml_dtypes.bfloat16))  # Any: ml_dtypes is untyped
    return np.dtype(name)
