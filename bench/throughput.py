"""Throughput of a real server under a burst of the whole problem bank.

Numbers are printed; nothing is asserted (this is not a test).

What it does:
  1. Starts `remat-judge serve --workers N` on a free loopback port with a fresh temporary data
     directory (fresh reference caches, fresh database), with REMAT_JUDGE_WAIT_TIMEOUT_S=600 so
     that `POST ...?wait=true` holds until the verdict. When it can, it first puts the server in
     a fresh cgroup of its own (see "CPU" below). `--url` uses a running server instead.
  2. Warm-up: posts every problem's reference.py once (wait=true), so each problem version's
     reference cache is built before anything is measured.
  3. Burst: every problems/<slug>/reference.py, right/*.py and wrong/*.py, except the bombs (files
     whose `# expect:` is TIME_LIMIT_EXCEEDED, MEMORY_LIMIT_EXCEEDED or OUTPUT_LIMIT_EXCEEDED: they
     measure limits, not throughput), deduplicated on (problem, source). All are posted at the same
     instant, one thread each, and each POST is held open with `wait=true` until its verdict
     (polling GET /api/v1/submissions/{id} only if the wait times out with 202). Waiting is async
     in the server (no thread per waiting request), so this costs the server next to nothing.
     `--poll` instead polls GET every 0.5 s from the start, as a client that never waits would
     (about 1 ms of server CPU per GET: with 162 clients, a third of a core).
  4. The same burst again: identical sources, which a result cache may serve.

Each burst prints:
  programs       how many submissions the burst posts.
  wall s         from the moment all threads are released to post until the last verdict arrives.
  verdicts/s     programs / wall s.                                  target: >= 3 per second
  CPU s/verdict  CPU time of the server's cgroup (the server and everything it starts: jails and
                 verifiers live in child cgroups of it) over the burst, divided by programs:
                 the delta of cpuacct.usage (cgroup v1) or cpu.stat usage_usec (v2). Split into
                 the server process itself (utime+stime of /proc/<server>/stat, which includes
                 its HTTP handlers and workers' threads) and its children (the rest).
                                                                     target: <= 0.6 s per verdict
  host           busy CPU of the whole host over the burst (/proc/stat), and how much of it was
                 outside the server's cgroup: the client and sampler, and any other load.
  p50 / p95      POST-to-verdict latency as the client sees it (nearest rank).
  quarters       how many verdicts arrived in each quarter of the wall time: uneven counts mean
                 throughput changed during the burst (cheaper problems queued later, other load).
  outside judge  client latency less the verdict's own timing_ms queue + total (stored to
                 graded): how long the HTTP layer held the request before it was stored or the
                 verdict after it was graded.
  judge phases   medians of the verdicts' own timing_ms (queue, sandbox, verify, total).
  mismatches     verdicts that differ from the file's `# expect:` (reference.py and right/ files
                 expect ACCEPTED), listed as file, expected, got.
  memory         every ~0.2 s, the server's process tree (found by walking /proc/*/stat ppid
                 links from the server's pid) is sampled: RSS (/proc/PID/statm) of each process,
                 and every 5th time (~1 s) its PSS (/proc/PID/smaps_rollup, when readable; reading
                 it costs ~4 ms of CPU per JAX process, on the cores the judge uses), grouped by
                 `group_of` (the first 80 characters of its command line, repository path removed,
                 numbers as N, [fork] when a process has its parent's command line, i.e. was
                 forked without exec; adjust that function to group otherwise). Per group: the
                 most processes seen at once, the peak of the group's summed RSS and PSS, and the
                 largest single RSS. Then the templates (processes not forked themselves that were
                 seen with a [fork] child: fork servers): their summed peak PSS divided by
                 --workers, beside the target of <= 600 MB per worker; and the peak PSS of
                 everything below the server per worker (measured against that target when the
                 judge has no templates). With cgroup v1 also the cgroup's
                 memory.max_usage_in_bytes (the whole tree, page cache included).

CPU accounting needs a writable cgroup hierarchy (root). With cgroup v1 a child
`remat-bench-<random>` is made under the benchmark's own cgroup in each of the memory, pids and
cpuacct hierarchies: the judge finds the parent of its jail cgroups by reading /proc/self/cgroup per
controller (sandbox/jail_limits.py `own_cgroup_v1`), so the server must be inside the new cgroup in
every hierarchy the judge uses. The server joins them before it execs (a `preexec_fn` writes its
pid to each cgroup.procs). With cgroup v2 one leaf cgroup is made (v2 does not let a non-root
cgroup that holds a process give controllers to children, so the judge's jails fall back to RLIMITs
there; CPU is still counted). At the
end the server gets SIGTERM, anything still in the cgroups after 10 s is killed and reported, and
the cgroups (and any jail cgroups the judge left in them) are removed. Without a writable cgroup:
"CPU: not measured (no writable cgroup)". With `--url` there is no CPU figure unless `--cgroup PATH`
names the cgroup directory of that server, and no memory figures unless `--server-pid` is given.

The benchmark's own threads and sampler run outside the cgroup but on the same cores; the
sampler's own CPU time is printed. Anything else busy on the host slows the bursts down (wall,
latency) without changing the cgroup's CPU much: check `uptime` first.

The server imports the project from the working tree; while someone edits the process layer that
can change under a running server (a verifier started later imports the new files). `--source-dir`
runs a fixed copy instead:
    rm -rf /tmp/remat-head && mkdir /tmp/remat-head && git archive HEAD | tar -x -C /tmp/remat-head
    .venv/bin/python bench/throughput.py --source-dir /tmp/remat-head

`--json` ends the output with one JSON object: the settings, the targets, and per burst every
number above plus each program's outcome (file, expected, got, latency_s, timing_ms).

Usage:
    .venv/bin/python bench/throughput.py [--workers 2] [--problems slug1,slug2] [--json]
                                         [--source-dir DIR] [--log server.log]
    .venv/bin/python bench/throughput.py --url http://127.0.0.1:8000 [--cgroup PATH] [--server-pid PID]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
from common import BOMBS, PROBLEMS, REPO

from sandbox.jail_limits import own_cgroup_v1
from tests.support import free_port

CGROUP_ROOT = Path("/sys/fs/cgroup")

TARGET_VERDICTS_PER_S = 3.0
TARGET_CPU_S_PER_VERDICT = 0.6
TARGET_TEMPLATE_MB_PER_WORKER = 600.0

EXPECT_LINE = re.compile(r"#\s*expect:\s*([A-Z_]+)\s*$")  # as graders/problems/problem.py reads it
SERVER_WAIT_TIMEOUT_S = 600  # the most server/settings.py allows
SAMPLE_INTERVAL_S = 0.2
PSS_EVERY = 5  # PSS on every 5th sample (~1 s): smaps_rollup of a JAX process costs ~4 ms of CPU here
MB = 1e6


# ----------------------------------------------------------------------------------------------
# The burst


@dataclass(frozen=True)
class Program:
    problem: str
    file: str  # relative to problems/, e.g. "remat_sin_sin/wrong/no_checkpoint.py"
    source: str
    expected: str


def expected_verdict(path: Path, folder: str) -> str | None:
    """The verdict a bank file expects: ACCEPTED for reference.py and for a right/ file without an
    expect line; a wrong/ file without one gives None (graders/problems/problem.py rejects it)."""
    first = path.read_text(encoding="utf-8").splitlines()[:1]
    m = EXPECT_LINE.match(first[0]) if first else None
    if m:
        return m.group(1)
    return None if folder == "wrong" else "ACCEPTED"


def build_burst(slugs: list[str]) -> tuple[list[Program], list[str]]:
    """(programs, notes on skipped files) for the bank's `slugs`."""
    programs: list[Program] = []
    seen: set[tuple[str, str]] = set()
    skipped: list[str] = []
    for slug in slugs:
        root = PROBLEMS / slug
        files = [(root / "reference.py", "reference")]
        files += [(p, "right") for p in sorted((root / "right").glob("*.py"))]
        files += [(p, "wrong") for p in sorted((root / "wrong").glob("*.py"))]
        for path, folder in files:
            rel = str(path.relative_to(PROBLEMS))
            expected = expected_verdict(path, folder)
            if expected is None:
                skipped.append(f"{rel}: no `# expect:` line")
                continue
            if expected in BOMBS:
                skipped.append(f"{rel}: {expected} (a bomb)")
                continue
            source = path.read_text(encoding="utf-8")
            if (slug, source) in seen:
                skipped.append(f"{rel}: same source as another file of {slug}")
                continue
            seen.add((slug, source))
            programs.append(Program(slug, rel, source, expected))
    return programs, skipped


