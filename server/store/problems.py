"""Problem packages' uploads (`problem_uploads`, migration 0010): one row per uploaded archive
with its validation's progress and report, read and written by `UploadStore`. Checking,
validating and installing packages is `server.problems.uploads`'s work.
"""

from __future__ import annotations

import enum
import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Boolean, Integer, String, Text, update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Mapped, mapped_column, sessionmaker

from server.store.db import Base, UTCDateTime, enum_column, utcnow

STALE_S = 900  # a "validating" row not updated for this long belongs to a process that is gone


class UploadState(enum.StrEnum):
    """Where an upload is: validating (in the background), done (passed), failed."""

    VALIDATING = "validating"
    DONE = "done"
    FAILED = "failed"


class ProblemUpload(Base):
    """One uploaded package and its validation.

    Attributes:
        done_files, total_files: files graded so far, of the package's reference, right/ and wrong/.
        result_json: the report once finished (`UploadView.report`).
        detail: one sentence on the outcome.
    """

    __tablename__ = "problem_uploads"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    slug: Mapped[str] = mapped_column(String(64))
    version: Mapped[str] = mapped_column(String(32))
    state: Mapped[UploadState] = mapped_column(enum_column(UploadState, "upload_state"))
    publish: Mapped[bool] = mapped_column(Boolean)
    requested_by: Mapped[str] = mapped_column(String(254))
    done_files: Mapped[int] = mapped_column(Integer)
    total_files: Mapped[int] = mapped_column(Integer)
    detail: Mapped[str] = mapped_column(Text, default="")
    result_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


@dataclass(frozen=True)
class UploadView:
    """An upload as its uploader sees it (`GET /api/v1/problems/uploads/{id}`, the upload page)."""

    id: str
    slug: str
    version: str
    state: str
    publish: bool
    done_files: int
    total_files: int
    detail: str
    report: dict[str, Any] | None
    created_at: datetime
    finished_at: datetime | None

    def public(self) -> dict[str, Any]:
        """The JSON of the status endpoint: every field, the report's parts at top level."""
        report = self.report or {}
        return {
            "id": self.id,
            "status_url": f"/api/v1/problems/uploads/{self.id}",
            "slug": self.slug,
            "version": self.version,
            "state": self.state,
            "publish": self.publish,
            "progress": {"done": self.done_files, "total": self.total_files},
            "detail": self.detail,
            "rows": report.get("rows", []),
            "reference_failures": report.get("reference_failures", []),
            "warnings": report.get("warnings", []),
            "published": report.get("published", False),
            "previous_version": report.get("previous_version"),
            "created_at": self.created_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
        }


class UploadStore:
    """Reads and writes `problem_uploads`. Thread-safe: one session per call."""

    def __init__(self, engine: Engine):
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def create(self, *, slug: str, version: str, publish: bool, requested_by: str, total_files: int) -> str:
        upload_id = uuid.uuid4().hex
        now = utcnow()
        with self._sessions.begin() as session:
            session.add(
                ProblemUpload(
                    id=upload_id,
                    slug=slug,
                    version=version,
                    state=UploadState.VALIDATING,
                    publish=publish,
                    requested_by=requested_by[:254],
                    done_files=0,
                    total_files=total_files,
                    detail="validating through the sandbox",
                    created_at=now,
                    updated_at=now,
                )
            )
        return upload_id

    def progress(self, upload_id: str, done_files: int) -> None:
        with self._sessions.begin() as session:
            session.execute(
                update(ProblemUpload)
                .where(ProblemUpload.id == upload_id)
                .values(done_files=done_files, updated_at=utcnow())
                .execution_options(synchronize_session=False)
            )

    def finish(self, upload_id: str, *, state: UploadState, detail: str, report: dict[str, Any]) -> None:
        now = utcnow()
        with self._sessions.begin() as session:
            session.execute(
                update(ProblemUpload)
                .where(ProblemUpload.id == upload_id)
                .values(
                    state=state, detail=detail[:2000], result_json=json.dumps(report), updated_at=now, finished_at=now
                )
                .execution_options(synchronize_session=False)
            )

    def record_published(self, upload_id: str) -> None:
        """Records on a finished upload that its version was published after it (its page's Publish)."""
        with self._sessions.begin() as session:
            row = session.get(ProblemUpload, upload_id)
            if row is None or row.result_json is None:
                return
            report = json.loads(row.result_json)
            report["published"] = True
            row.result_json = json.dumps(report)
            row.detail = f"installed version {row.version}, published"
            row.updated_at = utcnow()

    def get(self, upload_id: str) -> UploadView | None:
        with self._sessions() as session:
            row = session.get(ProblemUpload, upload_id)
        if row is None:
            return None
        state, detail = row.state, row.detail
        if state == UploadState.VALIDATING and row.updated_at < utcnow() - timedelta(seconds=STALE_S):
            state, detail = UploadState.FAILED, "the server stopped while validating this package: upload it again"
        return UploadView(
            id=row.id,
            slug=row.slug,
            version=row.version,
            state=str(state),
            publish=row.publish,
            done_files=row.done_files,
            total_files=row.total_files,
            detail=detail,
            report=json.loads(row.result_json) if row.result_json else None,
            created_at=row.created_at,
            finished_at=row.finished_at,
        )
