"""The program that runs inside the jail: load a submission, export its forward and backward pass.

This file is mounted read-only into the jail as `/judge/runner.py` and runs there with nothing
but the standard library and JAX, so it must not import anything from this project. The trusted
side imports `export_case` from it too (to export `reference.py` the same way), which is why the
export logic lives here and only here.

Protocol (see `sandbox/jail.py` for the parent's side):

1. `python -I -B /judge/runner.py BUNDLE_FD` imports JAX, then writes `READY\\n` to BUNDLE_FD.
2. The parent writes one JSON request to stdin and closes it:
   `{"source": str, "entry_point": str, "cpu_time_limit_s": float, "memory_limit_mib": int,
     "cases": [{"name": str, "args": [ArgSpec, ...]}]}` where an ArgSpec is
   `{"kind": "array", "name": str, "shape": [int, ...], "dtype": str}`,
   `{"kind": "list", "name": str, "items": [ArgSpec, ...]}` or
   `{"kind": "static", "name": str, "value": bool | int | float | str}`.
3. The runner writes one JSON bundle to BUNDLE_FD and exits 0 (schema: `sandbox/bundle.py`).

Nothing the runner writes is trusted: the submission shares its process and can patch or forge
any of it. The parent only believes the exported StableHLO, and checks even that.
"""

from __future__ import annotations

import base64
import inspect
import json
import linecache
import os
import re
import resource
import sys
import time
import traceback
import types
from typing import Any, Callable

SUBMISSION_FILENAME = "submission.py"
BUNDLE_FORMAT = "remat-judge-bundle/1"


# ---------------------------------------------------------------------------------------------
# Export: shared by the jail (submissions) and the trusted side (reference solutions).
# ---------------------------------------------------------------------------------------------

def _abstract_arg(spec: dict[str, Any]) -> Any:
    """Turns a dynamic ArgSpec into the pytree of `jax.ShapeDtypeStruct` that `jax.export` traces."""
    import jax
    import jax.numpy as jnp

    if spec["kind"] == "array":
        return jax.ShapeDtypeStruct(tuple(spec["shape"]), jnp.dtype(spec["dtype"]))
    if spec["kind"] == "list":
        return [_abstract_arg(item) for item in spec["items"]]
    raise ValueError(f"argument {spec.get('name')!r}: unknown kind {spec['kind']!r}")


def bind_static(fn: Callable[..., Any], specs: list[dict[str, Any]]) -> Callable[..., Any]:
    """Returns `g(*dynamic_args)` that calls `fn` with the static arguments of `specs` filled in."""

    def with_static(*dynamic: Any) -> Any:
        it = iter(dynamic)
        args = [spec["value"] if spec["kind"] == "static" else next(it) for spec in specs]
        return fn(*args)

    return with_static


def export_case(fn: Callable[..., Any], specs: list[dict[str, Any]]) -> tuple[bytes, bytes, int]:
    """Exports the VJP of `fn` at the argument avals `specs` as two serialized StableHLO artifacts.

    `fwd(*input_leaves) -> [*primal_output_leaves, *residuals]`: the primal outputs followed by
    every residual the VJP saves (the leaves of the `jax.vjp` closure ARE the residuals, measured
    with JAX 0.10.2: they equal what `jax.ad_checkpoint.print_saved_residuals` lists).
    `bwd(*residuals, *cotangent_leaves) -> [*gradient_leaves]`: may use nothing but the residuals,
    so correct gradients from it prove that the saved residuals suffice. Both programs take and
    return flat lists, one array per pytree leaf, in `jax.tree_util.tree_leaves` order.

    Args:
        fn: the function to differentiate; its output is a pytree of float arrays.
        specs: one ArgSpec per positional argument (see the module docstring).

    Returns:
        (fwd artifact bytes, bwd artifact bytes, number of primal output leaves).

    Raises:
        Whatever tracing or exporting `fn` raises (TypeError, jax errors, MemoryError, ...).
    """
    import jax
    from jax import export

    g = bind_static(fn, specs)
    dynamic = [_abstract_arg(s) for s in specs if s["kind"] != "static"]
    in_tree = jax.tree_util.tree_structure(dynamic)
    captured: dict[str, Any] = {}

    # Both programs take and return flat lists of arrays, whatever the argument pytrees (a list of
    # weights, say), so the verifier can call them with one array per leaf.
    def fwd(*leaves: Any) -> list[Any]:
        out, vjp_fn = jax.vjp(g, *jax.tree_util.tree_unflatten(in_tree, leaves))
        captured["vjp_tree"] = jax.tree_util.tree_structure(vjp_fn)
        captured["out_tree"] = jax.tree_util.tree_structure(out)
        return [*jax.tree_util.tree_leaves(out), *jax.tree_util.tree_leaves(vjp_fn)]

    fwd_exp = export.export(jax.jit(fwd), platforms=["cpu"])(*jax.tree_util.tree_leaves(dynamic))
    n_out = captured["out_tree"].num_leaves
    n_res = len(fwd_exp.out_avals) - n_out

    def bwd(*leaves: Any) -> list[Any]:
        vjp_fn = jax.tree_util.tree_unflatten(captured["vjp_tree"], leaves[:n_res])
        cotangent = jax.tree_util.tree_unflatten(captured["out_tree"], leaves[n_res:])
        return jax.tree_util.tree_leaves(vjp_fn(cotangent))

    specs_out = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in fwd_exp.out_avals]
    bwd_exp = export.export(jax.jit(bwd), platforms=["cpu"])(*specs_out[n_out:], *specs_out[:n_out])
    return bytes(fwd_exp.serialize()), bytes(bwd_exp.serialize()), n_out


