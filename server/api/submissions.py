"""`/api/v1/submissions`: submit code, read verdicts."""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response, status
from starlette.concurrency import run_in_threadpool

from server.api.deps import Services, client_key, get_services
from server.db import SubmissionRecord
from server.schemas import SubmissionCreate, SubmissionPublic
from server.submit import SubmitError, submit

router = APIRouter(prefix="/submissions", tags=["submissions"])
ServicesDep = Annotated[Services, Depends(get_services)]


def to_public(record: SubmissionRecord) -> SubmissionPublic:
    """The verdict JSON of a stored submission (partial while queued or running)."""
    links = {"self": f"/api/v1/submissions/{record.id}", "problem": f"/api/v1/problems/{record.problem}"}
    if record.result_json:
        return SubmissionPublic(**json.loads(record.result_json), links=links)
    return SubmissionPublic(id=record.id, problem=record.problem, status=str(record.status),
                            created_at=record.created_at.isoformat(), links=links)


def submit_error(exc: SubmitError) -> HTTPException:
    """The HTTP error of a refused submission (with `Retry-After` for 429 and 503)."""
    headers = {"Retry-After": str(exc.retry_after_s)} if exc.retry_after_s is not None else None
    return HTTPException(exc.status_code, exc.message, headers=headers)


@router.post("", response_model=SubmissionPublic, status_code=status.HTTP_202_ACCEPTED,
             responses={200: {"description": "graded within the wait time (with wait=true)"},
                        404: {"description": "unknown problem"}, 413: {"description": "source too large"},
                        422: {"description": "empty source or malformed body"},
                        429: {"description": "too many submissions from this client (Retry-After)"},
                        503: {"description": "the queue is full or unavailable; nothing stored (Retry-After)"}})
async def create_submission(body: SubmissionCreate, request: Request, services: ServicesDep, response: Response,
                            wait: Annotated[bool, Query(description="wait for the verdict (up to the server's "
                                                                    "wait timeout) instead of answering 202 at "
                                                                    "once")] = False,
                            ) -> SubmissionPublic:
    """Stores and queues a submission. 202 with its id; with `wait=true`, 200 with the verdict
    when grading finishes within the wait timeout (else still 202). Waiting holds no server
    thread: any number of clients may wait at once."""
    try:
        record = await run_in_threadpool(submit, services, problem=body.problem, source=body.source,
                                         owner_key=client_key(request))
    except SubmitError as exc:
        raise submit_error(exc) from None
    response.headers["Location"] = f"/api/v1/submissions/{record.id}"
    if wait and await services.hub.wait(record.id, services.settings.wait_timeout_s):
        response.status_code = status.HTTP_200_OK
    current = await run_in_threadpool(services.store.get, record.id)
    assert current is not None
    return to_public(current)


@router.get("/{submission_id}", response_model=SubmissionPublic, responses={404: {"description": "unknown id"}})
def get_submission(submission_id: str, services: ServicesDep) -> SubmissionPublic:
    """A submission's status and, once done, its verdict JSON."""
    record = services.store.get(submission_id)
    if record is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no submission {submission_id!r}")
    return to_public(record)
