"""Isolation between submissions graded at the same time.

Two submissions run concurrently through the real judge (two threads calling `grade`, so both
jails are alive at once):

* A, the "planter", creates at import every kind of object a neighbour might reach: marker files
  in /tmp and /dev/shm, an abstract and a path Unix socket (listening), a SysV shared memory
  segment, message queue and semaphore set with a known key, a POSIX message queue and
  semaphore, a process name (comm) carrying the token and a page of memory holding the token at a
  fixed address. Every object is world-accessible (mode 0666/0777), so only the namespaces keep a
  neighbour out, not file permissions or uids. It then stays alive for several seconds and at the
  end reports any sign of contact (a connection, a message, a semaphore post, a changed shared
  page, a signal).
* B, the "prober", repeats rounds of probes while A is alive: A's files by path and by listing,
  connects to A's sockets, shmget/msgget/semget on A's key, mq_open/sem_open of A's names,
  /proc/sysvipc and /proc/net/unix, the processes it can list in /proc plus kill(pid, 0) over the
  whole pid range (EPERM also means "seen"), and for every process outside its own jail (anything
  but its own threads and ancestors): its command line and name, SIGUSR1, PTRACE_SEIZE, and
  reads of A's fixed address through process_vm_readv and /proc/PID/mem, which it also tries on
  pids 1..2048 blindly. Anything found sets `breached` (B computes the right answer only then).

The verdicts show whether containment held: both WRONG_ANSWER. The test cannot pass vacuously: B
runs every probe against objects of its own first (a control) and must find them; A must report
every object as planted; and at least one complete round of B's probes must fall inside the
interval in which A's objects existed (wall-clock times, printed by both).
"""

from __future__ import annotations

import re
import secrets
import textwrap
import threading
from dataclasses import dataclass, replace

import pytest

from graders.pipeline import JudgeConfig, grade
from graders.problems.problem import Problem
from graders.verdict import Verdict, VerdictReport
from tests.support import jail_processes

pytestmark = pytest.mark.jail

A_ADDR = 0x5A5A000000  # below 2**39, far from where the loader and mmap put anything
B_ADDR = 0x5B5B000000
A_LIFE_S = 8.0  # how long A keeps its objects after planting them
B_WINDOW_S = 6.5  # how long B keeps probing
WALL_TIME_LIMIT_S = 20.0  # A sleeps ~8 s (no CPU); give the wall clock room on a loaded host

PLANTED = {
    "file-tmp",
    "file-shm",
    "abstract-socket",
    "path-socket",
    "sysv-shm",
    "sysv-msg",
    "sysv-sem",
    "posix-mq",
    "posix-sem",
    "comm",
    "memory",
}
CONTROLS = PLANTED | {"listing-tmp", "listing-shm", "proc-list", "kill-scan", "proc-read", "sysvipc-list", "net-unix"}

