"""Where the problems folder and the data folder come from, for every command and the server.

One order: the command's flag (`--problems-dir`, `--data-dir`), then the environment variable
(`REMAT_JUDGE_PROBLEMS_DIR`, `REMAT_JUDGE_DATA_DIR`), then the working directory's `problems/`
and `data/` (the defaults of `server.settings.Settings`, which applies the same order).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

FolderRole = Literal["problems", "data"]
FLAGS: dict[FolderRole, str] = {"problems": "--problems-dir", "data": "--data-dir"}
VARIABLES: dict[FolderRole, str] = {"problems": "REMAT_JUDGE_PROBLEMS_DIR", "data": "REMAT_JUDGE_DATA_DIR"}
WORKING_DIRECTORY = "the working directory"


@dataclass(frozen=True)
class Folder:
    """One resolved folder.

    Attributes:
        role: "problems" or "data".
        path: the absolute path.
        source: where it came from: the flag, the environment variable, or "the working directory".
    """

    role: FolderRole
    path: Path
    source: str

    def describe(self) -> str:
        """`problems: /abs/path (from --problems-dir)`."""
        return f"{self.role}: {self.path} (from {self.source})"


def source_of(role: FolderRole, *, flag_given: bool) -> str:
    """Which of the flag, the environment variable and the working directory gives the folder."""
    if flag_given:
        return FLAGS[role]
    variable = VARIABLES[role]
    # pydantic-settings reads variable names case-insensitively
    if any(name.upper() == variable for name in os.environ):
        return variable
    return WORKING_DIRECTORY


def folder(role: FolderRole, path: Path, *, flag_given: bool) -> Folder:
    """The folder `path` (as the settings resolved it) with its source."""
    return Folder(role=role, path=path.resolve(), source=source_of(role, flag_given=flag_given))
