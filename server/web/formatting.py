"""Numbers people can read: bytes in KiB/MiB/GiB and FLOPs in k/M/G with three significant
digits, and the judge's sentences with their `code` spans as code (`FILTERS`, the templates'
`human_bytes`, `human_flops` and `inline_code`)."""

from __future__ import annotations

import re

from markupsafe import Markup, escape

from graders.checks.comparison import human_bytes

_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def _three_digits(x: float) -> str:
    """3 significant digits at most, no trailing zeros: 1.23, 12.3, 123, 2."""
    text = f"{x:.2f}" if abs(x) < 10 else f"{x:.1f}" if abs(x) < 100 else f"{x:.0f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def human_flops(n: int | float) -> str:
    """`812 FLOPs`, `12.6 k FLOPs`, `1.23 M FLOPs`, `4 G FLOPs` (decimal prefixes)."""
    value = float(n)
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{_three_digits(value / scale)} {prefix} FLOPs"
    return f"{value:.0f} FLOP" + ("" if abs(value) == 1 else "s")


def inline_code(text: str) -> Markup:
    """`text` (a verdict message, a policy summary: `f32[16,8] from `dot_general``) as HTML with
    each backtick span as `<code>`: everything is escaped first, so the text can hold no markup of
    its own; a lone backtick stays as it is."""
    return Markup(_CODE_SPAN.sub(r"<code>\1</code>", str(escape(text))))


def collectives(counts: dict[str, int]) -> str:
    """A backward pass's collectives by kind (`ResidualReport.*_bwd_collectives`) as `2 all-gather,
    1 all-reduce` (XLA's names, sorted), or `no collective`."""
    return ", ".join(f"{n} {kind}" for kind, n in sorted((counts or {}).items())) or "no collective"


FILTERS = {
    "human_bytes": human_bytes,
    "human_flops": human_flops,
    "inline_code": inline_code,
    "collectives": collectives,
}
