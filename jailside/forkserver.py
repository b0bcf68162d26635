"""The fork server (zygote) loop and the life of one forked child, for the jail and the verifier.

A template process imports JAX (and, on the verifier side, our verifier) but initialises no
backend and holds no job data, then calls `serve`. Per `ForkRequest` it forks; the child:

1. says `Hello` on its job socket (the kernel attaches its pid) and waits for `JobSetup`, which
   the supervisor sends only after moving it into the job's own cgroup, so everything the child
   and its descendants run is accounted and capped there;
2. runs the job's trusted `prepare` step (the verifier loads the problem's expectations here);
3. unshares the namespaces the setup names and, when they include a PID namespace, forks the
   worker (otherwise it becomes the worker itself). With a PID namespace the worker is that
   namespace's first process: it mounts a /proc of its own, locks down and forks
   the process that runs the job, then reaps until it ends (the kernel kills whatever is left
   when it exits). The worker mounts a private /tmp and /dev/shm, sets rlimits, drops to the
   job's uid with no capabilities, sets no_new_privs and installs seccomp before the job reads
   anything untrusted, and says so by closing its copy of the job socket;
4. reports the worker's exit status (`JobExit`) and exits. A lock-down failure is reported as
   `JobExit(error=...)`: a fault of the judge, never the submission's.

Each child serves one job and exits. Forking after `import jax` and before the backend starts
is safe (measured with jax 0.10.2: `import jax` leaves one thread, the child initialises the CPU
backend in 0.06-0.12 s).
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import traceback
from collections.abc import Callable
from typing import Any, Protocol

from jailside import lockdown
from jailside.protocol import (
    ForkRequest,
    Hello,
    JobExit,
    JobSetup,
    LineReader,
    ProtocolError,
    Started,
    TemplateReady,
    decode,
    recv_with_fds,
)

LOCKDOWN_FAILED = 125
N_FDS = 5  # job socket, stdin, stdout, stderr, result


class Job(Protocol):
    """What a template runs in each child."""

    def prepare(self, params: dict[str, Any]) -> None:
        """Trusted set-up with the child's privileges, before lock-down (may read files)."""

    def run(self, result_fd: int) -> int:
        """The job itself, locked down: stdin (fd 0) is its input, `result_fd` its output.
        Returns the exit code."""


