"""The residuals read from an artifact as the judge knows them (`describe_residuals`): avals,
provenance, memory kinds, whether each is bookkeeping, and the jail's notes where they agree."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from graders.artifact_limits import Aval
from graders.checks.comparison import bookkeeping_reasons
from graders.checks.residuals import aval_signature
from graders.verdict import ResidualFact
from jailside.paths import local_paths


def describe_residuals(
    avals: Sequence[Any],
    notes: Sequence[Any] | None,
    *,
    sources: Sequence[str] | None = None,
    hide_source: bool = False,
    memory_kinds: Sequence[str] | None = None,
    depends: Sequence[bool] = (),
    selectors: Sequence[bool] = (),
) -> list[ResidualFact]:
    """The residuals read from an artifact, in the artifact's order, with provenance and notes.

    `saved_residuals` notes list the same values as the VJP's leaves, but not always in the same
    order (measured with JAX 0.10.2: a relu's boolean mask comes before the intermediates it
    follows in the VJP). So notes are attached only when their avals form the same multiset as the
    artifact's; within one aval a note goes first to a residual whose provenance it names ("output
    of sine" to a residual from `sine`), the rest in artifact order. Otherwise no notes: the
    artifact decides, the notes only explain. Notes come out of the jail, untrusted: any host
    path in one is rewritten whatever the jail sent (`jailside.paths.local_paths`: a library's
    frame relative to the library, `flax/linen/linear.py:287:8`).

    Args:
        avals: residual avals read from the fwd artifact (objects with `.shape` and `.dtype`).
        notes: `{"shape", "dtype", "note"}` dicts or objects, or None.
        sources: per residual, its producing op read from the artifact (`ModuleInfo.sources`).
        hide_source: drop "from <file>:<line> (<function>)" (for the reference: never show its
            path or structure to students).
        memory_kinds: per residual, where the forward program leaves it (`ModuleInfo.memory_kinds`).
        depends, selectors: per residual, whether an argument's data flows into it, and whether
            the backward program only branches on it (`ModuleInfo.depends_on_arguments`,
            `.selector_arguments`): they set `ResidualFact.left_out` (`bookkeeping_reasons`).
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
    for fact, reason in zip(facts, bookkeeping_reasons(facts, depends, selectors), strict=True):
        fact.left_out = reason
    if notes:
        _attach_notes(facts, notes, hide_source=hide_source)
    return facts


def _note_agrees(fact: ResidualFact, note: str) -> bool:
    """Whether `note` names the op (or argument) the artifact says produced `fact`."""
    if not fact.source:
        return False
    if fact.source.startswith("argument "):
        return note.startswith(f"from the {fact.source}")
    return note.startswith(f"output of {fact.source}")


def _attach_notes(facts: list[ResidualFact], notes: Sequence[Any], *, hide_source: bool) -> None:
    """Sets `note` on `facts` as `describe_residuals` says, or on none of them when the notes'
    avals are not the artifact's multiset; no note names a host path."""

    def field(n: Any, name: str) -> Any:
        return n[name] if isinstance(n, dict) else getattr(n, name)

    described = [
        (Aval(tuple(field(n, "shape")), str(field(n, "dtype"))), local_paths(str(field(n, "note")))) for n in notes
    ]
    if Counter(key for key, _ in described) != aval_signature(facts):
        return
    queues: dict[Aval, list[str]] = {}
    for key, note in described:
        if hide_source:
            note = re.sub(r" from (?!the argument).*$", "", note)
        queues.setdefault(key, []).append(note)
    # within one aval, a note goes first to a residual whose provenance it names, then in order
    for strict in (True, False):
        for fact in facts:
            if fact.note is not None:
                continue
            queue = queues[fact.aval]
            chosen = next((i for i, note in enumerate(queue) if _note_agrees(fact, note)), None if strict else 0)
            if chosen is not None:
                fact.note = queue.pop(chosen)
