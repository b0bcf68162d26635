"""First process of a jail: join its cgroups, set its RLIMITs, then exec bubblewrap.

Run by the trusted parent as `python -I -S enter.py SETUP_JSON bwrap ...`. Doing this in a
separate process, before `exec`, means the submission can never run outside the cgroup or
without its limits, and the (multithreaded) server never needs `preexec_fn`. Standard library
only. SETUP_JSON is `{"procs": ["/sys/fs/cgroup/.../cgroup.procs", ...],
"rlimits": {"RLIMIT_AS": [soft, hard], ...}}`.
"""

import json
import os
import resource
import sys


def main(argv: list[str]) -> None:
    setup = json.loads(argv[1])
    pid = str(os.getpid())
    for procs in setup["procs"]:
        with open(procs, "w") as f:
            f.write(pid)
    for name, (soft, hard) in setup["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    os.execvp(argv[2], argv[2:])


if __name__ == "__main__":
    main(sys.argv)
