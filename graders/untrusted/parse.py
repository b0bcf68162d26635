"""Untrusted bytes to objects: a `jax.export` artifact deserialized, its avals checked static, and
its StableHLO module parsed from bytecode (never from text) in a shared MLIR context."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from graders.artifact_limits import Aval
from graders.untrusted.result import ArtifactError


def deserialize(blob: bytes) -> Any:
    """`jax.export.deserialize` that reports any failure as ArtifactError.

    Raises:
        ArtifactError: not a serialized `jax.export.Exported`.
    """
    # JAX's MLIR only in the verifier child: the server imports graders.untrusted's types
    from jax import export

    try:
        return export.deserialize(bytearray(blob))
    except Exception as exc:  # noqa: BLE001 - the flatbuffer parser raises many kinds on corrupt input
        raise ArtifactError(f"not a jax.export artifact: {type(exc).__name__}: {exc}"[:500]) from None


def exported_avals(avals: Any) -> list[Aval]:
    """`Exported.in_avals` / `out_avals` as our Aval list.

    Raises:
        ArtifactError: a symbolic (shape-polymorphic) dimension or an unknown dtype.
    """
    out = []
    for a in avals:
        try:
            shape = tuple(int(d) for d in a.shape)
            dtype = str(a.dtype)
        except Exception:  # noqa: BLE001 - a forged aval's shape or dtype can raise anything
            raise ArtifactError(
                f"a value has a symbolic or dynamic shape ({a.shape}); only static shapes are judged"
            ) from None
        out.append(Aval(shape, dtype))
    return out


def mlir_ir() -> Any:
    """The MLIR Python bindings' `ir` module (JAX's), imported when first needed."""
    # JAX's MLIR only in the verifier child: the server imports graders.untrusted's types
    from jax._src.lib.mlir import ir

    return ir


_shared = threading.local()


@contextlib.contextmanager
def shared_ir_context() -> Iterator[None]:
    """Within the block, `inspect_module` and `normalized_digest` on this thread parse every module
    in one MLIR context instead of one each (making a context costs about 5 ms of CPU). The context,
    and everything parsed in it, is dropped when the block ends: use it around the artifacts of
    one submission, not for a process's lifetime."""
    # JAX's MLIR only in the verifier child: the server imports graders.untrusted's types
    from jax._src.interpreters import mlir as jax_mlir

    previous = getattr(_shared, "context", None)
    _shared.context = jax_mlir.make_ir_context()
    try:
        yield
    finally:
        _shared.context = previous


def ir_context() -> Any:
    """The thread's shared context (`shared_ir_context`), else a new one."""
    # JAX's MLIR only in the verifier child: the server imports graders.untrusted's types
    from jax._src.interpreters import mlir as jax_mlir

    context = getattr(_shared, "context", None)
    return context if context is not None else jax_mlir.make_ir_context()


def parse_module(exported: Any) -> Any:
    """The artifact's StableHLO module, parsed from its bytecode (call inside `ir_context()`).

    Raises:
        ArtifactError: the bytes are not a module the bindings can read.
    """
    # JAX's MLIR only in the verifier child: the server imports graders.untrusted's types
    from jax._src.lib import _jax

    try:
        return _jax.mlir.deserialize_portable_artifact(exported.mlir_module_serialized)
    except Exception as exc:  # noqa: BLE001 - the MLIR parser raises many kinds on a forged module
        raise ArtifactError(f"cannot parse the module: {type(exc).__name__}"[:500]) from None
