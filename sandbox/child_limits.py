"""What a child of a template may use and what the kernel accounted of it: `ChildLimits` (its
cgroup's memory and process caps, uid, RLIMITs, namespaces, output caps, start-up time) and
`ChildFacts` (OOM kill and whose limit caused it, process-limit hits, CPU time, peak memory), for
`sandbox.supervise.Child`.
Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ChildLimits:
    """Kernel-enforced limits of one child (the job's own limits come with its request).

    Attributes:
        memory_limit_bytes: the child's cgroup memory cap (resident, every process of it).
        process_limit: processes plus threads in its cgroup.
        own_uid: run it as a dedicated host uid of the jail uid range (when we are root).
        rlimits: RLIMITs set in the child before lock-down ends ({"RLIMIT_X": [soft, hard]}).
        unshare: namespaces the child gets ("mount", "pid", "ipc", "uts", "net").
        tmpfs_bytes: size of its private /tmp and /dev/shm (needs "mount"; 0 for none).
        seccomp: install the template's seccomp filter.
        expose: directories the child must read after dropping its uid (`JobSetup.expose`).
        output_caps: stream name ("stdout", "stderr", "result") -> most bytes read before the
            child is killed and the stream marked exceeded.
        kept_bytes: stream name -> bytes kept of it (the rest is counted, not stored).
        startup_time_limit_s: seconds from the fork request to the child's Hello.
    """

    memory_limit_bytes: int
    process_limit: int
    own_uid: bool = True
    rlimits: dict[str, list[int]] = field(default_factory=dict)
    unshare: tuple[str, ...] = ()
    tmpfs_bytes: int = 0
    seccomp: bool = True
    expose: tuple[str, ...] = ()
    output_caps: dict[str, int] = field(default_factory=dict)
    kept_bytes: dict[str, int] = field(default_factory=dict)
    startup_time_limit_s: float = 30.0


@dataclass
class ChildFacts:
    """What the kernel accounted of a child, read before its cgroup is removed.

    Attributes:
        oom_killed: the kernel's OOM killer killed a process of the child because the child
            reached its own cgroup memory limit (the job's fault: MEMORY_LIMIT_EXCEEDED).
        host_memory_kill: the OOM killer killed a process of the child for memory the host ran
            out of (a limit above the child's cgroup, such as the worker's container, or the whole
            machine): never the job's fault, a judge fault to retry. Decided from the kernel's
            counters by `sandbox.jail_limits.memory_kill_cause`.
        memory_kill_evidence: the kernel's counters behind those two, for logs ("" without a kill).
        process_limit_hit: a fork or clone failed at the cgroup's process limit.
        cpu_ms: CPU milliseconds of every process and thread of the child; None without a cgroup.
        peak_memory_bytes: its highest memory use; None without a cgroup.
    """

    oom_killed: bool = False
    host_memory_kill: bool = False
    memory_kill_evidence: str = ""
    process_limit_hit: bool = False
    cpu_ms: float | None = None
    peak_memory_bytes: int | None = None