# ----------------------------------------------------------------------------------------------
# Cgroups: the server's own, to count the CPU of everything it starts


class BenchCgroup:
    """The cgroup the server runs in: v1 (one directory per hierarchy) or v2 (one directory)."""

    V1_CONTROLLERS = ("memory", "pids", "cpuacct")

    def __init__(self, version: int, dirs: dict[str, Path], *, owned: bool):
        self.version, self.dirs, self.owned = version, dirs, owned

    @classmethod
    def create(cls) -> tuple[BenchCgroup | None, str]:
        """A fresh `remat-bench-<random>` cgroup under this process's own, or (None, why not)."""
        name = f"remat-bench-{uuid.uuid4().hex[:12]}"
        made: BenchCgroup | None = None
        try:
            if (CGROUP_ROOT / "cgroup.controllers").exists():  # pure v2
                line = next(row for row in Path("/proc/self/cgroup").read_text().splitlines() if row.startswith("0::"))
                parent = CGROUP_ROOT / line[3:].lstrip("/")
                if not os.access(parent, os.W_OK):
                    return None, f"{parent} is not writable"
                made = cls(2, {}, owned=True)
                (parent / name).mkdir()
                made.dirs["unified"] = parent / name
                return made, ""
            parents = {c: own_cgroup_v1(c) for c in cls.V1_CONTROLLERS}
            if parents["cpuacct"] is None:
                return None, "no cpuacct hierarchy"
            made = cls(1, {}, owned=True)
            for controller, parent in parents.items():
                if parent is not None and os.access(parent, os.W_OK):
                    (parent / name).mkdir()
                    made.dirs[controller] = parent / name
            if "cpuacct" not in made.dirs:
                made.remove()
                return None, f"{parents['cpuacct']} is not writable"
            return made, ""
        except (OSError, StopIteration) as exc:
            if made is not None:
                made.remove()
            return None, str(exc)

    @classmethod
    def existing(cls, path: Path) -> BenchCgroup:
        """A cgroup given with --cgroup (read only, never removed)."""
        if (path / "cpuacct.usage").exists():
            return cls(1, {"cpuacct": path}, owned=False)
        return cls(2, {"unified": path}, owned=False)

    def join(self) -> None:
        """Moves the calling process into the cgroup (run in the server's child before exec)."""
        pid = str(os.getpid())
        for d in self.dirs.values():
            with open(d / "cgroup.procs", "w") as f:
                f.write(pid)

    def cpu_s(self) -> float | None:
        """CPU seconds used so far by every process that ran in the cgroup or its children."""
        try:
            if self.version == 1:
                return int((self.dirs["cpuacct"] / "cpuacct.usage").read_text()) / 1e9
            for line in (self.dirs["unified"] / "cpu.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) / 1e6
        except (KeyError, OSError, ValueError):
            pass
        return None

    def reset_memory_peak(self) -> None:
        if self.version == 1 and "memory" in self.dirs:
            try:
                (self.dirs["memory"] / "memory.max_usage_in_bytes").write_text("0")
            except OSError:
                pass

    def memory_peak_bytes(self) -> int | None:
        """The cgroup's peak memory (v1: since the last reset; v2: since creation), page cache included."""
        path = (
            self.dirs["memory"] / "memory.max_usage_in_bytes"
            if self.version == 1 and "memory" in self.dirs
            else self.dirs.get("unified", Path("/nonexistent")) / "memory.peak"
        )
        try:
            return int(path.read_text())
        except (OSError, ValueError):
            return None

    def _tree(self) -> list[Path]:
        """Every directory of the cgroups, deepest first."""
        out: list[Path] = []
        for d in self.dirs.values():
            out += sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
            out.append(d)
        return out

    def pids(self) -> set[int]:
        found: set[int] = set()
        for d in self._tree():
            try:
                found.update(int(p) for p in (d / "cgroup.procs").read_text().split())
            except OSError:
                pass
        return found

    def remove(self, grace_s: float = 10.0) -> tuple[list[str], int]:
        """Waits up to `grace_s` for the processes to leave, kills the rest, removes the directories.
        Returns (command lines of the processes it had to kill, judge cgroups it found left)."""
        if not self.owned:
            return [], 0
        deadline = time.monotonic() + grace_s
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.1)
        killed = []
        for pid in self.pids():
            killed.append(f"{pid} {read_cmdline(pid)[:120]}")
        for _ in range(50):
            left = self.pids()
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        leftover_cgroups = len({d.name for d in self._tree() if d.name.startswith("remat-judge-")})
        for d in self._tree():
            for _ in range(100):  # EBUSY until a killed process is torn down
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
            else:
                print(f"warning: could not remove {d}", file=sys.stderr)
        return killed, leftover_cgroups


