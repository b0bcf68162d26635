"""The jail: a bubblewrap template that has imported JAX, and one locked-down child per submission.

The template (`jailside/jail_template.py`) runs inside bubblewrap: a read-only `/usr`, the Python
runtime and virtualenv (read-only), the `jailside` package at `/judge/jailside`, an empty `/tmp`,
a minimal `/dev`; no network, no environment but an allowlist, and never the problem folder, the
data folder or the database. It forks one child per submission through `sandbox/supervise.py`;
each child, before it reads the submission, joins its own cgroup, gets new mount, PID, IPC, UTS
and network namespaces with a private size-capped `/tmp` and `/dev/shm` and its own `/proc`,
RLIMITs, a dedicated unprivileged host uid with no capabilities, no_new_privs and the seccomp
filter of `sandbox/seccomp.py` (`jailside/forkserver.py`). A child serves one submission.

Identity, measured on this machine as root: `bwrap --unshare-user --uid 65534` maps the jail's
user to host uid 0 (`/proc/PID/uid_map` reads `65534 0 1`), so RLIMIT_NPROC would not apply and
files owned by root would be the jail's own. So when we are root the template runs without a user
namespace, as root with only CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID and CAP_SETPCAP (to build each
child's namespaces and drop to its uid); each child drops every capability before the submission
arrives. Unprivileged callers get a user namespace: children then share one uid and are kept
apart by their namespaces alone (and get no cgroup: RLIMITs only).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from jailside.protocol import READY, SIMULATED_DEVICES_FLAG, JailRequest
from sandbox.child_limits import HOST_MEMORY_KILL, ChildLimits
from sandbox.jail_limits import MIB, JailLimits
from sandbox.ready import shared_ready
from sandbox.supervise import Child
from sandbox.templates import SupervisorError, Templates, TemplateSpec, shared_templates
from sandbox.uids import JAIL_UIDS  # noqa: F401 - re-exported: tests check for leftover jail uids

log = logging.getLogger(__name__)

SANDBOX_DIR = Path(__file__).resolve().parent
JAILSIDE_DIR = SANDBOX_DIR.parent / "jailside"
PACKAGE_IN_JAIL = "/judge/jailside"
KEPT_OUTPUT_BYTES = 8 * 1024
TEMPLATE_CAPS = ("CAP_SYS_ADMIN", "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP")
CHILD_NAMESPACES = ("mount", "pid", "ipc", "uts", "net")
MAX_FORKS_PER_TEMPLATE = 500

# The only environment the template and its children get (`--clearenv` first).
JAIL_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "JAX_PLATFORMS": "cpu",
    "JAX_ENABLE_X64": "0",
    "TF_CPP_MIN_LOG_LEVEL": "2",
    "PYTHONUNBUFFERED": "1",
    "XLA_FLAGS": SIMULATED_DEVICES_FLAG,  # every mesh's devices (jailside.mesh)
}
BOOTSTRAP = (
    "import sys; sys.path.insert(0, '/judge'); from jailside.jail_template import main; sys.exit(main(sys.argv))"
)


class JailError(Exception):
    """The jail could not be started or used: a fault of the judge (INTERNAL_ERROR), not of a submission."""


class HostMemoryKill(JailError):
    """The kernel's OOM killer killed the jail because the host ran out of memory (a limit above
    the jail's, such as the worker's container, or the whole machine), not because the submission
    passed its own: a judge fault, retried like a lost worker (`graders.pipeline.grade`), never a
    verdict. `outcome`: what was observed of the run (its bundle is not judged).
    """

    def __init__(self, outcome: JailOutcome):
        super().__init__(f"{HOST_MEMORY_KILL} ({outcome.memory_kill_evidence})")
        self.outcome = outcome


@dataclass(frozen=True)
class JailRuntime:
    """What the jail mounts to run Python.

    Attributes:
        python_prefix: the base interpreter's prefix (`sys.base_prefix`).
        venv: the virtualenv with JAX installed (`sys.prefix`), or the same as python_prefix.
        package: the `jailside` package on the host, mounted read-only at /judge/jailside.
    """

    python_prefix: Path
    venv: Path
    package: Path

    @classmethod
    def current(cls) -> JailRuntime:
        """The interpreter and virtualenv running this process."""
        return cls(Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), JAILSIDE_DIR)

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")


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
            `memory_exceeded` is an OOM kill for the jail's own cgroup limit only.
        host_memory_kill: an OOM kill for the host's memory instead (`run_in_jail` raises
            `HostMemoryKill`); memory_kill_evidence: the kernel's counters behind either, or "".
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
    host_memory_kill: bool = False
    memory_kill_evidence: str = ""
    wall_ms: float = 0.0
    cpu_ms: float | None = None
    peak_memory_bytes: int | None = None
    notes: list[str] = field(default_factory=list)


def _ancestors(path: Path) -> list[str]:
    """'/a/b/c' -> ['/a', '/a/b'] (the directories bubblewrap must create before a bind)."""
    parts = path.parts[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


# The system the jail sees: /usr read-only (with the usual top-level links into it), its own
# /proc and /dev, and private /tmp and /dev/shm.
_SYSTEM_MOUNTS = (
    "--ro-bind",
    "/usr",
    "/usr",
    "--symlink",
    "usr/lib",
    "/lib",
    "--symlink",
    "usr/lib64",
    "/lib64",
    "--symlink",
    "usr/bin",
    "/bin",
    "--symlink",
    "usr/sbin",
    "/sbin",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--perms",
    "0755",
    "--tmpfs",
    "/tmp",
    "--perms",
    "0755",
    "--tmpfs",
    "/dev/shm",
)


def template_argv(runtime: JailRuntime, *, as_root: bool) -> list[str]:
    """The bubblewrap command line of the jail template (`{control_fd}` and `{seccomp_fd}` are
    filled in by the supervisor).

    Raises:
        JailError: bubblewrap is not installed.
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise JailError("bubblewrap (bwrap) is not installed: `apt-get install bubblewrap`")
    argv = [bwrap, "--unshare-ipc", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    if not as_root:
        argv += ["--unshare-user", "--uid", "0", "--gid", "0", "--disable-userns"]
    argv += ["--new-session", "--clearenv"]
    for key, value in JAIL_ENV.items():
        argv += ["--setenv", key, value]
    argv += _SYSTEM_MOUNTS
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
    argv += [
        "--perms",
        "0755",
        "--dir",
        "/judge",
        "--ro-bind",
        str(runtime.package),
        PACKAGE_IN_JAIL,
        "--chdir",
        "/tmp",
        "--cap-drop",
        "ALL",
    ]
    for cap in TEMPLATE_CAPS:
        argv += ["--cap-add", cap]
    argv += [runtime.python, "-I", "-B", "-c", BOOTSTRAP, "{control_fd}", "{seccomp_fd}"]
    return argv


def template_spec(runtime: JailRuntime | None = None) -> TemplateSpec:
    """How the supervisor starts the jail template."""
    runtime = runtime or JailRuntime.current()
    return TemplateSpec(
        name="jail",
        argv=lambda: template_argv(runtime, as_root=os.geteuid() == 0),
        env={},
        cwd="/",
        memory_limit_bytes=1 << 30,
        startup_time_limit_s=120.0,
    )


jail_templates = shared_templates(template_spec, max_forks=MAX_FORKS_PER_TEMPLATE)
"""This process's jail template set (one template, shared by every grading thread)."""
jail_ready = shared_ready(jail_templates)
"""This process's jail children started ahead of their submissions (`sandbox.ready`)."""


def _rlimits(limits: JailLimits) -> dict[str, list[int]]:
    # A coarse cap for the set-up; the runner tightens RLIMIT_AS to its size after the backend
    # starts plus memory_limit_mib, and RLIMIT_CPU to its use so far plus the limit.
    address_space = limits.address_space_limit_mib * MIB
    cpu_s = int(limits.startup_time_limit_s + limits.cpu_time_limit_s) + 1
    return {
        "RLIMIT_AS": [address_space, address_space],
        "RLIMIT_CPU": [cpu_s, cpu_s + 1],
        "RLIMIT_FSIZE": [limits.file_size_limit_bytes, limits.file_size_limit_bytes],
        "RLIMIT_NOFILE": [limits.open_files_limit, limits.open_files_limit],
        "RLIMIT_NPROC": [limits.process_limit, limits.process_limit],
        "RLIMIT_CORE": [0, 0],
    }


def _runtime_paths() -> tuple[str, ...]:
    """The interpreter and virtualenv the template mounted: a child's private /tmp must not hide
    them (a checkout under /tmp, as in CI)."""
    runtime = JailRuntime.current()
    return tuple(dict.fromkeys([str(runtime.python_prefix), str(runtime.venv)]))


def child_limits(limits: JailLimits) -> ChildLimits:
    """The supervisor's limits for one jail child (see `JailLimits` for each field's meaning)."""
    bundle_cap = limits.bundle_limit_bytes + len(READY)
    return ChildLimits(
        memory_limit_bytes=(limits.memory_limit_mib + limits.runtime_memory_mib) * MIB,
        process_limit=limits.process_limit,
        own_uid=True,
        rlimits=_rlimits(limits),
        unshare=CHILD_NAMESPACES,
        tmpfs_bytes=limits.tmpfs_size_bytes,
        seccomp=True,
        expose=_runtime_paths(),
        output_caps={"stdout": limits.output_limit_bytes, "stderr": limits.output_limit_bytes, "result": bundle_cap},
        kept_bytes={"stdout": KEPT_OUTPUT_BYTES, "stderr": KEPT_OUTPUT_BYTES, "result": bundle_cap},
        startup_time_limit_s=limits.startup_time_limit_s,
    )


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


def run_in_jail(
    request: JailRequest,
    limits: JailLimits,
    templates: Templates | None = None,
    *,
    keep_ready: int = 0,
    refill_ready: bool = True,
) -> JailOutcome:
    """Runs one submission in a fresh jail child and reports what was observed from outside.

    Args:
        request: the submission and the cases' argument avals.
        limits: this submission's limits.
        templates: the template set to fork from (default: this process's, `jail_templates()`,
            through its ready children `jail_ready()`).
        keep_ready: jail children with these limits to keep started ahead, waiting for the next
            submissions (`sandbox.ready`; 0: none). Only without `templates`.
        refill_ready: start a replacement for the child this run takes (`ReadyChildren.take`).

    Returns:
        The outcome; the child is torn down (every process killed, cgroup removed, uid returned).

    Raises:
        HostMemoryKill: an OOM kill for the host's memory, not the jail's limit (a judge fault).
        JailError: the jail could not be started or did not become ready (a judge fault).
    """
    try:
        if templates is None:
            child = jail_ready().take(child_limits(limits), keep=keep_ready, refill=refill_ready)
        else:
            child = Child.start(templates, child_limits(limits))
    except SupervisorError as exc:
        raise JailError(str(exc)) from None
    try:
        outcome = _run(child, request, limits)
    except BaseException:
        child.close()
        raise
    child.close(wait=False)  # the outcome holds the cgroup's facts; the teardown is off the critical path
    if outcome.host_memory_kill:
        log.warning("the host's memory pressure killed a jail (not its own limit): %s", outcome.memory_kill_evidence)
        raise HostMemoryKill(outcome)
    return outcome


def _run(child: Child, request: JailRequest, limits: JailLimits) -> JailOutcome:
    started = time.monotonic()
    child.pump(started + limits.startup_time_limit_s, stop=lambda c: len(c.buffers["result"]) >= len(READY))
    head = bytes(child.buffers["result"][: len(READY)])
    if head != READY:
        why = child.lockdown_error() or bytes(child.buffers["stderr"]).decode("utf-8", "replace")[-2000:]
        raise JailError(f"the jail did not start (got {head!r} after {time.monotonic() - started:.1f} s): {why}")
    del child.buffers["result"][: len(READY)]
    child.totals["result"] -= len(READY)
    cpu_ms_at_ready = child.cpu_ms()
    outcome = JailOutcome()
    t0 = time.monotonic()
    child.send_input(request.encode())
    if not child.pump(t0 + limits.wall_time_limit_s):
        outcome.wall_time_exceeded = True
        child.kill()
    ended = child.exit_status(timeout_s=max(1.0, t0 + limits.wall_time_limit_s - time.monotonic()))
    if ended is None:  # killed, or still running after its pipes closed: either way it ends now
        if not child.exceeded and _still_running(child):
            outcome.wall_time_exceeded = True
        child.kill()
        outcome.exit_code = 128 + signal.SIGKILL
    else:
        outcome.exit_code = ended.status
    outcome.wall_ms = (time.monotonic() - t0) * 1000
    outcome.bundle = bytes(child.buffers["result"])
    outcome.stdout, outcome.stderr = bytes(child.buffers["stdout"]), bytes(child.buffers["stderr"])
    outcome.stdout_bytes, outcome.stderr_bytes = child.totals["stdout"], child.totals["stderr"]
    outcome.output_exceeded = bool({"stdout", "stderr"} & child.exceeded)
    outcome.bundle_too_large = "result" in child.exceeded
    facts = child.facts()
    # Decided from the kernel's accounting, never from what the jail's exit status claims; an OOM
    # kill is the submission's only when the jail's own limit caused it (`memory_kill_cause`).
    outcome.memory_exceeded, outcome.host_memory_kill = facts.oom_killed, facts.host_memory_kill
    outcome.memory_kill_evidence = facts.memory_kill_evidence
    outcome.process_limit_hit = facts.process_limit_hit
    outcome.cpu_ms, outcome.peak_memory_bytes = facts.cpu_ms, facts.peak_memory_bytes
    used_ms = None if facts.cpu_ms is None or cpu_ms_at_ready is None else facts.cpu_ms - cpu_ms_at_ready
    outcome.cpu_time_exceeded = cpu_limit_exceeded(used_ms, limits.cpu_time_limit_s, outcome.exit_code)
    return outcome


def _still_running(child: Child) -> bool:
    """True when the child's cgroup still has processes (it outlived its pipes)."""
    return child.cgroup is not None and bool(child.cgroup.pids())
