"""The public face of a stored submission: what API callers and callbacks get."""

from __future__ import annotations

from graders.verdict import VerdictReport
from server.store.submissions import SubmissionRecord
from server.submissions.schemas import CallbackState, SubmissionPublic


def public_submission(record: SubmissionRecord) -> SubmissionPublic:
    """The submission as API callers see it, built field by field: the stored verdict report
    (whose instructor-only `internal` details the model leaves out), the client's `external_id`,
    the callback's state, links. Never the source, the owner or grading bookkeeping."""
    links = {"self": f"/api/v1/submissions/{record.id}", "problem": f"/api/v1/problems/{record.problem}"}
    if record.result_json:
        report = VerdictReport.model_validate_json(record.result_json)
    else:
        report = VerdictReport(
            id=record.id, problem=record.problem, status=str(record.status), created_at=record.created_at.isoformat()
        )
    callback = None
    if record.callback_url:
        callback = CallbackState(
            url=record.callback_url,
            status=str(record.callback_status or "pending"),
            attempts=record.callback_attempts,
            last_status_code=record.callback_last_code,
            last_error=record.callback_last_error,
        )
    return SubmissionPublic(**report.model_dump(), external_id=record.external_id, callback=callback, links=links)