# ----------------------------------------------------------------------------------------------
# Processes and memory

PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")


def read_cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def group_of(cmdline: str, *, is_server: bool, forked: bool) -> str:
    """The group a process's memory is counted in: the first 80 characters of its command line, with
    the repository path removed and every number written N (so `runner.py 15` and `runner.py 16`,
    the same jail with another fd, are one group), marked [server] for the server and [fork] for a
    process with the same command line as its parent (forked without exec: a fork server's child,
    whose pages are shared with its template until written). Adjust here to group otherwise."""
    label = re.sub(r"\b\d+\b", "N", cmdline.replace(str(REPO) + "/", ""))[:80]
    if is_server:
        return f"[server] {label}"
    return f"[fork] {label}" if forked else label


def process_tree(root: int) -> list[tuple[int, int]]:
    """(pid, ppid) of `root` and all its descendants, from the ppid field of every /proc/*/stat."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [(root, 0)]
    while todo:
        pid, ppid = todo.pop()
        out.append((pid, ppid))
        todo.extend((child, pid) for child in children.get(pid, []))
    return out


def host_busy_cpu_s() -> float:
    """CPU seconds all cores of the host have spent busy (not idle, not waiting for I/O), /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / TICK  # user..steal, less idle and iowait


def process_cpu_s(pid: int) -> float | None:
    """utime + stime of one process (all its threads), in seconds."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_pss_bytes(pid: int, *, with_pss: bool) -> tuple[int, int | None] | None:
    """(RSS, PSS or None when not asked for or smaps_rollup is unreadable), or None when the
    process is gone."""
    try:
        rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return None
    pss = None
    if not with_pss:
        return rss, None
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                pss = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError):
        pass
    return rss, pss


@dataclass
class GroupPeak:
    processes: int = 0  # most processes of the group seen in one sample
    rss_sum: int = 0  # peak over samples of the group's summed RSS
    pss_sum: int = 0  # same for PSS (0 when unreadable)
    rss_max: int = 0  # largest RSS of one process


class MemorySampler:
    """Samples the server's process tree every SAMPLE_INTERVAL_S (PSS every PSS_EVERY-th time) in
    a thread, between start() and stop().

    A template is a process that is not itself a fork of its parent and was seen with a forked
    child (same command line, no exec) in some sample; `template_peaks` sums the templates' memory
    per sample (a template seen forking only later still counts in earlier samples)."""

    def __init__(self, server_pid: int | None):
        self.server_pid = server_pid
        self.groups: dict[str, GroupPeak] = {}
        self.children_pss_peak = 0  # everything below the server, summed per PSS sample
        self.children_rss_peak = 0
        self.templates: dict[int, str] = {}  # pid -> group
        self._per_pid: list[tuple[dict[int, int], dict[int, int] | None]] = []  # per sample: RSS, PSS by pid
        self.samples = 0
        self.pss_samples = 0
        self.pss_unreadable = False  # some process's smaps_rollup could not be read (its RSS was counted)
        self.cpu_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)

    def start(self) -> MemorySampler:
        if self.server_pid is not None:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        cpu0 = time.thread_time()
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(SAMPLE_INTERVAL_S)
        self.cpu_s = time.thread_time() - cpu0

    def sample(self) -> None:
        assert self.server_pid is not None
        with_pss = self.samples % PSS_EVERY == 0
        now: dict[str, GroupPeak] = {}
        children_rss = children_pss = 0
        pss_missing = False
        tree = process_tree(self.server_pid)
        cmdlines = {pid: read_cmdline(pid) for pid, _ in tree}
        forked = {pid for pid, ppid in tree if ppid and cmdlines[pid] and cmdlines[pid] == cmdlines.get(ppid)}
        # the server's own forks are subprocess children about to exec, not a fork server's
        self.templates.update(
            {
                ppid: group_of(cmdlines[ppid], is_server=False, forked=False)
                for pid, ppid in tree
                if pid in forked and ppid not in forked and ppid != self.server_pid
            }
        )
        rss_by_pid: dict[int, int] = {}
        pss_by_pid: dict[int, int] = {}
        for pid, _ in tree:
            mem = rss_pss_bytes(pid, with_pss=with_pss)
            cmdline = cmdlines[pid]
            if mem is None or not cmdline:
                continue
            rss, pss = mem
            is_server = pid == self.server_pid
            g = now.setdefault(group_of(cmdline, is_server=is_server, forked=pid in forked), GroupPeak())
            g.processes += 1
            g.rss_sum += rss
            g.pss_sum += pss or 0
            g.rss_max = max(g.rss_max, rss)
            pss_missing |= with_pss and pss is None
            if not is_server:
                children_rss += rss
                children_pss += pss if pss is not None else rss  # RSS bounds PSS from above
                rss_by_pid[pid] = rss
                pss_by_pid[pid] = pss if pss is not None else rss
        for name, g in now.items():
            peak = self.groups.setdefault(name, GroupPeak())
            peak.processes = max(peak.processes, g.processes)
            peak.rss_sum = max(peak.rss_sum, g.rss_sum)
            peak.pss_sum = max(peak.pss_sum, g.pss_sum)
            peak.rss_max = max(peak.rss_max, g.rss_max)
        self.children_rss_peak = max(self.children_rss_peak, children_rss)
        if with_pss:
            self.children_pss_peak = max(self.children_pss_peak, children_pss)
            self.pss_samples += 1
        self.pss_unreadable |= pss_missing
        self._per_pid.append((rss_by_pid, pss_by_pid if with_pss else None))
        self.samples += 1

    def template_peaks(self) -> tuple[int, int]:
        """(peak summed RSS, peak summed PSS) of the templates over the samples, bytes."""
        rss_peak = max((sum(rss.get(p, 0) for p in self.templates) for rss, _ in self._per_pid), default=0)
        pss_peak = max(
            (sum(pss.get(p, 0) for p in self.templates) for _, pss in self._per_pid if pss is not None), default=0
        )
        return rss_peak, pss_peak


# ----------------------------------------------------------------------------------------------
# The server


def start_server(
    data_dir: Path, log_path: Path, workers: int, cgroup: BenchCgroup | None, source_dir: Path | None
) -> tuple[subprocess.Popen[bytes], str]:
    """`remat-judge serve` on a free loopback port, inside `cgroup` when given; waits for healthz.

    With `source_dir` the server imports the project from there instead of the working tree
    (PYTHONPATH comes before the venv's editable finder; the verifier runs `-m graders.verifier.main`
    with its cwd at the project root it was started from, and jails bind their runner from there)."""
    port = free_port()
    # the whole bank from one client: no rate limit, no API key (the classroom demo mode)
    env = {
        **os.environ,
        "REMAT_JUDGE_WAIT_TIMEOUT_S": str(SERVER_WAIT_TIMEOUT_S),
        "REMAT_JUDGE_RATE_LIMIT": "",
        "REMAT_JUDGE_ALLOW_ANONYMOUS_API": "true",
    }
    if source_dir is not None:
        env["PYTHONPATH"] = str(source_dir)
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "remat-judge"),
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--data-dir",
                str(data_dir),
                "--workers",
                str(workers),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            cwd=str(source_dir or REPO),
            preexec_fn=cgroup.join if cgroup is not None else None,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited:\n" + log_path.read_text(errors="replace")[-3000:])
        try:
            if httpx.get(f"{url}/api/v1/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    stop_server(proc)
    raise RuntimeError("server did not start:\n" + log_path.read_text(errors="replace")[-3000:])


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def log_problems(log_text: str) -> list[str]:
    """Distinct WARNING/ERROR lines of the server log (timestamps cut, ids masked), with counts."""
    counts: Counter[str] = Counter()
    for line in log_text.splitlines():
        m = re.match(r"\S+ \S+ (WARNING|ERROR|CRITICAL) (.*)", line)
        if m:
            counts[re.sub(r"[0-9a-f]{12,}", "…", f"{m.group(1)} {m.group(2)}")[:160]] += 1
        elif line.startswith("Traceback"):
            counts["Traceback"] += 1
    return [f"{n:4d}x {text}" for text, n in counts.most_common()]


# ----------------------------------------------------------------------------------------------
# Posting


@dataclass
class Outcome:
    file: str
    expected: str
    got: str  # the verdict, or "ERROR: ..." when none came
    latency_s: float
    timing_ms: dict[str, float] = field(default_factory=dict)


WAIT = {"mode": True}  # hold each POST open with wait=true (--poll: poll GET instead)


def submit(client: httpx.Client, program: Program, start: threading.Event, timeout_s: float) -> Outcome:
    """Posts once `start` is set, holds the POST open with wait=true and polls GET every 0.5 s only
    on a 202 (or, with --poll, polls from the start), and times POST to verdict."""
    start.wait()
    t0 = time.perf_counter()
    try:
        params = {"wait": "true"} if WAIT["mode"] else {}
        r = client.post(
            "/api/v1/submissions", params=params, json={"problem": program.problem, "source": program.source}
        )
        if r.status_code not in (200, 202):
            raise RuntimeError(f"HTTP {r.status_code}: {r.text[:200]}")
        body = r.json()
        while body.get("status") not in ("done", "failed"):
            if time.perf_counter() - t0 > timeout_s:
                raise RuntimeError(f"no verdict after {timeout_s:.0f} s")
            time.sleep(0.5)
            body = client.get(f"/api/v1/submissions/{body['id']}").json()
        return Outcome(
            program.file,
            program.expected,
            body.get("verdict") or "ERROR: no verdict",
            time.perf_counter() - t0,
            body.get("timing_ms") or {},
        )
    except Exception as exc:  # noqa: BLE001 - reported as a mismatch, never fatal
        return Outcome(
            program.file, program.expected, f"ERROR: {type(exc).__name__}: {exc}"[:200], time.perf_counter() - t0
        )


def http_client(url: str, connections: int) -> httpx.Client:
    return httpx.Client(
        base_url=url,
        timeout=httpx.Timeout(30.0, read=SERVER_WAIT_TIMEOUT_S + 60.0, pool=None),
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
    )


def warm_up(url: str, slugs: list[str], workers: int, timeout_s: float) -> None:
    """Posts each problem's reference once (in parallel, `workers` at a time) and waits for each."""
    programs = [
        Program(s, f"{s}/reference.py", (PROBLEMS / s / "reference.py").read_text(encoding="utf-8"), "ACCEPTED")
        for s in slugs
    ]
    start = threading.Event()
    start.set()
    t0 = time.perf_counter()
    with http_client(url, workers + 2) as client, ThreadPoolExecutor(max_workers=workers) as pool:
        for out in pool.map(lambda p: submit(client, p, start, timeout_s), programs):
            note = "" if out.got == "ACCEPTED" else "   <- the reference should be ACCEPTED"
            print(f"  warm-up {out.file:48s} {out.got:22s} {out.latency_s:6.1f} s{note}", flush=True)
    print(f"  warm-up done in {time.perf_counter() - t0:.1f} s")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


