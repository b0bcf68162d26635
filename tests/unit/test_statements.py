"""What every statement tells students about the judging, fast: each problem's "How this judge
measures it" section, and the one `problems new` writes, states what is left out of the residual
comparison (bookkeeping: values that carry nothing about the inputs), that a value in another
layout is the same residual, and that the recompute figure counts forward work done again, not
the derivative's own arithmetic."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from graders.problems.scaffold import scaffold
from graders.problems.scaffold_frameworks import FRAMEWORKS
from tests.support import PROBLEMS

SECTION = "## How this judge measures it"

# per rule, the phrases its sentence must hold (whitespace-insensitive: statements wrap at 100 columns)
RULES = {
    "bookkeeping": (
        "no floating-point input's data flows into",
        "loop counter",
        "only to pick a branch",
        '"left out" with the reason',
        "both sides",
    ),
    "layout": ("another layout", "permuted", "reshape", "same residual", "reversed, rolled, shuffled"),
    "recompute": ("forward work", "runs again from what was saved", "not the derivative's own arithmetic"),
}


def measuring_section(statement: str) -> str | None:
    """The text of the statement's measuring section up to the next `## ` heading, or None."""
    start = statement.find(SECTION)
    if start < 0:
        return None
    rest = statement[start + len(SECTION) :]
    nxt = re.search(r"^## ", rest, re.M)
    return " ".join((rest[: nxt.start()] if nxt else rest).split())


# a budget problem compares bytes, not values: it says what the budget and the score are instead of layout
BUDGET_RULES = {
    "bookkeeping": RULES["bookkeeping"],
    "recompute": RULES["recompute"],
    "budget": ("bytes of the residuals", "WRONG_POLICY, with by how much", "least any policy within the budget"),
}

# a budget of the backward pass's peak says which peak it means and where its optimum comes from
PEAK_BUDGET_RULES = {
    "bookkeeping": RULES["bookkeeping"],
    "recompute": RULES["recompute"],
    "budget": ("in program order", "WRONG_POLICY, with by how much", "least of the schedules the judge measured"),
}


def missing(statement: str, *, budget: str | None = None) -> list[str]:
    """What the statement's measuring section leaves unsaid: the section itself, or a rule's phrase
    (`budget`: None, or what a budget problem's budget counts, "residuals" or "peak")."""
    section = measuring_section(statement)
    if section is None:
        return [SECTION]
    rules = {None: RULES, "residuals": BUDGET_RULES, "peak": PEAK_BUDGET_RULES}[budget]
    return [f"{rule}: {phrase}" for rule, phrases in rules.items() for phrase in phrases if phrase not in section]


def problem_slugs() -> list[str]:
    return sorted(p.name for p in PROBLEMS.iterdir() if p.is_dir() and not p.name.startswith("."))


def test_the_bank_has_problems() -> None:
    assert len(problem_slugs()) >= 20


@pytest.mark.parametrize("slug", problem_slugs())
def test_a_statement_says_what_is_left_out_layout_and_recompute(slug: str) -> None:
    statement = (PROBLEMS / slug / "statement.md").read_text(encoding="utf-8")
    toml = (PROBLEMS / slug / "problem.toml").read_text(encoding="utf-8")
    budget = None if 'rule = "budget"' not in toml else "peak" if 'budget_of = "peak"' in toml else "residuals"
    assert missing(statement, budget=budget) == []


@pytest.mark.parametrize("framework", [None, *FRAMEWORKS])
def test_a_scaffolded_statement_says_them_too(tmp_path: Path, framework: str | None) -> None:
    made = scaffold(tmp_path, "fresh_problem", framework)
    statement = (made / "statement.md").read_text(encoding="utf-8")
    assert missing(statement) == []
    assert "{" not in statement and "}" not in statement  # every placeholder filled


def test_a_statement_without_one_rule_or_the_section_is_caught() -> None:
    statement = (PROBLEMS / "remat_sin_sin" / "statement.md").read_text(encoding="utf-8")
    assert missing(statement) == []
    no_layout = re.sub(r"^- \*\*Layout does not matter\.\*\*.*?(?=^- \*\*)", "", statement, flags=re.M | re.S)
    assert no_layout != statement
    assert {m.split(":")[0] for m in missing(no_layout)} == {"layout"}
    assert missing(statement.replace(SECTION, "## How it is judged")) == [SECTION]
    assert "recompute: forward work" in missing(statement.replace("forward work", "work"))


def test_a_scaffolded_budget_statement_says_the_budget_rules(tmp_path: Path) -> None:
    made = scaffold(tmp_path, "open_chain", budget=True)
    statement = (made / "statement.md").read_text(encoding="utf-8")
    assert missing(statement, budget="residuals") == []
    assert "{slug}" not in statement and "`open_chain(ws, x)`" in statement  # every placeholder filled
    assert "\\leftarrow" in statement and "\\\\leftarrow" not in statement  # TeX, one backslash
