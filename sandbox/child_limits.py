"""What a child of a template may use and what the kernel accounted of it: `ChildLimits` (its
cgroup's memory and process caps, uid, RLIMITs, namespaces, output caps, start-up time) and
`ChildFacts` (OOM kill and whose limit caused it, process-limit hits, CPU time, peak memory), for
`sandbox.supervise.Child`.

How the kernel's memory counters of a cgroup tell an OOM kill for the child's own limit from one
for the host's memory: `read_memory_kill` reads them, `memory_kill_cause` is the rule
(`sandbox.jail_limits.JailCgroup.memory_kill` calls them). Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

_MIB = 1 << 20

PEAK_MARGIN_BYTES = 4 << 20
"""How far below its own limit a cgroup's peak may stay when that limit made the OOM killer fire.
The kernel charges memory in batches of up to 64 pages (MEMCG_CHARGE_BATCH, mm/memcontrol.c) and a
transparent huge page is one 2 MiB charge: the charge that failed may leave the peak that much
below the limit, never more."""
HOST_MEMORY_KILL = (
    "the host ran out of memory, not the submission: the kernel's OOM killer killed the jail "
    "for a memory limit above the jail's own (the worker's container) or for the whole machine"
)
"""What an INTERNAL_ERROR caused by the host's memory says (the judge's fault, retried)."""
MAX_ANCESTOR_LEVELS = 32
"""Most cgroup levels above a jail read for evidence of whose limit ran out (a bound on the walk)."""


@dataclass(frozen=True)
class MemoryKill:
    """What the kernel's OOM killer did to a cgroup's processes, and whose limit made it fire.

    Attributes:
        killed: the OOM killer killed a process of the cgroup (whichever OOM killer: the
            cgroup's own, an ancestor cgroup's, or the whole machine's).
        own_limit: the cgroup's own memory limit made it fire: the submission's verdict
            (MEMORY_LIMIT_EXCEEDED). A kill that is not `own_limit` is the host's (`by_host`).
        evidence: the kernel's counters the decision was made from, for logs and INTERNAL_ERROR.
    """

    killed: bool = False
    own_limit: bool = False
    evidence: str = ""

    @property
    def by_host(self) -> bool:
        """True when the OOM killer killed a process of the cgroup for memory the host ran out of
        (a limit above the cgroup's own, or the whole machine): never the submission's fault."""
        return self.killed and not self.own_limit


def memory_kill_cause(
    *,
    oom_kills: int | None,
    own_ooms: int | None,
    own_limit_hits: int | None,
    peak_bytes: int | None,
    limit_bytes: int | None,
    above: str = "",
) -> MemoryKill:
    """Decides whether the jail's own limit or the host made the kernel's OOM killer kill a process
    of the jail, from the jail cgroup's counters (the kernel's Documentation/admin-guide/cgroup-v2.rst,
    "memory.events"; cgroup-v1/memory.rst, "memory.oom_control" and "memory.failcnt").

    The kernel counts `oom_kill` on the cgroup of the process it kills, whichever limit ran out (the
    cgroup's own, an ancestor's, or the machine's: mm/oom_kill.c, `__oom_kill_process`), so a kill
    alone says nothing of its cause. cgroup v2 counts `oom` on the cgroup whose own `memory.max`
    made the OOM killer run (and on that cgroup's ancestors, never on its descendants), so the
    jail's `oom` (`memory.events.local`) is its own limit's. cgroup v1 shows no such counter (and
    recent kernels no longer count `memory.memsw.failcnt`), so there the jail's peak against its
    limit decides: an own-limit kill leaves the peak within `PEAK_MARGIN_BYTES` of the limit.
    Where the counters cannot tell the causes apart, the jail's limit is blamed only when its
    peak reached it.

    Args:
        oom_kills: processes of the jail the OOM killer killed (v2 `memory.events` `oom_kill`, v1
            `memory.oom_control` `oom_kill`); None when the kernel does not count them (before 4.13).
        own_ooms: times the jail's own limit made the OOM killer run (v2 `memory.events.local`
            `oom`); None where the kernel does not show it (v1).
        own_limit_hits: times a charge failed at the jail's own limit, reclaimed or not (v2 `max`;
            v1 `memory.failcnt` plus `memory.memsw.failcnt`); None when unread.
        peak_bytes: the jail's highest memory use (v2 `memory.peak`, v1 `memory.max_usage_in_bytes`
            or `memory.memsw.max_usage_in_bytes`, the higher); None when unread.
        limit_bytes: the jail's own memory limit (v2 `memory.max`, v1 the lower of
            `memory.limit_in_bytes` and `memory.memsw.limit_in_bytes`); None when unlimited or unread.
        above: what the cgroups above the jail counted meanwhile (evidence only: `read_memory_kill`).

    Returns:
        Whether a process was killed, whether the jail's own limit was the cause, and the evidence.
    """
    peak_reached = None if peak_bytes is None or limit_bytes is None else peak_bytes >= limit_bytes - PEAK_MARGIN_BYTES
    if oom_kills is None:  # no kill counter: the old rule, a limit reached is an OOM kill
        killed = own = bool(own_limit_hits) and peak_reached is not False
    elif oom_kills == 0:
        killed = own = False
    elif own_ooms is not None:
        killed, own = True, own_ooms > 0 and peak_reached is not False
    elif peak_reached is not None:
        killed, own = True, peak_reached
    else:
        killed, own = True, False  # nothing says the jail reached its limit: not the submission's doing
    counts = {"oom_kill": oom_kills, "own-limit oom": own_ooms, "own-limit hits": own_limit_hits}
    parts = [f"{name} {n}" for name, n in counts.items() if n is not None]
    if peak_bytes is not None:
        of_limit = f" of its {limit_bytes / _MIB:.0f} MiB limit" if limit_bytes is not None else " (no limit)"
        parts.append(f"peak {peak_bytes / _MIB:.1f} MiB{of_limit}")
    evidence = "jail cgroup: " + ", ".join(parts) + (f"; {above}" if above else "")
    if killed:
        cause = "its own limit" if own else "the host's memory (a limit above the jail, or the whole machine)"
        evidence += f"; killed for {cause}"
    return MemoryKill(killed=killed, own_limit=own, evidence=evidence)


def cgroup_counter(path: Path, key: str | None = None) -> int | None:
    """The number in cgroup file `path`: its first word, or the value of `key` in a keyed file;
    None when it cannot be read (or reads "max")."""
    try:
        text = path.read_text()
        if key is None:
            return int(text.split()[0])
        return next((int(v) for k, _, v in (line.partition(" ") for line in text.splitlines()) if k == key), None)
    except (OSError, ValueError, IndexError):
        return None


def limit_counts_above(memory_dir: Path, version: int, root: Path) -> dict[Path, int]:
    """How often each cgroup above `memory_dir` (up to the hierarchy's `root`, at most
    `MAX_ANCESTOR_LEVELS`) ran into its own memory limit: v2 `oom` of `memory.events.local` (the
    times its `memory.max` made the OOM killer run), v1 `memory.failcnt` (the charges that failed
    at its `memory.limit_in_bytes`). Unreadable ones are left out."""
    counts: dict[Path, int] = {}
    d = memory_dir
    for _ in range(MAX_ANCESTOR_LEVELS):
        if d == root or root not in d.parents:
            break
        d = d.parent
        if version == 1:
            count = cgroup_counter(d / "memory.failcnt")
        else:
            count = cgroup_counter(d / "memory.events.local", "oom")
            count = cgroup_counter(d / "memory.events", "oom") if count is None else count
        if count is not None:
            counts[d] = count
    return counts


def read_memory_kill(memory_dir: Path, version: int, above_at_start: dict[Path, int], root: Path) -> MemoryKill:
    """Whether the kernel's OOM killer killed a process of the cgroup `memory_dir`, and whether its
    own limit made it fire (`memory_kill_cause`), from its counters: v2 `memory.events`,
    `memory.events.local`, `memory.peak`, `memory.max`; v1 `memory.oom_control`, `memory.failcnt`,
    `memory.max_usage_in_bytes`, `memory.limit_in_bytes` and their `memsw` forms. After a kill, the
    cgroups above it that reached their own limit since `above_at_start` (`limit_counts_above`
    then) are named as evidence.

    Args:
        memory_dir: the cgroup's directory (v1: in the memory hierarchy).
        version: 1 or 2.
        above_at_start: `limit_counts_above` when the cgroup was made.
        root: the hierarchy's root (/sys/fs/cgroup/memory for v1, /sys/fs/cgroup for v2).
    """
    if version == 1:
        kills, own_ooms = cgroup_counter(memory_dir / "memory.oom_control", "oom_kill"), None

        def both(name: str) -> list[int]:  # a v1 counter and its memory+swap form, those read
            found = (cgroup_counter(memory_dir / f"memory.{name}"), cgroup_counter(memory_dir / f"memory.memsw.{name}"))
            return [n for n in found if n is not None]

        failcnts, peaks, limits = both("failcnt"), both("max_usage_in_bytes"), both("limit_in_bytes")
        hits, peak, limit = (sum(failcnts) if failcnts else None), max(peaks, default=None), min(limits, default=None)
        limit = None if limit is not None and limit >= 1 << 62 else limit  # v1 shows "unlimited" as a huge number
    else:
        kills = cgroup_counter(memory_dir / "memory.events", "oom_kill")
        local = memory_dir / "memory.events.local"  # the jail has no child cgroups: either file is its own
        events = local if cgroup_counter(local, "oom") is not None else memory_dir / "memory.events"
        own_ooms, hits = cgroup_counter(events, "oom"), cgroup_counter(events, "max")
        peak, limit = cgroup_counter(memory_dir / "memory.peak"), cgroup_counter(memory_dir / "memory.max")
    above = ""
    if kills:
        now = limit_counts_above(memory_dir, version, root)
        counter = "failcnt" if version == 1 else "oom"
        rose = [
            f"{d} ({counter} +{n - above_at_start.get(d, 0)})" for d, n in now.items() if n > above_at_start.get(d, 0)
        ]
        above = (
            "above it, these cgroups reached their own limit meanwhile: " + ", ".join(rose)
            if rose
            else f"no cgroup above it ({len(now)} read) reached its own limit meanwhile"
        )
    return memory_kill_cause(
        oom_kills=kills, own_ooms=own_ooms, own_limit_hits=hits, peak_bytes=peak, limit_bytes=limit, above=above
    )


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
