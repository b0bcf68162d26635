"""ASGI middlewares that refuse requests before any route runs: bodies larger than a cap (HTTP
413, before they are read into memory: uvicorn sets no limit of its own), and paths, query strings
or form bodies holding a NUL character (`UnstorableTextGuard`)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class BodySizeLimit:
    """Answers 413 when Content-Length, or the bytes actually received, exceed the cap: `max_body_bytes`,
    or `per_path[path]` for the paths listed there (e.g. problem uploads)."""

    def __init__(
        self,
        app: Callable[[Scope, Receive, Send], Awaitable[None]],
        *,
        max_body_bytes: int,
        per_path: dict[str, int] | None = None,
    ):
        self.app, self.default_bytes, self.per_path = app, max_body_bytes, per_path or {}

    async def _reject(self, send: Send, limit: int) -> None:
        body = json.dumps({"detail": f"request body larger than {limit:,} bytes"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.per_path.get(scope.get("path", "").rstrip("/"), self.default_bytes)
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > limit:
                await self._reject(send, limit)
                return
        # Read the whole (small) body first, so an oversized one is refused before the app sees it.
        messages: list[Message] = []
        received = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            received += len(message.get("body", b""))
            if received > limit:
                await self._reject(send, limit)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


class UnstorableTextGuard:
    """Refuses, before any route runs, a request whose path, query string or form body carries a
    NUL character (`%00`): no database column can hold it (PostgreSQL's text refuses it) and no
    route has a use for it. The path answers 404 (no page has such a name); the query string and
    an `application/x-www-form-urlencoded` body 422 with a message. JSON bodies are checked field
    by field (`server.submissions.submit`, `server.platform.text`), since JSON can also spell lone surrogates."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]):
        self.app = app

    @staticmethod
    async def _answer(send: Send, status: int, detail: str) -> None:
        body = json.dumps({"detail": detail}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})

    @staticmethod
    def _has_nul(raw: bytes) -> bool:
        return b"\x00" in raw or b"%00" in raw

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if "\x00" in scope.get("path", "") or self._has_nul(scope.get("raw_path") or b""):
            await self._answer(send, 404, "no such page")
            return
        if self._has_nul(scope.get("query_string", b"")):
            await self._answer(send, 422, "the query string contains a NUL character (%00)")
            return
        headers = dict(scope.get("headers", []))
        if not headers.get(b"content-type", b"").lower().startswith(b"application/x-www-form-urlencoded"):
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []  # a form body: BodySizeLimit, outside this, has capped its size
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
        if self._has_nul(b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")):
            await self._answer(send, 422, "a form field contains a NUL character")
            return

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)
