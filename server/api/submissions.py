"""`/api/v1/submissions`: submit code (one or a batch), read verdicts.

Every call here needs `Authorization: Bearer <api key>` (see `server/api/callers.py`), unless the
deployment allows anonymous API use. A caller sees its own submissions only: another client's id
answers 404, as an unknown one does.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Query, Response, status
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from server.api.callers import Caller, CallerDep, can_read
from server.authz import Action, decide
from server.deps import ServicesDep
from server.services import Services
from server.store.faults import DATABASE, MESSAGE, RETRY_AFTER_S, is_database_fault
from server.store.submissions import SUBMISSION_ID, SubmissionRecord
from server.submissions.http_refusals import HTTP_STATUS, submit_error
from server.submissions.public import public_submission
from server.submissions.schemas import BatchAnswer, BatchItem, SubmissionBatchCreate, SubmissionCreate, SubmissionPublic
from server.submissions.submit import SubmitError, idempotency_key_of, submit

router = APIRouter(prefix="/submissions", tags=["submissions"])
PUBLIC_FIELDS = tuple(SubmissionPublic.model_fields)
FieldsQuery = Annotated[
    str | None,
    Query(
        description="comma-separated fields to return (default: all): " + ", ".join(PUBLIC_FIELDS),
        examples=["id,status,verdict,score"],
    ),
]
AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {401: {"description": "no API key, or not a valid one"}}


def _fields(fields: str | None) -> list[str] | None:
    if fields is None:
        return None
    wanted = [f.strip() for f in fields.split(",") if f.strip()]
    unknown = [f for f in wanted if f not in PUBLIC_FIELDS]
    if unknown or not wanted:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            f"unknown fields {', '.join(unknown) or '(none given)'}; choose from {', '.join(PUBLIC_FIELDS)}",
        )
    return wanted


def _shown(record: SubmissionRecord, fields: list[str] | None) -> dict[str, Any]:
    data = public_submission(record).model_dump(mode="json")
    return data if fields is None else {f: data[f] for f in fields}


def _submit(
    services: Services, caller: Caller, body: SubmissionCreate, idempotency_key: str | None
) -> SubmissionRecord:
    return submit(
        services,
        problem=body.problem,
        source=body.source,
        owner_key=caller.rate_key,
        client=caller.client,
        external_id=body.external_id,
        callback_url=body.callback_url,
        unpublished_too=decide(caller.principal, Action.PROBLEMS_MANAGE),
        idempotency_key=idempotency_key_of(idempotency_key),
    )


@router.post(
    "",
    response_model=SubmissionPublic,
    status_code=status.HTTP_202_ACCEPTED,
    responses={
        **AUTH_RESPONSES,
        200: {"description": "graded within the wait time (with wait=true)"},
        403: {"description": "a problem outside this client's scope"},
        404: {"description": "unknown problem"},
        413: {"description": "source too large"},
        422: {"description": "empty source, malformed body, or a callback URL not allowed"},
        409: {"description": "a request with the same Idempotency-Key is being stored (Retry-After)"},
        429: {"description": "too many submissions from this client (Retry-After)"},
        503: {"description": "the queue is full, or the queue or database unavailable; nothing stored (Retry-After)"},
    },
)
async def create_submission(
    body: SubmissionCreate,
    caller: CallerDep,
    services: ServicesDep,
    response: Response,
    wait: Annotated[
        bool,
        Query(description="wait for the verdict (up to the server's wait timeout) instead of answering 202 at once"),
    ] = False,
    idempotency_key: Annotated[
        str | None,
        Header(
            description="a unique key of this request (a UUID): repeating the request with "
            "it within 24 hours answers the submission stored first, so a retry "
            "after a time-out or a 5xx never stores a second one; the same key "
            "with another body is a 422"
        ),
    ] = None,
) -> SubmissionPublic:
    """Stores and queues a submission. 202 with its id; with `wait=true`, 200 with the verdict
    when grading finishes within the wait timeout (else still 202). Waiting holds no server
    thread: any number of clients may wait at once. Once stored, the answer is that submission
    even if reading it back fails (the database went away just then)."""
    try:
        record = await run_in_threadpool(_submit, services, caller, body, idempotency_key)
    except SubmitError as exc:
        raise submit_error(exc) from None
    response.headers["Location"] = f"/api/v1/submissions/{record.id}"
    try:
        if wait and await services.hub.wait(record.id, services.settings.wait_timeout_s):
            response.status_code = status.HTTP_200_OK
        current = await run_in_threadpool(services.submissions.get, record.id)
    except Exception as exc:  # stored already: answer what was stored rather than a 5xx a client would retry
        if not is_database_fault(exc):
            raise
        DATABASE.failed(exc, where="reading a stored submission back")
        current = None
    return public_submission(current or record)


@router.post(
    "/batch",
    response_model=BatchAnswer,
    status_code=status.HTTP_202_ACCEPTED,
    responses={**AUTH_RESPONSES, 422: {"description": "not a list of 1 to 20 submissions"}},
)
def create_batch(
    body: SubmissionBatchCreate, caller: CallerDep, services: ServicesDep, response: Response
) -> BatchAnswer:
    """Up to 20 submissions at once. Each is checked, admitted and stored on its own: the answer
    lists, in order, an id for each accepted one and the error (HTTP status and detail) of each
    refused one; a 429 or 503 item carries `retry_after_s`, and the answer then has a
    `Retry-After` header (the largest). Read them back with `GET /api/v1/submissions/batch?ids=...`."""
    items = []
    for index, item in enumerate(body.submissions):
        try:
            record = _submit(services, caller, item, item.idempotency_key)
            items.append(BatchItem(index=index, id=record.id, status=str(record.status)))
        except SubmitError as exc:
            items.append(
                BatchItem(
                    index=index, error=HTTP_STATUS[exc.refusal], detail=exc.message, retry_after_s=exc.retry_after_s
                )
            )
        except Exception as exc:  # the database went away: this item is not stored, those before it are
            if not is_database_fault(exc):
                raise
            DATABASE.failed(exc, where="a batch item")
            items.append(BatchItem(index=index, error=503, detail=MESSAGE, retry_after_s=RETRY_AFTER_S))
    waits = [i.retry_after_s for i in items if i.retry_after_s is not None]
    if waits:
        response.headers["Retry-After"] = str(max(waits))
    return BatchAnswer(items=items)


@router.get("/batch", responses={**AUTH_RESPONSES, 422: {"description": "no ids, more than 20, or unknown fields"}})
def read_batch(
    caller: CallerDep,
    services: ServicesDep,
    ids: Annotated[str, Query(description="comma-separated submission ids (up to 20)")],
    fields: FieldsQuery = None,
) -> JSONResponse:
    """Several submissions by id, in the order asked: `{"submissions": [...]}`, with
    `{"id": ..., "error": 404}` for an id that is unknown or not the caller's."""
    wanted = [i.strip() for i in ids.split(",") if i.strip()]
    if not wanted or len(wanted) > 20:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, "ids: give 1 to 20 comma-separated ids")
    chosen = _fields(fields)
    found = services.submissions.get_many([i for i in wanted if SUBMISSION_ID.match(i)])
    out = []
    for submission_id in wanted:
        record = found.get(submission_id)
        out.append(
            _shown(record, chosen)
            if record is not None and can_read(caller, record)
            else {"id": submission_id, "error": 404, "detail": "no such submission"}
        )
    return JSONResponse({"submissions": out})


