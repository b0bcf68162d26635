"""What the reference does on each test case: the facts every check compares a submission with.

Built and cached by graders/reference/build.py; read by graders/checks/* and graders/verifier/verify.py (kept
apart from reference.py so the checks never import the module that imports `reference.py`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from graders.artifact_limits import Aval
from graders.verdict import ResidualFact

if TYPE_CHECKING:
    from graders.problems.problem import Problem

DATA_FILE, META_FILE = "arrays.bin", "meta.json"  # a cache entry's files (graders/reference/build.py)


def seed_id(seed: bytes) -> str:
    """A short public name for a secret seed (does not reveal it)."""
    return hashlib.sha256(b"remat-judge seed id\0" + seed).hexdigest()[:12]


def cache_dir(cache_root: Path, problem: Problem, seed: bytes) -> Path:
    """Where the expectations of `problem`'s version under `seed` are cached."""
    return cache_root / problem.slug / f"{problem.version}-{seed_id(seed)}"


@dataclass
class CaseExpectation:
    """What the reference does on one test case.

    Attributes:
        name, dims, static: the case.
        arg_specs: the argument avals as the jail receives them.
        input_avals: fwd's input leaves; output_avals: the primal output leaves.
        residuals: the reference's saved residuals, in the order its fwd returns them, with their
            provenance (`source`) and `print_saved_residuals` notes.
        fwd_peak_bytes, bwd_peak_bytes: peak live bytes of its artifacts (graders/untrusted/).
        bwd_flops: FLOPs of one run of its backward program; bwd_flops_exact: False when a loop's
            trip count could not be read (the figure counts such a loop once); bwd_residual_flops:
            of those, the FLOPs that depend on no cotangent (`ModuleInfo.residual_flops`);
            bwd_recompute_flops: of those, the forward work redone (`ModuleInfo.recompute_flops`);
            bwd_recomputed: recompute FLOPs by op signature (the
            `ModuleInfo.recomputed_signatures`, every one: a submission's extra recomputation is
            what it does beyond these).
        plain_bwd_received_bytes, full_remat_bwd_received_bytes: on a mesh, the bytes one device
            receives through the collectives of each variant's compiled backward program (None on
            one device); on a mesh the variants' residual bytes are per device too
            (`graders.reference.variants`). plain_bwd_device_bytes, full_remat_bwd_device_bytes: on
            a mesh, what one device holds while each variant's backward program runs, by XLA.
        xla_memory: on a mesh, XLA's per-device figures of the reference's compiled programs
            (`graders.verifier.evaluate.CaseValues.xla_memory`); empty on one device.
        budget: on a budget problem, the case's optimum (`graders.reference.budget_facts`:
            budget_bytes, optimum, frontier, forward_flops); empty otherwise.
        fwd_flops: FLOPs of one run of its forward program (None in caches before format 16): what
            a submission's forward work beyond it is measured from (`graders.checks.recompute`).
        bwd_collectives, bwd_received_bytes: on a mesh, the collectives of its compiled backward
            program by kind and the bytes each device receives through them
            (`graders.verifier.collectives`); empty and None on one device.
        bwd_largest_value_bytes, bwd_largest_value_elements: the largest single value its backward
            program defines (the calibrated slack of the backward-peak bound for a submission that
            saves the same values, and of the recompute bound).
        plain_residual_bytes, plain_bwd_peak_bytes, plain_bwd_flops: the same function with every
            `jax.checkpoint` removed (None when that variant fails); plain_recompute_flops: its
            forward work redone (0 but for what JAX itself recomputes).
        full_remat_bytes, full_remat_bwd_peak_bytes, full_remat_bwd_flops: the function under one
            plain `jax.checkpoint` (everything recomputed; None when that variant fails);
            full_remat_recompute_flops: its forward work redone.
        fd_step: the finite-difference step; fd_reference_error: per hidden input k, the
            reference's own relative finite-difference error.
        output_errors, gradient_errors, residual_errors: per hidden input k, per leaf, the float32
            reference's own largest error max|reference - float64 reference| (the scale tolerances
            are calibrated on; empty when the reference cannot run in float64, residual_errors
            also when its float64 residuals do not line up with the float32 ones).
        inputs, cotangents, outputs, gradients, residual_values, fd_directions: per hidden input k,
            one array per leaf (float32 reference, as exported).
    """

    name: str
    dims: dict[str, int]
    static: dict[str, Any]
    arg_specs: list[dict[str, Any]]
    input_avals: list[Aval]
    output_avals: list[Aval]
    residuals: list[ResidualFact]
    fwd_peak_bytes: int
    bwd_peak_bytes: int
    bwd_flops: int
    plain_residual_bytes: int | None
    plain_bwd_peak_bytes: int | None
    plain_bwd_flops: int | None
    full_remat_bytes: int | None
    full_remat_bwd_peak_bytes: int | None
    full_remat_bwd_flops: int | None
    fd_step: float
    fd_reference_error: list[float]
    bwd_flops_exact: bool = True
    bwd_residual_flops: int | None = None
    bwd_recompute_flops: int | None = None
    bwd_recomputed: dict[str, int] = field(default_factory=dict)
    plain_recompute_flops: int | None = None
    full_remat_recompute_flops: int | None = None
    bwd_largest_value_bytes: int = 0
    bwd_largest_value_elements: int = 0
    fwd_flops: int | None = None
    plain_bwd_received_bytes: int | None = None
    full_remat_bwd_received_bytes: int | None = None
    plain_bwd_device_bytes: int | None = None
    full_remat_bwd_device_bytes: int | None = None
    xla_memory: dict[str, Any] = field(default_factory=dict)
    budget: dict[str, Any] = field(default_factory=dict)
    bwd_collectives: dict[str, int] = field(default_factory=dict)
    bwd_received_bytes: int | None = None
    output_errors: list[list[float]] = field(default_factory=list)
    gradient_errors: list[list[float]] = field(default_factory=list)
    residual_errors: list[list[float]] = field(default_factory=list)
    inputs: list[list[np.ndarray]] = field(default_factory=list, repr=False)
    cotangents: list[list[np.ndarray]] = field(default_factory=list, repr=False)
    outputs: list[list[np.ndarray]] = field(default_factory=list, repr=False)
    gradients: list[list[np.ndarray]] = field(default_factory=list, repr=False)
    residual_values: list[list[np.ndarray]] = field(default_factory=list, repr=False)
    fd_directions: list[list[np.ndarray]] = field(default_factory=list, repr=False)

    @property
    def residual_bytes(self) -> int:
        return sum(r.nbytes for r in self.residuals)


ARRAY_FIELDS = ("inputs", "cotangents", "outputs", "gradients", "residual_values", "fd_directions")


def error_of(errors: list[list[float]], k: int, i: int) -> float | None:
    """errors[k][i], or None when the float64 evaluation is missing."""
    return errors[k][i] if k < len(errors) and i < len(errors[k]) else None


@dataclass
class Expectations:
    """The reference's expectations for every case of one problem version."""

    slug: str
    version: str
    jax_version: str
    leaf_names: list[str]
    cases: list[CaseExpectation]


def named_sources(sources: list[str], names: list[str]) -> list[str]:
    """Provenance with "argument i" (a flat input index) replaced by the leaf's name ("argument x")."""
    out = []
    for source in sources:
        if source.startswith("argument ") and source[9:].isdigit() and int(source[9:]) < len(names):
            source = f"argument {names[int(source[9:])]}"
        out.append(source)
    return out
