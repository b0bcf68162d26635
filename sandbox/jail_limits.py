"""Resource limits of one jail, and the cgroups that make the kernel enforce them.

Every limit carries its unit in its name. Memory and process count are enforced by a cgroup
(v1 or v2, whichever the host lets us write) with RLIMIT fallbacks; CPU time, file size and
open files by RLIMITs; wall-clock time and output size by the trusted parent, which kills the
whole jail when they are exceeded.

An OOM kill of a jail's process is the submission's only when the jail's own memory limit made
the kernel's OOM killer fire; a kill for a limit above it (the worker's container) or for the
whole machine is the host's, a fault of the judge (`JailCgroup.memory_kill`, `memory_kill_cause`).
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MIB = 1024 * 1024
CGROUP_ROOT = Path("/sys/fs/cgroup")

PEAK_MARGIN_BYTES = 4 * MIB
"""How far below its own limit a cgroup's peak may stay when that limit made the OOM killer fire.
The kernel charges memory in batches of up to 64 pages (MEMCG_CHARGE_BATCH, mm/memcontrol.c) and a
transparent huge page is one 2 MiB charge: the charge that failed may leave the peak that much
below the limit, never more."""
MAX_ANCESTOR_LEVELS = 32
"""Most cgroup levels above a jail read for evidence of whose limit ran out (a bound on the walk)."""
HOST_MEMORY_KILL = (
    "the host ran out of memory, not the submission: the kernel's OOM killer killed the jail "
    "for a memory limit above the jail's own (the worker's container) or for the whole machine"
)
"""What an INTERNAL_ERROR caused by the host's memory says (the judge's fault, retried)."""


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
        above: what the cgroups above the jail counted meanwhile (evidence only: `JailCgroup`).

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
        of_limit = f" of its {limit_bytes / MIB:.0f} MiB limit" if limit_bytes is not None else " (no limit)"
        parts.append(f"peak {peak_bytes / MIB:.1f} MiB{of_limit}")
    evidence = "jail cgroup: " + ", ".join(parts) + (f"; {above}" if above else "")
    if killed:
        cause = "its own limit" if own else "the host's memory (a limit above the jail, or the whole machine)"
        evidence += f"; killed for {cause}"
    return MemoryKill(killed=killed, own_limit=own, evidence=evidence)


@dataclass(frozen=True)
class JailLimits:
    """What one jail may use.

    Attributes:
        wall_time_limit_s: seconds from handing over the submission until the bundle is written.
        cpu_time_limit_s: CPU seconds (all threads) the submission phase may use.
        startup_time_limit_s: seconds the jail may take to start and import JAX.
        memory_limit_mib: memory the submission may use on top of the Python and JAX runtime, in
            MiB. The runner caps its address space at its size after importing JAX plus this
            (RLIMIT_AS: an allocation beyond it fails at once with MemoryError), and the jail's
            cgroup caps resident memory at this plus `runtime_memory_mib`.
        runtime_memory_mib: resident memory allowed for the runtime itself; `import jax` takes
            about 190 MB resident and 1.5 GB of address space here (measured, 17 threads).
        address_space_limit_mib: RLIMIT_AS during start-up, a coarse backstop; `import jax` needs
            more than 1 GiB of address space (measured: fails at 1 GiB, works at 2 GiB).
        process_limit: processes plus threads in the jail (JAX starts about 17 threads).
        file_size_limit_bytes: largest file the jail may write (RLIMIT_FSIZE).
        tmpfs_size_bytes: size of the jail's private /tmp.
        open_files_limit: RLIMIT_NOFILE.
        output_limit_bytes: stdout and stderr, each; more kills the jail.
        bundle_limit_bytes: the result bundle; more kills the jail.
    """

    wall_time_limit_s: float = 10.0
    cpu_time_limit_s: float = 10.0
    startup_time_limit_s: float = 60.0
    memory_limit_mib: int = 1536
    runtime_memory_mib: int = 512
    address_space_limit_mib: int = 8192
    process_limit: int = 64
    file_size_limit_bytes: int = 16 * MIB
    tmpfs_size_bytes: int = 64 * MIB
    open_files_limit: int = 256
    output_limit_bytes: int = 1 * MIB
    bundle_limit_bytes: int = 32 * MIB


def own_cgroup_v1(controller: str) -> Path | None:
    """Path of the v1 cgroup this process is in for `controller`, or None when not mounted
    (the parent of the judge's jail cgroups; bench/throughput.py puts the server under one)."""
    mount = CGROUP_ROOT / controller
    if not (mount / "cgroup.procs").exists():
        return None
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return mount / path.lstrip("/")
    return mount


def _own_cgroup_v2() -> Path | None:
    if not (CGROUP_ROOT / "cgroup.controllers").exists():
        return None
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return CGROUP_ROOT / line[3:].lstrip("/")
    return None


# the v1 memory counters `JailCgroup.memory_kill` reads, each also in its memory+swap form
_V1_COUNTERS = tuple(
    f"{memsw}{name}" for memsw in ("", "memsw.") for name in ("failcnt", "max_usage_in_bytes", "limit_in_bytes")
)


def _read_int_file(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _read_keyed_file(path: Path, key: str) -> int | None:
    try:
        for line in path.read_text().splitlines():
            k, _, v = line.partition(" ")
            if k == key:
                return int(v)
    except (OSError, ValueError):
        return None
    return None


def _known(*values: int | None) -> list[int]:
    return [v for v in values if v is not None]


def _sum_known(*values: int | None) -> int | None:
    return sum(_known(*values)) if _known(*values) else None


def _max_known(*values: int | None) -> int | None:
    return max(_known(*values), default=None)


def _min_known(*values: int | None) -> int | None:
    return min(_known(*values), default=None)


class JailCgroup:
    """A fresh cgroup (one per jail) capping memory and process count.

    Create with `JailCgroup.create(...)`, which returns None when the host offers no writable
    memory and pids controllers (the caller then relies on RLIMITs and logs a warning). The
    jail's first process joins by writing its pid to every path in `procs_files` before it
    execs bubblewrap (see `sandbox/enter.py`), so nothing of the submission runs outside it.
    """

    def __init__(self, version: int, dirs: dict[str, Path]):
        self.version = version
        self.dirs = dirs  # controller name ("memory", "pids", "cpuacct"; "unified" for v2) -> dir
        # the ancestors' limit counters when the cgroup was made (`memory_kill` reports what rose)
        self.ancestors_at_start: dict[Path, int] = {}

    @classmethod
    def create(
        cls, *, memory_limit_bytes: int, process_limit: int, memory_parent: Path | None = None
    ) -> JailCgroup | None:
        """Creates the cgroup; returns None (and creates nothing) when it cannot be made.

        Args:
            memory_limit_bytes: its memory limit (v1 `memory.limit_in_bytes`, v2 `memory.max`).
            process_limit: its `pids.max`.
            memory_parent: the cgroup to make it in: a directory of the v1 memory hierarchy (the
                other v1 controllers stay under this process's own cgroups), or a v2 one with
                memory and pids in its `cgroup.subtree_control`. Default: this process's own
                (tests put a jail under a cgroup with a lower limit, as a worker's container).
        """
        name = f"remat-judge-{uuid.uuid4().hex[:12]}"
        v2_parent = memory_parent is not None and (memory_parent / "cgroup.controllers").exists()
        try:
            made = None if v2_parent else cls._create_v1(name, memory_limit_bytes, process_limit, memory_parent)
            if made is None and (memory_parent is None or v2_parent):
                made = cls._create_v2(name, memory_limit_bytes, process_limit, memory_parent)
            if made is not None:
                made.ancestors_at_start = made.ancestor_limit_counts()
            return made
        except OSError as exc:
            log.warning("cannot create a cgroup for the jail (%s); relying on RLIMITs", exc)
            return None

    @classmethod
    def _create_v1(
        cls, name: str, memory_limit_bytes: int, process_limit: int, memory_parent: Path | None
    ) -> JailCgroup | None:
        memory, pids = memory_parent or own_cgroup_v1("memory"), own_cgroup_v1("pids")
        if memory is None or pids is None or not os.access(memory, os.W_OK):
            return None
        dirs = {"memory": memory / name, "pids": pids / name}
        cpuacct = own_cgroup_v1("cpuacct")
        if cpuacct is not None and os.access(cpuacct, os.W_OK):
            dirs["cpuacct"] = cpuacct / name
        cpu = own_cgroup_v1("cpu")  # for `set_cpu_weight`; often the same hierarchy as cpuacct
        if cpu is not None and os.access(cpu, os.W_OK) and (cpuacct is None or cpu.resolve() != cpuacct.resolve()):
            dirs["cpu"] = cpu / name
        made = cls(1, {})
        try:
            for controller, path in dirs.items():
                path.mkdir()
                made.dirs[controller] = path
            (dirs["memory"] / "memory.limit_in_bytes").write_text(str(memory_limit_bytes))
            memsw = dirs["memory"] / "memory.memsw.limit_in_bytes"
            if memsw.exists():  # no swapping around the limit
                memsw.write_text(str(memory_limit_bytes))
            (dirs["pids"] / "pids.max").write_text(str(process_limit))
        except OSError:
            made.remove()
            raise
        return made

    @classmethod
    def _create_v2(
        cls, name: str, memory_limit_bytes: int, process_limit: int, memory_parent: Path | None
    ) -> JailCgroup | None:
        parent = memory_parent or _own_cgroup_v2()
        if parent is None or not os.access(parent, os.W_OK):
            return None
        enabled = (parent / "cgroup.subtree_control").read_text().split()
        if not {"memory", "pids"} <= set(enabled):
            return None  # enabling them here would break v2's no-internal-processes rule
        path = parent / name
        path.mkdir()
        made = cls(2, {"unified": path})
        try:
            (path / "memory.max").write_text(str(memory_limit_bytes))
            if (path / "memory.swap.max").exists():
                (path / "memory.swap.max").write_text("0")
            (path / "pids.max").write_text(str(process_limit))
        except OSError:
            made.remove()
            raise
        return made

    @staticmethod
    def remove_stale(min_age_s: float = 60.0) -> int:
        """Removes empty `remat-judge-*` cgroups left by a judge process that was killed; returns
        how many. Non-empty ones (a jail still running) are left alone: rmdir refuses them; so are
        ones younger than `min_age_s`, which another judge process may be about to join."""
        parents = [
            p
            for p in (*(own_cgroup_v1(c) for c in ("memory", "pids", "cpuacct", "cpu")), _own_cgroup_v2())
            if p is not None
        ]
        removed = 0
        for parent in parents:
            try:
                stale = [d for d in parent.glob("remat-judge-*") if d.is_dir()]
            except OSError:
                continue
            for d in stale:
                try:
                    if time.time() - d.stat().st_mtime < min_age_s:
                        continue
                    if not (d / "cgroup.procs").read_text().strip():
                        d.rmdir()
                        removed += 1
                except OSError:
                    pass
        return removed

    @property
    def procs_files(self) -> list[str]:
        """The `cgroup.procs` files a process writes its pid to in order to join."""
        return [str(d / "cgroup.procs") for d in self.dirs.values()]

    def attach(self, pid: int) -> None:
        """Moves process `pid` (a host pid) into this cgroup in every hierarchy; its later children
        start in it.

        Raises:
            OSError: the kernel refused (the process is gone, or we may not move it).
        """
        for procs in self.procs_files:
            with open(procs, "w") as f:
                f.write(str(pid))

    def _read_int(self, controller: str, filename: str) -> int | None:
        d = self.dirs.get(controller)
        return None if d is None else _read_int_file(d / filename)

    def _read_keyed(self, controller: str, filename: str, key: str) -> int | None:
        d = self.dirs.get(controller)
        return None if d is None else _read_keyed_file(d / filename, key)

    def _memory_dir(self) -> Path | None:
        return self.dirs.get("memory" if self.version == 1 else "unified")

    def ancestor_limit_counts(self) -> dict[Path, int]:
        """How often each cgroup above this one (up to the hierarchy's root, at most
        `MAX_ANCESTOR_LEVELS`) ran into its own memory limit: v2 `oom` of `memory.events.local`
        (the times that cgroup's `memory.max` made the OOM killer run), v1 `memory.failcnt` (the
        charges that failed at that cgroup's `memory.limit_in_bytes`). Unreadable ones are left out.
        """
        counts: dict[Path, int] = {}
        own = self._memory_dir()
        if own is None:
            return counts
        root = CGROUP_ROOT / "memory" if self.version == 1 else CGROUP_ROOT
        d = own
        for _ in range(MAX_ANCESTOR_LEVELS):
            if d == root or root not in d.parents:
                break
            d = d.parent
            if self.version == 1:
                count = _read_int_file(d / "memory.failcnt")
            else:
                count = _read_keyed_file(d / "memory.events.local", "oom")
                if count is None:
                    count = _read_keyed_file(d / "memory.events", "oom")
            if count is not None:
                counts[d] = count
        return counts

    def _above(self) -> str:
        """The cgroups above this one whose own limit ran out since it was made, as evidence."""
        now = self.ancestor_limit_counts()
        counter = "failcnt" if self.version == 1 else "oom"
        rose = [
            f"{d} ({counter} +{n - self.ancestors_at_start.get(d, 0)})"
            for d, n in now.items()
            if n > self.ancestors_at_start.get(d, 0)
        ]
        if rose:
            return "above it, these cgroups reached their own limit meanwhile: " + ", ".join(rose)
        return f"no cgroup above it ({len(now)} read) reached its own limit meanwhile"

    def memory_kill(self) -> MemoryKill:
        """Whether the kernel's OOM killer killed a process of this cgroup, and whether this
        cgroup's own limit made it fire (`memory_kill_cause` says how that is decided).

        Reads the cgroup's own counters (v2 `memory.events`, `memory.events.local`, `memory.peak`,
        `memory.max`; v1 `memory.oom_control`, `memory.failcnt`, `memory.max_usage_in_bytes`,
        `memory.limit_in_bytes` and their `memsw` forms) and, after a kill, those of its ancestors.
        """
        if self.version == 1:
            kills = self._read_keyed("memory", "memory.oom_control", "oom_kill")
            own_ooms = None
            v1 = {name: self._read_int("memory", f"memory.{name}") for name in _V1_COUNTERS}
            hits = _sum_known(v1["failcnt"], v1["memsw.failcnt"])
            peak = _max_known(v1["max_usage_in_bytes"], v1["memsw.max_usage_in_bytes"])
            limit = _min_known(v1["limit_in_bytes"], v1["memsw.limit_in_bytes"])
            if limit is not None and limit >= 1 << 62:  # v1 writes "unlimited" as a huge number
                limit = None
        else:
            kills = self._read_keyed("unified", "memory.events", "oom_kill")
            local = self._read_keyed("unified", "memory.events.local", "oom") is not None
            events = "memory.events.local" if local else "memory.events"  # the jail has no child cgroups
            own_ooms = self._read_keyed("unified", events, "oom")
            hits = self._read_keyed("unified", events, "max")
            peak = self._read_int("unified", "memory.peak")
            limit = self._read_int("unified", "memory.max")  # None for "max"
        return memory_kill_cause(
            oom_kills=kills,
            own_ooms=own_ooms,
            own_limit_hits=hits,
            peak_bytes=peak,
            limit_bytes=limit,
            above=self._above() if kills else "",
        )

    def oom_killed(self) -> bool:
        """True when the kernel's OOM killer killed a process of this cgroup because this cgroup
        reached its own memory limit (`memory_kill`; a kill the host caused is not counted)."""
        return self.memory_kill().own_limit

    def peak_memory_bytes(self) -> int | None:
        """Highest memory use of the jail (bytes), as the kernel accounted it."""
        if self.version == 1:
            return self._read_int("memory", "memory.max_usage_in_bytes")
        return self._read_int("unified", "memory.peak")

    def set_cpu_weight(self, weight: int) -> bool:
        """Sets the cgroup's CPU weight against its siblings (the judge's other children), in
        cgroup v2 units: 1..10000, 100 the default (v1: `cpu.shares` = weight * 1024 / 100, at
        least 2). The kernel's scheduler enforces it on every thread of every process inside;
        a weight of 1 lets the cgroup run only on CPU time the others leave idle.

        Returns:
            True when set; False when the host offers no cpu controller here (nothing changes).
        """
        if self.version == 1:
            found = [d / "cpu.shares" for d in self.dirs.values() if (d / "cpu.shares").exists()]
            value = str(max(2, weight * 1024 // 100))
        else:
            found = [d / "cpu.weight" for d in self.dirs.values() if (d / "cpu.weight").exists()]
            value = str(min(10000, max(1, weight)))
        try:
            for path in found:
                path.write_text(value)
        except OSError:
            return False
        return bool(found)

    def memory_bytes(self) -> int | None:
        """Memory charged to the cgroup now (bytes), as the kernel accounts it."""
        if self.version == 1:
            return self._read_int("memory", "memory.usage_in_bytes")
        return self._read_int("unified", "memory.current")

    def cpu_time_ms(self) -> float | None:
        """CPU time of every process that ran in the cgroup, in milliseconds."""
        if self.version == 1:
            ns = self._read_int("cpuacct", "cpuacct.usage")
            return None if ns is None else ns / 1e6
        usec = self._read_keyed("unified", "cpu.stat", "usage_usec")
        return None if usec is None else usec / 1e3

    def pids_limit_hit(self) -> bool:
        """True when a fork or clone in the jail failed because of the process limit."""
        key_dir = "pids" if self.version == 1 else "unified"
        return bool(self._read_keyed(key_dir, "pids.events", "max"))

    def pids(self) -> list[int]:
        """Pids still in the cgroup."""
        found: set[int] = set()
        for d in self.dirs.values():
            try:
                found.update(int(p) for p in (d / "cgroup.procs").read_text().split())
            except OSError:
                pass
        return sorted(found)

    def kill_all(self) -> None:
        """SIGKILLs every process left in the cgroup (v2: cgroup.kill; v1: one by one)."""
        kill_file = self.dirs.get("unified", Path("/nonexistent")) / "cgroup.kill"
        if kill_file.exists():
            kill_file.write_text("1")
            return
        for _ in range(20):  # repeat: a process may fork while we kill
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass

    def remove(self) -> bool:
        """Kills what is left, waits for it to be gone, and removes the cgroup directories.

        A killed process leaves its cgroup only once the kernel has torn it down, which for a
        process with hundreds of MiB takes a moment; rmdir fails with EBUSY until then.

        Returns:
            True when every directory is gone (so no process was left in the cgroup).
        """
        removed = True
        deadline = time.monotonic() + 5.0
        self.kill_all()
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.01)
            self.kill_all()
        for d in self.dirs.values():
            while True:
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if time.monotonic() > deadline:
                        log.warning("cannot remove cgroup %s (%s); it is removed at the next start", d, exc)
                        removed = False
                        break
                    time.sleep(0.02)
        return removed
