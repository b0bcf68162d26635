# expect: WRONG_ANSWER
# Forgery: writes its own result bundle to the result pipe and exits before the runner can,
# with artifacts of a cheap wrong function that saves exactly the expected residual avals.
import base64
import json
import os
import sys

import jax
import jax.numpy as jnp
from jax import export

bundle_fd = int(sys.argv[1])
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