def _status_code(status: int) -> int:
    """waitpid status -> exit code, or 128 + signal number."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 255


def _reap_all() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def serve(control_fd: int, make_job: Callable[[], Job], *, seccomp_bpf: bytes | None, import_ms: float) -> int:
    """The template's loop: announce readiness, then fork one child per `ForkRequest` until the
    control socket closes (the supervisor is gone or retired this template). Children outlive it."""
    control = socket.socket(fileno=control_fd)
    lockdown.become_subreaper()
    # SIGCHLD wakes the loop (through the wakeup pipe) so every child is reaped at once.
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    control.sendall(TemplateReady(pid=os.getpid(), import_ms=import_ms).encode())
    while True:
        _reap_all()
        watched: list[socket.socket | int] = [control, wake_r]
        readable, _, _ = select.select(watched, [], [], 5.0)
        if wake_r in readable:
            try:
                os.read(wake_r, 4096)
            except BlockingIOError:
                pass
        if control not in readable:
            continue
        try:
            line, fds = recv_with_fds(control, max_fds=N_FDS + 1)
        except (ProtocolError, OSError) as exc:
            sys.stderr.write(f"template: bad control message: {exc}\n")
            continue
        if not line:
            return 0
        try:
            request = decode(line, ForkRequest)
            if len(fds) != N_FDS:
                raise ProtocolError(f"a fork request carries {len(fds)} descriptors, not {N_FDS}")
        except ProtocolError as exc:
            sys.stderr.write(f"template: {exc}\n")
            for fd in fds:
                os.close(fd)
            continue
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signal.set_wakeup_fd(-1)
                os.close(wake_r)
                os.close(wake_w)
                control.close()
                code = _child(request, fds, make_job, seccomp_bpf)
            except BaseException:  # noqa: BLE001 - a child must never return into the template's loop
                traceback.print_exc()
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)


def _child(request: ForkRequest, fds: list[int], make_job: Callable[[], Job], seccomp_bpf: bytes | None) -> int:
    job_fd, stdin_fd, stdout_fd, stderr_fd, result_fd = fds
    os.setpgid(0, 0)  # one process group per child: the supervisor can kill it whole
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    job_sock = socket.socket(fileno=job_fd)
    job_sock.sendall(Hello(job_id=request.job_id).encode())
    line = LineReader(job_sock).read_line()
    if line is None:
        return 0  # the supervisor gave up on this child before set-up
    setup = decode(line, JobSetup)
    job = make_job()
    try:
        job.prepare(setup.job)
        lockdown.unshare(setup.unshare)
    except Exception as exc:  # noqa: BLE001 - reported, never run
        job_sock.sendall(JobExit(status=LOCKDOWN_FAILED, error=_describe(exc)).encode())
        return LOCKDOWN_FAILED
    if "pid" not in setup.unshare:
        # No PID namespace (the verifier): this process locks itself down and runs the job; its
        # exit is seen as the end of its pipes. It must not fork after `prepare`, which may have
        # started the JAX backend (building a missing reference cache), whose threads a fork
        # would not copy.
        return _worker(setup, job, job_sock, (stdin_fd, stdout_fd, stderr_fd, result_fd), seccomp_bpf)
    worker = os.fork()
    if worker == 0:
        code = LOCKDOWN_FAILED
        try:
            code = _worker(setup, job, job_sock, (stdin_fd, stdout_fd, stderr_fd, result_fd), seccomp_bpf)
        except BaseException:  # noqa: BLE001
            pass
        finally:
            os._exit(code)
    for fd in (stdin_fd, stdout_fd, stderr_fd, result_fd):
        os.close(fd)
    try:
        job_sock.sendall(Started(pid=worker).encode())
    except OSError:
        pass
    _, status = os.waitpid(worker, 0)
    try:
        job_sock.sendall(JobExit(status=_status_code(status)).encode())
    except OSError:
        pass  # the supervisor is gone
    return 0


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:2000]


def _worker(
    setup: JobSetup, job: Job, job_sock: socket.socket, fds: tuple[int, int, int, int], seccomp_bpf: bytes | None
) -> int:
    """The locked-down side. Returns the exit code (the job's, or LOCKDOWN_FAILED)."""
    stdin_fd, stdout_fd, stderr_fd, result_fd = fds
    try:
        for target, fd in ((0, stdin_fd), (1, stdout_fd), (2, stderr_fd)):
            os.dup2(fd, target)
            os.close(fd)
        if "mount" in setup.unshare:
            lockdown.private_mounts(setup.tmpfs_bytes, keep=setup.expose)
            lockdown.expose_paths(setup.expose)
        if "pid" in setup.unshare:
            lockdown.mount_proc()
        if "uts" in setup.unshare:
            lockdown.sethostname("jail")
        lockdown.set_rlimits(setup.rlimits)
        lockdown.drop_identity(setup.uid)
        lockdown.no_new_privs()
        if setup.seccomp:
            if not seccomp_bpf:
                raise lockdown.LockdownError("the setup asks for seccomp but the template has no filter")
            lockdown.install_seccomp(seccomp_bpf)
    except Exception as exc:  # noqa: BLE001
        try:
            job_sock.sendall(JobExit(status=LOCKDOWN_FAILED, error=_describe(exc)).encode())
        except OSError:
            pass
        return LOCKDOWN_FAILED
    job_sock.close()  # from here on nothing the job does can speak for the trusted side
    if "pid" not in setup.unshare:
        return job.run(result_fd)
    # First process of a PID namespace: run the job in a child and reap everything until it ends
    # (a namespace's init ignores signals it has no handler for, SIGXCPU included; its child does not).
    # As init it gets only the signals it handles: Python's SIGINT handler would let the job
    # interrupt its own init, so SIGINT goes back to the default (ignored for an init).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    runner = os.fork()
    if runner == 0:
        code = 1
        try:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            code = job.run(result_fd)
        except BaseException:  # noqa: BLE001 - the job's own failure, reported by its exit code
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            os._exit(code)
    os.close(result_fd)
    os.close(0)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 1
        if pid == runner:
            return _status_code(status)
