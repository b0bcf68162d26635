"""`/api/v1/submissions`: submit code, read verdicts."""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Response, status

from server.api.deps import Services, get_services
from server.api.problems import load_or_404
from server.db import SubmissionRecord
from server.schemas import SubmissionCreate, SubmissionPublic

router = APIRouter(prefix="/submissions", tags=["submissions"])
ServicesDep = Annotated[Services, Depends(get_services)]


def to_public(record: SubmissionRecord) -> SubmissionPublic:
    """The verdict JSON of a stored submission (partial while queued or running)."""
    links = {"self": f"/api/v1/submissions/{record.id}", "problem": f"/api/v1/problems/{record.problem}"}
    if record.status == "done" and record.result_json:
        return SubmissionPublic(**json.loads(record.result_json), links=links)
    return SubmissionPublic(id=record.id, problem=record.problem, status=record.status,
                            created_at=record.created_at.isoformat(), links=links)


@router.post("", response_model=SubmissionPublic, status_code=status.HTTP_202_ACCEPTED,
             responses={200: {"description": "graded within the wait time (with wait=true)"},
                        404: {"description": "unknown problem"}, 413: {"description": "source too large"}})
def create_submission(body: SubmissionCreate, services: ServicesDep, response: Response,
                      wait: Annotated[bool, Query(description="wait for the verdict (up to the server's "
                                                              "wait timeout) instead of answering 202 at once")] = False,
                      ) -> SubmissionPublic:
    """Stores and queues a submission. 202 with its id; with `wait=true`, 200 with the verdict
    when grading finishes within the wait timeout (else still 202)."""
    size = len(body.source.encode("utf-8"))
    limit = services.settings.max_source_bytes
    if size > limit:
        raise HTTPException(status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
                            f"the source is {size:,} bytes; the limit is {limit:,} bytes")
    load_or_404(services, body.problem)
    record = services.store.create(problem=body.problem, source=body.source)
    services.jobs.put(record.id)
    response.headers["Location"] = f"/api/v1/submissions/{record.id}"
    if wait:
        def is_done() -> bool:
            found = services.store.get(record.id)
            return found is not None and found.status == "done"

        if services.completions.wait(record.id, is_done, services.settings.wait_timeout_s):
            response.status_code = status.HTTP_200_OK
    current = services.store.get(record.id)
    assert current is not None
    return to_public(current)


@router.get("/{submission_id}", response_model=SubmissionPublic, responses={404: {"description": "unknown id"}})
def get_submission(submission_id: str, services: ServicesDep) -> SubmissionPublic:
    """A submission's status and, once done, its verdict JSON."""
    record = services.store.get(submission_id)
    if record is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no submission {submission_id!r}")
    return to_public(record)
