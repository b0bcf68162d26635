"""The judge's configuration for grading: caches, the seed, and every limit (no JAX here)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from graders.artifact_limits import VerifyLimits
from graders.problems.problem import Problem
from sandbox.jail_limits import JailLimits


@dataclass(frozen=True)
class JudgeConfig:
    """Everything grading needs besides the submission and the problem.

    Attributes:
        cache_dir: where reference expectations are cached (trusted side only).
        seed: the deployment's secret hidden-input seed (bytes).
        jail_limits: default jail limits; a problem's `[limits]` overrides some.
        verify_limits: caps on artifacts before they run.
        verify_time_limit_s: wall seconds for running a submission's artifacts.
        verify_startup_time_limit_s: wall seconds for the verifier to start and, on a cache miss,
            build the reference's expectations.
        verifier_memory_limit_mib: memory cap of the verifier process.
        retries_on_internal_error: how often a judge fault is retried before INTERNAL_ERROR stands.
        results_dir: where verifier results are cached by content (`graders.verifier.client.
            ResultCache`), or None for no result cache (a library caller's default; the server
            and the CLI use `<data dir>/results`).
        ready_children: jail and verifier children of each kind kept started ahead of their
            submission (`sandbox.ready`), 0 for none (a library caller's default; the server keeps
            one per grading thread).
        ready_refill: start a replacement when a grading takes a child started ahead; the server's
            grader sets False while submissions are queued (measured in a burst of the bank: 3.52
            verdicts/s and 0.53 CPU s per verdict with replacements, 3.77 and 0.49 without).
    """

    cache_dir: Path
    seed: bytes
    jail_limits: JailLimits = field(default_factory=JailLimits)
    verify_limits: VerifyLimits = field(default_factory=VerifyLimits)
    verify_time_limit_s: float = 60.0
    verify_startup_time_limit_s: float = 600.0
    verifier_memory_limit_mib: int = 4096
    retries_on_internal_error: int = 1
    results_dir: Path | None = None
    ready_children: int = 0
    ready_refill: bool = True

    def jail_limits_for(self, problem: Problem) -> JailLimits:
        """The deployment's limits with the problem's overrides applied."""
        overrides = {k: v for k, v in problem.spec.limits.model_dump().items() if v is not None}
        return replace(self.jail_limits, **overrides)
