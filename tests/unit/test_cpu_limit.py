"""sandbox/jail.py: when a jail is over its CPU time limit (decided outside the jail)."""

from __future__ import annotations

import signal

from sandbox.jail import cpu_limit_exceeded


def test_cpu_time_is_judged_against_the_limit_itself() -> None:
    """A run that finished under its CPU limit is not over it (it was judged at 90% before)."""
    assert not cpu_limit_exceeded(9_500.0, 10.0, 0)
    assert not cpu_limit_exceeded(10_000.0, 10.0, 0)
    assert cpu_limit_exceeded(10_001.0, 10.0, 0)


def test_the_kernels_cpu_limit_kill_is_over_the_limit_with_or_without_a_cgroup() -> None:
    assert cpu_limit_exceeded(2_000.0, 10.0, 128 + signal.SIGXCPU)
    assert cpu_limit_exceeded(None, 10.0, 128 + signal.SIGXCPU)
    assert not cpu_limit_exceeded(None, 10.0, 0)
