"""Messages between the trusted supervisor (`sandbox/supervise.py`) and fork-server processes.

Standard library only: both ends import this module, the trusted side and the code inside a
template (zygote) and its children. Every message is one JSON object on one line, written to a
stream socket or pipe; `encode` and `decode` are the only ways in and out, and `decode` checks
each field's type, so an unexpected message is an error rather than a silently wrong value.

Channels of one child (docs/ARCHITECTURE.md, "Process model"):
- control socket (supervisor <-> template): `ForkRequest` carrying the child's descriptors
  with SCM_RIGHTS; the template answers `TemplateReady` once, after its imports.
- job socket (supervisor <-> the child's first process, trusted code): `Hello` (its pid arrives
  as SCM_CREDENTIALS), then `JobSetup`, `Started` (the worker's pid, when it forks one), and
  `JobExit` when the locked-down worker has ended.
- stdin / result pipe / stdout / stderr (supervisor <-> the locked-down worker): what the job
  reads and writes (the jail's `JailRequest` and bundle, the verifier's bundle and events).
"""

from __future__ import annotations

import array
import json
import os
import socket
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar, TypeVar

MAX_MESSAGE_BYTES = 1 << 20
READY = b"READY\n"

T = TypeVar("T", bound="Message")


MAX_DEVICES = 8  # the most devices a problem's mesh may have
# What the trusted side sets in every jail and verifier template's environment, before JAX starts
# (it cannot change afterwards): MAX_DEVICES simulated CPU devices, so one template serves every
# mesh; a program on one device runs on the first. Measured with jax 0.10.2 on 2 cores: 8 devices
# instead of 1 cost 12 more threads and about 3 MB of resident memory, and no start-up time.
SIMULATED_DEVICES_FLAG = f"--xla_force_host_platform_device_count={MAX_DEVICES}"


class ProtocolError(Exception):
    """A message that is not one of ours, malformed, too long, or cut off."""


@dataclass(frozen=True)
class Message:
    """Base of every message: `kind` names the class on the wire."""

    kind: ClassVar[str] = ""

    def encode(self) -> bytes:
        """One JSON line: `{"kind": ..., <fields>}`."""
        return json.dumps({"kind": self.kind, **asdict(self)}, separators=(",", ":")).encode() + b"\n"


@dataclass(frozen=True)
class TemplateReady(Message):
    """Template -> supervisor, once: imports done, ready to fork. `pid` in the template's own PID
    namespace (informational), `import_ms` milliseconds spent importing."""

    kind: ClassVar[str] = "template_ready"
    pid: int
    import_ms: float


@dataclass(frozen=True)
class ForkRequest(Message):
    """Supervisor -> template: fork one child. The descriptors travel with the message
    (SCM_RIGHTS), in this order: job socket, stdin (read end), stdout, stderr, result (write ends)."""

    kind: ClassVar[str] = "fork"
    job_id: str


@dataclass(frozen=True)
class Hello(Message):
    """Child -> supervisor on the job socket, first thing after the fork. The kernel attaches the
    sender's pid, uid and gid (SCM_CREDENTIALS, translated into the receiver's PID namespace), so
    the supervisor learns the host pid to move into the child's cgroup without trusting a claim."""

    kind: ClassVar[str] = "hello"
    job_id: str


@dataclass(frozen=True)
class JobSetup(Message):
    """Supervisor -> child, after it has been moved into its cgroup: how to lock itself down.

    Attributes:
        uid: host uid (and gid) to drop to; None keeps the current one (an unprivileged judge
            without setuid rights; isolation then rests on namespaces alone).
        rlimits: resource name ("RLIMIT_CPU", ...) -> [soft, hard], set before the job runs.
        unshare: namespaces to create ("net", "ipc", "uts", "mount", "pid").
        tmpfs_bytes: size of the private /tmp and /dev/shm mounted in the new mount namespace
            (0: none).
        seccomp: install the template's seccomp filter in the worker.
        expose: directories the worker must still read after dropping its uid (the interpreter,
            the virtualenv, our code), made reachable in its mount namespace when an ancestor is
            closed to others (`jailside.lockdown.expose_paths`).
        job: the job's own parameters (for the verifier: problem, cache, seed), read by the
            trusted `prepare` step before the child drops its privileges.
    """

    kind: ClassVar[str] = "setup"
    uid: int | None
    rlimits: dict[str, list[int]] = field(default_factory=dict)
    unshare: list[str] = field(default_factory=list)
    tmpfs_bytes: int = 0
    seccomp: bool = False
    expose: list[str] = field(default_factory=list)
    job: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Started(Message):
    """Child's first process -> supervisor, when it has forked the worker (a PID namespace's
    first process): `pid` is the worker's pid in the supervisor's PID namespace, so the
    supervisor can wait until it has been reaped before the job's uid is handed out again."""

    kind: ClassVar[str] = "started"
    pid: int


@dataclass(frozen=True)
class JobExit(Message):
    """Child's first process -> supervisor: the locked-down worker ended. `status` is its exit
    code, or 128 + the signal number that killed it; `error` names a failure of the lock-down
    itself (a fault of the judge, never of the submission)."""

    kind: ClassVar[str] = "exit"
    status: int
    error: str = ""


