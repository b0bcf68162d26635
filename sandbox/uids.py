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


class UidPoolError(Exception):
    """Every uid of the range is in use: too many children at once (a fault of the judge's sizing)."""


class UidPool:
    """Hands out the dedicated host uids jails run as: one per concurrent jail on the whole host, so
    that RLIMIT_NPROC counts each jail's processes apart and no jail can signal another's.

    A uid is held through an exclusive `flock` on `<lock_dir>/uid-<uid>.lock`, which the kernel
    releases if the holder dies, so several judge processes (a server and a CLI `grade`) share the
    range safely. A uid is only taken when no process of it is alive: the lock file says "clean"
    when its last holder saw every process of it gone (its cgroup removed empty); otherwise (a
    judge killed mid-job) /proc is searched and leftovers killed before the uid is handed out.
    """

    def __init__(self, base: int, count: int, lock_dir: Path = Path("/run/remat-judge")):
        self.uids = range(base, base + count)
        self.lock_dir = lock_dir
        self._held: dict[int, int] = {}
        self._next = 0  # index in `uids` where the next search starts
        self._lock = threading.Lock()

    def _lock_path(self, uid: int) -> Path:
        return self.lock_dir / f"uid-{uid}.lock"

    def take(self) -> int:
        """Locks and returns a free uid.

        Raises:
            UidPoolError: every uid of the range is held or has live processes.
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
                if not clean and _processes_of(uid) and not _kill_uid(uid):
                    os.close(fd)  # a leftover that will not die: skip this uid
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

    def release(self, uid: int, *, known_empty: bool = False) -> None:
        """Gives `uid` back once no process of it is alive.

        Args:
            uid: a uid this pool handed out.
            known_empty: the caller saw every process of it gone (the child's cgroup, which held
                all of them, was removed empty: rmdir refuses a cgroup with processes). Otherwise
                /proc is searched and leftovers are killed; a uid whose processes survive SIGKILL
                is retired (never handed out again by this process) and logged.
        """
        if known_empty or _kill_uid(uid):
            self.give_back(uid, clean=True)
        else:
            log.error("processes of jail uid %d survive SIGKILL; the uid is retired", uid)

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
        """Whether the last holder of `uid` gave it back saying no process of it was alive (or it
        was never used). A uid left otherwise (its judge was killed mid-job) may still have
        processes, which `take` kills before handing it out again (for leak checks)."""
        try:
            fd = os.open(self._lock_path(uid), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return True
        try:
            return os.pread(fd, 16, 0) == CLEAN
        finally:
            os.close(fd)


def _processes_of(uid: int) -> list[tuple[int, str]]:
    """(pid, state letter) of every process whose real uid is `uid`, from /proc."""
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
            found.append((int(entry), fields.get("State", "?").strip()[:1]))
    return found


def _kill_uid(uid: int, timeout_s: float = 5.0) -> bool:
    """SIGKILLs every process of a jail uid and waits until none is left (zombies included, which
    the dying PID namespace reaps). Returns False if some survive the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = _processes_of(uid)
        if not left:
            return True
        if time.monotonic() > deadline:
            return False
        for pid, state in left:
            if state != "Z":
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        time.sleep(0.01)


JAIL_UIDS = UidPool(base=61000, count=64)
