"""Content keys of a submission's programs: `submission_digest` (the result cache's key) and
`program_digest` (what the insight pages call the same program)."""

from __future__ import annotations

import hashlib
import json

from sandbox.bundle import BundleCase


def program_digest(loaded: list[tuple[str, str]]) -> str:
    """One digest of a bundle's programs, blind to names (`ModuleInfo.program_digest` of each
    case's fwd and bwd, in case order): equal for two students' submissions whose exported
    programs are the same up to the names of functions and variables (64 hex digits)."""
    material = json.dumps(loaded, separators=(",", ":"))
    return hashlib.sha256(b"remat-judge programs\0" + material.encode()).hexdigest()


def submission_digest(loaded: list[tuple[BundleCase, str, str]]) -> str:
    """The content key of a bundle whose cases all loaded: sha256 (64 hex digits) over, per case in
    order, its name, `n_primal_outputs`, the `normalized_digest` of its fwd and bwd artifacts and
    its residual notes exactly as in the bundle (notes name source lines and are shown in the
    report). Two bundles with equal keys get identical reports from `verify` under the same
    problem version, expectations, limits and JAX version, which the caller's key must add.

    Args:
        loaded: per case, (the bundle's case, fwd digest, bwd digest).
    """
    doc = [
        {
            "name": case.name,
            "n_primal_outputs": case.n_primal_outputs,
            "fwd": fwd,
            "bwd": bwd,
            "residual_notes": None
            if case.residual_notes is None
            else [n.model_dump(mode="json") for n in case.residual_notes],
        }
        for case, fwd, bwd in loaded
    ]
    material = json.dumps({"cases": doc}, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(b"remat-judge bundle\0" + material.encode()).hexdigest()
