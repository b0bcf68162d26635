"""Hostile exported artifacts: a submission controls its whole jail process, so the bundle it returns
may carry ANY StableHLO module. These tests forge such modules (tests/security/forge.py), with the
public signatures a real export of `checkpoint_dot_policy` would have so the verifier's aval checks
pass, and the hostility inside: dynamically shaped temporaries, deep call chains, modules whose
text is gigabytes, deep region nesting around many ops, programs that need more memory than the
verifier has, and the plain regressions (garbage bytes, another platform, a custom_call).

Most tests hand the forged bundle to `graders.pipeline.judge_bundle` (the real verifier process,
cgroup, RLIMITs, time-out; no jail). One goes through the real jail with a submission that builds
the same hostile module and writes its own bundle from inside the jail.

Every test asserts the exact verdict, that nothing a student sees (check messages and details, as
the API serialises them) carries a traceback or a host path, and a bound on wall time. The
configuration shortens the verifier's time-out to 20 s, so a defence that regresses into a hang
shows up as a failure in 20 s rather than a minute.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from typing import Any

import pytest

from graders.pipeline import JudgeConfig, grade, judge_bundle
from graders.problems.problem import Problem
from graders.verdict import Verdict, VerdictReport
from tests.security import forge
from tests.security.forge import CaseSig
from tests.support import jail_processes

pytestmark = pytest.mark.jail

V = Verdict
GIB = 1 << 30
MIB = 1 << 20
BOUND_S = 30.0  # generous: a verifier start (about 2 s) and a refusal before anything runs
NORMAL_VERDICTS = {V.ACCEPTED, V.WRONG_ANSWER, V.WRONG_GRADIENT, V.WRONG_POLICY}
LEAKS = ("Traceback (most recent call last)", "/work/", "/root/", "site-packages")


@pytest.fixture(scope="module")
def config(judge_config: JudgeConfig) -> JudgeConfig:
    """The test deployment with a 20 s verifier time-out (the production default is 60 s)."""
    return replace(judge_config, verify_time_limit_s=20.0)


def judged(bundle: bytes, problem: Problem, config: JudgeConfig, label: str) -> tuple[VerdictReport, float]:
    """judge_bundle with its wall time, printed for the record (`pytest -s` shows it)."""
    t0 = time.monotonic()
    report = judge_bundle(bundle, problem, config)
    seconds = time.monotonic() - t0
    failed = failing_check(report)
    print(
        f"\n[hostile] {label}: {report.verdict.value} in {seconds:.1f} s"
        f"{f' ({failed.name}: {failed.message[:160]})' if failed else ''}"
    )
    return report, seconds


def failing_check(report: VerdictReport) -> Any:
    """The failed check that decided the verdict (the first failed one with that verdict)."""
    failed = [c for c in report.checks if not c.passed]
    return next((c for c in failed if c.verdict == report.verdict), failed[0] if failed else None)


def assert_student_safe(report: VerdictReport) -> None:
    """Nothing a student or API caller gets names a host path or shows a Python traceback."""
    shown = json.dumps(report.model_dump(mode="json")["checks"])
    for leak in LEAKS:
        assert leak not in shown, f"{leak!r} in what the student sees: {shown[:2000]}"


def assert_refused(report: VerdictReport, verdict: Verdict, pattern: str) -> None:
    """`verdict`, decided by a check made before anything ran, whose message matches `pattern`."""
    assert report.verdict == verdict, [c.model_dump() for c in report.checks]
    check = failing_check(report)
    assert check is not None
    assert check.name != "execute", f"refused only when it ran: {check.message}"
    assert re.search(pattern, check.message, re.IGNORECASE), check.message
    assert_student_safe(report)


def in_fwd(make_body: Any) -> forge.Forger:
    """A forger putting `make_body(sig) -> (body, functions)` into the fwd program."""

    def make(sig: CaseSig) -> tuple[bytes, bytes]:
        body, functions = make_body(sig)
        return forge.artifacts(sig, forge.fwd_text(sig, body, functions))

    return make


def in_bwd(make_body: Any) -> forge.Forger:
    """A forger putting `make_body(sig) -> (body, functions)` into the bwd program (fwd honest)."""

    def make(sig: CaseSig) -> tuple[bytes, bytes]:
        body, functions = make_body(sig)
        return forge.artifacts(sig, bwd=forge.bwd_text(sig, body, functions))

    return make


# --- the forgeries reach the interesting code ----------------------------------------------------


def test_the_forged_baseline_is_judged_like_any_wrong_submission(dot_problem: Problem, config: JudgeConfig) -> None:
    """The cheap wrong function, hand-written: it deserializes, passes the module and aval checks
    and runs, so every hostile variant below differs from it only by its hostility."""
    report, seconds = judged(forge.bundle(forge.artifacts), dot_problem, config, "baseline")
    assert report.verdict == V.WRONG_ANSWER
    assert [c.name for c in report.checks][:2] == ["module", "avals"]
    assert all(c.passed for c in report.checks[:2])
    assert_student_safe(report)
    assert seconds < BOUND_S


# --- attack 1: dynamic shapes -------------------------------------------------------------------

DYNAMIC = {
    # f32[?,?] of 20000 x 20000 (1.49 GiB, over the 1 GiB static cap) in main of fwd. Before the
    # fix: counted as 0 bytes, run, WRONG_ANSWER, the verifier's resident memory at 1.8 GB.
    "pad_1_5_gib_in_fwd_main": in_fwd(lambda sig: (forge.dynamic_pad_body(20_000, 20_000), "")),
    # the same inside a region (a case branch)
    "pad_in_case_region": in_fwd(lambda sig: (forge.in_case_region(forge.dynamic_pad_body(20_000, 20_000)), "")),
    # the residual x relabelled f32[?,?] and passed to a callee taking f32[?,?], in bwd only
    "dynamic_callee_argument_in_bwd": in_bwd(lambda sig: forge.dynamic_callee("%r_x", (sig.n, sig.d))),
    # 6 GiB from dynamic_broadcast_in_dim (off the allowlist: refused as an op before the fix too)
    "dynamic_broadcast_6_gib": in_fwd(lambda sig: (forge.dynamic_broadcast_body(40_000, 40_000), "")),
    # a function typed with unranked tensors that nothing calls: the contract is that the judge
    # refuses what it cannot size; dead code is still compiled by XLA
    "unranked_function": in_fwd(lambda sig: ("", forge.UNRANKED_DEAD_FUNCTION)),
}


@pytest.mark.parametrize("variant", list(DYNAMIC))
def test_dynamic_shapes_are_refused_before_anything_runs(
    variant: str, dot_problem: Problem, config: JudgeConfig
) -> None:
    bundle = forge.bundle(DYNAMIC[variant], only="small")
    report, seconds = judged(bundle, dot_problem, config, f"dynamic:{variant}")
    assert_refused(report, V.RUNTIME_ERROR, r"dynamic|shape|unranked")
    assert seconds < BOUND_S


# --- attack 2: a deep call chain -----------------------------------------------------------------


@pytest.mark.parametrize("where", ["fwd", "bwd"])
def test_a_1500_deep_call_chain_is_a_runtime_error(where: str, dot_problem: Problem, config: JudgeConfig) -> None:
    """main calls f0, f0 calls f1, ... f1499: a walker recursing per call dies of RecursionError
    (INTERNAL_ERROR); it must be a depth bound the submission is told about."""
    chain = lambda sig: forge.call_chain(1500)  # noqa: E731
    report, seconds = judged(
        forge.bundle(in_fwd(chain) if where == "fwd" else in_bwd(chain), only="small"),
        dot_problem,
        config,
        f"call chain in {where}",
    )
    assert_refused(report, V.RUNTIME_ERROR, r"deep|depth|nest|chain|call")
    assert seconds < BOUND_S


# --- attack 3: a small artifact whose text is huge -----------------------------------------------


def test_bytecode_uniquing_makes_text_thousands_of_times_larger() -> None:
    """The construction, measured small: 100 uses of a 64 KiB string print as about 97 times the
    artifact; the tests below use 6,000 uses of 1 MiB (1.15 MB of bytecode, about 6.3 GB of text)."""
    sig = forge.cases()[0]
    portable = forge.mlir_to_portable(
        forge.fwd_text(sig, forge.repeated_attribute_body(100)), forge.huge_attribute_edit(64 * 1024)
    )
    assert forge.text_size(portable) > 90 * len(portable)
    body, functions = forge.repeated_callee_body(100)
    portable = forge.mlir_to_portable(forge.fwd_text(sig, body, functions), forge.huge_name_edit(64 * 1024))
    assert forge.text_size(portable) > 90 * len(portable)


def _huge_attribute(sig: CaseSig) -> tuple[bytes, bytes]:
    return forge.artifacts(
        sig, forge.fwd_text(sig, forge.repeated_attribute_body(6000)), fwd_edit=forge.huge_attribute_edit(1 * MIB)
    )


def _huge_callee_name(sig: CaseSig) -> tuple[bytes, bytes]:
    body, functions = forge.repeated_callee_body(6000)
    return forge.artifacts(sig, forge.fwd_text(sig, body, functions), fwd_edit=forge.huge_name_edit(1 * MIB))


@pytest.mark.parametrize("construction", ["attribute", "callee_name"])
def test_a_module_that_prints_as_gigabytes_gets_a_verdict_in_bounded_time(
    construction: str, dot_problem: Problem, config: JudgeConfig
) -> None:
    """A 1 MiB string stored once in bytecode and used 6,000 times (a discardable attribute on
    6,000 adds, or the name of a function called 6,000 times): 1.15 MB serialized, about 6.3 GB as
    MLIR text. Before the fix the verifier printed every module (`Exported.mlir_module()`): a 60 s
    time-out (attribute) or an OOM kill (callee name), both INTERNAL_ERROR. A refusal or a normal
    verdict are both fine; a judge fault or a hang are not.

    Measured after the printing fix: XLA clones a called function per call site, its name
    included, so compiling 1,000 calls of a 1 MiB name takes 1.2 GB and 7 s; 6,000 calls blow
    the verifier's 4 GiB (MEMORY_LIMIT_EXCEEDED after about 15 s). Symbol names and attribute
    strings need a size cap of their own."""
    make = _huge_attribute if construction == "attribute" else _huge_callee_name
    bundle = forge.bundle(make, only="small")
    assert len(bundle) < 4 * MIB
    report, seconds = judged(bundle, dot_problem, config, f"huge text:{construction}")
    assert report.verdict in NORMAL_VERDICTS | {V.RUNTIME_ERROR}, [c.model_dump() for c in report.checks]
    assert report.verdict != V.ACCEPTED
    assert_student_safe(report)
    assert seconds < BOUND_S


# --- attack 4: deep nesting around many ops ------------------------------------------------------


def _nested(depth: int, adds: int) -> forge.Forger:
    """`depth` nested stablehlo.case around `adds` adds, in fwd, as plain StableHLO bytecode
    (which the verifier accepts like VHLO; writing VHLO for 300 levels x 40,000 ops takes a minute)."""

    def make(sig: CaseSig) -> tuple[bytes, bytes]:
        fwd = forge.exported_bytes(
            forge.mlir_to_portable(forge.fwd_text(sig, forge.nested_case_body(depth, adds)), plain=True),
            sig.fwd_in,
            sig.fwd_out,
        )
        return fwd, forge.artifacts(sig)[1]

    return make


@pytest.mark.parametrize(
    "depth,adds", [(300, 40_000), (1500, 10), (2, 60_000)], ids=["300_deep_40000_ops", "1500_deep", "60000_ops"]
)
def test_deep_nesting_and_many_ops_are_refused_in_bounded_time(
    depth: int, adds: int, dot_problem: Problem, config: JudgeConfig
) -> None:
    """300 nested cases around 40,000 adds made a walker that re-walks every nested region at
    every level quadratic (time-outs, INTERNAL_ERROR); 1500 levels overflow a recursive walk;
    60,000 ops exceed `VerifyLimits.max_ops` (50,000). Each must be refused (op cap counted as the
    walk goes, or a nesting cap) in well under 20 s."""
    bundle = forge.bundle(_nested(depth, adds), only="small")
    report, seconds = judged(bundle, dot_problem, config, f"nested:{depth}x{adds}")
    assert_refused(report, V.RUNTIME_ERROR, r"operations|nest|deep|depth")
    assert seconds < 20.0


# --- attack 5: more memory than the verifier has ----------------------------------------------------


def test_a_program_that_needs_more_than_the_verifiers_memory_is_memory_limit_exceeded(
    dot_problem: Problem, config: JudgeConfig
) -> None:
    """A static f32[14480, 14480] temporary (800 MiB, under the 1 GiB static cap, so it runs; XLA
    really allocates it: 1.03 GB resident in-process) in a verifier capped at 768 MiB: the
    cgroup's OOM kill must read as MEMORY_LIMIT_EXCEEDED. (Before the fix the verifier's cgroup
    was removed before its OOM count was read: INTERNAL_ERROR.)"""
    small = replace(config, verifier_memory_limit_mib=768)
    bundle = forge.bundle(in_fwd(lambda sig: (forge.big_static_temporary_body(14_480, 14_480), "")), only="small")
    report, seconds = judged(bundle, dot_problem, small, "800 MiB temporary, 768 MiB verifier")
    assert report.verdict == V.MEMORY_LIMIT_EXCEEDED, [c.model_dump() for c in report.checks]
    assert failing_check(report).name == "execute"
    assert_student_safe(report)
    assert seconds < BOUND_S


def test_a_static_temporary_over_the_cap_is_refused_without_running(dot_problem: Problem, config: JudgeConfig) -> None:
    """f32[23170, 23170] (2 GiB): the static walk sees it and refuses it before it runs (regression)."""
    bundle = forge.bundle(in_fwd(lambda sig: (forge.big_static_temporary_body(23_170, 23_170), "")), only="small")
    report, seconds = judged(bundle, dot_problem, config, "2 GiB static temporary")
    assert_refused(report, V.MEMORY_LIMIT_EXCEEDED, r"bytes")
    assert seconds < BOUND_S


# --- attack 6: regressions ------------------------------------------------------------------------


def _garbage(sig: CaseSig) -> tuple[bytes, bytes]:
    return b"\x00not a jax.export artifact\xff" * 10, forge.artifacts(sig)[1]


def _truncated(sig: CaseSig) -> tuple[bytes, bytes]:
    fwd, bwd = forge.artifacts(sig)
    return fwd[: len(fwd) // 2], bwd


def _corrupt_module(sig: CaseSig) -> tuple[bytes, bytes]:
    """A well-formed Exported whose StableHLO bytes are flipped in the middle."""
    portable = bytearray(forge.mlir_to_portable(forge.fwd_text(sig)))
    for i in range(len(portable) // 3, 2 * len(portable) // 3, 7):
        portable[i] ^= 0x5A
    return forge.exported_bytes(bytes(portable), sig.fwd_in, sig.fwd_out), forge.artifacts(sig)[1]


def _on_cuda(sig: CaseSig) -> tuple[bytes, bytes]:
    return forge.artifacts(sig, platforms=("cuda",))


def _custom_call(sig: CaseSig) -> tuple[bytes, bytes]:
    return forge.artifacts(sig, forge.fwd_text(sig, forge.custom_call_body()))


REGRESSIONS = {
    "garbage_bytes": (_garbage, r"not a valid exported program|artifact"),
    "truncated_artifact": (_truncated, r"not a valid exported program|artifact"),
    "corrupt_module_bytes": (_corrupt_module, r"read|parse|valid"),
    "platform_cuda": (_on_cuda, r"cpu"),
    "custom_call": (_custom_call, r"custom_call"),
}


@pytest.mark.parametrize("variant", list(REGRESSIONS))
def test_unreadable_foreign_or_impure_artifacts_are_runtime_errors(
    variant: str, dot_problem: Problem, config: JudgeConfig
) -> None:
    make, pattern = REGRESSIONS[variant]
    report, seconds = judged(forge.bundle(make, only="small"), dot_problem, config, f"regression:{variant}")
    assert_refused(report, V.RUNTIME_ERROR, pattern)
    assert seconds < BOUND_S


# --- end to end: the forgery made inside the real jail -------------------------------------------


def test_a_dynamic_temporary_forged_inside_the_jail_is_refused(dot_problem: Problem, config: JudgeConfig) -> None:
    """A submission that writes the 1.49 GiB f32[?,?] fwd of attack 1 (and honest-looking bwd)
    from inside the jail, as wrong/forged_bundle.py does: the jail accepts the bundle (it is
    well-formed), the verifier refuses the module."""
    modules = {}
    for sig in forge.cases():
        body = forge.dynamic_pad_body(20_000, 20_000) if sig.name == "small" else ""
        modules[sig.name] = (forge.fwd_text(sig, body), forge.bwd_text(sig))
    source = forge.jail_forgery_source(modules)
    t0 = time.monotonic()
    report = grade(source, dot_problem, config)
    seconds = time.monotonic() - t0
    print(f"\n[hostile] in-jail dynamic forgery: {report.verdict.value} in {seconds:.1f} s")
    sandbox = report.checks[0]
    assert sandbox.name == "sandbox" and sandbox.passed, (sandbox.message, report.stderr[-2000:])
    assert_refused(report, V.RUNTIME_ERROR, r"dynamic|shape")
    assert seconds < 60.0
    assert jail_processes() == []
