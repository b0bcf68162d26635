"""`[memory]` of problem.toml: what the saved residuals must be (`MemoryRule`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from graders.problems.generators import StrictModel


class MemoryRule(StrictModel):
    """What the saved residuals must be.

    `exact`: the residual signature (the multiset of residual avals) equals the reference's; with
    `bound_bwd_peak`, the backward pass's peak live bytes must also be at most the reference's plus
    `slack_bytes` (for problems whose values all share one shape, where a wrong checkpoint placement
    can save as many arrays of that shape as the right one but holds more at once afterwards).
    `at_most`: residual bytes and backward-pass peak live bytes are each at most the reference's
    plus `slack_bytes`.
    `match` (for `exact`): "values" (default) also requires each saved residual to equal, as a value
    on every hidden input, a distinct residual of the reference (docs/ARCHITECTURE.md, "Two axes of
    a policy"); "avals" compares shapes and dtypes only, for a problem whose statement accepts any
    value of the right shape.
    `recompute_slack` (for `exact`): the backward pass may spend at most this fraction more FLOPs
    than the reference's (a policy saves values so the backward pass need not recompute them: one
    that saves the right values and recomputes everything anyway is WRONG_POLICY); None: reported
    only. The default, 0.25, is measured: the bank's correct solutions, written in other styles,
    stay within a few percent of their reference.
    `compare_kinds` (for `exact`): True (default) requires each residual to be kept where the
    reference keeps it (device memory, or host memory for a value a policy offloads); False
    accepts either place, for a statement that says "keep it on the device or offload it, both are
    fine" (the values are still matched, and where each is kept is still reported).
    `budget`: an open problem (docs/ARCHITECTURE.md, "Budget problems"). `budgets` gives each case
    the bytes of residuals its policy may keep on the device; any program with the right values and
    gradients within it is ACCEPTED, and the policy part of the score is how close its
    recomputation comes to the least any policy within the budget needs (`graders.checks.budget`).
    `budget_of` (for `budget`): what the budget bounds. "residuals" (default): the bytes of
    residuals kept on the device, and the least recomputation is solved for exactly over every
    choice of saved values (`graders.budget.optimum`). "peak": the backward pass's peak live bytes,
    counted statically with its ops in program order (what `ModuleInfo.peak_live_bytes` counts);
    that peak depends on the schedule JAX emits, which no model here predicts to the byte, so the
    least recomputation is the least of the reference and the schedules its `SCHEDULES` names,
    each measured like a submission (`graders.reference.schedules`).
    """

    rule: Literal["exact", "at_most", "budget"] = "exact"
    match: Literal["values", "avals"] = "values"
    slack_bytes: Annotated[int, Field(ge=0)] = 0
    bound_bwd_peak: bool = False
    recompute_slack: Annotated[float, Field(ge=0, le=100)] | None = 0.25
    compare_kinds: bool = True
    budgets: dict[str, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)
    budget_of: Literal["residuals", "peak"] = "residuals"

    @model_validator(mode="after")
    def _budgets_only_with_their_rule(self) -> MemoryRule:
        if self.rule == "budget" and not self.budgets:
            raise ValueError('rule = "budget" needs budgets = { <case> = <bytes>, ... } for every case')
        if self.rule != "budget" and self.budgets:
            raise ValueError('budgets are read only with rule = "budget"')
        if self.rule != "budget" and self.budget_of != "residuals":
            raise ValueError('budget_of is read only with rule = "budget"')
        if self.rule == "budget" and self.bound_bwd_peak:
            raise ValueError(
                "a budget problem bounds what budget_of says; bound_bwd_peak is not read with it "
                '(use budget_of = "peak")'
            )
        return self

    @property
    def bounds_peak(self) -> bool:
        """Whether the backward pass's peak live bytes are judged (not only reported)."""
        return self.rule == "at_most" or self.bound_bwd_peak
