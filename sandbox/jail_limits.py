"""Resource limits of one jail, and the cgroups that make the kernel enforce them.

Every limit carries its unit in its name. Memory and process count are enforced by a cgroup
(v1 or v2, whichever the host lets us write) with RLIMIT fallbacks; CPU time, file size and
open files by RLIMITs; wall-clock time and output size by the trusted parent, which kills the
whole jail when they are exceeded.

An OOM kill of a jail's process is the submission's only when the jail's own memory limit made
the kernel's OOM killer fire; a kill for a limit above it (the worker's container) or for the
whole machine is the host's, a fault of the judge (`JailCgroup.memory_kill`; the counters and
the rule: `sandbox.child_limits.read_memory_kill`).
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from sandbox.child_limits import MemoryKill, cgroup_counter, limit_counts_above, read_memory_kill

log = logging.getLogger(__name__)

MIB = 1024 * 1024
CGROUP_ROOT = Path("/sys/fs/cgroup")


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
        return None if d is None else cgroup_counter(d / filename)

    def _read_keyed(self, controller: str, filename: str, key: str) -> int | None:
        d = self.dirs.get(controller)
        return None if d is None else cgroup_counter(d / filename, key)

    def _memory_dir(self) -> Path | None:
        return self.dirs.get("memory" if self.version == 1 else "unified")

    def _hierarchy_root(self) -> Path:
        return CGROUP_ROOT / "memory" if self.version == 1 else CGROUP_ROOT

    def ancestor_limit_counts(self) -> dict[Path, int]:
        """How often each cgroup above this one ran into its own memory limit (`limit_counts_above`)."""
        own = self._memory_dir()
        return {} if own is None else limit_counts_above(own, self.version, self._hierarchy_root())

    def memory_kill(self) -> MemoryKill:
        """Whether the kernel's OOM killer killed a process of this cgroup, and whether this
        cgroup's own limit made it fire (`sandbox.child_limits.read_memory_kill`)."""
        own = self._memory_dir()
        if own is None:
            return MemoryKill()
        return read_memory_kill(own, self.version, self.ancestors_at_start, self._hierarchy_root())

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
