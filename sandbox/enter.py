"""First process of a jail: join its cgroups, set its RLIMITs, then exec bubblewrap.

Run by the trusted parent as `python -I -S enter.py SETUP_JSON bwrap ...`. Doing this in a
separate process, before `exec`, means the submission can never run outside the cgroup or
without its limits, and the (multithreaded) server never needs `preexec_fn`. Standard library
only. SETUP_JSON is `{"procs": ["/sys/fs/cgroup/.../cgroup.procs", ...],
"rlimits": {"RLIMIT_AS": [soft, hard], ...}, "die_with_parent": bool}`. With die_with_parent the
process gets SIGKILL when the thread that started it exits (PR_SET_PDEATHSIG, kept across exec).
"""

import ctypes
import json
import os
import resource
import signal
import sys

PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> None:
    setup = json.loads(argv[1])
    pid = str(os.getpid())
    for procs in setup["procs"]:
        with open(procs, "w") as f:
            f.write(pid)
    for name, (soft, hard) in setup["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    if setup.get("die_with_parent"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != setup["parent_pid"]:  # the parent died before prctl took effect
            sys.exit(1)
    os.execvp(argv[2], argv[2:])


if __name__ == "__main__":
    main(sys.argv)
