"""The model libraries a submission and a reference may import: Flax (linen and NNX), Equinox and
optax, imported by the jail's and the verifier's templates before they fork, so no child pays for
the import (about 0.7 s of CPU after JAX, measured with flax 0.12.8, equinox 0.13.8 and optax 0.2.8
on this project's 2-core machine; `bench/ready_memory.py` prints the templates' memory).

Importing them starts no JAX backend and no thread (checked by `jailside.warmup.warm_up` after the
import, and by the suite). TensorFlow is never installed: `flax/io.py` imports it when present.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import sys

#: The modules imported before the fork, in order (optax is what `flax.nnx` imports for its optimizer).
FRAMEWORK_MODULES = ("flax.linen", "flax.nnx", "equinox", "optax")

#: The distributions whose versions decide what a framework submission or reference saves: part
#: of the expectation cache's and the result cache's keys.
FRAMEWORK_DISTRIBUTIONS = ("flax", "equinox", "optax")


def import_frameworks() -> None:
    """Imports FRAMEWORK_MODULES (JAX already imported). A framework that fails to import is left
    out, with one line on the template's stderr (kept in the judge's log): problems in plain JAX
    go on being judged, and a submission importing it gets the ImportError as its own verdict.
    """
    for name in FRAMEWORK_MODULES:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - see above: the submission that needs it says so
            print(f"remat-judge: {name} not preloaded: {type(exc).__name__}: {exc}", file=sys.stderr)


def framework_versions() -> dict[str, str]:
    """{distribution: version} of FRAMEWORK_DISTRIBUTIONS from their package metadata (nothing is
    imported); a distribution that is not installed maps to "absent"."""
    versions = {}
    for name in FRAMEWORK_DISTRIBUTIONS:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions
