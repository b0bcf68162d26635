"""The dedicated host uids that jail and verifier children run as: one per live child on the host.

A child that runs as its own uid cannot signal, trace or read the memory of any other child, and
RLIMIT_NPROC counts its processes apart from everyone else's.
"""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)


CLEAN = b"clean"
RELEASE_TIMEOUT_S = 5.0
"""Seconds `UidPool.release` waits for a uid's processes, zombies included, to leave /proc."""
TAKE_TIMEOUT_S = 1.0
"""Seconds `UidPool.take` waits for what is left of a uid not given back clean before it tries the
next uid (what it killed is gone by the next time round; it holds the pool's lock meanwhile)."""


class UidPoolError(Exception):
    """Every uid of the range is in use: too many children at once (a fault of the judge's sizing)."""


class UidPool:
    """Hands out the dedicated host uids jails run as: one per concurrent jail on the whole host, so
    that RLIMIT_NPROC counts each jail's processes apart and no jail can signal another's.

    A uid is held through an exclusive `flock` on `<lock_dir>/uid-<uid>.lock`, which the kernel
    releases if the holder dies, so several judge processes (a server and a CLI `grade`) share the
    range safely. A uid is only taken when no process of it is left, zombies included: the lock
    file says "clean" when its last holder saw /proc hold nothing of it (`release`); otherwise (a
    judge killed mid-job, a zombie not reaped in time) /proc is searched and leftovers killed before
    the uid is handed out, and a uid with anything of it still left is skipped.

    Args:
        base, count: the range of host uids, `base` to `base + count - 1`.
        lock_dir: where the lock files are (shared by every judge process on the host).
        release_timeout_s: seconds `release` waits for a uid's processes to leave /proc.
        take_timeout_s: seconds `take` waits for what is left of a uid not given back clean.
    """

    def __init__(
        self,
        base: int,
        count: int,
        lock_dir: Path = Path("/run/remat-judge"),
        *,
        release_timeout_s: float = RELEASE_TIMEOUT_S,
        take_timeout_s: float = TAKE_TIMEOUT_S,
    ):
        self.uids = range(base, base + count)
        self.lock_dir = lock_dir
        self.release_timeout_s = release_timeout_s
        self.take_timeout_s = take_timeout_s
        self._held: dict[int, int] = {}
        self._next = 0  # index in `uids` where the next search starts
        self._lock = threading.Lock()

    def _lock_path(self, uid: int) -> Path:
        return self.lock_dir / f"uid-{uid}.lock"

    def take(self) -> int:
        """Locks and returns a free uid.

        Raises:
            UidPoolError: every uid of the range is held or has processes left (zombies included).
        """
        self.lock_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        with self._lock:
            # Round-robin from after the last uid handed out: a uid just given back is not reused
            # at once. A killed child's last tasks leave its cgroup before they are released, and
            # until then they still count against the uid's RLIMIT_NPROC; reusing it at once made
            # the next jail's threads fail to start (SIGABRT in XLA, seen in CI after a kill).
            start = self._next
            order: list[int] = [*self.uids[start:], *self.uids[:start]]
            for index, uid in enumerate(order):
                if uid in self._held:
                    continue
                fd = os.open(self._lock_path(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                clean = os.pread(fd, 16, 0) == CLEAN
                if not clean and _wait_uid_gone(uid, self.take_timeout_s):
                    os.close(fd)  # a leftover not gone yet (alive, or a zombie not reaped): skip this uid
                    continue
                os.ftruncate(fd, 0)  # taken: not known clean until released
                self._held[uid] = fd
                self._next = (start + index + 1) % len(self.uids)
                return uid
        raise UidPoolError(f"no free jail uid in {self.uids.start}..{self.uids.stop - 1}: too many jails at once")

    def give_back(self, uid: int, *, clean: bool = False) -> None:
        """Releases the lock of `uid`; `clean` records that no process of it is alive."""
        with self._lock:
            fd = self._held.pop(uid, None)
        if fd is not None:
            if clean:
                os.pwrite(fd, CLEAN, 0)
            os.close(fd)  # closing releases the flock

    def release(self, uid: int) -> None:
        """Gives `uid` back once /proc holds no process of it, zombies included: a zombie still
        counts against the uid's RLIMIT_NPROC, so a uid handed out with one could make the next
        child's threads fail to start.

        Polls /proc for up to `release_timeout_s` seconds: SIGKILLs what is alive of the uid and
        reaps its zombies that are children of this process (its other zombies are reaped by their
        own parents: a template, a PID namespace's init). A child's cgroup removed empty does
        not spare the search: a process leaves its cgroup when it exits, before it is reaped.

        Args:
            uid: a uid this pool handed out.

        Outcome: clean, the uid goes back marked clean (`left_clean`); only zombies left at the
        bound, it goes back not clean, so the next `take` of it searches /proc first and skips it
        while anything of it is left; a live process that survives SIGKILL, the uid is retired
        (never handed out again by this process) and logged.
        """
        left = _wait_uid_gone(uid, self.release_timeout_s)
        if not left:
            self.give_back(uid, clean=True)
        elif any(state != "Z" for _, state, _ in left):
            log.error("processes of jail uid %d survive SIGKILL; the uid is retired", uid)
        else:
            log.warning(
                "zombies of jail uid %d were not reaped within %g s (pids %s); it goes back not clean",
                uid,
                self.release_timeout_s,
                [pid for pid, _, _ in left],
            )
            self.give_back(uid, clean=False)

    def is_free(self, uid: int) -> bool:
        """True when no judge process on the host holds `uid` (for leak checks)."""
        if uid in self._held:
            return False
        try:
            fd = os.open(self._lock_path(uid), os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        finally:
            os.close(fd)

    def left_clean(self, uid: int) -> bool:
        """Whether the last holder of `uid` gave it back saying /proc held no process of it, zombies
        included (or it was never used). A uid left otherwise (its judge was killed mid-job) may still have
        processes, which `take` kills before handing it out again (for leak checks)."""
        try:
            fd = os.open(self._lock_path(uid), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return True
        try:
            return os.pread(fd, 16, 0) == CLEAN
        finally:
            os.close(fd)


def _processes_of(uid: int) -> list[tuple[int, str, int]]:
    """(pid, state letter, parent pid) of every process whose real uid is `uid`, zombies included
    (State: Z), from the Uid: lines of /proc/<pid>/status."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue  # it exited while we looked
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            found.append((int(entry), fields.get("State", "?").strip()[:1], int(fields.get("PPid", "0"))))
    return found


def _wait_uid_gone(uid: int, timeout_s: float) -> list[tuple[int, str, int]]:
    """Polls /proc until no process of `uid` is left, zombies included, for up to `timeout_s`
    seconds: SIGKILLs the live ones and reaps the zombies whose parent is this process.

    Returns:
        What is left at the bound (`_processes_of`), or [] when nothing is. Never raises.
    """
    deadline = time.monotonic() + timeout_s
    me = os.getpid()
    while True:
        left = _processes_of(uid)
        if not left or time.monotonic() > deadline:
            return left
        for pid, state, ppid in left:
            try:
                if state != "Z":
                    os.kill(pid, signal.SIGKILL)
                elif ppid == me:
                    os.waitpid(pid, os.WNOHANG)
            except (ProcessLookupError, ChildProcessError):
                pass  # gone, or reaped by another thread of ours
        time.sleep(0.01)


JAIL_UIDS = UidPool(base=61000, count=64)
