"""The residuals check: which values autodiff saves for the backward pass, against the policy the
problem asks for (the memory rule), and the residual signatures and listings messages are made of."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from graders.artifact_limits import Aval
from graders.checks.budget import OVER_BUDGET, budget_advice, over_budget
from graders.checks.check import Advice, CheckContext, Evidence, ScorePart
from graders.checks.comparison import CaseRun, device_bytes, host_bytes, is_bookkeeping
from graders.checks.matching import match_values, with_matches
from graders.problems.memory_rule import MemoryRule
from graders.problems.spec import ProblemSpec
from graders.verdict import CheckResult, ResidualFact, Verdict

ANY_KIND = "any"  # the memory kind in a signature that does not compare kinds
OTHER_MEMORY = "keeps them in other memory"  # in a failure that is about where, not which, values are kept


def signature(residuals: list[ResidualFact], *, kinds: bool = True) -> Counter[tuple[Aval, str]]:
    """The residual signature: the multiset of residual avals with where each is kept (device or
    host memory; `ANY_KIND` for every residual when `kinds` is False, as `MemoryRule.compare_kinds`
    asks), order-free: two correct programs may save the same values in a different order."""
    return Counter((r.aval, r.memory_kind if kinds else ANY_KIND) for r in residuals)


def size_signature(residuals: list[ResidualFact], *, kinds: bool = True) -> Counter[tuple[str, int, str]]:
    """The residual signature up to layout: the multiset of (dtype, bytes, memory kind), what
    stays the same when a value's axes are split, permuted or merged (`graders.checks.layout`)."""
    return Counter((r.dtype, r.aval.nbytes, r.memory_kind if kinds else ANY_KIND) for r in residuals)


def aval_signature(residuals: list[ResidualFact]) -> Counter[Aval]:
    """The multiset of residual avals alone (what `print_saved_residuals` notes can be checked against)."""
    return Counter(r.aval for r in residuals)


def with_layouts(facts: list[ResidualFact], layouts: Sequence[dict[str, Any]]) -> list[ResidualFact]:
    """Copies of `facts` with each residual's per-device layout on a mesh (the dicts of
    `graders.verifier.placement.device_layout`, read from the compiled forward program's outputs;
    its memory kind is the one that run says): `shape` becomes `[devices, *piece]`, the shape of
    the pieces stacked by device that the values are compared as, the global shape kept in
    `global_shape`. `facts` themselves when there is none (one device)."""
    if not layouts:
        return facts
    return [
        fact.model_copy(
            update={
                "shape": [int(layout["devices"]), *layout["device_shape"]],
                "global_shape": list(fact.shape),
                "device_shape": list(layout["device_shape"]),
                "device_bytes": int(layout["device_bytes"]),
                "replicas": int(layout["replicas"]),
                "memory_kind": str(layout["device_memory_kind"]),
                "same_pieces": bool(layout.get("same_pieces", False)),
            }
        )
        for fact, layout in zip(facts, layouts, strict=True)
    ]


def format_residuals(
    residuals: list[ResidualFact], *, title: str, unmatched: str = "not saved by the required policy"
) -> str:
    """A `print_saved_residuals`-style listing with a count and total bytes, where each value comes
    from, and `unmatched` beside each residual whose `matched` is False (bookkeeping is said to be
    left out; a value in another layout says so). On a mesh: bytes per device, and what each
    device keeps of each residual (`ResidualFact.per_device`)."""
    mesh = any(r.device_bytes is not None for r in residuals)
    total = sum(r.nbytes if r.device_bytes is None else r.device_bytes for r in residuals)
    unit = "bytes per device" if mesh else "bytes"
    lines = [f"{title}: {len(residuals)} residual{'s' if len(residuals) != 1 else ''}, {total:,} {unit}"]
    width = max((len(r.short()) for r in residuals), default=0)
    for r in residuals:
        where = f"from `{r.source}`" if r.source else ""
        if not r.on_device:
            where += f" [offloaded to {r.memory_kind}]"
        note = "" if r.note and r.source and r.note.startswith("from the argument") else (r.note or "")
        mark = f"  (left out: {r.left_out})" if is_bookkeeping(r) else f"  ({unmatched})" if r.matched is False else ""
        mark += f"  ({r.layout})" if r.layout else ""
        lines.append(f"  {r.short():<{width}}  {where}{r.per_device()}  {note}".rstrip() + mark)
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


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _recompute_text(run: CaseRun) -> str:
    """What the submission recomputes against the policy, in forward work done again
    (`RecomputeFigures`), for a residuals failure; "" when either figure is unknown or they agree."""
    exp = run.expected
    if run.bwd_recompute is None or exp.bwd_recompute_flops is None:
        return ""
    yours, theirs = run.bwd_recompute.flops, exp.bwd_recompute_flops
    if yours > theirs:
        return (
            f" Your backward pass recomputes {yours - theirs:,} more FLOPs of forward work than the required "
            f"policy's ({yours:,} against {theirs:,}): work it recomputes instead of saving."
        )
    if yours < theirs:
        return (
            f" Your backward pass recomputes {theirs - yours:,} fewer FLOPs of forward work than the required "
            f"policy's ({yours:,} against {theirs:,}): it keeps work the policy recomputes."
        )
    return ""


# jax/_src/core.py (0.10.2), mem_kind_to_space: only "pinned_host" maps to host memory
UNPINNED_HOST_NOTE = (
    ". If you offloaded with offload_dst='unpinned_host': JAX keeps such a value in device memory "
    "(only 'pinned_host' moves it to the host), and so does your exported program"
)