def residual_notes(fn: Callable[..., Any], specs: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """Describes each saved residual the way `print_saved_residuals` does ("output of sin from ...").

    Advisory only: for people reading a verdict. Uses `jax._src.ad_checkpoint.saved_residuals`,
    which JAX 0.10.2 no longer exports publicly. Returns `[{"shape", "dtype", "note"}, ...]` in
    the order the VJP stores residuals, or None when the description fails.
    """
    try:
        from jax._src import ad_checkpoint

        dynamic = [_abstract_arg(s) for s in specs if s["kind"] != "static"]
        names = [s["name"] for s in specs if s["kind"] != "static"]
        found = ad_checkpoint.saved_residuals(bind_static(fn, specs), *dynamic)
        # our wrapper's parameter is `*dynamic`: give the arguments their problem's names back
        return [{"shape": [int(d) for d in aval.shape], "dtype": str(aval.dtype),
                 "note": re.sub(r"dynamic\[(\d+)\]", lambda m: names[int(m.group(1))], str(note))}
                for aval, note in found]
    except Exception:  # advisory: a failure here must not change the verdict
        return None


# ---------------------------------------------------------------------------------------------
# The jail's side of the protocol.
# ---------------------------------------------------------------------------------------------

class _Failure(Exception):
    """A submission failure with the bundle status it maps to."""

    def __init__(self, status: str, kind: str, message: str, tb: str = "", case: str | None = None):
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
        raise _Failure("compile_error", type(exc).__name__, f"the source does not compile: {exc}", detail)
    module = types.ModuleType("submission")
    module.__file__ = SUBMISSION_FILENAME
    sys.modules["submission"] = module
    try:
        exec(code, module.__dict__)
    except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt are failures too
        raise _classify(exc, "importing the submission")
    fn = module.__dict__.get(entry_point)
    if fn is None:
        raise _Failure("compile_error", "MissingEntryPoint",
                       f"the submission defines no `{entry_point}`: define a function with that name")
    if not callable(fn):
        raise _Failure("compile_error", "NotCallable",
                       f"`{entry_point}` is a {type(fn).__name__}, not a function")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn  # some wrapped callables have no signature; tracing will tell
    try:
        signature.bind(*range(n_args))
    except TypeError as exc:
        raise _Failure("compile_error", "WrongArity",
                       f"`{entry_point}{signature}` cannot be called with the {n_args} arguments "
                       f"({', '.join(arg_names)}) the problem passes: {exc}")
    return fn


def run_request(request: dict[str, Any]) -> dict[str, Any]:
    """Loads the submission in `request` and exports every case; returns the bundle as a dict."""
    timings: dict[str, float] = {}
    cases_out: list[dict[str, Any]] = []
    bundle: dict[str, Any] = {"format": BUNDLE_FORMAT, "status": "ok", "error": None,
                              "cases": cases_out, "timings_ms": timings}
    specs0 = request["cases"][0]["args"]
    t = time.monotonic()
    try:
        fn = _load_entry_point(request["source"], request["entry_point"], len(specs0),
                               [s["name"] for s in specs0])
        timings["load"] = (time.monotonic() - t) * 1000
        for case in request["cases"]:
            t = time.monotonic()
            try:
                fwd, bwd, n_out = export_case(fn, case["args"])
            except BaseException as exc:  # noqa: BLE001
                raise _classify(exc, f"tracing and exporting case {case['name']!r}", case["name"])
            cases_out.append({
                "name": case["name"], "n_primal_outputs": n_out,
                "fwd": base64.b64encode(fwd).decode("ascii"),
                "bwd": base64.b64encode(bwd).decode("ascii"),
                "residual_notes": residual_notes(fn, case["args"]),
            })
            timings[f"export:{case['name']}"] = (time.monotonic() - t) * 1000
    except _Failure as failure:
        bundle["status"] = failure.status
        bundle["error"] = {"kind": failure.kind, "message": failure.message,
                           "traceback": failure.tb, "case": failure.case}
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
        view = view[os.write(fd, view):]


def main(argv: list[str]) -> int:
    bundle_fd = int(argv[1])
    t0 = time.monotonic()
    import jax  # noqa: F401 - the expensive part of start-up, done before any submission arrives
    import jax.numpy as jnp
    from jax import export  # noqa: F401

    jnp.zeros(()).block_until_ready()  # initialise the CPU backend now, not under the time limit
    import_ms = (time.monotonic() - t0) * 1000
    _write_all(bundle_fd, b"READY\n")

    request = json.loads(sys.stdin.buffer.read())
    sys.stdin.close()
    _limit_address_space(int(request.get("memory_limit_mib", 0)))
    # The kernel enforces the CPU budget from here on: a process can lower its hard limit but,
    # without CAP_SYS_RESOURCE, never raise it again, so the submission cannot lift it.
    used_s = resource.getrusage(resource.RUSAGE_SELF).ru_utime + resource.getrusage(resource.RUSAGE_SELF).ru_stime
    limit_s = int(used_s + float(request["cpu_time_limit_s"])) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard == resource.RLIM_INFINITY or limit_s < hard:
        resource.setrlimit(resource.RLIMIT_CPU, (limit_s, limit_s + 1))

    bundle = run_request(request)
    bundle["timings_ms"]["import_jax"] = import_ms
    bundle["jax_version"] = jax.__version__
    sys.stdout.flush()
    sys.stderr.flush()
    _write_all(bundle_fd, json.dumps(bundle).encode("utf-8"))
    os.close(bundle_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