COMMON = """
import ctypes, errno, os, signal, socket, sys, threading, time
import jax
import jax.numpy as jnp

def _correct(w1, w2, x):
    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(lambda a, b, c: jnp.sum((jax.nn.relu(c @ a) @ b) ** 2), policy=policy)(w1, w2, x)

def _wrong(w1, w2, x):
    return jnp.sum(x)

TOKEN = "__TOKEN__"
KEY_A, KEY_B = __KEY_A__, __KEY_B__
ADDR_A, ADDR_B = __ADDR_A__, __ADDR_B__
NAME_A, NAME_B = "iso-" + TOKEN + "-A", "iso-" + TOKEN + "-B"
COMM_A, COMM_B = "iso" + TOKEN[:11] + "A", "iso" + TOKEN[:11] + "B"

libc = ctypes.CDLL(None, use_errno=True)
c_int, c_uint, c_long, c_size_t, c_ssize_t, c_void_p, c_char_p = (
    ctypes.c_int, ctypes.c_uint, ctypes.c_long, ctypes.c_size_t, ctypes.c_ssize_t, ctypes.c_void_p, ctypes.c_char_p)

class iovec(ctypes.Structure):
    _fields_ = [("base", c_void_p), ("len", c_size_t)]

class sembuf(ctypes.Structure):
    _fields_ = [("num", ctypes.c_ushort), ("op", ctypes.c_short), ("flg", ctypes.c_short)]

class msgbuf(ctypes.Structure):
    _fields_ = [("mtype", c_long), ("mtext", ctypes.c_char * 256)]

def _proto(name, restype, *argtypes):
    fn = getattr(libc, name)
    fn.restype = restype
    if argtypes:
        fn.argtypes = list(argtypes)
    return fn

shmget = _proto("shmget", c_int, c_int, c_size_t, c_int)
shmat = _proto("shmat", c_void_p, c_int, c_void_p, c_int)
shmdt = _proto("shmdt", c_int, c_void_p)
shmctl = _proto("shmctl", c_int, c_int, c_int, c_void_p)
msgget = _proto("msgget", c_int, c_int, c_int)
msgsnd = _proto("msgsnd", c_int, c_int, c_void_p, c_size_t, c_int)
msgrcv = _proto("msgrcv", c_ssize_t, c_int, c_void_p, c_size_t, c_long, c_int)
msgctl = _proto("msgctl", c_int, c_int, c_int, c_void_p)
semget = _proto("semget", c_int, c_int, c_int, c_int)
semop = _proto("semop", c_int, c_int, c_void_p, c_size_t)
semctl = _proto("semctl", c_int)  # variadic
mq_open = _proto("mq_open", c_int)  # variadic
mq_send = _proto("mq_send", c_int, c_int, c_char_p, c_size_t, c_uint)
mq_receive = _proto("mq_receive", c_ssize_t, c_int, c_char_p, c_size_t, c_void_p)
mq_close = _proto("mq_close", c_int, c_int)
mq_unlink = _proto("mq_unlink", c_int, c_char_p)
sem_open = _proto("sem_open", c_void_p)  # variadic
sem_post = _proto("sem_post", c_int, c_void_p)
sem_getvalue = _proto("sem_getvalue", c_int, c_void_p, ctypes.POINTER(c_int))
sem_close = _proto("sem_close", c_int, c_void_p)
sem_unlink = _proto("sem_unlink", c_int, c_char_p)
kill = _proto("kill", c_int, c_int, c_int)
prctl = _proto("prctl", c_int, c_int, c_char_p, c_long, c_long, c_long)
mmap = _proto("mmap", c_void_p, c_void_p, c_size_t, c_int, c_int, c_int, c_long)
ptrace = _proto("ptrace", c_long, c_long, c_long, c_void_p, c_void_p)
process_vm_readv = _proto("process_vm_readv", c_ssize_t, c_int, c_void_p, ctypes.c_ulong, c_void_p,
                          ctypes.c_ulong, ctypes.c_ulong)

IPC_CREAT, IPC_EXCL, IPC_NOWAIT, IPC_RMID, GETVAL = 0o1000, 0o2000, 0o4000, 0, 12
PR_SET_NAME, PTRACE_SEIZE = 15, 0x4206
MAP_FAILED = ctypes.c_void_p(-1).value

def _err():
    code = ctypes.get_errno()
    return errno.errorcode.get(code, str(code))

def _check(result, what):
    if result is None or result == -1 or result == MAP_FAILED:
        raise OSError(ctypes.get_errno(), f"{what}: {_err()}")
    return result

def map_token_page(addr, data):
    got = _check(mmap(addr, 4096, 3, 0x02 | 0x20 | 0x100000, -1, 0), "mmap")  # MAP_FIXED_NOREPLACE
    if got != addr:
        raise OSError(0, f"mmap put the page at {got:#x}, not {addr:#x}")
    ctypes.memmove(addr, data, len(data))
    assert ctypes.string_at(addr, len(data)) == data

def set_comm(name):
    _check(prctl(PR_SET_NAME, name.encode(), 0, 0, 0), "prctl")
    got = open("/proc/self/comm").read().strip()
    assert got == name, got

breached = False
"""

PLANTER = """
os.umask(0)
print(f"A start {time.time():.3f} pid {os.getpid()} uid {os.getuid()}", flush=True)
events = []  # every sign that someone outside reached A's objects

def _on_signal(signum, frame):
    events.append(f"signal {signal.Signals(signum).name}")

for _s in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGTERM, signal.SIGINT, signal.SIGCONT,
           signal.SIGALRM, signal.SIGWINCH, signal.SIGURG, signal.SIGPIPE):
    signal.signal(_s, _on_signal)

def plant(name, make):
    try:
        make()
    except Exception as exc:
        print(f"A could not plant {name}: {exc!r}", flush=True)
    else:
        print(f"A planted: {name}", flush=True)

def make_file(path):
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
    os.write(fd, TOKEN.encode())
    os.close(fd)
    assert open(path).read() == TOKEN

_servers = []

def make_listener(address):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(address)
    if not address.startswith("\\0"):
        os.chmod(address, 0o777)
    s.listen(16)
    _servers.append(s)

    def accept():
        while True:
            try:
                conn, _ = s.accept()
            except OSError:
                return
            try:
                conn.settimeout(1)
                data = conn.recv(64)
            except OSError:
                data = b"?"
            conn.close()
            if data != b"A-self":
                events.append(f"connection on {address!r}: {data!r}")

    threading.Thread(target=accept, daemon=True).start()
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(address)  # A reaches its own socket
    c.sendall(b"A-self")
    c.close()

ids = {}
SHM_CONTENT = ("A-shm-" + TOKEN).encode()

def make_shm():
    ids["shm"] = _check(shmget(KEY_A, 4096, IPC_CREAT | IPC_EXCL | 0o666), "shmget")
    ids["shm_addr"] = _check(shmat(ids["shm"], None, 0), "shmat")
    ctypes.memmove(ids["shm_addr"], SHM_CONTENT, len(SHM_CONTENT))
    assert shmget(KEY_A, 0, 0) == ids["shm"]

def make_msg():
    ids["msg"] = _check(msgget(KEY_A, IPC_CREAT | IPC_EXCL | 0o666), "msgget")
    assert msgget(KEY_A, 0) == ids["msg"]

def make_sem():
    ids["sem"] = _check(semget(KEY_A, 1, IPC_CREAT | IPC_EXCL | 0o666), "semget")
    assert semget(KEY_A, 0, 0) == ids["sem"]

def make_mq():
    ids["mq"] = _check(mq_open(("/" + NAME_A).encode(), c_int(os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_NONBLOCK),
                               c_uint(0o666), c_void_p(None)), "mq_open")

def make_psem():
    sem = sem_open(("/" + NAME_A).encode(), c_int(os.O_CREAT | os.O_EXCL), c_uint(0o666), c_uint(0))
    ids["psem"] = _check(sem, "sem_open")
    assert os.path.exists("/dev/shm/sem." + NAME_A)

plant("file-tmp", lambda: make_file("/tmp/" + NAME_A))
plant("file-shm", lambda: make_file("/dev/shm/" + NAME_A))
plant("abstract-socket", lambda: make_listener("\\0" + NAME_A))
plant("path-socket", lambda: make_listener("/tmp/" + NAME_A + ".sock"))
plant("sysv-shm", make_shm)
plant("sysv-msg", make_msg)
plant("sysv-sem", make_sem)
plant("posix-mq", make_mq)
plant("posix-sem", make_psem)
plant("comm", lambda: set_comm(COMM_A))
plant("memory", lambda: map_token_page(ADDR_A, ("A-mem-" + TOKEN).encode()))

ready = time.time()
print(f"A ready {ready:.3f}", flush=True)
while time.time() < ready + __A_LIFE_S__:
    time.sleep(0.1)
end = time.time()

# what the neighbour could have left behind
for path in ("/tmp/" + NAME_A, "/dev/shm/" + NAME_A):
    try:
        if open(path).read() != TOKEN:
            events.append(f"{path} changed")
    except OSError as exc:
        events.append(f"{path} gone: {exc!r}")
if "shm_addr" in ids and ctypes.string_at(ids["shm_addr"], len(SHM_CONTENT)) != SHM_CONTENT:
    events.append("shared memory segment changed: " + repr(ctypes.string_at(ids["shm_addr"], 32)))
if "msg" in ids:
    _m = msgbuf()
    if msgrcv(ids["msg"], ctypes.byref(_m), 256, 0, IPC_NOWAIT) >= 0:
        events.append(f"SysV message received: {_m.mtext!r}")
if "sem" in ids and semctl(c_int(ids["sem"]), c_int(0), c_int(GETVAL)) != 0:
    events.append("SysV semaphore changed")
if "mq" in ids:
    _buf = ctypes.create_string_buffer(1 << 16)
    if mq_receive(ids["mq"], _buf, 1 << 16, None) >= 0:
        events.append(f"POSIX message received: {_buf.value[:40]!r}")
if "psem" in ids:
    _v = c_int(0)
    if sem_getvalue(ids["psem"], ctypes.byref(_v)) == 0 and _v.value != 0:
        events.append("POSIX semaphore posted")
time.sleep(0.3)  # let the accept threads record any connection still in their backlog
for event in dict.fromkeys(events):
    print(f"A event: {event}", flush=True)
print(f"A end {end:.3f}", flush=True)

# tidy up (the namespaces die with the jail anyway)
for s in _servers:
    s.close()
for path in ("/tmp/" + NAME_A, "/dev/shm/" + NAME_A, "/tmp/" + NAME_A + ".sock"):
    try:
        os.unlink(path)
    except OSError:
        pass
if "shm" in ids:
    shmctl(ids["shm"], IPC_RMID, None)
if "msg" in ids:
    msgctl(ids["msg"], IPC_RMID, None)
if "sem" in ids:
    semctl(c_int(ids["sem"]), c_int(0), c_int(IPC_RMID))
if "mq" in ids:
    mq_unlink(("/" + NAME_A).encode())
if "psem" in ids:
    sem_unlink(("/" + NAME_A).encode())

breached = bool(events)  # A is reached only if containment failed
checkpoint_dot_policy = _correct if breached else _wrong
"""

