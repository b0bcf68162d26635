"""Host paths out of text a student or API caller reads: frames, messages, tracebacks, output.

JAX names where a saved value was made ("output of dot_general from <file>:<line>:<col> (fn)"),
and for a value made inside a library that file is its install path on the judge's host
(`/work/main/.venv/lib/python3.11/site-packages/flax/linen/linear.py`); exception messages and
warnings on stderr carry such paths too. `local_paths` rewrites every absolute path it finds to
one that names no host folder: relative to its library (`flax/linen/linear.py`) under a
`site-packages/`, `dist-packages/` or `lib/pythonX.Y/` folder, else its file name alone. The
submission's own frames (`submission.py:17:68`) are already relative and stay as they are.

Used on both sides: in the jail, so a bundle carries no host path, and on the trusted side,
where what came out of the jail is untrusted text (a forged note or message is rewritten
the same way). Standard library only.
"""

from __future__ import annotations

import re

# an absolute path: "/" at the start of the text or after a space, quote, bracket or separator
# (not inside a word or a ratio; a URL's "//" starts none), then its segments; `file://` is
# dropped first, so a file URL's path is rewritten too
_ABSOLUTE = re.compile(r"""(?:^|(?<=[\s"'`(\[{<=,;:|]))/[\w.+@%~-]+(?:/[\w.+@%~-]*)*""")
_FILE_URL = re.compile(r"\bfile://(?=/)")
# where installed Python code lives: what follows it is the library's own path
_LIBRARY_ROOT = re.compile(r"^.*/(?:site-packages|dist-packages|lib/python\d+(?:\.\d+)?t?)/")
# first folders of host paths (Linux, macOS, containers); a Flax scope ("/layers/Dense_0")
# or a JAX name stack starts with none of them and has no file extension, so it is kept
_HOST_ROOTS = frozenset(
    "app bin boot data dev etc home lib lib32 lib64 media mnt nix opt private proc root run sbin "
    "snap srv sys tmp Users usr var Volumes work workspace workspaces".split()
)


def _local(match: re.Match[str]) -> str:
    """The rewrite of one absolute path (see `local_paths`)."""
    path = match.group(0)
    library = _LIBRARY_ROOT.sub("", path, count=1)
    if library != path:
        return library or path.rstrip("/").rsplit("/", 1)[-1]
    segments = [s for s in path.split("/") if s]
    if segments[0] not in _HOST_ROOTS and not re.search(r"\.\w+$", segments[-1]):
        return path  # a Flax scope ("/remat", "/layers/Dense_0"), not a file or host folder
    return segments[-1]


def local_paths(text: str) -> str:
    """`text` with every absolute path rewritten so that it names no folder of the host.

    Under a `site-packages/`, `dist-packages/` or `lib/pythonX.Y/` folder a path becomes
    relative to it, as Python imports it (`/usr/lib/python3/dist-packages/numpy/core/x.py` is
    `numpy/core/x.py`, `/usr/lib/python3.11/json/decoder.py` is `json/decoder.py`); any other
    path of a file, or starting at a host's top folder (`/root`, `/home`, `/tmp`, ...), becomes
    its last component (`/root/work/model.py` is `model.py`). What follows a path (`:287:8
    (__call__)`) is kept; relative paths, URLs (but `file://`) and a Flax scope (`/remat`,
    `/layers/Dense_0`: no host folder first, no file extension last) are left as they are.

    Args:
        text: a note, message, traceback or captured output.

    Returns:
        `text` with no absolute host path in it.
    """
    if "/" not in text:
        return text
    return _ABSOLUTE.sub(_local, _FILE_URL.sub("", text))
