"""Who calls the API: an API client (its key), an admin (the deployment's admin token,
`REMAT_JUDGE_INSTRUCTOR_TOKEN`), or nobody.

`Authorization: Bearer <key>` on every `/api/v1` call that submits or reads submissions. Reading
problems stays public. What a caller may read is `server.authz`'s `submission.read` row, as for
every door: an API client its own submissions, the admin token every one, and an anonymous
caller the anonymous API submissions (which exist only when `REMAT_JUDGE_ALLOW_ANONYMOUS_API` is
on, readable by anyone with the id).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from server.authz import ADMIN_TOKEN, ANONYMOUS, Action, Principal, SubmissionTarget, api_client, decide
from server.deps import get_services
from server.services import Services
from server.store.accounts import ApiClientRecord
from server.store.submissions import SubmissionRecord

bearer = HTTPBearer(
    auto_error=False,
    scheme_name="APIKey",
    description="An API client's key (`remat-judge clients create NAME`), "
    "or the admin token (REMAT_JUDGE_INSTRUCTOR_TOKEN)",
)


def client_key(request: Request) -> str:
    """Who is calling, for rate limiting: the client's IP address (`ip:<address>`)."""
    host = request.client.host if request.client else "unknown"
    return f"ip:{host}"


@dataclass(frozen=True)
class Caller:
    """The caller of one request.

    Attributes:
        client: the API client, when a client key was given.
        admin: the admin token was given (sees every submission, submits to unpublished problems).
        rate_key: whom admission control counts this request against.
    """

    client: ApiClientRecord | None
    admin: bool
    rate_key: str

    @property
    def anonymous(self) -> bool:
        return self.client is None and not self.admin

    @property
    def principal(self) -> Principal:
        """The caller as `server.authz` sees it."""
        if self.admin:
            return ADMIN_TOKEN
        return api_client(self.client.id) if self.client is not None else ANONYMOUS


def _unauthorized(message: str) -> HTTPException:
    return HTTPException(status.HTTP_401_UNAUTHORIZED, message, headers={"WWW-Authenticate": "Bearer"})


async def api_caller(
    request: Request,
    services: Annotated[Services, Depends(get_services)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Caller:
    """FastAPI dependency: the caller, from its bearer token.

    Raises:
        HTTPException 401: a token that is no valid, unrevoked key; or no token while anonymous
            API use is off.
    """
    if credentials is None:
        if not services.settings.allow_anonymous_api:
            raise _unauthorized(
                "an API key is required: send `Authorization: Bearer <api key>` (an instructor "
                "creates one with `remat-judge clients create NAME`)"
            )
        return Caller(client=None, admin=False, rate_key=client_key(request))
    token = credentials.credentials
    instructor_token = services.settings.instructor_token
    if instructor_token and hmac.compare_digest(token.encode(), instructor_token.encode()):
        return Caller(client=None, admin=True, rate_key="admin")
    client = await run_in_threadpool(services.clients.by_key, token)
    if client is None:
        raise _unauthorized("the API key is not valid, or was revoked")
    return Caller(client=client, admin=False, rate_key=f"client:{client.name}")


CallerDep = Annotated[Caller, Depends(api_caller)]


def can_read(caller: Caller, record: SubmissionRecord) -> bool:
    """Whether `caller` may see `record` (`submission.read`; API callers are never course staff,
    so no course facts are needed)."""
    return decide(caller.principal, Action.SUBMISSION_READ, SubmissionTarget(record.user_id, record.client_id))
