"""The result bundle a jail writes: its schema and a strict parser for untrusted bytes.

The bundle is JSON (never pickle) with the two StableHLO artifacts of each case in base64. It is
written by code that shares a process with the submission, so every field is a claim: parse it
strictly, cap its size, and believe nothing in it but what the verifier re-checks.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

BUNDLE_FORMAT = "remat-judge-bundle/1"  # the same literal as jailside/runner.py writes


class BundleError(Exception):
    """The bundle is missing, too large or malformed: the submission's run is a RUNTIME_ERROR."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class BundleErrorInfo(_Strict):
    """What the runner says went wrong (advisory text for the student)."""

    kind: Annotated[str, Field(max_length=200)]
    message: Annotated[str, Field(max_length=20_000)]
    traceback: Annotated[str, Field(max_length=64_000)] = ""
    case: Annotated[str, Field(max_length=200)] | None = None


class ResidualNote(_Strict):
    """One `saved_residuals` entry: the aval and where JAX says it came from (advisory)."""

    shape: list[Annotated[int, Field(ge=0)]] = Field(max_length=32)
    dtype: Annotated[str, Field(max_length=20)]
    note: Annotated[str, Field(max_length=2000)]


class BundleCase(_Strict):
    """One test case: the serialized fwd and bwd artifacts (bytes, decoded from base64).

    Attributes:
        name: the case name the jail was given.
        n_primal_outputs: how many leading outputs of fwd are primal outputs (the rest are residuals).
        fwd, bwd: `jax.export` serialized artifacts.
        residual_notes: `saved_residuals` descriptions, advisory.
    """

    name: Annotated[str, Field(max_length=200)]
    n_primal_outputs: Annotated[int, Field(ge=0, le=1024)]
    fwd: bytes
    bwd: bytes
    residual_notes: list[ResidualNote] | None = Field(default=None, max_length=100_000)

    @field_validator("fwd", "bwd", mode="before")
    @classmethod
    def _decode(cls, value: object) -> bytes:
        if not isinstance(value, str):
            raise ValueError("artifact must be a base64 string")
        try:
            return base64.b64decode(value.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError) as exc:
            raise ValueError(f"artifact is not valid base64: {exc}") from None


class Bundle(_Strict):
    """The whole result of one jail run."""

    format: Literal["remat-judge-bundle/1"]
    status: Literal["ok", "compile_error", "runtime_error", "memory_error"]
    error: BundleErrorInfo | None = None
    cases: list[BundleCase] = Field(default_factory=list, max_length=64)
    timings_ms: dict[Annotated[str, Field(max_length=200)], float] = Field(default_factory=dict, max_length=200)
    jax_version: Annotated[str, Field(max_length=50)] | None = None


def parse_bundle(data: bytes, *, limit_bytes: int) -> Bundle:
    """Parses untrusted bundle bytes.

    Args:
        data: what the jail wrote after its READY line.
        limit_bytes: the largest bundle accepted.

    Raises:
        BundleError: empty, larger than `limit_bytes`, not JSON, or not of the schema.
    """
    if not data:
        raise BundleError("the submission's process ended without writing a result")
    if len(data) > limit_bytes:
        raise BundleError(f"the result is {len(data)} bytes, more than the {limit_bytes} allowed")
    try:
        return Bundle.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise BundleError(f"the result is malformed ({where}: {first.get('msg')})") from None