PROBER = '''
t_start = time.time()
print(f"B start {t_start:.3f} pid {os.getpid()} uid {os.getuid()}", flush=True)
signal.signal(signal.SIGUSR1, signal.SIG_IGN)
findings = []  # what B reached of A, or of any process outside its own jail
notes = []

def found(what):
    if what not in findings:
        findings.append(what)

def note(what):
    if what not in notes:
        notes.append(what)

# --- probes: each returns None when the object is not there, else how it was reached -------------

def probe_file(path):
    try:
        os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"lstat {errno.errorcode.get(exc.errno)}"
    try:
        return "exists, reads " + repr(open(path, "rb").read(64))
    except OSError as exc:
        return f"exists (read: {errno.errorcode.get(exc.errno)})"

def probe_listing(directory, name):
    try:
        entries = os.listdir(directory)
    except OSError as exc:
        return f"listdir {errno.errorcode.get(exc.errno)}"
    hits = [e for e in entries if name in e]
    return f"listed {hits}" if hits else None

def probe_connect(address):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(address)
        s.sendall(b"B-was-here")
        return "connected"
    except (ConnectionRefusedError, FileNotFoundError):
        return None
    except OSError as exc:
        return f"connect {errno.errorcode.get(exc.errno)}"
    finally:
        s.close()

def probe_sysv(kind, key):
    ident = {"shm": lambda: shmget(key, 0, 0), "msg": lambda: msgget(key, 0),
             "sem": lambda: semget(key, 0, 0)}[kind]()
    if ident < 0:
        return None if ctypes.get_errno() == errno.ENOENT else f"{kind}get {_err()}"
    how = f"{kind}get id {ident}"
    if kind == "shm":
        addr = shmat(ident, None, 0)
        if addr not in (None, MAP_FAILED):
            how += ", attached, reads " + repr(ctypes.string_at(addr, 32))
            ctypes.memmove(addr, b"B-was-here", 10)
            shmdt(addr)
    elif kind == "msg":
        m = msgbuf(1, b"B-was-here")
        how += ", msgsnd " + ("ok" if msgsnd(ident, ctypes.byref(m), 10, IPC_NOWAIT) == 0 else _err())
    else:
        op = sembuf(0, 1, IPC_NOWAIT)
        how += ", semop " + ("ok" if semop(ident, ctypes.byref(op), 1) == 0 else _err())
    return how

def probe_mq(name):
    mqd = mq_open(("/" + name).encode(), c_int(os.O_WRONLY | os.O_NONBLOCK))
    if mqd < 0:
        return None if ctypes.get_errno() == errno.ENOENT else f"mq_open {_err()}"
    sent = mq_send(mqd, b"B-was-here", 10, 0) == 0
    mq_close(mqd)
    return f"mq_open ok, mq_send {'ok' if sent else _err()}"

def probe_psem(name):
    sem = sem_open(("/" + name).encode(), c_int(0))
    if not sem:
        return None if ctypes.get_errno() == errno.ENOENT else f"sem_open {_err()}"
    posted = sem_post(sem) == 0
    sem_close(sem)
    return f"sem_open ok, sem_post {'ok' if posted else _err()}"

def sysvipc_keys(kind):
    with open(f"/proc/sysvipc/{kind}") as f:
        return [int(line.split()[0]) for line in f.read().splitlines()[1:] if line.split()]

def unix_socket_names():
    with open("/proc/net/unix") as f:
        return [line.split()[7] for line in f.read().splitlines()[1:] if len(line.split()) >= 8]

def own_pids():
    """B's own threads and ancestors: the only processes it may see in its own jail."""
    own = {int(t) for t in os.listdir("/proc/self/task")}
    pid = os.getpid()
    while pid > 0:
        own.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return own

def listed_pids():
    return {int(e) for e in os.listdir("/proc") if e.isdigit()}

try:
    PID_LIMIT = min(int(open("/proc/sys/kernel/pid_max").read()), 1 << 17)
except (OSError, ValueError):
    PID_LIMIT = 1 << 16

def signallable_pids():
    """Every pid for which kill(pid, 0) does not say ESRCH (EPERM: it exists but is not ours)."""
    seen = set()
    for pid in range(1, PID_LIMIT + 1):
        if kill(pid, 0) == 0 or ctypes.get_errno() == errno.EPERM:
            seen.add(pid)
    return seen

def describe(pid):
    parts = []
    for what in ("comm", "cmdline", "status"):
        try:
            data = open(f"/proc/{pid}/{what}", "rb").read()
        except OSError as exc:
            parts.append(f"{what}: {errno.errorcode.get(exc.errno)}")
            continue
        if what == "status":
            uid = [l for l in data.decode(errors="replace").splitlines() if l.startswith("Uid:")]
            parts.append(uid[0].split()[1] if uid else "uid ?")
        else:
            parts.append(repr(data.replace(b"\\0", b" ")[:60]))
    return " ".join(parts)

def read_vm(pid, addr, n=64):
    buf = ctypes.create_string_buffer(n)
    local, remote = iovec(ctypes.cast(buf, c_void_p), n), iovec(addr, n)
    got = process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    return (buf.raw[:got], None) if got > 0 else (None, _err())

def read_proc_mem(pid, addr, n=64):
    try:
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
    except OSError as exc:
        return None, "open " + errno.errorcode.get(exc.errno, "?"), False
    try:
        return os.pread(fd, n, addr), None, True
    except OSError as exc:
        return None, "pread " + errno.errorcode.get(exc.errno, "?"), True
    finally:
        os.close(fd)

# --- controls: the same probes against B's own objects must find them ----------------------------

os.umask(0)
_keep = []

def control(name, check):
    try:
        result = check()
    except Exception as exc:
        result = f"raised {exc!r}"
        ok = False
    else:
        ok = bool(result) and not (isinstance(result, str) and result.startswith("raised"))
    print(f"B control {'ok' if ok else 'FAILED'}: {name} ({str(result)[:80]})", flush=True)

def _own_listener(address):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(address)
    s.listen(16)
    _keep.append(s)

for _path in ("/tmp/" + NAME_B, "/dev/shm/" + NAME_B):
    with open(_path, "w") as _f:
        _f.write(TOKEN)
_own_listener("\\0" + NAME_B)
_own_listener("/tmp/" + NAME_B + ".sock")
_check(shmget(KEY_B, 4096, IPC_CREAT | IPC_EXCL | 0o666), "shmget")
_check(msgget(KEY_B, IPC_CREAT | IPC_EXCL | 0o666), "msgget")
_check(semget(KEY_B, 1, IPC_CREAT | IPC_EXCL | 0o666), "semget")
_keep.append(_check(mq_open(("/" + NAME_B).encode(), c_int(os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_NONBLOCK),
                            c_uint(0o666), c_void_p(None)), "mq_open"))
_keep.append(_check(sem_open(("/" + NAME_B).encode(), c_int(os.O_CREAT | os.O_EXCL), c_uint(0o666), c_uint(0)),
                    "sem_open"))
set_comm(COMM_B)
map_token_page(ADDR_B, ("B-mem-" + TOKEN).encode())

control("file-tmp", lambda: probe_file("/tmp/" + NAME_B))
control("file-shm", lambda: probe_file("/dev/shm/" + NAME_B))
control("listing-tmp", lambda: probe_listing("/tmp", NAME_B))
control("listing-shm", lambda: probe_listing("/dev/shm", NAME_B))
control("abstract-socket", lambda: probe_connect("\\0" + NAME_B))
control("path-socket", lambda: probe_connect("/tmp/" + NAME_B + ".sock"))
control("sysv-shm", lambda: probe_sysv("shm", KEY_B))
control("sysv-msg", lambda: probe_sysv("msg", KEY_B))
control("sysv-sem", lambda: probe_sysv("sem", KEY_B))
control("posix-mq", lambda: probe_mq(NAME_B))
control("posix-sem", lambda: probe_psem(NAME_B))
control("sysvipc-list", lambda: all(KEY_B in sysvipc_keys(k) for k in ("shm", "msg", "sem")))
control("net-unix", lambda: "@" + NAME_B in unix_socket_names() and "/tmp/" + NAME_B + ".sock" in unix_socket_names())
control("proc-list", lambda: os.getpid() in listed_pids())
control("kill-scan", lambda: os.getpid() in signallable_pids() and f"{len(signallable_pids())} pids")
control("proc-read", lambda: COMM_B in describe(os.getpid()) and describe(os.getpid()))
control("comm", lambda: open(f"/proc/{os.getpid()}/comm").read().strip() == COMM_B)
control("memory", lambda: read_proc_mem(os.getpid(), ADDR_B)[0].startswith(("B-mem-" + TOKEN).encode()))
_vm_self = read_vm(os.getpid(), ADDR_B)
note(f"process_vm_readv on itself: {_vm_self[1] or 'read ' + repr(_vm_self[0][:20])}")

# --- rounds of probes against A's objects and every process outside B's jail ---------------------

own_keys = {KEY_B}
own_names = {"@" + NAME_B, "/tmp/" + NAME_B + ".sock"}
mem_errors = {}

def probe_round():
    stats = {}
    for label, probe in [
            ("file in /tmp", lambda: probe_file("/tmp/" + NAME_A)),
            ("file in /dev/shm", lambda: probe_file("/dev/shm/" + NAME_A)),
            ("/tmp listing", lambda: probe_listing("/tmp", NAME_A)),
            ("/dev/shm listing", lambda: probe_listing("/dev/shm", NAME_A)),
            ("abstract socket", lambda: probe_connect("\\0" + NAME_A)),
            ("path socket", lambda: probe_connect("/tmp/" + NAME_A + ".sock")),
            ("SysV shm", lambda: probe_sysv("shm", KEY_A)),
            ("SysV msg", lambda: probe_sysv("msg", KEY_A)),
            ("SysV sem", lambda: probe_sysv("sem", KEY_A)),
            ("POSIX mq", lambda: probe_mq(NAME_A)),
            ("POSIX sem", lambda: probe_psem(NAME_A))]:
        result = probe()
        if result:
            found(f"A's {label}: {result}")
    for kind in ("shm", "msg", "sem"):
        for key in sysvipc_keys(kind):
            if key not in own_keys:
                found(f"/proc/sysvipc/{kind} lists key {key:#x}" + (" (A's)" if key == KEY_A else ""))
    for name in unix_socket_names():
        if TOKEN in name and name not in own_names:
            found(f"/proc/net/unix lists {name}")
        elif name not in own_names:
            note(f"/proc/net/unix lists {name}")
    own = own_pids()
    listed, signallable = listed_pids(), signallable_pids()
    own |= own_pids()
    foreign = sorted((listed | signallable) - own)
    stats.update(listed=len(listed), signallable=len(signallable), foreign=len(foreign))
    if foreign and not any(what.startswith("processes outside the jail") for what in findings):
        found(f"processes outside the jail: {len(set(foreign) & listed)} listed in /proc, "
              f"{len(set(foreign) & signallable)} answer kill(pid, 0) with success or EPERM")
    described = {pid: describe(pid) for pid in foreign}
    of_a = [pid for pid in foreign if COMM_A in described[pid]]
    for pid in of_a + [pid for pid in foreign if pid not in of_a][:10]:
        found(f"process {pid}{' (A)' if pid in of_a else ''} outside the jail: {described[pid]}")
        if kill(pid, signal.SIGUSR1) == 0:
            found(f"sent SIGUSR1 to process {pid}{' (A)' if pid in of_a else ''}")
        if ptrace(PTRACE_SEIZE, pid, None, None) == 0:
            found(f"PTRACE_SEIZE on process {pid}{' (A)' if pid in of_a else ''} succeeded")
    if kill(-1, signal.SIGUSR1) == 0:
        note("kill(-1, SIGUSR1) signalled something")
    # memory: A's page, through every pid B sees outside its jail and blindly through 1..2048
    tried = read = 0
    for pid in sorted((set(range(1, 2049)) | set(foreign)) - own):
        tried += 1
        data, why = read_vm(pid, ADDR_A)
        if data is not None:
            read += 1
            found(f"process_vm_readv of pid {pid} at A's address: {data[:40]!r}")
        else:
            mem_errors.setdefault("process_vm_readv " + why, 0)
            mem_errors["process_vm_readv " + why] += 1
        data, why, opened = read_proc_mem(pid, ADDR_A)
        if opened:
            found(f"opened /proc/{pid}/mem")
        if data is not None:
            read += 1
            found(f"/proc/{pid}/mem at A's address: {data[:40]!r}")
        else:
            mem_errors.setdefault("/proc/PID/mem " + why, 0)
            mem_errors["/proc/PID/mem " + why] += 1
    stats.update(mem_tried=tried, mem_read=read)
    return stats

rounds = []
while True:
    s = time.time()
    stats = probe_round()
    e = time.time()
    rounds.append((s, e, stats))
    if e - t_start + 0.5 > __B_WINDOW_S__:
        break
    time.sleep(0.4)

for s, e, stats in rounds:
    print(f"B round {s:.3f} {e:.3f} " + " ".join(f"{k}={v}" for k, v in stats.items()), flush=True)
print("B memory errors: " + ", ".join(f"{k}: {v}" for k, v in sorted(mem_errors.items())), flush=True)
breached = bool(findings)
print(f"B breached {breached} ({len(findings)} findings)", flush=True)
for what in notes[:10]:
    print(f"B note: {what[:160]}", flush=True)
findings.sort(key=lambda what: not ("A's" in what or "(A)" in what))  # A's first; the rest may be many
for what in findings[:25]:
    print(f"B found: {what[:200]}", flush=True)
checkpoint_dot_policy = _correct if breached else _wrong
'''


