"""The one process layer: fork-server templates and the single-use children they fork.

Both sides of grading run untrusted input in children of a template (zygote) process that has
already imported JAX: the jail (`sandbox/jail.py`, template `jailside/jail_template.py`) and the
verifier (`graders/verifier/client.py`, template `graders/verifier/main.py`). This module is the only
code that starts, feeds, watches and kills them:

- `Template`: one template process under its own cgroup and RLIMITs, reached through a control
  socket; `Templates` keeps one alive per kind, restarts it when it dies and replaces it after
  `max_forks` children (a fresh copy bounds whatever state could accumulate in it).
- `Child`: one job. It gets its own cgroup (memory, processes, CPU accounting) and its own host
  uid before it runs anything: the child announces itself on its job socket, the kernel tells us
  its pid (SCM_CREDENTIALS), we move it into the cgroup and only then send its `JobSetup`. We
  pump its output pipes with caps, enforce the wall-clock limit, kill it (cgroup and process
  group), and read the cgroup's facts (OOM kill, and whether the child's own limit or the host's
  memory caused it; peak memory, CPU time, process-limit hits) before the cgroup is removed.

Messages are the typed ones of `jailside/protocol.py`, shared by both ends of every pipe.
Standard library plus `sandbox.jail_limits`; no JAX here (the server imports this module).

The templates are in `sandbox.templates`; a child's limits and what the kernel accounted of it
in `sandbox.child_limits`.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from jailside.protocol import (
    Hello,
    JobExit,
    JobSetup,
    LineReader,
    ProtocolError,
    Started,
    decode,
    decode_any,
    recv_credentials,
)
from sandbox.child_limits import ChildFacts, ChildLimits
from sandbox.jail_limits import JailCgroup
from sandbox.templates import SupervisorError, Templates
from sandbox.uids import JAIL_UIDS, UidPoolError


class Child:
    """One single-use child of a template, serving one job.

    Usage: `child = Child.start(templates, limits, job)`; write its input with `send_input`, read
    with `pump`; `exit_status()`; `facts()`; always `close()` (kills what is left, removes the
    cgroup, gives the uid back).
    """

    STREAMS = ("stdout", "stderr", "result")

    def __init__(self, limits: ChildLimits):
        self.limits = limits
        self.job_id = uuid.uuid4().hex
        self.cgroup: JailCgroup | None = None
        self.uid: int | None = None
        self.pid: int | None = None  # host pid of the child's first process (its process group)
        self.job_sock: socket.socket | None = None
        self.stdin_w: int | None = None
        self.buffers: dict[str, bytearray] = {name: bytearray() for name in self.STREAMS}
        self.totals: dict[str, int] = {name: 0 for name in self.STREAMS}
        self.exceeded: set[str] = set()
        self._open: dict[int, str] = {}
        self._exit: JobExit | None = None
        self.worker_pid: int | None = None  # host pid of the worker, when the child forks one
        self._job_reader: LineReader | None = None
        self._closed = False
        self.started_at = time.monotonic()

    @classmethod
    def start(
        cls,
        templates: Templates,
        limits: ChildLimits,
        job: dict[str, Any] | None = None,
        *,
        cpu_weight: int | None = None,
    ) -> Child:
        """Forks a child through `templates`, moves it into a new cgroup and sends its setup.

        Args:
            templates: the template kind to fork from.
            limits: its limits and isolation.
            job: parameters for the job's trusted `prepare` step (never shown to the job after it).
            cpu_weight: its cgroup's CPU weight (`JailCgroup.set_cpu_weight`) from before its
                setup is sent; None for the default (a child started ahead waits at weight 1).

        Raises:
            SupervisorError: the template or the child failed before the job began (judge fault).
        """
        child = cls(limits)
        try:
            child._start(templates, job or {}, cpu_weight)
        except BaseException:
            child.close()
            raise
        return child

    def _start(self, templates: Templates, job: dict[str, Any], cpu_weight: int | None) -> None:
        limits = self.limits
        as_root = os.geteuid() == 0
        if as_root:
            self.cgroup = JailCgroup.create(
                memory_limit_bytes=limits.memory_limit_bytes, process_limit=limits.process_limit
            )
        if self.cgroup is not None and cpu_weight is not None:
            self.cgroup.set_cpu_weight(cpu_weight)
        if as_root and limits.own_uid:
            try:
                self.uid = JAIL_UIDS.take()
            except UidPoolError as exc:
                raise SupervisorError(str(exc)) from None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.job_sock = ours
        stdin_r, stdin_w = os.pipe()
        pipes = {name: os.pipe() for name in self.STREAMS}
        self.stdin_w = stdin_w
        given = [theirs.fileno(), stdin_r, pipes["stdout"][1], pipes["stderr"][1], pipes["result"][1]]
        try:
            templates.fork(self.job_id, given)
        finally:
            theirs.close()
            for fd in given[1:]:
                os.close(fd)
        for name, (read_end, _) in pipes.items():
            os.set_blocking(read_end, False)
            self._open[read_end] = name
        ready, _, _ = select.select([ours], [], [], limits.startup_time_limit_s)
        if not ready:
            raise SupervisorError(
                f"the forked child did not start in time (no hello within {limits.startup_time_limit_s:g} s)"
            )
        data, creds = recv_credentials(ours)
        if not data.endswith(b"\n") or creds is None:
            raise SupervisorError("the forked child's hello came without its credentials")
        if decode(data[:-1], Hello).job_id != self.job_id:
            raise SupervisorError("a forked child answered for another job")
        self.pid = creds[0]
        if self.cgroup is not None:
            try:
                self.cgroup.attach(self.pid)
            except OSError as exc:
                raise SupervisorError(f"cannot move the forked child into its cgroup: {exc}") from None
        setup = JobSetup(
            uid=self.uid,
            rlimits=limits.rlimits,
            unshare=list(limits.unshare),
            tmpfs_bytes=limits.tmpfs_bytes,
            seccomp=limits.seccomp,
            expose=list(limits.expose),
            job=job,
        )
        ours.sendall(setup.encode())
        ours.setblocking(False)
        self._job_reader = LineReader(ours)

    # -- input and output ------------------------------------------------------------------

    def send_input(self, data: bytes) -> None:
        """Writes `data` to the child's stdin from a thread and closes it (never blocks us)."""
        fd, self.stdin_w = self.stdin_w, None
        if fd is None:
            return

        def write() -> None:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            except OSError:
                pass  # the child died first; its outcome says why
            finally:
                os.close(fd)

        threading.Thread(target=write, daemon=True).start()

    def pump(self, until: float, stop: Callable[[Child], bool] = lambda child: False) -> bool:
        """Reads the output pipes until all are closed (True), `stop(self)` holds (True), or the
        monotonic time `until` passes (False). A stream past its cap kills the child and is
        added to `exceeded`."""
        while self._open:
            if stop(self):
                return True
            timeout = until - time.monotonic()
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
                    os.close(fd)
                    continue
                self.totals[name] += len(chunk)
                keep = self.limits.kept_bytes.get(name, 1 << 62)
                room = keep - len(self.buffers[name])
                if room > 0:
                    self.buffers[name] += chunk[:room]
                cap = self.limits.output_caps.get(name)
                if cap is not None and self.totals[name] > cap:
                    self.exceeded.add(name)
                    self.kill()
                    self._close_pipes()  # what is still in the pipes after a kill is not read
                    return True
        return True

    @property
    def finished(self) -> bool:
        """True once every output pipe of the child has closed (or was closed after a kill)."""
        return not self._open

    def take_lines(self, name: str = "result") -> list[bytes]:
        """Removes and returns the complete lines buffered from stream `name`."""
        buffer = self.buffers[name]
        if b"\n" not in buffer:
            return []
        head, _, rest = bytes(buffer).rpartition(b"\n")
        self.buffers[name] = bytearray(rest)
        return head.split(b"\n")

    def exit_status(self, timeout_s: float = 2.0) -> JobExit | None:
        """The child's `JobExit` (its worker's exit status, or a lock-down error), waiting up to
        `timeout_s`; None when the child's first process died without one (killed), or never got
        its setup (its start failed: nothing on its job socket is a report then)."""
        deadline = time.monotonic() + timeout_s
        while self._exit is None and self.job_sock is not None and self._job_reader is not None:
            ready, _, _ = select.select([self.job_sock], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return None
            try:
                line = self._job_reader.read_line()
            except (BlockingIOError, InterruptedError):
                continue
            except (OSError, ProtocolError):
                return None
            if line is None:
                return None
            try:
                message = decode_any(line, (Started, JobExit))
            except ProtocolError:
                return None
            if isinstance(message, Started):
                self.worker_pid = message.pid
            else:
                assert isinstance(message, JobExit)  # decode_any returns one of `expected`
                self._exit = message
        return self._exit

    def lockdown_error(self) -> str | None:
        """The lock-down failure the child reported already, without waiting (judge fault), or None."""
        found = self.exit_status(timeout_s=0.0)
        return found.error if found is not None and found.error else None

    # -- facts and teardown --------------------------------------------------------------------

    def facts(self) -> ChildFacts:
        """The cgroup's accounting now (call after the child ended or was killed, before close)."""
        if self.cgroup is None:
            return ChildFacts()
        kill = self.cgroup.memory_kill()
        return ChildFacts(
            oom_killed=kill.own_limit,
            host_memory_kill=kill.by_host,
            memory_kill_evidence=kill.evidence if kill.killed else "",
            process_limit_hit=self.cgroup.pids_limit_hit(),
            cpu_ms=self.cgroup.cpu_time_ms(),
            peak_memory_bytes=self.cgroup.peak_memory_bytes(),
        )

    def waiting(self) -> bool:
        """Whether the child is still alive and has reported no exit (a ready child waiting for
        its job): its cgroup holds a process (or, without a cgroup, its first process is not a
        zombie), and no `JobExit` came on its job socket."""
        if self._closed or self.pid is None or self.lockdown_error() is not None or self._exit is not None:
            return False
        if self.cgroup is not None:
            return bool(self.cgroup.pids())
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as f:
                state = f.read().rpartition(b")")[2].split()[:1]
        except OSError:
            return False
        return state not in ([b"Z"], [b"X"], [])

    def set_cpu_weight(self, weight: int) -> None:
        """Sets its cgroup's CPU weight (`JailCgroup.set_cpu_weight`; nothing without a cgroup)."""
        if self.cgroup is not None:
            self.cgroup.set_cpu_weight(weight)

    def memory_bytes(self) -> int | None:
        """Memory charged to the child's cgroup now (bytes), or None without a cgroup."""
        return self.cgroup.memory_bytes() if self.cgroup is not None else None

    def cpu_ms(self) -> float | None:
        """CPU milliseconds the child has used so far (cgroup), or None."""
        return self.cgroup.cpu_time_ms() if self.cgroup is not None else None

    def kill(self) -> None:
        """SIGKILLs every process of the child: its cgroup, and its process group."""
        if self.cgroup is not None:
            self.cgroup.kill_all()
        if self.pid is not None:
            for kill in (os.killpg, os.kill):
                try:
                    kill(self.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def _close_pipes(self) -> None:
        for fd in self._open:
            os.close(fd)
        self._open.clear()

    def close(self, *, wait: bool = True) -> None:
        """Kills what is left, removes the cgroup and gives the uid back. Idempotent.

        Args:
            wait: True: return once all of that is done. False: every process of the child is
                SIGKILLed before returning (nothing of it runs again), and waiting for the kernel
                to tear it down, removing the cgroup and returning the uid happen in a background
                thread: 3-30 ms off a verdict's critical path (measured on 2 cores). Read `facts`
                first: the cgroup goes away.
        """
        if self._closed:
            return
        self._closed = True
        self.exit_status(timeout_s=0.0)  # read what it reported (its worker's pid, its exit) while we can
        self.kill()
        self._close_pipes()
        if self.stdin_w is not None:
            os.close(self.stdin_w)
            self.stdin_w = None
        if self.job_sock is not None:
            self.job_sock.close()
            self.job_sock = None
        if wait:
            self._tear_down()
        else:
            threading.Thread(target=self._tear_down, name="child-teardown", daemon=True).start()

    def _tear_down(self) -> None:
        """Removes the cgroup and gives the uid back once /proc holds no process of it, zombies
        included (`JAIL_UIDS.release`, bounded): a killed process leaves its cgroup before its
        parent (the template, a subreaper) has reaped it, and until then it still counts against
        its uid's RLIMIT_NPROC. So a caller that looks right after `close` never finds a jail uid
        given back clean with a process of it left."""
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        if self.uid is not None:
            JAIL_UIDS.release(self.uid)
            self.uid = None
