"""Locking a freshly forked child down: namespaces, private mounts, rlimits, identity, seccomp.

Standard library only (ctypes for the system calls Python 3.11's `os` lacks). Called by the
fork server (`jailside/forkserver.py`) in each child, never in the template, in this order:
`unshare` (as the child's first process), `private_mounts`, `expose_paths` and `mount_proc`
(in the worker, the first process of a new PID namespace when there is one), then `set_rlimits`, `drop_identity`,
`no_new_privs` and `install_seccomp`, before the job reads anything untrusted.

Facts from the kernel documentation (man 2 unshare, man 7 capabilities, man 2 seccomp): a new
PID namespace applies to the caller's children, not the caller; changing every uid from 0 to a
non-zero uid clears the permitted and effective capabilities; dropping the bounding set needs
CAP_SETPCAP; a seccomp filter needs no_new_privs (or CAP_SYS_ADMIN) and can never be removed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
import struct

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
NAMESPACES = {"mount": CLONE_NEWNS, "uts": CLONE_NEWUTS, "ipc": CLONE_NEWIPC, "pid": CLONE_NEWPID, "net": CLONE_NEWNET}

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    0x1,
    0x2,
    0x4,
    0x8,
    0x20,
    0x1000,
    0x4000,
    0x40000,
)
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
CAP_LAST_CAP_FALLBACK = 40
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


class LockdownError(Exception):
    """A lock-down step failed: the child must not run its job (a fault of the judge)."""


def _check(result: int, what: str) -> int:
    if result == -1:
        err = ctypes.get_errno()
        raise LockdownError(f"{what}: {os.strerror(err)} (errno {err})")
    return result


def unshare(names: list[str]) -> None:
    """Moves the caller into new namespaces (`NAMESPACES` keys; "pid" applies to its children).

    Raises:
        LockdownError: an unknown name, or the kernel refused (no CAP_SYS_ADMIN).
    """
    flags = 0
    for name in names:
        if name not in NAMESPACES:
            raise LockdownError(f"unknown namespace {name!r}")
        flags |= NAMESPACES[name]
    if flags:
        _check(_libc.unshare(ctypes.c_int(flags)), f"unshare({', '.join(names)})")


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    _check(
        _libc.mount(
            source.encode(),
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {target}",
    )


def _under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def private_mounts(tmpfs_bytes: int, keep: list[str] | tuple[str, ...] = ()) -> None:
    """In a new mount namespace: stop mount propagation, then (when `tmpfs_bytes` > 0) mount a
    private, size-capped tmpfs (mode 1777) on /tmp and on /dev/shm, so no two children share a
    file, socket path or POSIX shared memory object. Directories of `keep` that lie under one of
    them (a virtualenv in /tmp, as a CI checkout has) are bound back read-only at their paths.

    Raises:
        LockdownError: a mount failed.
    """
    _mount("none", "/", None, MS_REC | MS_PRIVATE, None)
    for target in ("/tmp", "/dev/shm") if tmpfs_bytes > 0 else ():
        if not os.path.isdir(target):
            continue
        inside = [
            os.path.abspath(p) for p in keep if _under(os.path.abspath(p), target) and os.path.abspath(p) != target
        ]
        fds = {path: os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC) for path in dict.fromkeys(inside)}
        try:
            _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"size={int(tmpfs_bytes)},mode=1777")
            for path, fd in fds.items():
                _bind_read_only(fd, path)
        finally:
            for fd in fds.values():
                os.close(fd)


def _bind_read_only(fd: int, path: str) -> None:
    """Binds the directory open as O_PATH descriptor `fd` at `path` (created 0755), read-only."""
    os.makedirs(path, mode=0o755, exist_ok=True)
    _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC, None)
    _mount("none", path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_REC, None)


def _blocking_ancestor(path: str) -> str | None:
    """The highest ancestor directory of `path` that others may not traverse (no o+x), or None."""
    parts = os.path.abspath(path).split("/")[1:]
    for i in range(1, len(parts)):
        ancestor = "/" + "/".join(parts[:i])
        if not os.stat(ancestor).st_mode & 0o001:
            return ancestor
    return None


def expose_paths(paths: list[str]) -> None:
    """Makes each of `paths` reachable by an unprivileged uid in this (private) mount namespace:
    an ancestor others may not traverse (a pyenv interpreter under /root, mode 0700) is covered
    by an empty tmpfs in which only the paths themselves are bound back (read-only), so the
    rest of that ancestor stays out of sight. Paths already reachable are left as they are.

    Raises:
        LockdownError: a path does not exist or a mount failed.
    """
    blocked: dict[str, list[str]] = {}
    for path in paths:
        try:
            ancestor = _blocking_ancestor(path)
        except OSError as exc:
            raise LockdownError(f"cannot expose {path}: {exc}") from None
        if ancestor is not None:
            blocked.setdefault(ancestor, []).append(os.path.abspath(path))
    for ancestor, inside in blocked.items():
        fds = {path: os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC) for path in dict.fromkeys(inside)}
        try:
            _mount("tmpfs", ancestor, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
            for path, fd in fds.items():
                _bind_read_only(fd, path)
        finally:
            for fd in fds.values():
                os.close(fd)


def mount_proc() -> None:
    """Mounts a /proc of the caller's PID namespace over /proc (call it as that namespace's first
    process, in a private mount namespace), so the child sees its own processes and nothing else.

    Raises:
        LockdownError: the mount failed.
    """
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)


def set_rlimits(limits: dict[str, list[int]]) -> None:
    """Sets each `{"RLIMIT_X": [soft, hard]}`; a hard limit can only be lowered afterwards.

    Raises:
        LockdownError: an unknown resource name or a refused value.
    """
    for name, (soft, hard) in limits.items():
        number = getattr(resource, name, None)
        if not name.startswith("RLIMIT_") or not isinstance(number, int):
            raise LockdownError(f"unknown resource {name!r}")
        try:
            resource.setrlimit(number, (int(soft), int(hard)))
        except (ValueError, OSError) as exc:
            raise LockdownError(f"setrlimit {name}: {exc}") from None


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except (OSError, ValueError):
        return CAP_LAST_CAP_FALLBACK


def drop_identity(uid: int | None) -> None:
    """Becomes `uid` (real, effective and saved; gid the same, no supplementary groups) and holds
    no capability in any set afterwards (bounding, permitted, effective, inheritable, ambient).

    With uid None (a judge without setuid rights) the identity stays, and only the capabilities
    are dropped.

    Raises:
        LockdownError: a step failed, or a capability is still held at the end.
    """
    for cap in range(_last_cap() + 1):
        if _libc.prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0) == -1 and ctypes.get_errno() not in (0, 22):
            raise LockdownError(
                f"cannot drop capability {cap} from the bounding set: {os.strerror(ctypes.get_errno())}"
            )
    if uid is not None:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        except OSError as exc:
            raise LockdownError(f"cannot become uid {uid}: {exc}") from None
    # capset(all zero) for this thread: clears inheritable (and, without a uid change, the rest).
    header = struct.pack("II", _LINUX_CAPABILITY_VERSION_3, 0)
    data = bytes(24)  # two __user_cap_data_struct {effective, permitted, inheritable}, all zero
    _check(_libc.capset(ctypes.c_char_p(header), ctypes.c_char_p(data)), "capset")
    # Changing uids made the process non-dumpable, which hands its own /proc/self files to root
    # (it could not read /proc/self/environ). Dumpable again, as after an exec: only processes of
    # the same uid, the job's own, could attach, and seccomp denies ptrace; RLIMIT_CORE is 0.
    _libc.prctl(PR_SET_DUMPABLE, ctypes.c_ulong(1), 0, 0, 0)
    with open("/proc/self/status") as status:
        caps = {k: v.strip() for k, _, v in (line.partition(":") for line in status) if k.startswith("Cap")}
    held = {k: v for k, v in caps.items() if int(v, 16) != 0}
    if held:
        raise LockdownError(f"capabilities still held after the drop: {held}")


def no_new_privs() -> None:
    """PR_SET_NO_NEW_PRIVS: no execve can grant privileges again (setuid bits, file capabilities).

    Raises:
        LockdownError: the kernel refused.
    """
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), 0, 0, 0), "prctl(NO_NEW_PRIVS)")


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_seccomp(bpf: bytes) -> None:
    """Installs a classic-BPF seccomp filter (the bytes libseccomp's `export_bpf` writes: an
    array of 8-byte `struct sock_filter`) for this thread and the processes and threads it
    creates later. Call after `no_new_privs`. Irreversible.

    Raises:
        LockdownError: an empty or misaligned program, or the kernel refused it.
    """
    if not bpf or len(bpf) % 8:
        raise LockdownError(f"a seccomp program of {len(bpf)} bytes is not a BPF program")
    program = ctypes.create_string_buffer(bpf, len(bpf))
    fprog = _SockFprog(len(bpf) // 8, ctypes.cast(program, ctypes.c_void_p))
    _check(
        _libc.prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog), 0, 0), "prctl(SECCOMP)"
    )


def become_subreaper() -> None:
    """PR_SET_CHILD_SUBREAPER: orphans below this process (a worker whose parent was killed) are
    reparented to it, so it reaps them instead of the host's init, which may never do so (and a
    zombie still counts against its uid's RLIMIT_NPROC).

    Raises:
        LockdownError: the kernel refused.
    """
    _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, ctypes.c_ulong(1), 0, 0, 0), "prctl(CHILD_SUBREAPER)")


def sethostname(name: str) -> None:
    """Sets the hostname of the (new) UTS namespace."""
    _check(_libc.sethostname(name.encode(), ctypes.c_size_t(len(name))), "sethostname")
