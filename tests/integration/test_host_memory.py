"""An OOM kill is the submission's only when the jail's own memory limit caused it; a kill for a
limit above the jail (the worker's container) or for the whole machine is the host's: a judge
fault, retried, never a verdict (`sandbox.jail_limits.memory_kill_cause`).

Every test makes a "host" cgroup under this process's own memory cgroup, as the worker's container,
and makes its jail cgroups inside it (`JailCgroup.create(memory_parent=...)`), so the kernel's OOM
killer really fires and the decision is made from what the kernel recorded. cgroup v1 refuses to
lower a limit below the usage (EBUSY) and v2 reclaims, then OOM-kills: either way the jail's
counters read as when its use reaches a lower limit above it, so the host's limit is set low before
the jail allocates and nothing here depends on timing. Runs on whichever hierarchy the judge uses
(v1 first, as `JailCgroup.create`); skips without a writable one, fails then under CI=1.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import graders.pipeline
import sandbox.supervise
from graders.pipeline import JudgeConfig, grade, judge_outcome
from graders.problems.problem import Problem
from graders.verdict import Verdict
from graders.verifier.client import Verifier, VerifierError
from jailside.protocol import JailRequest
from sandbox.jail import HostMemoryKill, JailOutcome, jail_templates, run_in_jail
from sandbox.jail_limits import MIB, JailCgroup, JailLimits, _own_cgroup_v2, own_cgroup_v1
from tests.support import jail_processes

pytestmark = pytest.mark.jail

TRIVIAL_CASE = [{"name": "small", "args": [{"kind": "array", "name": "x", "shape": [4], "dtype": "float32"}]}]
HOG = "import sys\nsys.stdin.readline()\nhoard = []\nwhile True:\n    hoard.append(b'\\1' * (8 << 20))\n"
"""A process that waits for a line on stdin (it is in its cgroup by then), then touches 8 MiB after
8 MiB until the kernel kills it."""
HOARD_MIB = 1024
"""What the 'correct' submissions touch at import and free again: within the jail's default limits
(1536 MiB on top of the runtime; the cgroup holds 2048 MiB), far above the host cgroup's room."""
VERIFIER_HOST_ROOM_MIB = 4
"""The host cgroup's limit for a verifier child: it needs about 12.5 MiB of its own to load the
expectations of checkpoint_dot_policy (measured), so it is killed while it loads them."""
HOST_ROOM_MIB = 256
"""The host cgroup's limit when it is short of memory: a jail child needs about 35 MiB of its own
(measured: peak 33 MiB for a trivial submission), so it is killed while it hoards."""


def hoarding(source: str, hoard_mib: int = HOARD_MIB) -> str:
    """`source` preceded by touching `hoard_mib` MiB at import and freeing it."""
    return f"_hoard = bytearray(b'\\1') * ({hoard_mib} << 20)\ndel _hoard\n" + source


TRIVIAL_SOURCE = "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sum(jnp.sin(x))\n"


def _where() -> tuple[int, Path] | str:
    """(cgroup version, this process's own memory cgroup) where the jail's cgroups are made, as
    `JailCgroup.create` chooses them, or why no host cgroup can be made here."""
    if os.geteuid() != 0:
        return "making cgroups needs root"
    memory = own_cgroup_v1("memory")
    if memory is not None and own_cgroup_v1("pids") is not None and os.access(memory, os.W_OK):
        return 1, memory
    unified = _own_cgroup_v2()
    if unified is not None and os.access(unified, os.W_OK):
        enabled = (unified / "cgroup.subtree_control").read_text().split()
        if {"memory", "pids"} <= set(enabled):
            return 2, unified
    return "no writable memory cgroup here (v1, or v2 with memory and pids in this cgroup's subtree_control)"


