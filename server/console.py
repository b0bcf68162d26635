"""The command line's Rich consoles: one for stdout (tables, JSON), one for stderr (messages)."""

from __future__ import annotations

import os
import sys

from rich.console import Console

PIPED_WIDTH = 200  # columns a table may use when the output is not a terminal


def make_console(*, stderr: bool = False) -> Console:
    """A console for stdout (or stderr). On a terminal Rich measures it; piped or captured (a
    script, `| grep`, CI), Rich would assume 80 columns and wrap every table row over several
    lines, so tables get `PIPED_WIDTH` columns there (`COLUMNS` still wins when set)."""
    stream = sys.stderr if stderr else sys.stdout
    piped = not (hasattr(stream, "isatty") and stream.isatty()) and "COLUMNS" not in os.environ
    return Console(stderr=stderr, width=PIPED_WIDTH if piped else None)