@dataclass
class BurstResult:
    label: str
    programs: int
    wall_s: float
    verdicts_per_s: float
    cpu_s_per_verdict: float | None
    cpu_s_total: float | None
    server_process_cpu_s: float | None
    host_busy_cpu_s: float
    p50_s: float
    p95_s: float
    max_s: float
    verdicts_by_quarter: list[int]  # verdicts arriving in each quarter of the wall time
    outside_judge_p50_s: float | None  # client latency less the verdict's queue + total time
    outside_judge_max_s: float | None
    verdicts: dict[str, int]
    phase_medians_ms: dict[str, float]
    mismatches: list[dict[str, str]]
    outcomes: list[dict]  # per program: file, expected, got, latency_s, timing_ms
    memory_groups: dict[str, dict[str, int]]
    children_pss_peak_mb: float | None
    children_rss_peak_mb: float | None
    children_pss_mb_per_worker: float | None
    templates: int
    template_groups: dict[str, int]  # how many template processes (pids) of each group were seen
    templates_rss_peak_mb: float
    templates_pss_peak_mb: float
    templates_pss_mb_per_worker: float
    cgroup_memory_peak_mb: float | None
    sampler_samples: int
    sampler_pss_samples: int
    pss_unreadable: bool
    sampler_cpu_s: float