@dataclass(frozen=True)
class JailRequest(Message):
    """Supervisor -> jail worker on stdin, once, after the worker said READY: the submission and
    the argument avals of each test case. Never hidden inputs, never the reference.

    Attributes:
        source: the submission's Python source.
        entry_point: the function it must define.
        cases: `[{"name": str, "args": [ArgSpec, ...]}]` (ArgSpec: `jailside/export.py`).
        cpu_time_limit_s: CPU seconds (all threads) the submission may use from here on.
        memory_limit_mib: memory it may use on top of the runtime (RLIMIT_AS, relative).
        mesh: the problem's mesh and partition (`jailside.mesh`'s MeshDict), or None: one device.
    """

    kind: ClassVar[str] = "jail_request"
    source: str
    entry_point: str
    cases: list[dict[str, Any]]
    cpu_time_limit_s: float
    memory_limit_mib: int = 0
    mesh: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The request as the plain dict `jailside.runner.run_request` takes."""
        return asdict(self)


MESSAGES: dict[str, type[Message]] = {
    m.kind: m for m in (TemplateReady, ForkRequest, Hello, JobSetup, Started, JobExit, JailRequest)
}
_CHECKS: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (int, float),
    "str": (str,),
    "bool": (bool,),
    "int | None": (int, type(None)),
    "list[str]": (list,),
    "dict[str, list[int]]": (dict,),
    "dict[str, Any]": (dict,),
    "dict[str, Any] | None": (dict, type(None)),
    "list[dict[str, Any]]": (list,),
}


def decode(line: bytes, expected: type[T]) -> T:
    """Parses one line as a message of class `expected`.

    Raises:
        ProtocolError: not JSON, another kind, a missing or extra field, or a field of the wrong type.
    """
    try:
        raw = json.loads(line)
    except ValueError as exc:
        raise ProtocolError(f"not a JSON message: {exc}") from None
    if not isinstance(raw, dict) or raw.pop("kind", None) != expected.kind:
        raise ProtocolError(f"expected a {expected.kind!r} message")
    names = {f.name: f for f in fields(expected)}
    if set(raw) - set(names):
        raise ProtocolError(f"{expected.kind}: unknown fields {sorted(set(raw) - set(names))}")
    for name, value in raw.items():
        allowed = _CHECKS.get(str(names[name].type))
        if allowed is not None and (
            not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed)
        ):
            raise ProtocolError(f"{expected.kind}.{name}: {type(value).__name__} is not {names[name].type}")
    try:
        return expected(**raw)
    except TypeError as exc:
        raise ProtocolError(f"{expected.kind}: {exc}") from None


def decode_any(line: bytes, expected: tuple[type[Message], ...]) -> Message:
    """Parses one line as whichever of the `expected` message classes its `kind` names.

    Raises:
        ProtocolError: not JSON, a kind outside `expected`, or a malformed message of it.
    """
    try:
        kind = json.loads(line).get("kind")
    except (ValueError, AttributeError):
        raise ProtocolError("not a JSON message") from None
    for cls in expected:
        if cls.kind == kind:
            return decode(line, cls)
    raise ProtocolError(f"expected one of {[c.kind for c in expected]}, got {kind!r}")


class LineReader:
    """Reads newline-terminated messages from a blocking socket, each at most MAX_MESSAGE_BYTES."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._buffer = bytearray()

    def read_line(self) -> bytes | None:
        """The next line without its newline, or None at end of stream.

        Raises:
            ProtocolError: a line longer than MAX_MESSAGE_BYTES, or a stream cut mid-line.
        """
        while b"\n" not in self._buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                if self._buffer:
                    raise ProtocolError("the stream ended in the middle of a message")
                return None
            self._buffer += chunk
            if len(self._buffer) > MAX_MESSAGE_BYTES:
                raise ProtocolError("message too long")
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        return line


def send_with_fds(sock: socket.socket, message: Message, fds: list[int]) -> None:
    """Sends `message` with `fds` attached (SCM_RIGHTS) in one sendmsg."""
    socket.send_fds(sock, [message.encode()], fds)


def recv_with_fds(sock: socket.socket, max_fds: int = 8) -> tuple[bytes, list[int]]:
    """Receives one message sent by `send_with_fds`: (line without newline, descriptors).

    Returns (b"", []) at end of stream. The control socket carries one message per sendmsg and
    the sender waits for nothing in between, so one recvmsg is one message.

    Raises:
        ProtocolError: a message without its newline (cut or too long).
    """
    data, fds, flags, _ = socket.recv_fds(sock, MAX_MESSAGE_BYTES, max_fds)
    if not data:
        for fd in fds:
            _close_quietly(fd)
        return b"", []
    if not data.endswith(b"\n") or flags & socket.MSG_CTRUNC:
        for fd in fds:
            _close_quietly(fd)
        raise ProtocolError("a control message was cut off")
    return data[:-1], list(fds)


def recv_credentials(sock: socket.socket) -> tuple[bytes, tuple[int, int, int] | None]:
    """Receives one message with the sender's (pid, uid, gid) from SCM_CREDENTIALS.

    The receiving socket must have SO_PASSCRED set before the sender sends; the kernel then
    attaches the sender's real credentials (a process can only claim its own pid unless it has
    CAP_SYS_ADMIN), translated into the receiver's PID and user namespaces.
    """
    size = socket.CMSG_SPACE(array.array("i", [0, 0, 0]).itemsize * 3)
    data, ancdata, _, _ = sock.recvmsg(MAX_MESSAGE_BYTES, size)
    creds = None
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(payload) >= 12:
            values = array.array("i")
            values.frombytes(payload[:12])
            creds = (values[0], values[1], values[2])
    return data, creds


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass
