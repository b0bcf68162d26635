"""An ASGI middleware that refuses request bodies larger than a cap (HTTP 413) before they are
read into memory: uvicorn sets no limit of its own."""

from __future__ import annotations

import json
from typing import Any, Awaitable, Callable

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class BodySizeLimit:
    """Answers 413 when Content-Length, or the bytes actually received, exceed the cap: `max_body_bytes`,
    or `per_path[path]` for the paths listed there (e.g. problem uploads)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], *, max_body_bytes: int,
                 per_path: dict[str, int] | None = None):
        self.app, self.default_bytes, self.per_path = app, max_body_bytes, per_path or {}

    async def _reject(self, send: Send, limit: int) -> None:
        body = json.dumps({"detail": f"request body larger than {limit:,} bytes"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
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
