"""Fork-server templates (zygotes): `Template`, one template process under its own cgroup and
RLIMITs, reached through a control socket; `Templates` keeps one alive per kind, restarts it when
it dies and replaces it after `max_forks` children. Their children are `sandbox.supervise.Child`.
Standard library plus `sandbox.jail_limits`; no JAX here (the server imports this module)."""

from __future__ import annotations

import io
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from jailside.protocol import (
    ForkRequest,
    LineReader,
    ProtocolError,
    TemplateReady,
    decode,
    send_with_fds,
)
from sandbox.jail_limits import JailCgroup
from sandbox.seccomp import filter_fd

log = logging.getLogger(__name__)


SANDBOX_DIR = Path(__file__).resolve().parent


KEPT_TEMPLATE_STDERR_BYTES = 16 * 1024


class SupervisorError(Exception):
    """A template or child could not be started or set up: a fault of the judge (INTERNAL_ERROR)."""


@dataclass(frozen=True)
class TemplateSpec:
    """How to start one kind of template.

    Attributes:
        name: "jail" or "verifier" (logs and errors).
        argv: the command after `sandbox/enter.py`; `{control_fd}` and `{seccomp_fd}` are replaced
            by the descriptor numbers of the template's end of the control socket and of a pipe
            holding the compiled seccomp filter (`sandbox/seccomp.py`), which the template reads
            once and installs in each child.
        env: the template's whole environment.
        cwd: its working directory.
        memory_limit_bytes: cap of the template's own cgroup (its imports; children have their own).
        startup_time_limit_s: seconds to import everything and say `TemplateReady`.
    """

    name: str
    argv: Callable[[], list[str]]
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = "/"
    memory_limit_bytes: int = 2 << 30
    startup_time_limit_s: float = 120.0


