"""Text the judge can store: what every door checks before a string from outside reaches the
database.

PostgreSQL's text columns refuse NUL, and a lone surrogate (JSON can spell one as "\\ud800";
Python keeps it) is not UTF-8 at all, so neither database driver can write it: both would end a
request in a 500 after work was done. Form fields, paths and query strings
(`server.platform.http_guards.UnstorableTextGuard`), the submission service's fields (`server.submissions.submit`) and
LTI claims (`server.lti.launch`) refuse or clean such text first.
"""

from __future__ import annotations

from typing import Any


def unstorable_reason(text: str) -> str | None:
    """Why `text` cannot be stored as it is ("a NUL character", "a lone surrogate ..."), or None."""
    if "\x00" in text:
        return "a NUL character (U+0000)"
    for c in text:
        if "\ud800" <= c <= "\udfff":
            return f"a lone surrogate (U+{ord(c):04X}), which is not valid Unicode text"
    return None


def storable(text: str) -> bool:
    """Whether `text` can be stored as it is (`unstorable_reason` is None)."""
    return unstorable_reason(text) is None


def display_text(value: Any, limit: int = 255) -> str | None:
    """Free text from outside (a name, a title, an email an LMS sent) fit to store and show: None
    unless a non-empty string; control characters and lone surrogates dropped; at most `limit`
    characters."""
    if not isinstance(value, str):
        return None
    cleaned = "".join(c for c in value if (c.isprintable() or c == " ") and not "\ud800" <= c <= "\udfff")
    cleaned = cleaned[:limit].strip()
    return cleaned or None
