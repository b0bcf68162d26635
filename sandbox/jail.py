"""The bubblewrap jail: one process tree per submission, never reused.

Starting a jail (`Jail.start`) and handing it a submission (`Jail.run`) are separate steps: a
started jail has imported JAX and waits on stdin, so a pool can keep jails warm ahead of time.

The jail sees a read-only `/usr`, the Python runtime and virtualenv (read-only), the runner at
`/judge/runner.py`, a private size-capped `/tmp`, a fresh `/proc` and a minimal `/dev`. It gets
no network (`--unshare-net`), no environment but an allowlist, no view of other processes
(`--unshare-pid`) and never the problem folder, the data folder or the database.

Identity, measured on this machine as root: `bwrap --unshare-user --uid 65534` maps the jail's
user to host uid 0 (`/proc/PID/uid_map` reads `65534 0 1`), so RLIMIT_NPROC would not apply and
files owned by root would be the jail's own. So when we are root we do not ask bubblewrap for a
user namespace; bubblewrap (root) builds the mounts, keeps only CAP_SETUID, CAP_SETGID and
CAP_SETPCAP, and `setpriv` drops to a dedicated unprivileged host uid with `no_new_privs`, an
empty bounding set and no capabilities before Python starts. Unprivileged callers use a user
namespace with uid 65534 (which then maps to the caller's own unprivileged uid).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox.limits import MIB, JailCgroup, JailLimits
from sandbox.seccomp import filter_fd

log = logging.getLogger(__name__)

SANDBOX_DIR = Path(__file__).resolve().parent
RUNNER_IN_JAIL = "/judge/runner.py"
READY = b"READY\n"
KEPT_OUTPUT_BYTES = 8 * 1024

# The only environment a jail gets (`--clearenv` first).
JAIL_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "JAX_PLATFORMS": "cpu",
    "JAX_ENABLE_X64": "0",
    "TF_CPP_MIN_LOG_LEVEL": "2",
    "PYTHONUNBUFFERED": "1",
}


class JailError(Exception):
    """The jail could not be started or used: a fault of the judge (INTERNAL_ERROR), not of a submission."""


@dataclass(frozen=True)
class JailRuntime:
    """What the jail mounts to run Python.

    Attributes:
        python_prefix: the base interpreter's prefix (`sys.base_prefix`).
        venv: the virtualenv with JAX installed (`sys.prefix`), or the same as python_prefix.
        runner: path of `sandbox/runner.py` on the host.
    """

    python_prefix: Path
    venv: Path
    runner: Path

    @classmethod
    def current(cls) -> "JailRuntime":
        """The interpreter and virtualenv running this process."""
        return cls(Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), SANDBOX_DIR / "runner.py")

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")


@dataclass
class JailRequest:
    """What the jail is handed: the submission and the argument avals of each test case.

    Never hidden inputs, never the reference: only shapes, dtypes and static values.
    """

    source: str
    entry_point: str
    cases: list[dict[str, Any]]
    cpu_time_limit_s: float
    memory_limit_mib: int = 0

    def to_json(self) -> bytes:
        return json.dumps({"source": self.source, "entry_point": self.entry_point, "cases": self.cases,
                           "cpu_time_limit_s": self.cpu_time_limit_s,
                           "memory_limit_mib": self.memory_limit_mib}).encode()


@dataclass
class JailOutcome:
    """What the trusted side observed of one jail run. Only the flags set here by the parent
    (time, memory, output) are trusted; `bundle` is untrusted bytes for `sandbox.bundle`.

    Attributes:
        bundle: the bytes written to the result pipe after READY (untrusted), or b"".
        stdout, stderr: the first 8 KiB of each stream.
        stdout_bytes, stderr_bytes: how much was written in all (up to the cap plus one read).
        exit_code: bubblewrap's exit status (128 + signal number when killed by a signal).
        wall_time_exceeded, cpu_time_exceeded, memory_exceeded, output_exceeded,
        bundle_too_large, process_limit_hit: what went wrong, as seen from outside.
        wall_ms: milliseconds from handing over the request to the end of the jail.
        cpu_ms: CPU milliseconds of the whole jail (cgroup), or None without a cgroup.
        peak_memory_bytes: the jail's highest memory use (cgroup), or None.
    """

    bundle: bytes = b""
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    exit_code: int | None = None
    wall_time_exceeded: bool = False
    cpu_time_exceeded: bool = False
    memory_exceeded: bool = False
    output_exceeded: bool = False
    bundle_too_large: bool = False
    process_limit_hit: bool = False
    wall_ms: float = 0.0
    cpu_ms: float | None = None
    peak_memory_bytes: int | None = None
    notes: list[str] = field(default_factory=list)


class _UidPool:
    """Hands out the dedicated host uids jails run as: one per concurrent jail on the whole host, so
    that RLIMIT_NPROC counts each jail's processes apart and no jail can signal another's.

    A uid is held through an exclusive `flock` on `<lock_dir>/uid-<uid>.lock`, which the kernel
    releases if the holder dies, so several judge processes (a server and a CLI `grade`) share the
    range safely. A uid is only taken when no process of it is alive.
    """

    def __init__(self, base: int, count: int, lock_dir: Path = Path("/run/remat-judge")):
        self.uids = range(base, base + count)
        self.lock_dir = lock_dir
        self._held: dict[int, int] = {}
        self._lock = threading.Lock()

    def _lock_path(self, uid: int) -> Path:
        return self.lock_dir / f"uid-{uid}.lock"

    def take(self) -> int:
        """Locks and returns a free uid.

        Raises:
            JailError: every uid of the range is held or has live processes.
        """
        self.lock_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        with self._lock:
            for uid in self.uids:
                if uid in self._held:
                    continue
                fd = os.open(self._lock_path(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                if _processes_of(uid) and not _kill_uid(uid):
                    os.close(fd)  # a leftover that will not die: skip this uid
                    continue
                self._held[uid] = fd
                return uid
        raise JailError(f"no free jail uid in {self.uids.start}..{self.uids.stop - 1}: too many jails at once")

    def give_back(self, uid: int) -> None:
        with self._lock:
            fd = self._held.pop(uid, None)
        if fd is not None:
            os.close(fd)  # closing releases the flock

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


JAIL_UIDS = _UidPool(base=61000, count=64)
_warned_no_cgroup = False


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


def _ancestors(path: Path) -> list[str]:
    """'/a/b/c' -> ['/a', '/a/b'] (the directories bubblewrap must create before a bind)."""
    parts = path.parts[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def bwrap_argv(runtime: JailRuntime, limits: JailLimits, *, bundle_fd: int, jail_uid: int | None,
               seccomp_fd: int | None = None) -> list[str]:
    """The bubblewrap command line of one jail.

    Args:
        runtime: what to mount for Python.
        limits: only `tmpfs_size_bytes` is used here; the rest is set by the caller.
        bundle_fd: the inherited descriptor the runner writes the bundle to.
        jail_uid: the host uid to drop to with setpriv (we are root), or None to use an
            unprivileged user namespace (we are not root).
        seccomp_fd: a descriptor with the compiled seccomp filter (sandbox/seccomp.py), or None.
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise JailError("bubblewrap (bwrap) is not installed: `apt-get install bubblewrap`")
    argv = [bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    if jail_uid is None:
        argv += ["--unshare-user", "--uid", "65534", "--gid", "65534", "--disable-userns"]
    argv += ["--die-with-parent", "--new-session", "--clearenv"]
    for key, value in JAIL_ENV.items():
        argv += ["--setenv", key, value]
    argv += ["--ro-bind", "/usr", "/usr",
             "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
             "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
             "--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", str(limits.tmpfs_size_bytes), "--tmpfs", "/tmp",
             "--perms", "1777", "--size", str(limits.tmpfs_size_bytes), "--tmpfs", "/dev/shm"]
    made: set[str] = {"/", "/usr", "/tmp", "/proc", "/dev"}
    for source in dict.fromkeys([runtime.python_prefix, runtime.venv]):
        if str(source) == "/usr" or str(source).startswith("/usr/"):
            continue
        for directory in _ancestors(source):
            if directory not in made:
                argv += ["--perms", "0755", "--dir", directory]
                made.add(directory)
        argv += ["--ro-bind", str(source), str(source)]
        made.add(str(source))
    argv += ["--perms", "0755", "--dir", "/judge", "--ro-bind", str(runtime.runner), RUNNER_IN_JAIL,
             "--chdir", "/tmp", "--cap-drop", "ALL"]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    if jail_uid is not None:
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP",
                 "/usr/bin/setpriv", f"--reuid={jail_uid}", f"--regid={jail_uid}", "--clear-groups",
                 "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    argv += [runtime.python, "-I", "-B", RUNNER_IN_JAIL, str(bundle_fd)]
    return argv


def _rlimits(limits: JailLimits, with_cgroup: bool) -> dict[str, list[int]]:
    # A coarse cap for the start-up; the runner tightens RLIMIT_AS to its size after importing JAX
    # plus memory_limit_mib before the submission runs.
    address_space = limits.address_space_limit_mib * MIB
    cpu_s = int(limits.startup_time_limit_s + limits.cpu_time_limit_s) + 1  # coarse; runner tightens
    return {
        "RLIMIT_AS": [address_space, address_space],
        "RLIMIT_CPU": [cpu_s, cpu_s + 1],
        "RLIMIT_FSIZE": [limits.file_size_limit_bytes, limits.file_size_limit_bytes],
        "RLIMIT_NOFILE": [limits.open_files_limit, limits.open_files_limit],
        "RLIMIT_NPROC": [limits.process_limit, limits.process_limit],
        "RLIMIT_CORE": [0, 0],
    }


def cpu_limit_exceeded(used_ms: float | None, limit_s: float, exit_code: int | None) -> bool:
    """Whether a jail ran over its CPU time limit.

    Args:
        used_ms: CPU milliseconds of the whole jail (every process and thread) after READY, from
            the cgroup's accounting; None without a cgroup.
        limit_s: the CPU time limit in seconds.
        exit_code: the jail's exit status (128 + signal number when killed by a signal).

    Returns:
        True when the kernel's RLIMIT_CPU killed it (SIGXCPU: the runner sets the limit rounded
        up, so the kill means the limit was reached) or the cgroup counted more than the limit
        itself; a run that finished under the limit is never over it.
    """
    if exit_code == 128 + signal.SIGXCPU:
        return True
    return used_ms is not None and used_ms > limit_s * 1000


class Jail:
    """One single-use jail process.

    Usage: `jail = Jail.start(limits)`, later `outcome = jail.run(request)`; `run` always tears
    the jail down (every process killed, cgroup removed). `close()` does so without running.

    Raises:
        JailError: when bubblewrap is missing or the jail does not start (judge fault).
    """

    def __init__(self, limits: JailLimits, runtime: JailRuntime):
        self.limits = limits
        self.runtime = runtime
        self.cgroup: JailCgroup | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.jail_uid: int | None = None
        self._bundle_r: int | None = None
        self._buffers: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray(), "bundle": bytearray()}
        self._totals = {"stdout": 0, "stderr": 0, "bundle": 0}
        self._open: dict[int, str] = {}
        self._ready = False
        self._cpu_ms_at_ready: float | None = None
        self._closed = False
        self.started_at = time.monotonic()

    @classmethod
    def start(cls, limits: JailLimits, runtime: JailRuntime | None = None) -> "Jail":
        """Spawns the jail; it imports JAX and then waits for `run`. Does not block on the import."""
        jail = cls(limits, runtime or JailRuntime.current())
        try:
            jail._spawn()
        except BaseException:
            jail.close()
            raise
        return jail

    def _spawn(self) -> None:
        global _warned_no_cgroup
        as_root = os.geteuid() == 0
        self.cgroup = JailCgroup.create(
            memory_limit_bytes=(self.limits.memory_limit_mib + self.limits.runtime_memory_mib) * MIB,
            process_limit=self.limits.process_limit) if as_root else None
        if self.cgroup is None and not _warned_no_cgroup:
            log.warning("no writable memory+pids cgroup: the jail's memory and process caps fall back "
                        "to RLIMIT_AS and RLIMIT_NPROC, which are coarser")
            _warned_no_cgroup = True
        self.jail_uid = JAIL_UIDS.take() if as_root else None
        bundle_r, bundle_w = os.pipe()
        self._bundle_r = bundle_r
        try:
            seccomp_fd = filter_fd()
        except OSError as exc:
            os.close(bundle_w)
            raise JailError(f"cannot build the seccomp filter (is libseccomp2 installed?): {exc}") from exc
        setup = {"procs": self.cgroup.procs_files if self.cgroup else [],
                 "rlimits": _rlimits(self.limits, self.cgroup is not None)}
        argv = [sys.executable, "-I", "-S", str(SANDBOX_DIR / "enter.py"), json.dumps(setup)]
        argv += bwrap_argv(self.runtime, self.limits, bundle_fd=bundle_w, jail_uid=self.jail_uid,
                           seccomp_fd=seccomp_fd)
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, pass_fds=(bundle_w, seccomp_fd), env={},
                                         start_new_session=True)
        finally:
            os.close(bundle_w)
            os.close(seccomp_fd)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._open = {self.proc.stdout.fileno(): "stdout", self.proc.stderr.fileno(): "stderr", bundle_r: "bundle"}
        for fd in self._open:
            os.set_blocking(fd, False)

    # -- pumping the three pipes -----------------------------------------------------------

    def _pump(self, until: float, outcome: JailOutcome, stop_when_ready: bool = False) -> bool:
        """Reads the pipes until all are closed (True) or `until` passes (False). Kills the jail
        when stdout, stderr or the bundle exceed their caps."""
        caps = {"stdout": self.limits.output_limit_bytes, "stderr": self.limits.output_limit_bytes,
                "bundle": self.limits.bundle_limit_bytes + len(READY)}
        while self._open:
            if stop_when_ready and len(self._buffers["bundle"]) >= len(READY):
                return True
            timeout = until - time.monotonic()
            # past the deadline, still take what is already there (a warm jail's READY arrived long ago)
            readable, _, _ = select.select(list(self._open), [], [], max(0.0, min(timeout, 0.5)))
            if not readable and timeout <= 0:
                return False
            for fd in readable:
                name = self._open[fd]
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    del self._open[fd]
                    continue
                self._totals[name] += len(chunk)
                keep = caps[name] if name == "bundle" else KEPT_OUTPUT_BYTES
                room = keep - len(self._buffers[name])
                if room > 0:
                    self._buffers[name] += chunk[:room]
                if self._totals[name] > caps[name]:
                    if name == "bundle":
                        outcome.bundle_too_large = True
                    else:
                        outcome.output_exceeded = True
                    self._kill()
                    self._open.clear()  # what is still in the pipes after a kill is not read
                    return True
        return True

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.cgroup is not None:
            self.cgroup.kill_all()

    def alive(self) -> bool:
        """True while the jail waits (or runs) and has not been closed."""
        return not self._closed and self.proc is not None and self.proc.poll() is None

    # -- the two phases ------------------------------------------------------------------------

    def wait_ready(self) -> None:
        """Blocks until the jail has imported JAX.

        Raises:
            JailError: the jail exited or did not become ready within startup_time_limit_s.
        """
        if self._ready:
            return
        probe = JailOutcome()
        deadline = self.started_at + self.limits.startup_time_limit_s
        self._pump(deadline, probe, stop_when_ready=True)
        head = bytes(self._buffers["bundle"][: len(READY)])
        if head != READY:
            stderr = bytes(self._buffers["stderr"]).decode("utf-8", "replace")[-2000:]
            self.close()
            raise JailError(f"the jail did not start (got {head!r} after "
                            f"{time.monotonic() - self.started_at:.1f} s): {stderr}")
        del self._buffers["bundle"][: len(READY)]
        self._totals["bundle"] -= len(READY)
        self._ready = True
        self._cpu_ms_at_ready = self.cgroup.cpu_time_ms() if self.cgroup is not None else None

    def run(self, request: JailRequest) -> JailOutcome:
        """Hands the submission to the jail and waits for it to finish or be killed.

        Returns:
            What was observed; the jail is torn down afterwards.

        Raises:
            JailError: the jail never became ready (judge fault).
        """
        try:
            self.wait_ready()
            assert self.proc is not None and self.proc.stdin is not None
            outcome = JailOutcome()
            t0 = time.monotonic()
            payload = request.to_json()
            writer = threading.Thread(target=self._write_stdin, args=(payload,), daemon=True)
            writer.start()
            finished = self._pump(t0 + self.limits.wall_time_limit_s, outcome)
            if not finished:
                outcome.wall_time_exceeded = True
                self._kill()
                self._open.clear()
            try:
                outcome.exit_code = self.proc.wait(timeout=max(1.0, t0 + self.limits.wall_time_limit_s - time.monotonic()))
            except subprocess.TimeoutExpired:
                outcome.wall_time_exceeded = True
                self._kill()
                outcome.exit_code = self.proc.wait()
            outcome.wall_ms = (time.monotonic() - t0) * 1000
            self._observe(outcome)
            return outcome
        finally:
            self.close()

    def _write_stdin(self, payload: bytes) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(payload)
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # the jail died first; its outcome says why

    def _observe(self, outcome: JailOutcome) -> None:
        outcome.bundle = bytes(self._buffers["bundle"])
        outcome.stdout, outcome.stderr = bytes(self._buffers["stdout"]), bytes(self._buffers["stderr"])
        outcome.stdout_bytes, outcome.stderr_bytes = self._totals["stdout"], self._totals["stderr"]
        if self.cgroup is not None:
            # Decided from the kernel's accounting, never from what the jail's exit status claims:
            # CPU used after READY (all processes and threads) against the limit the runner set.
            outcome.memory_exceeded = self.cgroup.oom_killed()
            outcome.process_limit_hit = self.cgroup.pids_limit_hit()
            outcome.cpu_ms = self.cgroup.cpu_time_ms()
            outcome.peak_memory_bytes = self.cgroup.peak_memory_bytes()
        used_ms = None
        if outcome.cpu_ms is not None and self._cpu_ms_at_ready is not None:
            used_ms = outcome.cpu_ms - self._cpu_ms_at_ready
        outcome.cpu_time_exceeded = cpu_limit_exceeded(used_ms, self.limits.cpu_time_limit_s, outcome.exit_code)

    def close(self) -> None:
        """Kills every process of the jail, reaps it and removes its cgroup. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._kill()
        if self.proc is not None:
            for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                try:
                    if stream is not None:
                        stream.close()
                except OSError:
                    pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                log.error("jail process %s did not die after SIGKILL", self.proc.pid)
        self._open.clear()
        if self._bundle_r is not None:
            os.close(self._bundle_r)
            self._bundle_r = None
        if self.cgroup is not None:
            self.cgroup.remove()
        if self.jail_uid is not None:
            if _kill_uid(self.jail_uid):
                JAIL_UIDS.give_back(self.jail_uid)
            else:  # never hand a uid to a new jail while an old process of it could still run
                log.error("processes of jail uid %d survive SIGKILL; the uid is retired", self.jail_uid)
            self.jail_uid = None
