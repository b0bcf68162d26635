"""The jail's seccomp filter: system calls a traced-and-exported JAX function never needs, denied.

The filter is compiled to BPF by libseccomp (through `pyseccomp`, a ctypes binding to the system's
libseccomp.so.2) and handed to bubblewrap with `--seccomp FD`, which installs it just before the
jail's command runs, so it holds for every process and thread of the jail and cannot be removed.

Default: allow (JAX's CPU runtime uses a broad set of calls). Denied with EPERM: debugging other
processes, namespaces and mounts, kernel keyrings, BPF, perf, io_uring, module and system
administration calls, and every socket family but AF_UNIX. `clone3` fails with ENOSYS so that
glibc falls back to `clone`, whose flags a classic BPF filter can inspect (clone3 passes them in
memory); `clone` with any namespace flag is denied.
"""

from __future__ import annotations

import errno
import os
import socket
import tempfile
from functools import lru_cache

DENIED_SYSCALLS = (
    # other processes' memory and control
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    # namespaces, mounts, root changes
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    # kernel attack surface a numerical program never needs
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "open_by_handle_at",
    "name_to_handle_at",
    "fanotify_init",
    "quotactl",
    "acct",
    "swapon",
    "swapoff",
    "reboot",
    "settimeofday",
    "clock_settime",
    "adjtimex",
    "clock_adjtime",
    "syslog",
    "iopl",
    "ioperm",
    "lookup_dcookie",
    "vhangup",
)
# <linux/sched.h>: CLONE_NEWTIME, NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
# (Python 3.11's os module does not define them yet).
NAMESPACE_CLONE_FLAGS = (0x00000080, 0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)


@lru_cache(maxsize=1)
def jail_filter_bpf() -> bytes:
    """The compiled filter (classic BPF for the native architecture; other ABIs are killed by
    libseccomp's default bad-architecture action).

    Raises:
        OSError: libseccomp is not installed (Debian: libseccomp2).
    """
    # libseccomp only in the child that installs the filter
    import pyseccomp as sc

    f = sc.SyscallFilter(defaction=sc.ALLOW)
    for name in DENIED_SYSCALLS:
        try:
            f.add_rule(sc.ERRNO(errno.EPERM), name)
        except (ValueError, RuntimeError):  # unknown to this libseccomp: nothing to deny
            continue
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for flag in NAMESPACE_CLONE_FLAGS:
        f.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    for call in ("socket", "socketpair"):
        f.add_rule(sc.ERRNO(errno.EPERM), call, sc.Arg(0, sc.NE, socket.AF_UNIX))
    with tempfile.TemporaryFile() as out:
        f.export_bpf(out)
        out.seek(0)
        return out.read()


def filter_fd() -> int:
    """A readable descriptor holding the compiled filter, for `bwrap --seccomp FD` (the caller
    closes it after starting bubblewrap, which reads it once)."""
    data = jail_filter_bpf()
    read_end, write_end = os.pipe()
    if len(data) > 65536:  # a pipe holds 64 KiB; the filter is a few hundred bytes
        raise OSError("seccomp filter too large for a pipe")
    os.write(write_end, data)
    os.close(write_end)
    return read_end