def run_burst(
    label: str,
    url: str,
    programs: list[Program],
    *,
    server_pid: int | None,
    cgroup: BenchCgroup | None,
    workers: int,
    timeout_s: float,
) -> BurstResult:
    """Posts every program at once and measures until the last verdict."""
    start = threading.Event()
    if cgroup is not None:
        cgroup.reset_memory_peak()
    results: list[Outcome | None] = [None] * len(programs)
    sampler = MemorySampler(server_pid)
    with http_client(url, len(programs) + 4) as client:

        def post(i: int, program: Program) -> None:
            results[i] = submit(client, program, start, timeout_s)

        # daemon threads, one per program: on Ctrl-C nothing waits for them, and main() stops the server
        threads = [threading.Thread(target=post, args=(i, p), daemon=True) for i, p in enumerate(programs)]
        for t in threads:
            t.start()
        time.sleep(0.5)  # let every thread reach start.wait()
        try:
            sampler.start()
            cpu0 = cgroup.cpu_s() if cgroup is not None else None
            server_cpu0 = process_cpu_s(server_pid) if server_pid is not None else None
            host0 = host_busy_cpu_s()
            t0 = time.perf_counter()
            start.set()
            for t in threads:
                t.join()
            wall_s = time.perf_counter() - t0
            host1 = host_busy_cpu_s()
            cpu1 = cgroup.cpu_s() if cgroup is not None else None
            server_cpu1 = process_cpu_s(server_pid) if server_pid is not None else None
        finally:
            sampler.stop()
    outcomes = [o for o in results if o is not None]
    n = len(outcomes)
    cpu_total = cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None
    latencies = [o.latency_s for o in outcomes]
    phases = {}
    for key in ("queue", "sandbox", "verify", "total"):
        values = [o.timing_ms[key] for o in outcomes if key in o.timing_ms]
        if values:
            phases[key] = round(statistics.median(values), 1)
    have_samples = sampler.samples > 0
    children_pss = sampler.children_pss_peak / MB if have_samples else None
    memory_peak = cgroup.memory_peak_bytes() if cgroup is not None else None
    template_rss, template_pss = sampler.template_peaks()
    quarters = Counter(min(3, int(x / wall_s * 4)) for x in latencies)
    outside = [
        o.latency_s - (o.timing_ms["queue"] + o.timing_ms["total"]) / 1000
        for o in outcomes
        if "queue" in o.timing_ms and "total" in o.timing_ms
    ]
    return BurstResult(
        label=label,
        programs=n,
        wall_s=round(wall_s, 2),
        verdicts_per_s=round(n / wall_s, 3),
        cpu_s_per_verdict=round(cpu_total / n, 3) if cpu_total is not None else None,
        cpu_s_total=round(cpu_total, 2) if cpu_total is not None else None,
        server_process_cpu_s=(
            round(server_cpu1 - server_cpu0, 2) if server_cpu0 is not None and server_cpu1 is not None else None
        ),
        host_busy_cpu_s=round(host1 - host0, 2),
        p50_s=round(percentile(latencies, 50), 2),
        p95_s=round(percentile(latencies, 95), 2),
        max_s=round(max(latencies), 2),
        verdicts_by_quarter=[quarters.get(q, 0) for q in range(4)],
        outside_judge_p50_s=round(percentile(outside, 50), 2) if outside else None,
        outside_judge_max_s=round(max(outside), 2) if outside else None,
        verdicts=dict(Counter(o.got if not o.got.startswith("ERROR") else "ERROR" for o in outcomes).most_common()),
        phase_medians_ms=phases,
        mismatches=[{"file": o.file, "expected": o.expected, "got": o.got} for o in outcomes if o.got != o.expected],
        outcomes=[{**asdict(o), "latency_s": round(o.latency_s, 2)} for o in outcomes],
        memory_groups={name: asdict(g) for name, g in sorted(sampler.groups.items(), key=lambda kv: -kv[1].rss_sum)},
        children_pss_peak_mb=round(children_pss, 1) if children_pss is not None else None,
        children_rss_peak_mb=round(sampler.children_rss_peak / MB, 1) if have_samples else None,
        children_pss_mb_per_worker=round(children_pss / workers, 1) if children_pss is not None else None,
        templates=len(sampler.templates),
        template_groups=dict(Counter(sampler.templates.values())),
        templates_rss_peak_mb=round(template_rss / MB, 1),
        templates_pss_peak_mb=round(template_pss / MB, 1),
        templates_pss_mb_per_worker=round(template_pss / MB / workers, 1),
        cgroup_memory_peak_mb=round(memory_peak / MB, 1) if memory_peak is not None else None,
        sampler_samples=sampler.samples,
        sampler_pss_samples=sampler.pss_samples,
        pss_unreadable=sampler.pss_unreadable,
        sampler_cpu_s=round(sampler.cpu_s, 2),
    )