class Template:
    """One running template process. Thread-safe: `fork` may be called from any thread."""

    def __init__(self, spec: TemplateSpec):
        self.spec = spec
        self.forks = 0
        self.import_ms = 0.0
        self.cgroup: JailCgroup | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.control: socket.socket | None = None
        self.stderr = bytearray()
        self._lock = threading.Lock()

    @classmethod
    def start(cls, spec: TemplateSpec) -> Template:
        """Starts a template and waits for its `TemplateReady`.

        Raises:
            SupervisorError: it exited, said something else, or was not ready in time.
        """
        made = cls(spec)
        try:
            made._spawn()
        except BaseException:
            made.close()
            raise
        return made

    def _spawn(self) -> None:
        spec = self.spec
        as_root = os.geteuid() == 0
        self.cgroup = (
            JailCgroup.create(memory_limit_bytes=spec.memory_limit_bytes, process_limit=256) if as_root else None
        )
        try:
            seccomp_fd = filter_fd()
        except OSError as exc:
            raise SupervisorError(f"cannot build the seccomp filter (is libseccomp2 installed?): {exc}") from exc
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            argv = [a.format(control_fd=theirs.fileno(), seccomp_fd=seccomp_fd) for a in spec.argv()]
            setup = {"procs": self.cgroup.procs_files if self.cgroup else [], "rlimits": {"RLIMIT_CORE": [0, 0]}}
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(SANDBOX_DIR / "enter.py"), json.dumps(setup), *argv],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=(theirs.fileno(), seccomp_fd),
                env=spec.env,
                cwd=spec.cwd,
                start_new_session=True,
            )
        finally:
            theirs.close()
            os.close(seccomp_fd)
        self.control = ours
        reader = threading.Thread(target=self._read_stderr, name=f"{spec.name}-template-stderr", daemon=True)
        reader.start()
        ready, _, _ = select.select([ours], [], [], spec.startup_time_limit_s)
        line = LineReader(ours).read_line() if ready else None
        if line is None:
            self._kill()
            try:  # what it wrote before it died says why: wait for the reader to get all of it
                self.proc.wait(timeout=5)
                reader.join(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            raise SupervisorError(
                f"the {spec.name} template did not start: {bytes(self.stderr).decode('utf-8', 'replace')[-2000:]}"
            )
        try:
            self.import_ms = decode(line, TemplateReady).import_ms
        except ProtocolError as exc:
            raise SupervisorError(f"the {spec.name} template said something unexpected: {exc}") from None

    def _read_stderr(self) -> None:
        assert self.proc is not None
        stderr = self.proc.stderr
        assert isinstance(stderr, io.BufferedReader)  # a PIPE with Popen's default buffering
        for chunk in iter(lambda: stderr.read1(4096), b""):
            self.stderr += chunk
            del self.stderr[:-KEPT_TEMPLATE_STDERR_BYTES]

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and self.control is not None

    def fork(self, job_id: str, fds: list[int]) -> None:
        """Asks the template to fork a child that gets `fds` (see `jailside.protocol.ForkRequest`).

        Raises:
            SupervisorError: the template is gone.
        """
        with self._lock:
            if not self.alive():
                raise SupervisorError(f"the {self.spec.name} template is not running")
            assert self.control is not None
            try:
                send_with_fds(self.control, ForkRequest(job_id=job_id), fds)
            except OSError as exc:
                raise SupervisorError(f"the {self.spec.name} template is gone: {exc}") from None
            self.forks += 1

    def pid(self) -> int | None:
        """The host pid of the template's process (enter.py execs into it, or into bubblewrap)."""
        return self.proc.pid if self.proc is not None else None

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def close(self) -> None:
        """Closes the control socket (the template exits; children it forked live on, each in its
        own cgroup and process group) and removes the template's cgroup. Idempotent."""
        with self._lock:
            if self.control is not None:
                self.control.close()
                self.control = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._kill()
                self.proc.wait()
            if self.proc.stderr is not None:
                self.proc.stderr.close()
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None


class Templates:
    """Keeps one live template of a kind: started on first use (or by `prestart`), restarted when
    it dies, replaced after `max_forks` children.

    Args:
        spec: how to start one.
        max_forks: children per template before a fresh one takes over.
    """

    def __init__(self, spec: TemplateSpec, *, max_forks: int = 500):
        self.spec, self.max_forks = spec, max_forks
        self.current: Template | None = None
        self.started = 0
        self._lock = threading.Lock()

    def get(self) -> Template:
        """The live template, started (blocking) if there is none.

        Raises:
            SupervisorError: it could not be started.
        """
        with self._lock:
            old = None
            if self.current is not None and (not self.current.alive() or self.current.forks >= self.max_forks):
                if not self.current.alive():
                    log.warning(
                        "the %s template died (%s); starting a new one",
                        self.spec.name,
                        bytes(self.current.stderr).decode("utf-8", "replace")[-500:],
                    )
                old, self.current = self.current, None
            if self.current is None:
                self.current = Template.start(self.spec)
                self.started += 1
            current = self.current
        if old is not None:
            old.close()
        return current

    def fork(self, job_id: str, fds: list[int]) -> Template:
        """Forks a child through the live template, retrying once with a fresh template."""
        for attempt in range(2):
            template = self.get()
            try:
                template.fork(job_id, fds)
                return template
            except SupervisorError:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def prestart(self) -> None:
        """Starts the template now, so the first submission does not wait for its imports."""
        self.get()

    def close(self) -> None:
        with self._lock:
            current, self.current = self.current, None
        if current is not None:
            current.close()


def shared_templates(spec: Callable[[], TemplateSpec], *, max_forks: int) -> Callable[[], Templates]:
    """A function that returns this process's one `Templates` of a kind, made on its first call
    (so importing a module starts nothing), shared by every grading thread."""
    lock = threading.Lock()
    made: list[Templates] = []

    def get() -> Templates:
        with lock:
            if not made:
                made.append(Templates(spec(), max_forks=max_forks))
            return made[0]

    return get
