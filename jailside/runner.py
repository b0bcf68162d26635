"""The jail's job: load a submission, export every case, write the bundle.

Runs in a locked-down child of the jail template (`jailside/jail_template.py`) with nothing but
the standard library and JAX. Protocol with the trusted side (`sandbox/jail.py`):

1. The child initialises the CPU backend, then writes `READY\\n` to the result pipe.
2. The supervisor writes one `jailside.protocol.JailRequest` line to stdin and closes it.
3. The child writes one JSON bundle to the result pipe and exits 0 (schema: `sandbox/bundle.py`).

Nothing the child writes is trusted: the submission shares its process and can patch or forge
any of it. The trusted side only believes the exported StableHLO, and checks even that.
"""

from __future__ import annotations

import base64
import inspect
import json
import linecache
import os
import resource
import sys
import time
import traceback
import types
from collections.abc import Callable
from typing import Any

from jailside.export import export_case, residual_notes
from jailside.paths import local_paths
from jailside.protocol import READY, JailRequest, decode

SUBMISSION_FILENAME = "submission.py"
BUNDLE_FORMAT = "remat-judge-bundle/1"
MAX_REQUEST_BYTES = 64 << 20  # far above any allowed source (REMAT_JUDGE_MAX_SOURCE_BYTES)


class _Failure(Exception):
    """A submission failure with the bundle status it maps to; its message and traceback name no
    host path (an exception's text can: `jailside.paths.local_paths`)."""

    def __init__(self, status: str, kind: str, message: str, tb: str = "", case: str | None = None):
        message, tb = local_paths(message), local_paths(tb)
        super().__init__(message)
        self.status, self.kind, self.message, self.tb, self.case = status, kind, message, tb, case