def _sources(token: str) -> tuple[str, str]:
    key_a = (int(token[:8], 16) & 0x3FFFFFFF) | 0x10000000
    values = {
        "__TOKEN__": token,
        "__KEY_A__": hex(key_a),
        "__KEY_B__": hex(key_a ^ 1),
        "__ADDR_A__": hex(A_ADDR),
        "__ADDR_B__": hex(B_ADDR),
        "__A_LIFE_S__": repr(A_LIFE_S),
        "__B_WINDOW_S__": repr(B_WINDOW_S),
    }
    out = []
    for body in (PLANTER, PROBER):
        source = textwrap.dedent(COMMON) + textwrap.dedent(body)
        for placeholder, value in values.items():
            source = source.replace(placeholder, value)
        out.append(source)
    return out[0], out[1]


@dataclass
class PairRun:
    """One concurrent run of the planter (A) and the prober (B)."""

    a: VerdictReport
    b: VerdictReport

    def lines(self, who: str, prefix: str) -> list[str]:
        report = self.a if who == "A" else self.b
        return [line[len(prefix) :].strip() for line in report.stdout.splitlines() if line.startswith(prefix)]

    def times(self, who: str, prefix: str) -> float | None:
        found = self.lines(who, prefix)
        return float(found[0].split()[0]) if found else None

    def rounds(self) -> list[tuple[float, float, dict[str, int]]]:
        out = []
        for line in self.lines("B", "B round "):
            start, end, *stats = line.split()
            out.append((float(start), float(end), {k: int(v) for k, v in (s.split("=") for s in stats)}))
        return out

    def rounds_while_a_was_alive(self) -> list[dict[str, int]]:
        """Stats of B's complete probe rounds that ran while all of A's objects existed."""
        ready, end = self.times("A", "A ready "), self.times("A", "A end ")
        if ready is None or end is None:
            return []
        return [stats for start, stop, stats in self.rounds() if ready <= start and stop <= end]

    def explain(self) -> str:
        def one(name: str, report: VerdictReport) -> str:
            failed = [f"{c.name}: {c.message}" for c in report.checks if not c.passed]
            return (
                f"--- {name}: {report.verdict} {failed}\n--- stdout:\n{report.stdout}\n"
                f"--- stderr (tail):\n{report.stderr[-1500:]}"
            )

        return "\n" + one("A (planter)", self.a) + "\n" + one("B (prober)", self.b)


