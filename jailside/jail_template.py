"""The jail's template process (zygote): imports JAX and the model libraries once
(`jailside/frameworks.py`), then forks one child per submission.

Started by `sandbox/jail.py` inside bubblewrap (read-only system, no network, none of the judge's
files), as root with only the capabilities the children need to lock themselves down
(CAP_SYS_ADMIN for namespaces and mounts, CAP_SETUID/CAP_SETGID, CAP_SETPCAP); each child drops
all of them before the submission arrives (`jailside/forkserver.py`). The template never sees a
submission, a reference, a hidden input or a secret: only fork requests with descriptors.

    python -I -B -c "import sys; sys.path.insert(0, '/judge'); from jailside.jail_template import main; \\
        sys.exit(main(sys.argv))" CONTROL_FD SECCOMP_FD
"""

from __future__ import annotations

import os
import time


def main(argv: list[str]) -> int:
    control_fd, seccomp_fd = int(argv[1]), int(argv[2])
    with os.fdopen(seccomp_fd, "rb") as f:
        seccomp_bpf = f.read(1 << 20)
    t0 = time.monotonic()
    # the template imports JAX once, timed, before it forks: every child starts warm
    import jax
    import jax.numpy  # noqa: F401
    from jax import export  # noqa: F401

    from jailside import forkserver, runner
    from jailside.frameworks import import_frameworks
    from jailside.warmup import warm_up

    import_frameworks()
    warm_up()

    return forkserver.serve(
        control_fd, runner.JailJob, seccomp_bpf=seccomp_bpf, import_ms=(time.monotonic() - t0) * 1000
    )
