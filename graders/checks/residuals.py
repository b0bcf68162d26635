"""Memory checks: which residuals autodiff saves, and the backward pass's peak live bytes."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from graders.artifact_limits import Aval
from graders.checks.common import CaseRun, compare_calibrated
from graders.expectation import error_of
from graders.problem_spec import MemoryRule, ProblemSpec, Tolerance
from graders.verdict import CheckResult, ResidualFact, Verdict

ANY_KIND = "any"  # the memory kind in a signature that does not compare kinds


def signature(residuals: list[ResidualFact], *, kinds: bool = True) -> Counter[tuple[Aval, str]]:
    """The residual signature: the multiset of residual avals with where each is kept (device or
    host memory; `ANY_KIND` for every residual when `kinds` is False, as `MemoryRule.compare_kinds`
    asks), order-free: two correct programs may save the same values in a different order."""
    return Counter((r.aval, r.memory_kind if kinds else ANY_KIND) for r in residuals)


def aval_signature(residuals: list[ResidualFact]) -> Counter[Aval]:
    """The multiset of residual avals alone (what `print_saved_residuals` notes can be checked against)."""
    return Counter(r.aval for r in residuals)


def device_bytes(residuals: list[ResidualFact]) -> int:
    """Residual bytes kept in device memory between the passes."""
    return sum(r.nbytes for r in residuals if r.on_device)


def describe_residuals(
    avals: Sequence[Any],
    notes: Sequence[Any] | None,
    *,
    sources: Sequence[str] | None = None,
    hide_source: bool = False,
    memory_kinds: Sequence[str] | None = None,
) -> list[ResidualFact]:
    """The residuals read from an artifact, in the artifact's order, with provenance and notes.

    `saved_residuals` notes list the same values as the VJP's leaves, but not always in the same
    order (measured with JAX 0.10.2: a relu's boolean mask comes before the intermediates it
    follows in the VJP). So notes are attached only when their avals form the same multiset as the
    artifact's; within one aval a note goes first to a residual whose provenance it names ("output
    of sine" to a residual from `sine`), the rest in artifact order. Otherwise no notes: the
    artifact decides, the notes only explain.

    Args:
        avals: residual avals read from the fwd artifact (objects with `.shape` and `.dtype`).
        notes: `{"shape", "dtype", "note"}` dicts or objects, or None.
        sources: per residual, its producing op read from the artifact (`ModuleInfo.sources`).
        hide_source: drop "from <file>:<line> (<function>)" (for the reference: never show its
            path or structure to students).
        memory_kinds: per residual, where the forward program leaves it (`ModuleInfo.memory_kinds`).
    """
    facts = [
        ResidualFact(
            shape=list(a.shape),
            dtype=str(a.dtype),
            source=sources[i] if sources is not None and i < len(sources) else None,
            memory_kind=memory_kinds[i] if memory_kinds is not None and i < len(memory_kinds) else "device",
        )
        for i, a in enumerate(avals)
    ]
    if not notes:
        return facts

    def field(n: Any, name: str) -> Any:
        return n[name] if isinstance(n, dict) else getattr(n, name)

    described = [(Aval(tuple(field(n, "shape")), str(field(n, "dtype"))), str(field(n, "note"))) for n in notes]
    if Counter(key for key, _ in described) != aval_signature(facts):
        return facts
    queues: dict[Aval, list[str]] = {}
    for key, note in described:
        if hide_source:
            note = re.sub(r" from (?!the argument).*$", "", note)
        queues.setdefault(key, []).append(note)

    def agrees(fact: ResidualFact, note: str) -> bool:
        if not fact.source:
            return False
        if fact.source.startswith("argument "):
            return note.startswith(f"from the {fact.source}")
        return note.startswith(f"output of {fact.source}")

    # within one aval, a note goes first to a residual whose provenance it names, then in order
    for strict in (True, False):
        for fact in facts:
            if fact.note is not None:
                continue
            queue = queues[fact.aval]
            chosen = next((i for i, note in enumerate(queue) if agrees(fact, note)), None if strict else 0)
            if chosen is not None:
                fact.note = queue.pop(chosen)
    return facts


def format_residuals(
    residuals: list[ResidualFact], *, title: str, unmatched: str = "not saved by the required policy"
) -> str:
    """A `print_saved_residuals`-style listing with a count and total bytes, where each value comes
    from, and `unmatched` beside each residual whose `matched` is False."""
    total = sum(r.nbytes for r in residuals)
    lines = [f"{title}: {len(residuals)} residual{'s' if len(residuals) != 1 else ''}, {total:,} bytes"]
    width = max((len(r.short()) for r in residuals), default=0)
    for r in residuals:
        where = f"from `{r.source}`" if r.source else ""
        if not r.on_device:
            where += f" [offloaded to {r.memory_kind}]"
        note = "" if r.note and r.source and r.note.startswith("from the argument") else (r.note or "")
        mark = f"  ({unmatched})" if r.matched is False else ""
        lines.append(f"  {r.short():<{width}}  {where}  {note}".rstrip() + mark)
    return "\n".join(lines)


def _offloads(residuals: list[ResidualFact]) -> bool:
    """Whether any residual is kept outside device memory."""
    return any(not r.on_device for r in residuals)


def _difference(expected: list[ResidualFact], submitted: list[ResidualFact], *, kinds: bool = True) -> str:
    want, got = signature(expected, kinds=kinds), signature(submitted, kinds=kinds)
    missing, extra = want - got, got - want
    places = kinds and _offloads(expected + submitted)

    def short(key: tuple[Aval, str]) -> str:
        aval, memory_kind = key
        if memory_kind == ANY_KIND:
            return aval.short()
        if memory_kind == "device":
            return aval.short() + (" in device memory" if places else "")
        return aval.short() + f" on {memory_kind}"

    parts = []
    if missing:
        parts.append("not saved by yours: " + ", ".join(f"{short(k)} x{n}" for k, n in sorted(missing.items())))
    if extra:
        parts.append("saved by yours only: " + ", ".join(f"{short(k)} x{n}" for k, n in sorted(extra.items())))
    return "; ".join(parts)


MASK_MISMATCH_FRACTION = 0.005  # bool/int residuals: share of elements that may differ (float noise at 0)


def residuals_equal(got: np.ndarray, reference: np.ndarray, reference_error: float | None, tol: Tolerance) -> bool:
    """Whether a submitted residual holds the same value as a reference residual on one input.

    Floats: within the calibrated tolerance (`compare_calibrated`). Bool and integer values (masks,
    indices): equal except for at most MASK_MISMATCH_FRACTION of the elements (at least one), which
    float noise next to a threshold can flip; a different mask differs in a large share.
    """
    if got.shape != reference.shape or got.dtype != reference.dtype:
        return False
    if got.dtype.kind in "biu":
        allowed = max(1, int(MASK_MISMATCH_FRACTION * got.size))
        return int(np.count_nonzero(got != reference)) <= allowed
    return compare_calibrated(got, reference, reference_error, tol).passed


def match_residuals(run: CaseRun, *, spec: ProblemSpec) -> list[int | None]:
    """A one-to-one matching of the submission's residuals to the reference's, by value.

    A submitted residual i may match reference residual j when both have the same aval and
    `residuals_equal` holds on every hidden input. The matching is maximum (augmenting paths,
    Kuhn's algorithm), so two residuals of one aval saved in swapped order still match.

    Returns:
        Per submitted residual, the index of its reference residual, or None.
    """
    exp = run.expected
    sub_values, ref_values = run.residual_values, exp.residual_values
    n_sub, n_ref = len(run.residuals), len(exp.residuals)
    candidates: list[list[int]] = []
    for i, fact in enumerate(run.residuals):
        same_aval = [
            j
            for j in range(n_ref)
            if exp.residuals[j].shape == fact.shape
            and exp.residuals[j].dtype == fact.dtype
            and (exp.residuals[j].memory_kind == fact.memory_kind or not spec.memory.compare_kinds)
        ]
        candidates.append(sorted(same_aval, key=lambda j: (j != i, j)))  # try the same position first
    cache: dict[tuple[int, int], bool] = {}

    def equal(i: int, j: int) -> bool:
        if (i, j) not in cache:
            tol = spec.tolerance_for(run.residuals[i].dtype)
            cache[(i, j)] = all(
                residuals_equal(sub_values[k][i], ref_values[k][j], error_of(exp.residual_errors, k, j), tol)
                for k in range(min(len(sub_values), len(ref_values)))
            )
        return cache[(i, j)]

    owner: dict[int, int] = {}  # reference index -> submitted index
    for start in range(n_sub):
        # iterative augmenting-path search from `start`
        parent: dict[int, tuple[int, int | None]] = {}  # ref j -> (sub i that reached it, previous ref)
        stack: list[tuple[int, int | None]] = [(start, None)]
        seen: set[int] = set()
        found: int | None = None
        while stack and found is None:
            i, via = stack.pop()
            for j in candidates[i]:
                if j in seen or not equal(i, j):
                    continue
                seen.add(j)
                parent[j] = (i, via)
                if j not in owner:
                    found = j
                    break
                stack.append((owner[j], j))
        j_cur: int | None = found
        while j_cur is not None:
            i, previous = parent[j_cur]
            owner[j_cur] = i
            j_cur = previous
    by_sub = {i: j for j, i in owner.items()}
    return [by_sub.get(i) for i in range(n_sub)]


def _with_matches(facts: list[ResidualFact], matched: list[bool] | None) -> list[ResidualFact]:
    """Copies of the reference's facts (shared by every run) marked with what the submission saves."""
    if matched is None:
        return facts
    return [f.model_copy(update={"matched": m}) for f, m in zip(facts, matched, strict=True)]


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _recompute_text(run: CaseRun) -> str:
    exp = run.expected
    if run.bwd_flops is None:
        return ""
    extra = run.bwd_flops - exp.bwd_flops
    if extra > 0:
        return (
            f" Your backward pass does {extra:,} more FLOPs than the required policy's ({run.bwd_flops:,} "
            f"against {exp.bwd_flops:,}): work it recomputes instead of saving."
        )
    if extra < 0:
        return (
            f" Your backward pass does {-extra:,} fewer FLOPs than the required policy's ({run.bwd_flops:,} "
            f"against {exp.bwd_flops:,}): it keeps work the policy recomputes."
        )
    return ""


def _match_values(run: CaseRun, *, spec: ProblemSpec) -> int:
    """Returns how many reference residuals the submission's match by value, marking `matched` on both sides."""
    expected, submitted = run.expected.residuals, run.residuals
    matching = match_residuals(run, spec=spec)
    matched_refs = {j for j in matching if j is not None}
    run.expected_matched = [j in matched_refs for j in range(len(expected))]
    for fact, j in zip(submitted, matching, strict=True):
        fact.matched = j is not None
    return len(matched_refs)


# jax/_src/core.py (0.10.2), mem_kind_to_space: only "pinned_host" maps to host memory
UNPINNED_HOST_NOTE = (
    ". If you offloaded with offload_dst='unpinned_host': JAX keeps such a value in device memory "
    "(only 'pinned_host' moves it to the host), and so does your exported program"
)


BOOKKEEPING_ELEMENTS = 256  # an integer residual this small is a loop counter or a branch index


def is_bookkeeping(fact: ResidualFact) -> bool:
    """Whether a residual is loop or branch bookkeeping, not part of a policy: an integer (not
    boolean) value of at most `BOOKKEEPING_ELEMENTS` elements. Measured: a `fori_loop` over 8 layers
    saves its counter as i32[] and i32[8]; a `lax.cond` on data saves its branch index as i32[]. A
    policy's integer values (a relu's mask is bool, a gather's indices are as large as the data) are
    larger or boolean, and the float residuals must still match one to one."""
    return np.dtype(fact.dtype).kind in "iu" and math.prod(fact.shape) <= BOOKKEEPING_ELEMENTS


def _exact_mismatch(run: CaseRun, rule: MemoryRule) -> str:
    """Returns why the residuals break the `exact` rule (signature, then values), or "" if they keep
    it. Bookkeeping residuals (`is_bookkeeping`) on either side are left out of both comparisons."""
    expected = [f for f in run.expected.residuals if not is_bookkeeping(f)]
    submitted = [f for f in run.residuals if not is_bookkeeping(f)]
    kinds = rule.compare_kinds
    if signature(expected, kinds=kinds) != signature(submitted, kinds=kinds):
        diff = _difference(expected, submitted, kinds=kinds)
        if signature(expected, kinds=False) == signature(submitted, kinds=False):
            return (
                "saves residuals of the right shapes but keeps them in other memory than the required policy"
                + (f" ({diff})" if diff else "")
                + (UNPINNED_HOST_NOTE if _offloads(expected) and not _offloads(submitted) else "")
            )
        return "saves different residuals than the required checkpoint policy" + (f" ({diff})" if diff else "")
    if rule.match == "values" and not all(f.matched for f in submitted):
        yours = [f for f in submitted if not f.matched]
        assert run.expected_matched is not None  # set by _match_values, as rule.match == "values"
        theirs = [
            f
            for f, m in zip(run.expected.residuals, run.expected_matched, strict=True)
            if not m and not is_bookkeeping(f)
        ]
        return (
            f"saves residuals of the right shapes, but {_count(len(yours), 'value')} "
            f"{'is' if len(yours) == 1 else 'are'} not one the required policy saves: you save "
            + ", ".join(f.described() for f in yours)
            + " where the policy saves "
            + ", ".join(f.described() for f in theirs)
        )
    return ""


def _residuals_failure(run: CaseRun, why: str) -> str:
    """Returns the failure message for one case: `why`, the recompute note and both residual listings."""
    return (
        f"{run.label}: your function {why}.{_recompute_text(run)}\n"
        + format_residuals(
            _with_matches(run.expected.residuals, run.expected_matched),
            title="the required policy saves",
            unmatched="not saved by yours",
        )
        + "\n"
        + format_residuals(run.residuals, title="yours saves")
        + "\n"
        + f"backward pass peak live bytes: yours {run.bwd_peak_bytes:,}, "
        f"reference {run.expected.bwd_peak_bytes:,}"
    )


def check_residuals(runs: list[CaseRun], *, spec: ProblemSpec) -> CheckResult:
    """Compares saved residuals with the reference's under the problem's memory rule.

    `exact`: the residual signatures must be equal and, with `match = "values"` (the default),
    every submitted residual must equal a distinct reference residual as a value on every hidden
    input (`match_residuals`): a policy that saves other values of the same shapes fails.
    `at_most`: the residual bytes kept on the device must not exceed the reference's plus
    `slack_bytes` (bytes a policy offloads to host memory do not count). Where each residual is
    kept (device or host memory) is part of its signature and of its value match.
    Sets `matched` on the residual facts of every run.

    Returns:
        A "residuals" CheckResult; fails with WRONG_POLICY, naming the values that differ by
        provenance, for the failing case with the most bytes at stake (the case the residual report
        shows too).
    """
    rule = spec.memory
    details = {}
    failures: list[tuple[int, str]] = []  # (bytes at stake, message) per failing case
    for run in runs:
        expected, submitted = run.expected.residuals, run.residuals
        exp_bytes, sub_bytes = sum(r.nbytes for r in expected), sum(r.nbytes for r in submitted)
        exp_device, sub_device = device_bytes(expected), device_bytes(submitted)
        details[run.expected.name] = {
            "expected_count": len(expected),
            "submitted_count": len(submitted),
            "expected_bytes": exp_bytes,
            "submitted_bytes": sub_bytes,
            "expected_host_bytes": exp_bytes - exp_device,
            "submitted_host_bytes": sub_bytes - sub_device,
            "expected_bwd_flops": run.expected.bwd_flops,
            "submitted_bwd_flops": run.bwd_flops,
        }
        why = ""
        if rule.rule == "exact" or rule.match == "values":
            details[run.expected.name]["values_matched"] = _match_values(run, spec=spec)
        if rule.rule == "exact":
            why = _exact_mismatch(run, rule)
        elif sub_device > exp_device + rule.slack_bytes:
            why = (
                f"keeps {sub_device:,} bytes of residuals on the device, more than the "
                f"{exp_device + rule.slack_bytes:,} allowed"
            )
        if why:
            failures.append((max(exp_bytes, sub_bytes), _residuals_failure(run, why)))
    # the case with the most bytes at stake, as in the residual report beside the verdict
    failure = max(failures, key=lambda f: f[0])[1] if failures else None
    if failure:
        return CheckResult(
            name="residuals", passed=False, message=failure, details=details, verdict=Verdict.WRONG_POLICY
        )
    if rule.rule == "exact":
        kind = "the same values as" if rule.match == "values" else "residuals of the same shapes and dtypes as"
    else:
        kind = "no more residual bytes than"
    return CheckResult(
        name="residuals", passed=True, message=f"saves {kind} the reference on every case", details=details
    )


def _same_values(run: CaseRun) -> bool:
    """Whether the submission saves exactly the reference's residuals, as values (every one of
    either side matched one to one by the residuals check)."""
    return (
        run.expected_matched is not None
        and all(run.expected_matched)
        and all(f.matched for f in run.residuals)
        and len(run.residuals) == len(run.expected.residuals)
    )


def peak_slack(run: CaseRun, rule: MemoryRule) -> tuple[int, str]:
    """(bytes, why) a submission's backward peak may exceed the reference's by.

    `rule.slack_bytes`; and when the submission saves exactly the reference's values, at least twice
    the largest single value of the reference's backward program: the policy is then the
    reference's, and how the derivative is written moves the peak by a temporary or two, not by a
    policy's worth (measured: `exp2(c * log2 e)` for `exp(c)` in checkpoint_stages holds one f32[N]
    and three scalars more, 4,194,316 bytes in the large case).
    """
    calibrated = 2 * run.expected.bwd_largest_value_bytes
    if _same_values(run) and calibrated > rule.slack_bytes:
        return calibrated, "two of the largest values of its backward pass, since you save the same values"
    return rule.slack_bytes, "allowed"


def check_peak_memory(runs: list[CaseRun], *, rule: MemoryRule) -> CheckResult:
    """Compares the backward pass's peak live bytes with the reference's.

    Under `at_most` (and `exact` with `bound_bwd_peak`) a peak above the reference's plus the slack
    (`peak_slack`) fails with WRONG_POLICY: checkpointing a whole chain saves few residuals but
    holds every recomputed value at once in the backward pass, and only this check sees it.
    Otherwise the residual signature decides and this check only reports the numbers.
    """
    details = {}
    failure = None
    for run in runs:
        exp_peak, sub_peak = run.expected.bwd_peak_bytes, run.bwd_peak_bytes
        slack, why = peak_slack(run, rule)
        details[run.expected.name] = {
            "expected_bwd_peak_bytes": exp_peak,
            "submitted_bwd_peak_bytes": sub_peak,
            "expected_fwd_peak_bytes": run.expected.fwd_peak_bytes,
            "submitted_fwd_peak_bytes": run.fwd_peak_bytes,
            "slack_bytes": slack,
        }
        if rule.bounds_peak and sub_peak > exp_peak + slack and failure is None:
            failure = (
                f"{run.label}: your backward pass holds up to {sub_peak:,} bytes live at once (measured "
                f"statically, ops in program order), more than the reference's {exp_peak:,} bytes plus "
                f"{slack:,} ({why})."
            )
            if not _same_values(run):
                failure += (
                    " Saving few residuals is not enough if the backward pass then recomputes a whole "
                    "chain and keeps it all at once: checkpoint in smaller pieces."
                )
    if failure:
        return CheckResult(
            name="peak_memory", passed=False, message=failure, details=details, verdict=Verdict.WRONG_POLICY
        )
    last = runs[-1] if runs else None
    summary = (
        f"; {last.label}: backward pass peak {last.bwd_peak_bytes:,} bytes, reference "
        f"{last.expected.bwd_peak_bytes:,} bytes"
        if last
        else ""
    )
    if not rule.bounds_peak:
        return CheckResult(
            name="peak_memory",
            passed=True,
            judged=False,
            message="reported only (this problem's rule is an exact residual signature)" + summary,
            details=details,
        )
    return CheckResult(
        name="peak_memory",
        passed=True,
        message="backward pass peak live bytes within the reference's on every case" + summary,
        details=details,
    )


WRITING_PASSES = 2  # elementwise passes over the largest backward value a correct rewrite may add
# share of the reference's backward FLOPs a correct rewrite may move into work on the residuals alone
# (measured: at most 0.5% in the bank's right/ files and held-out styles, past the passes)
RESIDUAL_SHARE = 0.05


JUDGED_FLOPS_FLOOR = 1_000_000  # a reference backward pass this costly is judged on any case


def judged_recompute_cases(runs: list[CaseRun]) -> set[str]:
    """The cases whose backward FLOPs the recompute bound judges: the one where the reference's
    backward pass spends the most FLOPs (ties all), and every case where it spends at least
    `JUDGED_FLOPS_FLOOR`.

    A relative bound means something only where the policy's work dwarfs what the way a derivative
    is written adds: a blocked mat-vec, an extra elementwise pass, a reordered product. On the
    bank's smallest cases those add 20-70% to a backward pass of a few hundred FLOPs (measured:
    736 against 442 FLOPs at d=4 in checkpoint_each_layer) while recomputing everything costs 2 to
    180 times the reference's on the largest one; past a million FLOPs no correct file of the bank
    or of the held-out styles spends more than 1.24 times the reference's (`bench/recompute_styles.py`
    prints the table). The other cases are reported.
    """
    counted = [r for r in runs if r.bwd_flops is not None]
    if not counted:
        return set()
    most = max(r.expected.bwd_flops for r in counted)
    return {
        r.expected.name for r in counted if r.expected.bwd_flops == most or r.expected.bwd_flops >= JUDGED_FLOPS_FLOOR
    }


def _recompute_failure(run: CaseRun, rule: MemoryRule, flops: int, residual: int | None, *, at_least: bool) -> str:
    """Why one judged case recomputes too much, or "" (the bounds of `check_recompute`). `flops` and
    `residual` are the submission's backward FLOPs and its work on the residuals alone, exact or,
    with `at_least`, lower bounds (the cheapest branch where only the run picks one)."""
    exp = run.expected
    slack = rule.recompute_slack or 0.0
    allowed = exp.bwd_flops * (1 + slack) + WRITING_PASSES * exp.bwd_largest_value_elements
    some = "at least " if at_least else ""
    if exp.bwd_residual_flops is not None and residual is not None and flops <= allowed:
        residual_allowed = (
            exp.bwd_residual_flops * (1 + slack)
            + WRITING_PASSES * exp.bwd_largest_value_elements
            + RESIDUAL_SHARE * exp.bwd_flops
        )
        if residual > residual_allowed:
            return (
                f"{run.label}: your backward pass spends {some}{residual:,} FLOPs on work that does not "
                f"depend on the cotangent (computing forward values again from what was saved) where the "
                f"required policy spends {exp.bwd_residual_flops:,} (at most {residual_allowed:,.0f} allowed). "
                f"Use the values the policy saves instead of recomputing them."
            )
    if flops <= allowed:
        return ""
    theirs, yours = exp.recompute_flops(exp.bwd_flops), exp.recompute_flops(flops)
    redo = (
        f" It recomputes {some}{yours:,} FLOPs of forward work where the required policy recomputes {theirs:,}."
        if yours is not None and theirs is not None
        else ""
    )
    return (
        f"{run.label}: your backward pass spends {some}{flops:,} FLOPs, "
        f"{flops / max(1, exp.bwd_flops):.1f} times the required policy's {exp.bwd_flops:,} "
        f"(at most {allowed:,.0f} allowed).{redo} Save the values the policy saves and use them, "
        f"instead of recomputing what they hold."
    )


def check_recompute(runs: list[CaseRun], *, rule: MemoryRule) -> CheckResult:
    """What the backward pass recomputes, against the policy the problem asks for.

    Under `exact` with a `recompute_slack`, a backward pass that spends more than (1 + slack)
    times the reference's backward FLOPs, plus `WRITING_PASSES` elementwise passes over the largest
    value of the reference's backward program (how a derivative is written moves the count by a
    pass or two), or whose work on the residuals alone (`CaseRun.bwd_residual_flops`: what depends
    on no cotangent, the forward values it computes again) exceeds (1 + slack) times the
    reference's plus those passes plus `RESIDUAL_SHARE` of the reference's whole backward pass
    (a custom_vjp that saves a dense layer's matmul outputs and recomputes them anyway adds 25% to
    the whole but 1000 times to that part), fails with WRONG_POLICY on the case the bound judges
    (`judged_recompute_cases`:
    the one with the costliest reference backward pass), saying how much forward work it redoes: a
    policy saves values so they need not be recomputed, and a solution that saves the right values
    and recomputes everything anyway (measured: 180 times the reference's recomputation in
    checkpoint_stages) does not follow it. The FLOPs are those of what runs
    (`graders.untrusted.flops`: no dead code, no untaken branch of a constant `cond`). Not judged
    (reported only) under `at_most` (saving less and recomputing more is allowed there), without
    a slack, or when a figure of a judged case is inexact (a loop's trip count or a branch index
    that only the run decides), unless even its lower bound (the cheapest branch, each unknown loop
    once) is over: a data-dependent `lax.cond` around a recompute-everything branch is no way out.
    """
    judged = rule.rule == "exact" and rule.recompute_slack is not None
    judged_cases = judged_recompute_cases(runs)
    details: dict[str, Any] = {}
    failure = None
    inexact = False
    for run in runs:
        exp = run.expected
        if run.bwd_flops is None:
            continue
        exact = run.bwd_flops_exact and exp.bwd_flops_exact
        decides = exp.name in judged_cases
        inexact = inexact or (decides and not exact)
        details[exp.name] = {
            "expected_bwd_flops": exp.bwd_flops,
            "submitted_bwd_flops": run.bwd_flops,
            "expected_recompute_flops": exp.recompute_flops(exp.bwd_flops),
            "submitted_recompute_flops": exp.recompute_flops(run.bwd_flops),
            "expected_residual_flops": exp.bwd_residual_flops,
            "submitted_residual_flops": run.bwd_residual_flops,
            "exact": exact,
            "judged": judged and decides,
        }
        if not (judged and decides and exp.bwd_flops_exact) or failure is not None:
            continue
        if run.bwd_flops_exact:
            failure = _recompute_failure(run, rule, run.bwd_flops, run.bwd_residual_flops, at_least=False) or None
        elif run.bwd_flops_low is not None:  # a branch only the run picks: the cheapest still too much
            failure = (
                _recompute_failure(run, rule, run.bwd_flops_low, run.bwd_residual_flops_low, at_least=True) or None
            )
    if failure:
        return CheckResult(
            name="recompute", passed=False, message=failure, details=details, verdict=Verdict.WRONG_POLICY
        )
    note = " (a loop's trip count or a branch is decided only at run time: the FLOPs are not exact)" if inexact else ""
    if not judged or inexact:
        return CheckResult(
            name="recompute",
            passed=True,
            judged=False,
            details=details,
            message=("reported only" if not judged else "not judged") + note,
        )
    return CheckResult(
        name="recompute",
        passed=True,
        details=details,
        message=f"the backward pass recomputes no more than the required policy "
        f"(+{rule.recompute_slack:.0%} allowed) on {', '.join(sorted(judged_cases))} (the case with the "
        f"costliest backward pass and any past {JUDGED_FLOPS_FLOOR:,} FLOPs; the others are reported)",
    )
