"""A jail uid goes back to the pool as clean only once /proc holds nothing of it, zombies included.

Real processes under a uid of a pool of our own (its own lock folder and a uid range apart from
the judge's `JAIL_UIDS`): a child that runs as the uid and exits at once, and a parent (root, like
the templates) that reaps it only later. Until then the child is a zombie of the uid: gone from
any cgroup, still counted against the uid's RLIMIT_NPROC.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandbox.child_limits import ChildLimits
from sandbox.jail_limits import MIB, JailCgroup
from sandbox.supervise import Child
from sandbox.uids import JAIL_UIDS, UidPool

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="starting a process as another uid needs root")

# A parent (root) that forks a child, which joins the cgroup whose procs files follow, becomes the
# uid and exits; the parent prints the child's pid, reaps it only after reap_after_s seconds, then
# waits for its stdin to close.
LATE_REAPER = """
import os, sys, time
uid, reap_after_s, procs = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]
pid = os.fork()
if pid == 0:
    for path in procs:
        with open(path, "w") as f:
            f.write(str(os.getpid()))
    os.setgid(uid); os.setuid(uid); os._exit(0)
print(pid, flush=True)
time.sleep(reap_after_s)
os.waitpid(pid, 0)
sys.stdin.read()
"""


def pool(tmp_path: Path, **timeouts: float) -> UidPool:
    """A pool of four uids (far from the judge's, and per xdist worker) locked in `tmp_path`."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    return UidPool(base=63000 + 8 * worker, count=4, lock_dir=tmp_path / "locks", **timeouts)


def state_of(pid: int) -> tuple[int, str] | None:
    """(real uid, state letter) of `pid` from /proc/<pid>/status, or None when it is gone."""
    try:
        lines = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    except OSError:
        return None
    return int(lines["Uid"].split()[0]), lines["State"].strip()[:1]


def zombie_of(uid: int, reap_after_s: float, procs: list[str] | None = None) -> tuple[subprocess.Popen[str], int]:
    """A late reaper's process and its child, once the child is a zombie of `uid` (having been in
    the cgroup of `procs`, its procs files)."""
    parent = subprocess.Popen(
        [sys.executable, "-c", LATE_REAPER, str(uid), str(reap_after_s), *(procs or [])],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    deadline = time.monotonic() + 5
    while state_of(child) != (uid, "Z"):
        assert time.monotonic() < deadline, f"no zombie of {uid}: {state_of(child)}"
        time.sleep(0.005)
    return parent, child


def processes_of(uid: int) -> list[int]:
    return [int(e) for e in os.listdir("/proc") if e.isdigit() and (state_of(int(e)) or (-1, ""))[0] == uid]


def test_a_childs_uid_goes_back_clean_only_after_its_zombie_is_reaped() -> None:
    """The teardown of a child (`Child.close`): its cgroup is removed empty, for its process has
    exited, but that process is a zombie of its uid until its parent reaps it (half a second later);
    the uid must not be marked clean before."""
    child = Child(ChildLimits(memory_limit_bytes=64 * MIB, process_limit=8))
    child.cgroup = JailCgroup.create(memory_limit_bytes=64 * MIB, process_limit=8)
    if child.cgroup is None:
        pytest.skip("no cgroup can be made here")
    uid = child.uid = JAIL_UIDS.take()
    parent, zombie = zombie_of(uid, reap_after_s=0.5, procs=child.cgroup.procs_files)
    try:
        assert child.cgroup.pids() == []  # its cgroup is empty: the zombie left it when it exited
        child.close()
        assert state_of(zombie) is None, "the uid went back with its zombie still in /proc"
        assert processes_of(uid) == []
        assert JAIL_UIDS.left_clean(uid) and JAIL_UIDS.is_free(uid)
    finally:
        parent.communicate("")


def test_a_uid_whose_zombie_outlives_the_bound_goes_back_not_clean(tmp_path: Path) -> None:
    uids = pool(tmp_path, release_timeout_s=0.3, take_timeout_s=0.1)
    uid = uids.take()
    parent, child = zombie_of(uid, reap_after_s=3.0)
    try:
        uids.release(uid)
        assert state_of(child) == (uid, "Z")  # still there at the bound
        assert uids.is_free(uid) and not uids.left_clean(uid)  # not retired, not clean
        taken = [uids.take() for _ in uids.uids[1:]]  # every other uid: this one is skipped
        assert uid not in taken
        for other in taken:
            uids.release(other)
    finally:
        parent.communicate("")
    assert state_of(child) is None
    # reaped now: the next take searches /proc, finds nothing of it and hands it out
    again = [uids.take() for _ in uids.uids]
    assert uid in again


def test_a_zombie_of_ours_is_reaped_by_the_release(tmp_path: Path) -> None:
    uids = pool(tmp_path, release_timeout_s=20.0)
    uid = uids.take()
    ours = subprocess.Popen(["true"], user=uid, group=uid)  # never waited for: a zombie of ours
    deadline = time.monotonic() + 5
    while state_of(ours.pid) != (uid, "Z"):
        assert time.monotonic() < deadline
        time.sleep(0.005)
    started = time.monotonic()
    uids.release(uid)
    assert time.monotonic() - started < 10.0  # reaped, not waited out (20 s), however busy the machine
    assert state_of(ours.pid) is None and uids.left_clean(uid)
    ours.wait()
