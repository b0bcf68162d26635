"""`jailside.mesh` in a process of 4 simulated CPU devices: the mesh of a problem's `[mesh]` (its
plain JSON, as it would cross into the jail), arrays and avals placed on it piece by piece.

The devices exist only when XLA_FLAGS is set before JAX starts, so the work runs in a child
process (the flag set for it alone); this process never imports JAX for it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from graders.problems.mesh_spec import MeshSpec
from tests.support import REPO

CHILD = textwrap.dedent(
    """
    import json, sys
    import jax, numpy as np
    from jailside.mesh import MeshUnavailable, make_mesh, place

    spec = json.loads(sys.stdin.read())
    mesh = make_mesh(spec)
    leaves = {
        "x": np.arange(8 * 6, dtype=np.float32).reshape(8, 6),
        "params[0]": np.ones((8, 4), np.float32),
        "b": np.zeros((6,), np.float32),
    }
    placed = place(leaves, spec["partition"], mesh)
    avals = place({k: jax.ShapeDtypeStruct(v.shape, v.dtype) for k, v in leaves.items()}, spec["partition"], mesh)
    exported = jax.export.export(jax.jit(lambda x, w, b: (x.T @ w).sum() + b.sum()))(*avals.values())
    try:
        make_mesh({"axes": {"a": 8}})
        unavailable = None
    except MeshUnavailable as exc:
        unavailable = str(exc)
    print(json.dumps({
        "devices": len(jax.devices()),
        "mesh_shape": dict(mesh.shape),
        "axis_types": [str(t) for t in mesh.axis_types],
        "pieces": {
            name: sorted([d.id, list(s.data.shape), np.asarray(s.data).ravel()[:1].tolist()]
                         for d, s in ((s.device, s) for s in x.addressable_shards))
            for name, x in placed.items()
        },
        "aval_pieces": {name: list(a.sharding.shard_shape(a.shape)) for name, a in avals.items()},
        "nr_devices": exported.nr_devices,
        "unavailable": unavailable,
    }))
    """
)


def test_a_2x2_mesh_places_each_argument_piece_by_piece() -> None:
    spec = MeshSpec.model_validate(
        {
            "axes": {"data": 2, "model": 2},
            "axis_types": {"model": "explicit"},
            "partition": {"x": ["data", None], "params[0]": [["data", "model"], []]},
        }
    )
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4", "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        input=json.dumps(spec.plain()),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])

    assert found["devices"] == 4
    assert found["mesh_shape"] == {"data": 2, "model": 2}
    assert found["axis_types"] == ["AxisType.Auto", "AxisType.Explicit"]
    # x (8, 6) split over data: devices 0, 1 (data = 0) hold rows 0..3, devices 2, 3 rows 4..7
    assert found["pieces"]["x"] == [[0, [4, 6], [0.0]], [1, [4, 6], [0.0]], [2, [4, 6], [24.0]], [3, [4, 6], [24.0]]]
    # params[0] (8, 4) split over data x model: four pieces of two rows each
    assert [shape for _, shape, _ in found["pieces"]["params[0]"]] == [[2, 4]] * 4
    # b is in no partition: replicated, whole on every device
    assert [shape for _, shape, _ in found["pieces"]["b"]] == [[6]] * 4
    assert found["aval_pieces"] == {"x": [4, 6], "params[0]": [2, 4], "b": [6]}
    assert found["nr_devices"] == 4
    assert found["unavailable"] is not None
    assert "needs 8 devices and this process has 4" in found["unavailable"]
    assert "--xla_force_host_platform_device_count=8" in found["unavailable"]
