"""Writing a file so that a reader sees the old content or the new, never part of it, and a write
that fails (a full disk) leaves nothing behind: the result cache, a reference's recorded
self-check failure and a package's publication marker all write this way."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path


def replace_atomically(path: Path, data: bytes, *, mode: int = 0o666) -> None:
    """Writes `data` to a temporary file beside `path`, then renames it over `path`.

    On any failure the temporary file is removed and the error raised: `path` keeps its old
    content (or stays missing), and no `.<name>.*.tmp` is left in its folder.

    Args:
        path: the file to write; its folder must exist.
        data: its new content.
        mode: the new file's permissions before the umask (as `open` creates files: 0o666).

    Raises:
        OSError: the temporary file cannot be created, written or renamed.
    """
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(descriptor, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
