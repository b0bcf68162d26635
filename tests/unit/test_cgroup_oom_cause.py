"""Whose limit an OOM kill of a jail was for, decided from the kernel's cgroup counters
(`sandbox.jail_limits.memory_kill_cause`, `JailCgroup.memory_kill`). The counters' meaning is the
kernel's (Documentation/admin-guide/cgroup-v2.rst, "memory.events"): `oom_kill` is counted on the
killed process's cgroup whatever limit ran out; `oom` only on the cgroup whose own limit did (and
its ancestors). Real cgroups: tests/integration/test_host_memory.py; here the counters are given,
or written to files laid out like cgroupfs (v2 cannot be made on a host whose memory is on v1).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import sandbox.jail_limits as jail_limits
from sandbox.child_limits import PEAK_MARGIN_BYTES, MemoryKill, memory_kill_cause
from sandbox.jail_limits import MIB, JailCgroup

LIMIT = 2048 * MIB


def cause(**counters: int | None) -> MemoryKill:
    given: dict[str, int | None] = {
        "oom_kills": 1,
        "own_ooms": None,
        "own_limit_hits": None,
        "peak_bytes": None,
        "limit_bytes": LIMIT,
    }
    given.update(counters)
    return memory_kill_cause(**given)  # type: ignore[arg-type]


def test_no_oom_kill_is_no_memory_kill_whatever_the_peak() -> None:
    found = cause(oom_kills=0, own_ooms=0, own_limit_hits=7, peak_bytes=LIMIT)
    assert not found.killed and not found.own_limit and not found.by_host


def test_cgroup_v2_own_oom_counter_names_the_jails_own_limit() -> None:
    found = cause(own_ooms=1, own_limit_hits=12, peak_bytes=LIMIT - MIB)
    assert found.killed and found.own_limit and not found.by_host
    assert "killed for its own limit" in found.evidence


def test_cgroup_v2_kill_without_an_own_oom_is_the_hosts_even_at_the_limit() -> None:
    # the jail counted the kill but never ran out of its own limit: an ancestor's or the machine's OOM
    for peak in (100 * MIB, LIMIT):
        found = cause(own_ooms=0, own_limit_hits=0, peak_bytes=peak)
        assert found.killed and found.by_host and not found.own_limit, found.evidence
        assert "the host's memory" in found.evidence


def test_cgroup_v2_own_oom_far_below_the_limit_is_not_blamed_on_the_submission() -> None:
    found = cause(own_ooms=1, peak_bytes=300 * MIB)
    assert found.by_host


def test_cgroup_v2_without_memory_peak_trusts_the_own_oom_counter() -> None:
    assert cause(own_ooms=1, peak_bytes=None).own_limit
    assert cause(own_ooms=0, peak_bytes=None).by_host


def test_cgroup_v1_peak_against_the_limit_decides_within_the_margin() -> None:
    assert cause(peak_bytes=LIMIT).own_limit
    assert cause(peak_bytes=LIMIT - PEAK_MARGIN_BYTES).own_limit
    assert cause(peak_bytes=LIMIT - PEAK_MARGIN_BYTES - 1).by_host
    assert cause(peak_bytes=200 * MIB, own_limit_hits=0).by_host


def test_a_kill_nothing_ties_to_the_jails_limit_is_the_hosts() -> None:
    assert cause(peak_bytes=None, limit_bytes=None).by_host  # no peak, no limit: not the submission's
    assert cause(peak_bytes=500 * MIB, limit_bytes=None).by_host  # an unlimited cgroup has no limit to pass


def test_without_a_kill_counter_a_limit_reached_is_the_old_rule() -> None:
    # kernels before 4.13 count no oom_kill (v1): a failed charge at the limit stands for the kill
    assert cause(oom_kills=None, own_limit_hits=3, peak_bytes=LIMIT).own_limit
    assert not cause(oom_kills=None, own_limit_hits=0, peak_bytes=LIMIT).killed
    assert not cause(oom_kills=None, own_limit_hits=3, peak_bytes=10 * MIB).killed


# --- the counters as JailCgroup reads them from cgroupfs (laid out in a temporary directory) ---------


def write(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


def events(oom: int, oom_kill: int, max_: int = 0) -> str:
    return f"low 0\nhigh 0\nmax {max_}\noom {oom}\noom_kill {oom_kill}\noom_group_kill 0\n"


@pytest.fixture
def cgroupfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(jail_limits, "CGROUP_ROOT", tmp_path)
    return tmp_path


def test_cgroup_v2_files_a_kill_for_the_containers_limit(cgroupfs: Path) -> None:
    container = write(cgroupfs / "worker.slice", {"memory.events.local": events(oom=1, oom_kill=0, max_=40)})
    jail = write(
        container / "remat-judge-x",
        {
            "memory.events": events(oom=0, oom_kill=1),  # hierarchical: the kill of its process
            "memory.events.local": events(oom=0, oom_kill=1),
            "memory.peak": str(700 * MIB),
            "memory.max": str(LIMIT),
        },
    )
    cgroup = JailCgroup(2, {"unified": jail})
    cgroup.ancestors_at_start = {container: 0}
    found = cgroup.memory_kill()
    assert found.by_host and not found.own_limit
    assert f"{container} (oom +1)" in found.evidence


def test_cgroup_v2_files_a_kill_for_the_jails_own_limit(cgroupfs: Path) -> None:
    jail = write(
        cgroupfs / "remat-judge-x",
        {
            "memory.events": events(oom=1, oom_kill=1, max_=9),
            "memory.events.local": events(oom=1, oom_kill=1, max_=9),
            "memory.peak": str(LIMIT),
            "memory.max": str(LIMIT),
        },
    )
    found = JailCgroup(2, {"unified": jail}).memory_kill()
    assert found.own_limit and not found.by_host


def test_cgroup_v2_files_of_an_unlimited_jail_killed_by_the_machine(cgroupfs: Path) -> None:
    jail = write(
        cgroupfs / "remat-judge-x",
        {"memory.events": events(oom=0, oom_kill=1), "memory.peak": str(LIMIT), "memory.max": "max"},
    )
    found = JailCgroup(2, {"unified": jail}).memory_kill()  # no memory.events.local: a kernel before 5.2
    assert found.by_host
    assert "no cgroup above it (0 read)" in found.evidence


def test_cgroup_v1_files_a_kill_for_the_parents_limit(cgroupfs: Path) -> None:
    parent = write(cgroupfs / "memory" / "container", {"memory.failcnt": "99"})
    jail = write(
        parent / "remat-judge-x",
        {
            "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
            "memory.failcnt": "0",
            "memory.max_usage_in_bytes": str(256 * MIB),
            "memory.limit_in_bytes": str(LIMIT),
            "memory.memsw.limit_in_bytes": str(LIMIT),
        },
    )
    cgroup = JailCgroup(1, {"memory": jail})
    cgroup.ancestors_at_start = {parent: 90}
    found = cgroup.memory_kill()
    assert found.by_host
    assert f"{parent} (failcnt +9)" in found.evidence
    (jail / "memory.max_usage_in_bytes").write_text(str(LIMIT))
    assert cgroup.memory_kill().own_limit