def _run_pair(problem: Problem, config: JudgeConfig) -> PairRun:
    a_source, b_source = _sources(secrets.token_hex(8))
    reports: dict[str, VerdictReport] = {}
    errors: list[BaseException] = []

    def run(name: str, source: str) -> None:
        try:
            reports[name] = grade(source, problem, config)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=("A", a_source)), threading.Thread(target=run, args=("B", b_source))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    assert not errors, errors
    assert set(reports) == {"A", "B"}, "a grading thread did not finish"
    return PairRun(reports["A"], reports["B"])


@pytest.fixture(scope="module")
def config(judge_config: JudgeConfig) -> JudgeConfig:
    limits = judge_config.jail_limits
    return replace(
        judge_config, jail_limits=replace(limits, wall_time_limit_s=max(limits.wall_time_limit_s, WALL_TIME_LIMIT_S))
    )


@pytest.fixture(scope="module")
def pair(dot_problem: Problem, config: JudgeConfig) -> PairRun:
    """A and B graded at the same time. Run again once if, on a loaded host, no round of B's probes
    happened to fall inside A's lifetime (that run proves nothing either way)."""
    from graders.reference.build import ensure_expectations

    ensure_expectations(dot_problem, seed=config.seed, cache_root=config.cache_dir)  # not built twice at once
    run = _run_pair(dot_problem, config)
    if not run.rounds_while_a_was_alive() and run.a.verdict == run.b.verdict == Verdict.WRONG_ANSWER:
        run = _run_pair(dot_problem, config)
    return run


