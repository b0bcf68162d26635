"""How many children the server keeps started ahead (`Settings.ready_children_kept`, `sandbox/ready.py`)
and the key that decides which waiting child may serve a job (`sandbox.ready.child_key`)."""

from __future__ import annotations

import dataclasses

import pytest

from sandbox.child_limits import ChildLimits
from sandbox.ready import child_key
from sandbox.uids import JAIL_UIDS
from server.settings import Settings


@pytest.mark.parametrize(
    ("workers", "ready", "kept"),
    [(2, None, 2), (1, None, 1), (4, 0, 0), (4, 3, 3), (20, None, 8), (28, None, 0), (40, 5, 0)],
)
def test_ready_children_default_to_one_per_thread_within_the_uid_range(
    workers: int, ready: int | None, kept: int
) -> None:
    assert len(JAIL_UIDS.uids) == 64  # the numbers below assume the range the jail uses
    settings = Settings(workers=workers, ready_children=ready)
    assert settings.ready_children_kept() == kept
    assert settings.judge_config().ready_children == kept


@pytest.mark.parametrize("ready", [None, 1, 8, 64])
def test_running_and_waiting_children_never_take_the_spare_uids(ready: int | None) -> None:
    """Every running and waiting child holds a uid and 8 stay spare for children being torn down:
    whatever the thread count, what `ready_children_kept` answers fits (or keeps none)."""
    for workers in range(1, 64):
        kept = Settings(workers=workers, ready_children=ready).ready_children_kept()
        assert kept >= 0
        assert kept == 0 or 2 * workers + 2 * kept <= len(JAIL_UIDS.uids) - 8, (workers, kept)
        if ready is not None and 2 * workers + 2 * ready <= len(JAIL_UIDS.uids) - 8:
            assert kept == ready, (workers, kept)  # what was asked, when it fits


def test_a_negative_ready_children_is_refused() -> None:
    with pytest.raises(ValueError):
        Settings(ready_children=-1)


def test_the_key_covers_every_limit_and_every_setup_parameter_and_hides_them() -> None:
    limits = ChildLimits(memory_limit_bytes=1 << 30, process_limit=64, rlimits={"RLIMIT_CPU": [11, 12]})
    job = {"problem_version": "3", "seed_hex": "ab" * 16}
    key = child_key(limits, job)
    assert key == child_key(dataclasses.replace(limits), dict(job))  # same values, same key
    assert len(key) == 64 and "ab" * 16 not in key
    for other in (
        child_key(dataclasses.replace(limits, memory_limit_bytes=2 << 30), job),
        child_key(dataclasses.replace(limits, rlimits={"RLIMIT_CPU": [12, 13]}), job),
        child_key(limits, {**job, "problem_version": "4"}),
        child_key(limits, {**job, "seed_hex": "cd" * 16}),
    ):
        assert other != key