# ----------------------------------------------------------------------------------------------
# Report


def mark(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def print_burst(b: BurstResult, cpu_note: str) -> None:
    print(f"\n== {b.label}")
    cpu = (
        f"{b.cpu_s_per_verdict:.2f} CPU s/verdict (target <= {TARGET_CPU_S_PER_VERDICT}: "
        f"{mark(b.cpu_s_per_verdict <= TARGET_CPU_S_PER_VERDICT)})"
        if b.cpu_s_per_verdict is not None
        else f"CPU: {cpu_note}"
    )
    print(
        f"{b.programs} programs  wall {b.wall_s:.1f} s  {b.verdicts_per_s:.2f} verdicts/s "
        f"(target >= {TARGET_VERDICTS_PER_S}: {mark(b.verdicts_per_s >= TARGET_VERDICTS_PER_S)})  {cpu}  "
        f"p50 {b.p50_s:.1f} s  p95 {b.p95_s:.1f} s  (max {b.max_s:.1f} s)"
    )
    print(f"  verdicts in each quarter of the wall time: {', '.join(map(str, b.verdicts_by_quarter))}")
    if b.outside_judge_p50_s is not None:
        print(
            f"  latency outside the judge (client latency less the verdict's queue + total): p50 "
            f"{b.outside_judge_p50_s:.1f} s, max {b.outside_judge_max_s:.1f} s (the HTTP layer holding the "
            f"request before storing it, or the verdict after it)"
        )
    if b.cpu_s_total is not None:
        server = b.server_process_cpu_s
        split = (
            f" = server process {server:.1f} s + its children {b.cpu_s_total - server:.1f} s"
            if server is not None
            else ""
        )
        print(f"  CPU of the server's cgroup over the burst: {b.cpu_s_total:.1f} s{split}")
    if b.cpu_s_total is None:
        print(
            f"  host: {os.cpu_count()} cores, busy {b.host_busy_cpu_s:.1f} CPU s over the burst (the server's "
            f"share not measured)"
        )
    else:
        other = b.host_busy_cpu_s - b.cpu_s_total
        print(
            f"  host: {os.cpu_count()} cores, busy {b.host_busy_cpu_s:.1f} CPU s over the burst, of which "
            f"{other:.1f} s ({other / b.wall_s:.2f} cores on average) outside the server's cgroup: this "
            f"benchmark's client and sampler, and anything else running (which slows the burst)"
        )
    print("  verdicts: " + ", ".join(f"{v} {n}" for v, n in b.verdicts.items()))
    if b.phase_medians_ms:
        print("  judge phases, median ms: " + ", ".join(f"{k} {v:.0f}" for k, v in b.phase_medians_ms.items()))
    print(f"  verdicts differing from `# expect:`: {len(b.mismatches)}")
    for m in b.mismatches:
        print(f"    {m['file']:55s} expected {m['expected']:22s} got {m['got']}")
    if not b.memory_groups:
        print("  memory: not sampled (no server pid)")
        return
    unreadable = "; some PSS unreadable, RSS counted instead" if b.pss_unreadable else ""
    print(
        f"  memory, peaks over {b.sampler_samples} samples of the server's process tree (PSS over "
        f"{b.sampler_pss_samples}{unreadable}; sampler CPU {b.sampler_cpu_s:.1f} s):"
    )
    print(f"    {'procs':>5} {'RSS sum':>9} {'PSS sum':>9} {'RSS max':>9}  group (command line)")
    for name, g in b.memory_groups.items():
        pss = f"{g['pss_sum'] / MB:7.0f}MB" if g["pss_sum"] else f"{'-':>9}"
        print(f"    {g['processes']:5d} {g['rss_sum'] / MB:7.0f}MB {pss} {g['rss_max'] / MB:7.0f}MB  {name}")
    target = TARGET_TEMPLATE_MB_PER_WORKER
    if b.templates:
        per_worker = b.templates_pss_mb_per_worker
        print(
            f"  templates ({b.templates} processes seen forking children without exec): peak PSS "
            f"{b.templates_pss_peak_mb:.0f} MB (RSS {b.templates_rss_peak_mb:.0f} MB) = {per_worker:.0f} MB per "
            f"worker (target <= {target:.0f} MB per worker: {mark(per_worker <= target)})"
        )
        for name, count in b.template_groups.items():
            print(f"    {count} x {name}")
    else:
        print("  templates: none seen (no process forked children without exec)")
    if b.children_pss_mb_per_worker is not None:
        per_worker = b.children_pss_mb_per_worker
        versus = (
            ""
            if b.templates
            else (
                f" (no templates, so against their target <= {target:.0f} MB per worker: {mark(per_worker <= target)})"
            )
        )
        print(
            f"  everything below the server: peak PSS {b.children_pss_peak_mb:.0f} MB (RSS "
            f"{b.children_rss_peak_mb:.0f} MB) = {per_worker:.0f} MB per worker{versus}"
        )
    if b.cgroup_memory_peak_mb is not None:
        print(f"  cgroup memory peak (whole tree, page cache included): {b.cgroup_memory_peak_mb:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=2,
        help="the server's --workers (default 2: the cores here); with --url only used for memory per worker",
    )
    parser.add_argument("--problems", default=None, help="comma-separated slugs (default: the whole bank)")
    parser.add_argument("--url", default=None, help="use a running server instead of starting one")
    parser.add_argument(
        "--cgroup",
        type=Path,
        default=None,
        help="with --url: the server's cgroup directory (cpuacct for v1), to count CPU",
    )
    parser.add_argument("--server-pid", type=int, default=None, help="with --url: the server's pid, to sample memory")
    parser.add_argument("--no-warm-up", action="store_true", help="skip posting each reference first")
    parser.add_argument(
        "--settle-s",
        type=float,
        default=2.0,
        help="pause before each burst (the judge restarts what it pre-starts after a grading)",
    )
    parser.add_argument("--timeout-s", type=float, default=3600.0, help="give up on one submission after this")
    parser.add_argument(
        "--source-dir",
        type=Path,
        default=None,
        help="run the server from this copy of the project (e.g. `git archive HEAD | tar -x -C "
        "DIR`) instead of the working tree, so edits made meanwhile cannot change it mid-run",
    )
    parser.add_argument("--log", type=Path, default=None, help="keep the server's log here (default: discarded)")
    parser.add_argument("--json", action="store_true", help="also print one JSON object at the end")
    parser.add_argument(
        "--poll", action="store_true", help="poll GET every 0.5 s instead of holding each POST open with wait=true"
    )
    args = parser.parse_args()
    WAIT["mode"] = not args.poll

    slugs = sorted(p.name for p in PROBLEMS.iterdir() if (p / "problem.toml").is_file())
    if args.problems:
        wanted = [s.strip() for s in args.problems.split(",") if s.strip()]
        unknown = sorted(set(wanted) - set(slugs))
        if unknown:
            parser.error(f"unknown problems: {', '.join(unknown)}")
        slugs = wanted
    programs, skipped = build_burst(slugs)
    if not programs:
        parser.error("no programs to post")
    print(f"burst: {len(programs)} programs from {len(slugs)} problems ({len(skipped)} files skipped)")
    for note in skipped:
        print(f"  skipped {note}")

    cgroup: BenchCgroup | None = None
    cpu_note = "not measured (no writable cgroup)"
    proc = None
    server_pid = args.server_pid
    results: list[BurstResult] = []
    killed: list[str] = []
    leftover_cgroups = 0
    log_lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="remat-bench-") as tmp:
        try:
            if args.url:
                url = args.url.rstrip("/")
                if args.cgroup is not None:
                    cgroup = BenchCgroup.existing(args.cgroup)
                else:
                    cpu_note = "not measured (--url without --cgroup)"
            else:
                cgroup, why = BenchCgroup.create()
                if cgroup is None:
                    print(f"no writable cgroup ({why}): CPU is not measured")
                else:
                    print(f"server cgroup (v{cgroup.version}): " + ", ".join(str(d) for d in cgroup.dirs.values()))
                log_path = args.log or Path(tmp) / "server.log"
                source_dir = args.source_dir.resolve() if args.source_dir else None
                proc, url = start_server(Path(tmp), log_path, args.workers, cgroup, source_dir)
                server_pid = proc.pid
                print(
                    f"server {url} (pid {server_pid}, {args.workers} workers, code {source_dir or REPO}, "
                    f"data {tmp}, log {log_path})"
                )
            if not args.no_warm_up:
                warm_up(url, slugs, args.workers, args.timeout_s)
            for label in ("burst 1", "burst 2 (the same sources again)"):
                time.sleep(args.settle_s)
                print(f"\n{label}: posting {len(programs)} programs at once …", flush=True)
                result = run_burst(
                    label,
                    url,
                    programs,
                    server_pid=server_pid,
                    cgroup=cgroup,
                    workers=args.workers,
                    timeout_s=args.timeout_s,
                )
                results.append(result)
                print_burst(result, cpu_note)
        finally:
            if proc is not None:
                stop_server(proc)
                log_lines = log_problems(log_path.read_text(errors="replace")) if log_path.exists() else []
            if cgroup is not None:
                killed, leftover_cgroups = cgroup.remove()
    if proc is not None:
        print(
            f"\nafter SIGTERM to the server: {len(killed)} processes still in its cgroup after 10 s (killed), "
            f"{leftover_cgroups} jail cgroups left in it (removed)"
        )
        for line in killed:
            print(f"  killed {line}")
        print(f"server log: {len(log_lines)} distinct warning/error lines")
        for line in log_lines[:15]:
            print(f"  {line}")
    if args.json:
        print(
            json.dumps(
                {
                    "workers": args.workers,
                    "problems": slugs,
                    "programs": len(programs),
                    "skipped": skipped,
                    "cgroup_version": cgroup.version if cgroup is not None else None,
                    "targets": {
                        "verdicts_per_s": TARGET_VERDICTS_PER_S,
                        "cpu_s_per_verdict": TARGET_CPU_S_PER_VERDICT,
                        "template_mb_per_worker": TARGET_TEMPLATE_MB_PER_WORKER,
                    },
                    "bursts": [asdict(r) for r in results],
                    "leftover_processes": killed,
                    "leftover_jail_cgroups": leftover_cgroups,
                    "server_log_problems": log_lines,
                }
            )
        )


if __name__ == "__main__":
    main()
