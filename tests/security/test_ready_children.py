"""Children started ahead of their job (`sandbox/ready.py`): a ready child holds nothing of an
earlier job, and the job running while it waits can neither see nor touch it.

Three real jail jobs through `run_in_jail(..., keep_ready=1)`: A plants everything it can (files in
/tmp and /dev/shm, an environment variable, an attribute on the jax module, a listening abstract
socket, a process left behind) and then SIGKILLs every process it may signal (`kill(-1)`), while
the child that will serve B is already waiting. B, served by that waiting child, reports what it
finds of A. From outside (as root) the waiting child's memory is searched for A's token before B's
source exists, with the child's own job id as the control that the search reads its memory."""

from __future__ import annotations

import json
import os
import secrets
import time

import pytest

from sandbox.jail import JailRequest, jail_ready, run_in_jail
from sandbox.jail_limits import JailLimits
from tests.support import descendants, jail_processes, memory_contains

pytestmark = pytest.mark.jail

CASES = [{"name": "small", "args": [{"kind": "array", "name": "x", "shape": [4], "dtype": "float32"}]}]
TOKEN_A = "planted-by-a-" + secrets.token_hex(8)

A_SOURCE = f"""
import os, signal, socket, sys, time
import jax
TOKEN = {TOKEN_A!r}
for path in ("/tmp/planted-by-a", "/dev/shm/planted-by-a"):
    with open(path, "w") as f:
        f.write(TOKEN)
os.environ["PLANTED_BY_A"] = TOKEN
jax.planted_by_a = TOKEN
listener = socket.socket(socket.AF_UNIX)
listener.bind("\\0planted-by-a")
listener.listen()
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
print("A sees", len(pids), "processes", flush=True)
if os.fork() == 0:  # left behind, holding the socket, then killing everything it may signal
    time.sleep(0.2)
    os.kill(-1, signal.SIGKILL)
    time.sleep(30)
    os._exit(0)
time.sleep(5)  # killed long before: the fork above kills it after 0.2 s

def f(x):
    return (x * x).sum()
"""

B_SOURCE = """
import json, os, socket
import jax
seen = {
    "files": [p for p in ("/tmp/planted-by-a", "/dev/shm/planted-by-a") if os.path.exists(p)],
    "env": "PLANTED_BY_A" in os.environ,
    "module": hasattr(jax, "planted_by_a"),
    "processes": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
}
probe = socket.socket(socket.AF_UNIX)
try:
    probe.connect("\\0planted-by-a")
    seen["socket"] = True
except OSError:
    seen["socket"] = False
print("B sees " + json.dumps(seen), flush=True)

def f(x):
    return (x * x).sum()
"""


def _request(source: str) -> JailRequest:
    return JailRequest(source=source, entry_point="f", cases=CASES, cpu_time_limit_s=10)


def test_a_ready_child_holds_nothing_of_an_earlier_job_and_the_earlier_job_cannot_reach_it() -> None:
    ready = jail_ready()
    limits = JailLimits()
    ready.drain()
    try:
        run_in_jail(_request("def f(x):\n    return x.sum()\n"), limits, keep_ready=1)  # leaves one waiting
        assert ready.settle(60) and ready.waiting() == 1
        hits = ready.hits
        outcome_a = run_in_jail(_request(A_SOURCE), limits, keep_ready=1)
        assert ready.hits == hits + 1, "A was not served by a waiting child"
        assert b"A sees" in outcome_a.stdout, outcome_a.stderr
        assert outcome_a.exit_code == 128 + 9, "A's kill(-1) did not kill A itself: it did not run"
        assert ready.settle(60) and ready.waiting() == 1, "no child waits for B"
        (waiting,) = ready.children()
        assert waiting.waiting(), "the child started while A ran did not survive A's kill(-1)"
        if os.geteuid() == 0:
            pids = descendants(waiting.pid)
            control = waiting.job_id.encode()
            found = [n for pid in pids for n in memory_contains(pid, [TOKEN_A.encode(), control])]
            assert control in found, "the memory search did not read the waiting child's memory"
            assert TOKEN_A.encode() not in found, "a waiting child holds a token of an earlier job"
        outcome_b = run_in_jail(_request(B_SOURCE), limits, keep_ready=1)
        assert ready.hits == hits + 2, "B was not served by the child that waited while A ran"
        assert outcome_b.exit_code == 0, outcome_b.stderr
        line = next(x for x in outcome_b.stdout.decode().splitlines() if x.startswith("B sees "))
        seen = json.loads(line.removeprefix("B sees "))
        assert seen["files"] == [] and not seen["env"] and not seen["module"] and not seen["socket"], seen
        assert len(seen["processes"]) <= 3, seen  # its own namespace: init, the job, nothing of A's
        assert json.loads(outcome_b.bundle)["status"] == "ok"
    finally:
        ready.drain()
    assert jail_processes() == []


def test_a_waiting_child_is_only_used_for_the_same_limits_and_one_that_died_is_not_used() -> None:
    ready = jail_ready()
    ready.drain()
    request = _request("def f(x):\n    return (x * 2).sum()\n")
    try:
        run_in_jail(request, JailLimits(), keep_ready=1)
        assert ready.settle(60) and ready.waiting() == 1
        (first,) = ready.children()
        cgroup_dirs = list(first.cgroup.dirs.values()) if first.cgroup else []
        misses = ready.misses
        other = JailLimits(cpu_time_limit_s=7.0)  # other limits: never served by a child set up for the first
        assert run_in_jail(request, other, keep_ready=1).exit_code == 0
        assert ready.misses == misses + 1
        assert ready.settle(60) and ready.children() == [first], "one miss evicts nothing"
        assert run_in_jail(request, other, keep_ready=1).exit_code == 0  # the same key twice: worth a child
        assert ready.misses == misses + 2
        assert ready.settle(60) and ready.waiting() == 1 and first not in ready.children()
        assert not any(d.exists() for d in cgroup_dirs), "the evicted child's cgroup was not removed"
        (second,) = ready.children()
        second.kill()  # a waiting child that died is never handed a job
        deadline = time.monotonic() + 10
        while second.waiting() and time.monotonic() < deadline:
            time.sleep(0.01)
        outcome = run_in_jail(request, other, keep_ready=1)
        assert outcome.exit_code == 0 and json.loads(outcome.bundle)["status"] == "ok"
        assert ready.misses == misses + 3
        assert ready.settle(60) and ready.waiting() == 1
        hits = ready.hits
        assert run_in_jail(request, other, keep_ready=1, refill_ready=False).exit_code == 0  # a backlog
        assert ready.hits == hits + 1
        assert ready.settle(60) and ready.waiting() == 0, "refill_ready=False started a replacement"
        assert run_in_jail(request, other, keep_ready=0).exit_code == 0
        assert ready.waiting() == 0, "keep_ready=0 keeps nothing waiting"
    finally:
        ready.drain()
    assert jail_processes() == []