def _assert_the_run_is_conclusive(run: PairRun) -> None:
    """Both submissions really ran as meant: A planted everything and lived to the end, B's probes
    found B's own objects, and at least one complete round of them ran while A's objects existed."""
    planted = set(run.lines("A", "A planted:"))
    assert planted == PLANTED, f"A did not plant {sorted(PLANTED - planted)}:" + run.explain()
    assert run.times("A", "A end ") is not None, "A did not live to the end:" + run.explain()
    controls = {c.split(" (")[0] for c in run.lines("B", "B control ok:")}
    assert controls == CONTROLS, (
        f"B's probes failed to find B's own {sorted(CONTROLS - controls)}, so they would prove nothing:" + run.explain()
    )
    assert not run.lines("B", "B control FAILED:"), run.explain()
    assert run.lines("B", "B breached "), "B did not finish its probes:" + run.explain()
    assert run.rounds_while_a_was_alive(), "no round of B's probes ran while A was alive:" + run.explain()


def test_concurrent_submissions_cannot_see_signal_or_talk_to_each_other(pair: PairRun) -> None:
    _assert_the_run_is_conclusive(pair)
    # the verdicts first: each submission computes the right answer only if it reached the other
    assert pair.b.verdict == Verdict.WRONG_ANSWER, "B (prober) reached A or the host:" + pair.explain()
    assert pair.a.verdict == Verdict.WRONG_ANSWER, "something reached A (planter):" + pair.explain()
    assert pair.lines("B", "B breached") and pair.lines("B", "B breached")[0].startswith("False"), pair.explain()
    assert pair.lines("B", "B found:") == [], pair.explain()
    assert pair.lines("A", "A event:") == [], "something reached A's objects:" + pair.explain()
    for stats in pair.rounds_while_a_was_alive():
        assert stats["foreign"] == 0, pair.explain()
        assert stats["signallable"] >= 1 and stats["listed"] >= 1, pair.explain()  # B at least saw itself
    assert jail_processes() == []


def test_concurrent_submission_cannot_read_anothers_memory(pair: PairRun) -> None:
    _assert_the_run_is_conclusive(pair)
    # B read its own page through /proc/PID/mem (control "memory") with the same code it aimed at A's
    # page, in every round while A's page existed, through every pid outside its jail and 1..2048.
    alive_rounds = pair.rounds_while_a_was_alive()
    assert all(stats["mem_tried"] >= 2000 for stats in alive_rounds), pair.explain()
    assert all(stats["mem_read"] == 0 for _, _, stats in pair.rounds()), pair.explain()
    leaks = [line for line in pair.lines("B", "B found:") if re.search(r"mem|process_vm_readv|PTRACE", line)]
    assert leaks == [], "B read memory of a process outside its jail:" + pair.explain()