@router.get("", responses=AUTH_RESPONSES)
def list_submissions(
    caller: CallerDep,
    services: ServicesDep,
    external_id: Annotated[str | None, Query(description="only those with this external_id")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    fields: FieldsQuery = None,
) -> JSONResponse:
    """The calling client's submissions, newest first: `{"submissions": [...]}` (filter by your
    `external_id`). Instructors and anonymous callers have no list here (the web pages list them)."""
    chosen = _fields(fields)
    if caller.client is None:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "listing submissions needs an API client's key")
    records = services.submissions.for_client(caller.client.id, external_id=external_id, limit=limit)
    return JSONResponse({"submissions": [_shown(r, chosen) for r in records]})


@router.get(
    "/{submission_id}",
    response_model=SubmissionPublic,
    responses={**AUTH_RESPONSES, 404: {"description": "unknown id, or another owner's submission"}},
)
def get_submission(submission_id: str, caller: CallerDep, services: ServicesDep, fields: FieldsQuery = None) -> Any:
    """A submission's status and, once graded, its verdict JSON (only the fields asked for)."""
    chosen = _fields(fields)
    record = services.submissions.get(submission_id) if SUBMISSION_ID.match(submission_id) else None
    if record is None or not can_read(caller, record):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such submission")
    if chosen is not None:
        return JSONResponse(_shown(record, chosen))
    return public_submission(record)