class HostCgroup:
    """A cgroup standing for the worker's container: jail cgroups are made inside it."""

    def __init__(self, version: int, path: Path):
        self.version, self.path = version, path

    def limit(self, limit_bytes: int) -> None:
        """Sets its memory limit (v1 `memory.limit_in_bytes`, v2 `memory.max`)."""
        name = "memory.limit_in_bytes" if self.version == 1 else "memory.max"
        (self.path / name).write_text(str(limit_bytes))

    def jail(self, memory_limit_bytes: int) -> JailCgroup:
        """A jail cgroup inside it, made as the judge makes one."""
        made = JailCgroup.create(memory_limit_bytes=memory_limit_bytes, process_limit=64, memory_parent=self.path)
        assert made is not None and made.version == self.version
        return made

    def holds_jails(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Makes every jail (and verifier) child started from now on get its cgroup inside this one."""
        parent = self.path

        class UnderHost(JailCgroup):
            @classmethod
            def create(cls, **kwargs: Any) -> JailCgroup | None:
                return JailCgroup.create(**kwargs, memory_parent=parent)

        monkeypatch.setattr(sandbox.supervise, "JailCgroup", UnderHost)


@pytest.fixture
def host() -> Iterator[HostCgroup]:
    """A fresh host cgroup under this process's own (removed after the test, once the jail
    cgroups inside it are gone: a jail's teardown runs in the background)."""
    where = _where()
    if isinstance(where, str):
        if os.environ.get("CI"):
            pytest.fail(where)
        pytest.skip(where)
    version, own = where
    path = own / f"remat-test-host-{uuid.uuid4().hex[:12]}"
    path.mkdir()
    try:
        if version == 2:  # it holds no process, so its children may have controllers
            (path / "cgroup.subtree_control").write_text("+memory +pids")
        yield HostCgroup(version, path)
    finally:
        deadline = time.monotonic() + 30
        while True:
            try:
                path.rmdir()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


def run_hog(jail: JailCgroup) -> int:
    """Runs `HOG` inside `jail` until the kernel kills it; returns its exit status."""
    proc = subprocess.Popen([sys.executable, "-I", "-c", HOG], stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        jail.attach(proc.pid)
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        proc.stdin.close()
        return proc.wait(timeout=300)
    finally:
        proc.kill()
        proc.wait()


def request(source: str, memory_limit_mib: int) -> JailRequest:
    return JailRequest(
        source=source, entry_point="f", cases=TRIVIAL_CASE, cpu_time_limit_s=10.0, memory_limit_mib=memory_limit_mib
    )


# --- the decision, on real cgroups -----------------------------------------------------------------


def test_a_kill_for_the_limit_above_the_jail_is_the_hosts(host: HostCgroup) -> None:
    host.limit(128 * MIB)
    jail = host.jail(memory_limit_bytes=1024 * MIB)
    try:
        assert run_hog(jail) == -9
        kill = jail.memory_kill()
        assert kill.killed and kill.by_host and not kill.own_limit, kill.evidence
        assert str(host.path) in kill.evidence  # named as the cgroup that ran out
    finally:
        assert jail.remove()


def test_a_kill_for_the_jails_own_limit_is_its_own(host: HostCgroup) -> None:
    host.limit(2048 * MIB)
    jail = host.jail(memory_limit_bytes=128 * MIB)
    try:
        assert run_hog(jail) == -9
        kill = jail.memory_kill()
        assert kill.killed and kill.own_limit and not kill.by_host, kill.evidence
    finally:
        assert jail.remove()


# --- through the real jail ------------------------------------------------------------------------


# (each asks for `judge_config`, which skips them without bubblewrap, or fails them in CI)


def test_a_correct_submission_killed_for_the_hosts_memory_is_a_judge_fault(
    judge_config: JudgeConfig, host: HostCgroup, monkeypatch: pytest.MonkeyPatch
) -> None:
    limits = JailLimits()
    source = hoarding(TRIVIAL_SOURCE)
    # the control: with room on the host, the same submission passes within its own limits
    passed = run_in_jail(request(source, limits.memory_limit_mib), limits, jail_templates())
    assert judge_outcome(passed, limits)[0].passed, (passed.stderr[-2000:], passed.memory_kill_evidence)
    host.limit(HOST_ROOM_MIB * MIB)
    host.holds_jails(monkeypatch)
    with pytest.raises(HostMemoryKill) as raised:
        run_in_jail(request(source, limits.memory_limit_mib), limits, jail_templates())
    outcome = raised.value.outcome
    assert outcome.host_memory_kill and not outcome.memory_exceeded
    assert "the host ran out of memory, not the submission" in str(raised.value)
    assert str(host.path) in str(raised.value)
    assert jail_processes() == []


def test_a_submission_past_its_own_limit_stays_memory_limit_exceeded(
    judge_config: JudgeConfig, host: HostCgroup, monkeypatch: pytest.MonkeyPatch
) -> None:
    host.limit(4096 * MIB)  # a container above the jail, with room: the jail's own limit is reached
    host.holds_jails(monkeypatch)
    limits = JailLimits(memory_limit_mib=256, runtime_memory_mib=256)  # the jail's cgroup: 512 MiB
    # no RLIMIT_AS allowance in the request, so the cgroup's OOM kill stops it, not a MemoryError
    outcome = run_in_jail(request(hoarding(TRIVIAL_SOURCE, 2048), 0), limits, jail_templates())
    assert outcome.memory_exceeded and not outcome.host_memory_kill, outcome.memory_kill_evidence
    check, _ = judge_outcome(outcome, limits)
    assert check.verdict == Verdict.MEMORY_LIMIT_EXCEEDED
    assert jail_processes() == []


# --- the grading path -----------------------------------------------------------------------------


def jails_under_host(host: HostCgroup, monkeypatch: pytest.MonkeyPatch, runs: list[JailOutcome | str]) -> None:
    """Grading's jail (only it: the verifier child stays where it was) gets its cgroup inside
    `host`; each run is appended to `runs` (its outcome, or its fault's class name)."""
    real: Callable[..., JailOutcome] = run_in_jail

    def run(request: JailRequest, limits: JailLimits, **_: Any) -> JailOutcome:
        with monkeypatch.context() as patched:
            host.holds_jails(patched)
            try:
                outcome = real(request, limits, jail_templates())
            except Exception as exc:
                runs.append(type(exc).__name__)
                raise
        runs.append(outcome)
        return outcome

    monkeypatch.setattr(graders.pipeline, "run_in_jail", run)


def test_grading_retries_a_host_memory_kill_then_reports_a_judge_fault(
    judge_config: JudgeConfig, dot_problem: Problem, host: HostCgroup, monkeypatch: pytest.MonkeyPatch
) -> None:
    host.limit(HOST_ROOM_MIB * MIB)
    runs: list[JailOutcome | str] = []
    jails_under_host(host, monkeypatch, runs)
    attempts: list[int] = []
    source = hoarding(dot_problem.reference_path.read_text())
    report = grade(source, dot_problem, judge_config, on_attempt=attempts.append)
    assert attempts == [0, 1] and runs == ["HostMemoryKill", "HostMemoryKill"]  # retried, killed again
    assert report.verdict == Verdict.INTERNAL_ERROR and report.score == 0.0
    assert report.checks[0].message == "the judge failed; this is not your fault"
    internal = report.checks[0].internal["error"]
    assert "HostMemoryKill" in internal and "the host ran out of memory, not the submission" in internal
    assert "MEMORY_LIMIT" not in report.stored_json()
    assert jail_processes() == []


def test_a_host_memory_kill_is_retried_and_the_retry_grades(
    judge_config: JudgeConfig, dot_problem: Problem, host: HostCgroup, monkeypatch: pytest.MonkeyPatch
) -> None:
    host.limit(HOST_ROOM_MIB * MIB)
    runs: list[JailOutcome | str] = []
    jails_under_host(host, monkeypatch, runs)

    def attempt(number: int) -> None:
        if number == 1:  # the host has memory again before the retry
            host.limit(4096 * MIB)

    report = grade(hoarding(dot_problem.reference_path.read_text()), dot_problem, judge_config, on_attempt=attempt)
    assert runs[0] == "HostMemoryKill" and len(runs) == 2
    assert report.verdict == Verdict.ACCEPTED, report.checks
    assert jail_processes() == []


def test_a_verifier_child_killed_for_the_hosts_memory_is_a_judge_fault(
    judge_config: JudgeConfig, dot_problem: Problem, host: HostCgroup, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the expectations are built before: a kill while building them must not read as the reference's failure
    assert graders.pipeline.check_reference(dot_problem, judge_config) is None
    host.limit(VERIFIER_HOST_ROOM_MIB * MIB)
    host.holds_jails(monkeypatch)
    verifier = Verifier.start(dot_problem, judge_config, ready=False)
    try:
        with pytest.raises(VerifierError) as raised:
            verifier.wait_ready()
    finally:
        verifier.close()
    assert not raised.value.memory_exceeded
    assert "the host ran out of memory, not the submission" in str(raised.value), str(raised.value)