def _exact_mismatch(run: CaseRun, rule: MemoryRule) -> str:
    """Returns why the residuals break the `exact` rule (signature, then values), or "" if they keep
    it. Bookkeeping residuals (`is_bookkeeping`) on either side are left out of both comparisons."""
    expected = [f for f in run.expected.residuals if not is_bookkeeping(f)]
    submitted = [f for f in run.residuals if not is_bookkeeping(f)]
    kinds = rule.compare_kinds
    # with values compared, a value in another layout is the same residual: only sizes must agree
    same = size_signature if rule.match == "values" else signature
    if same(expected, kinds=kinds) != same(submitted, kinds=kinds):
        diff = _difference(expected, submitted, kinds=kinds)
        if same(expected, kinds=False) == same(submitted, kinds=False):
            return (
                f"saves residuals of the right shapes but {OTHER_MEMORY} than the required policy"
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


def _residuals_failure(run: CaseRun, why: str, *, budget: bool = False) -> str:
    """Returns the failure message for one case: `why`, the recompute note and both residual
    listings (a budget problem's: `why` and yours, there being no required policy)."""
    if budget:
        return f"{run.label}: your function {why}.\n" + format_residuals(run.residuals, title="yours saves")
    return (
        f"{run.label}: your function {why}.{_recompute_text(run)}\n"
        + format_residuals(
            with_matches(run.expected.residuals, run.expected_matched),
            title="the required policy saves",
            unmatched="not saved by yours",
        )
        + "\n"
        + format_residuals(run.residuals, title="yours saves")
        + "\n"
        + f"backward pass peak live bytes: yours {run.bwd_peak_bytes:,}, "
        f"reference {run.expected.bwd_peak_bytes:,}"
    )


def _mismatch(run: CaseRun, rule: MemoryRule, exp_device: int, sub_device: int) -> str:
    """Why one case's residuals break the rule, or "" (`check_residuals`)."""
    if rule.rule == "exact":
        return _exact_mismatch(run, rule)
    if rule.rule == "budget":
        return over_budget(run)
    if sub_device > exp_device + rule.slack_bytes:
        return (
            f"keeps {sub_device:,} bytes of residuals on the device, more than the "
            f"{exp_device + rule.slack_bytes:,} allowed"
        )
    return ""


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
            "expected_host_bytes": host_bytes(expected),
            "submitted_host_bytes": host_bytes(submitted),
            "expected_bwd_flops": run.expected.bwd_flops,
            "submitted_bwd_flops": run.bwd_flops,
        }
        if rule.rule == "exact" or (rule.rule == "at_most" and rule.match == "values"):
            details[run.expected.name]["values_matched"] = match_values(run, spec=spec)
        why = _mismatch(run, rule, exp_device, sub_device)
        if why:
            failures.append((max(exp_bytes, sub_bytes), _residuals_failure(run, why, budget=rule.rule == "budget")))
    # the case with the most bytes at stake, as in the residual report beside the verdict
    failure = max(failures, key=lambda f: f[0])[1] if failures else None
    if failure:
        return CheckResult(
            name="residuals", passed=False, message=failure, details=details, verdict=Verdict.WRONG_POLICY
        )
    if rule.rule == "budget":
        fits = (
            "peaks within the budget on every case"
            if rule.budget_of == "peak"
            else "keeps within the budget on every case"
        )
        return CheckResult(name="residuals", passed=True, message=fits, details=details)
    if rule.rule == "exact":
        kind = "the same values as" if rule.match == "values" else "residuals of the same shapes and dtypes as"
    else:
        kind = "no more residual bytes than"
    return CheckResult(
        name="residuals", passed=True, message=f"saves {kind} the reference on every case", details=details
    )


def _listed(values: list[str], limit: int = 3) -> str:
    more = f" and {len(values) - limit} more" if len(values) > limit else ""
    return ", ".join(values[:limit]) + more


def _values(n: int) -> str:
    return f"{n} value" if n == 1 else f"{n} values"


class ResidualsCheck:
    """The residuals check in the registry (`graders.checks.check.Check`): `check_residuals`."""

    name = "residuals"
    part: ScorePart = "policy"
    headline = "Your checkpoint policy saves different values than the required one"

    def run(self, runs: list[CaseRun], context: CheckContext) -> CheckResult:
        return check_residuals(runs, spec=context.spec)

    def explain(self, evidence: Evidence) -> Advice:
        """Names the values saved only by the submission and only by the reference, with what to
        change; a failure about memory kinds says where to keep them instead."""
        if OVER_BUDGET in evidence.message:
            return budget_advice(evidence.message)
        if OTHER_MEMORY in evidence.message:
            return Advice(
                evidence.message.split("\n", 1)[0],
                headline="Your checkpoint policy saves the right values in the wrong memory",
                advice="Keep each value where the required policy keeps it: offload to pinned_host what it "
                "offloads, and leave the rest in device memory.",
            )
        extra, missing = evidence.extra, evidence.missing
        parts = []
        if extra:
            parts.append(f"Your code saves {_values(len(extra))} the required policy does not keep: {_listed(extra)}.")
        if missing:
            parts.append(f"It does not save {_values(len(missing))} the required policy keeps: {_listed(missing)}.")
        if extra and missing:
            advice = (
                "Change what your policy saves: keep the missing values, and let the extra ones be "
                "recomputed in the backward pass."
            )
        elif extra:
            advice = (
                "Save less: those values should be recomputed in the backward pass (a stricter policy, "
                "or one checkpointed region around more of the computation)."
            )
        elif missing:
            advice = "Save more: let the policy keep those values instead of recomputing them."
        else:
            advice = ""
        return Advice(" ".join(parts) or evidence.message, advice)
