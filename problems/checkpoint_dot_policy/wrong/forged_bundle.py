# expect: WRONG_ANSWER
# Forgery: writes its own result bundle to the result pipe and exits before the runner can,
# with artifacts of a cheap wrong function that saves exactly the expected residual avals.
import base64
import fcntl
import json
import os

import jax
import jax.numpy as jnp
from jax import export


def result_pipe() -> int:
    """The descriptor the runner will write its bundle to: the one pipe open for writing besides
    stdout and stderr."""
    for fd in sorted(int(n) for n in os.listdir("/proc/self/fd")):
        try:
            if fd > 2 and os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:") \
                    and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:
                return fd
        except OSError:  # the descriptor listdir itself used, closed by now
            continue
    raise RuntimeError("no result pipe found")


bundle_fd = result_pipe()
cases = []
for name, d, n in (("small", 4, 8), ("rectangular", 16, 40), ("large", 256, 1024)):
    spec = [jax.ShapeDtypeStruct((d, d), jnp.float32)] * 2 + [jax.ShapeDtypeStruct((n, d), jnp.float32)]

    def fwd(w1, w2, x):
        return jnp.sum(x), [w1, w2, x, x, x]

    def bwd(res, ct):
        w1, w2, x, _, _ = res
        return jnp.zeros_like(w1), jnp.zeros_like(w2), jnp.ones_like(x) * ct

    f = export.export(jax.jit(fwd))(*spec)
    b = export.export(jax.jit(bwd))([spec[0], spec[1], spec[2], spec[2], spec[2]], jax.ShapeDtypeStruct((), jnp.float32))
    cases.append({"name": name, "n_primal_outputs": 1,
                  "fwd": base64.b64encode(f.serialize()).decode(), "bwd": base64.b64encode(b.serialize()).decode(),
                  "residual_notes": None})
os.write(bundle_fd, json.dumps({"format": "remat-judge-bundle/1", "status": "ok", "error": None,
                                "cases": cases, "timings_ms": {}}).encode())
os._exit(0)