def _trimmed_traceback(exc: BaseException) -> str:
    """The traceback with only the submission's own frames (and the exception line)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == SUBMISSION_FILENAME]
    lines = ["Traceback (most recent call last):\n"] if frames else []
    lines += traceback.format_list(frames)
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines)


def _classify(exc: BaseException, context: str, case: str | None = None) -> _Failure:
    if isinstance(exc, MemoryError):
        return _Failure("memory_error", "MemoryError", f"MemoryError while {context}", _trimmed_traceback(exc), case)
    name = type(exc).__name__
    first = (str(exc).strip().splitlines() or [""])[0][:500]
    message = f"{name} while {context}" + (f": {first}" if first else "")
    return _Failure("runtime_error", name, message, _trimmed_traceback(exc), case)


def _load_entry_point(source: str, entry_point: str, n_args: int, arg_names: list[str]) -> Callable[..., Any]:
    lines = source.splitlines(keepends=True)
    linecache.cache[SUBMISSION_FILENAME] = (len(source), None, lines, SUBMISSION_FILENAME)
    try:
        code = compile(source, SUBMISSION_FILENAME, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:  # ValueError: source with NUL bytes
        detail = "".join(traceback.format_exception_only(type(exc), exc))
        raise _Failure("compile_error", type(exc).__name__, f"the source does not compile: {exc}", detail) from exc
    module = types.ModuleType("submission")
    module.__file__ = SUBMISSION_FILENAME
    sys.modules["submission"] = module
    try:
        exec(code, module.__dict__)
    except BaseException as exc:
        raise _classify(exc, "importing the submission") from exc
    fn: object = module.__dict__.get(entry_point)
    if fn is None:
        raise _Failure(
            "compile_error",
            "MissingEntryPoint",
            f"the submission defines no `{entry_point}`: define a function with that name",
        )
    if not callable(fn):
        raise _Failure("compile_error", "NotCallable", f"`{entry_point}` is a {type(fn).__name__}, not a function")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn  # some wrapped callables have no signature; tracing will tell
    try:
        signature.bind(*range(n_args))
    except TypeError as exc:
        raise _Failure(
            "compile_error",
            "WrongArity",
            f"`{entry_point}{signature}` cannot be called with the {n_args} arguments "
            f"({', '.join(arg_names)}) the problem passes: {exc}",
        ) from exc
    return fn


def run_request(request: dict[str, Any]) -> dict[str, Any]:
    """Loads the submission in `request` and exports every case; returns the bundle as a dict."""
    timings: dict[str, float] = {}
    cases_out: list[dict[str, Any]] = []
    bundle: dict[str, Any] = {
        "format": BUNDLE_FORMAT,
        "status": "ok",
        "error": None,
        "cases": cases_out,
        "timings_ms": timings,
    }
    specs0 = request["cases"][0]["args"]
    t = time.monotonic()
    try:
        fn = _load_entry_point(request["source"], request["entry_point"], len(specs0), [s["name"] for s in specs0])
        timings["load"] = (time.monotonic() - t) * 1000
        for case in request["cases"]:
            t = time.monotonic()
            try:
                fwd, bwd, n_out = export_case(fn, case["args"], request.get("mesh"))
            except BaseException as exc:
                raise _classify(exc, f"tracing and exporting case {case['name']!r}", case["name"]) from exc
            cases_out.append(
                {
                    "name": case["name"],
                    "n_primal_outputs": n_out,
                    "fwd": base64.b64encode(fwd).decode("ascii"),
                    "bwd": base64.b64encode(bwd).decode("ascii"),
                    "residual_notes": residual_notes(fn, case["args"], request.get("mesh")),
                }
            )
            timings[f"export:{case['name']}"] = (time.monotonic() - t) * 1000
    except _Failure as failure:
        bundle["status"] = failure.status
        bundle["error"] = {
            "kind": failure.kind,
            "message": failure.message,
            "traceback": failure.tb,
            "case": failure.case,
        }
        sys.stderr.write(failure.tb or failure.message + "\n")
    return bundle


def _limit_address_space(allowance_mib: int) -> None:
    """Caps RLIMIT_AS at what the process maps now plus `allowance_mib`, before the submission runs.

    JAX maps about 1.5 GB of address space at import but keeps only about 200 MB resident
    (measured here), so a fixed RLIMIT_AS is either too tight for JAX or too loose to matter. Set
    relative to the current size, a large allocation fails at once with MemoryError
    (MEMORY_LIMIT_EXCEEDED) instead of thrashing against the cgroup's limit until the OOM killer
    comes. Without CAP_SYS_RESOURCE the limit can only be lowered afterwards.
    """
    if allowance_mib <= 0:
        return
    with open("/proc/self/status") as status:
        vm_kb = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
    limit = vm_kb * 1024 + allowance_mib * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or limit < hard:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class JailJob:
    """One submission in one locked-down child (the `Job` of `jailside/forkserver.py`)."""

    def prepare(self, params: dict[str, Any]) -> None:
        """Nothing to prepare: the jail's only input is its request, read after lock-down."""

    def run(self, result_fd: int) -> int:
        """Initialises the backend, says READY, reads the request from stdin, writes the bundle."""
        # JAX only inside the jail's child, after its lock-down
        import jax
        import jax.numpy as jnp

        t0 = time.monotonic()
        # Start the CPU backend now, not under the time limit, with one compile: XLA's compile
        # threads (and their malloc arenas) must exist before `_limit_address_space` measures the
        # runtime's size. With `jax.devices()` alone (12 ms instead of about 60 ms of CPU) they
        # started later, under the submission's RLIMIT_AS, and a thread sometimes failed to start
        # ("cannot allocate memory for thread-local data", exit 127; MemoryError), seen in CI.
        jnp.zeros(()).block_until_ready()
        backend_ms = (time.monotonic() - t0) * 1000
        _write_all(result_fd, READY)
        request = decode(sys.stdin.buffer.read(MAX_REQUEST_BYTES), JailRequest).as_dict()
        sys.stdin.close()
        _limit_address_space(int(request["memory_limit_mib"]))
        # The kernel enforces the CPU budget from here on: a process can lower its hard limit
        # but, without CAP_SYS_RESOURCE, never raise it again, so the submission cannot lift it.
        usage = resource.getrusage(resource.RUSAGE_SELF)
        limit_s = int(usage.ru_utime + usage.ru_stime + float(request["cpu_time_limit_s"])) + 1
        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        if hard == resource.RLIM_INFINITY or limit_s < hard:
            resource.setrlimit(resource.RLIMIT_CPU, (limit_s, limit_s + 1))
        bundle = run_request(request)
        bundle["timings_ms"]["backend_init"] = backend_ms
        bundle["jax_version"] = jax.__version__
        sys.stdout.flush()
        sys.stderr.flush()
        _write_all(result_fd, json.dumps(bundle).encode("utf-8"))
        os.close(result_fd)
        return 0
