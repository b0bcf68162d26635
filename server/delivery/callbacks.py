"""Callbacks: POSTing a verdict to the URL an API client gave with its submission.

One attempt at a time; scheduling retries (`backoff_s`) and recording attempts is the caller's.

- Signed like Stripe's webhooks: the header `X-Remat-Judge-Signature: t=<unix seconds>,v1=<hex>`
  where `<hex>` is HMAC-SHA256, under the client's `callback_secret` (UTF-8), of the ASCII
  decimal timestamp, a literal ".", then the exact body bytes. `verify` is what a receiver does.
- Allowed only for URLs under one of the client's `--callback-allow` prefixes (`allowed_prefix`:
  parsed URLs are compared, not strings), and never to a loopback, link-local, private, reserved,
  multicast or unspecified address unless the prefix names it (`resolve`): the prefix's host is
  that IP literal, or it is `localhost` and the address is loopback.
- The address checked is the address connected to: `resolve` looks the host up once, and `send`
  builds the request to that IP (the `Host` header and, for https, the TLS server name and
  certificate check still use the URL's host), so a name that resolves elsewhere a moment later
  (DNS rebinding) changes nothing. Environment proxies (`HTTP_PROXY`...) are ignored.
- Never follows redirects; reads at most `MAX_RESPONSE_BYTES` of an answer; an `Attempt` says
  whether to retry: yes after connection errors, time-outs and 5xx, no after 3xx and 4xx.

Signatures: `server.delivery.signing`; where a callback may go: `server.delivery.targets`.
"""

from __future__ import annotations

import functools
import random
import re
import socket
import ssl
import time
from dataclasses import dataclass

import httpx

from server.delivery.signing import SIGNATURE_HEADER, sign
from server.delivery.targets import CallbackRefused, Target, resolve

USER_AGENT = "remat-judge-callback/1"


MAX_RESPONSE_BYTES = 64 * 1024


_EXCERPT_CHARS = 200


@dataclass
class Attempt:
    """The outcome of one delivery.

    Attributes:
        status_code: the receiver's HTTP status; None when there was no answer (refused URL,
            connection error, time-out).
        error: why it was not delivered, short and for the client (no traceback, no paths of
            this host); None when delivered.
        retry: worth retrying later: connection errors, time-outs, 5xx. Not 3xx, 4xx, refusals.
        delivered: the receiver answered 2xx.
        elapsed_ms: wall time of the attempt, look-up included, in milliseconds.
    """

    status_code: int | None
    error: str | None
    retry: bool
    delivered: bool
    elapsed_ms: float


def deliver(
    url: str,
    body: bytes,
    secret: str,
    prefixes: list[str],
    *,
    timeout_s: float = 10.0,
    now: float | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> Attempt:
    """One signed POST of `body` to `url`: `resolve` (the checks), then `send` (the request to
    the checked address).

    Args:
        body: the verdict JSON, sent byte for byte (content-type application/json).
        secret: the client's `callback_secret`. prefixes: the client's allowed callback prefixes.
        timeout_s: seconds allowed for connecting, for each write and for each read (httpx's
            per-operation time-outs); reading the answer's body also stops once `timeout_s`
            has passed since the request was sent.
        now: unix seconds signed as the timestamp (default: the clock).
        ssl_context: for https, the certificates trusted (default: httpx's: certifi's CAs, or
            `SSL_CERT_FILE` / `SSL_CERT_DIR`).
    Returns:
        The `Attempt`. A refused URL is `Attempt(None, why, retry=False, delivered=False)`; this
        never raises for anything the URL or the receiver does.
    Raises:
        ValueError: `secret` is empty (a bug of the caller, before anything is sent).
    """
    started = time.monotonic()
    if not secret:
        raise ValueError("a callback secret is required to sign a callback")
    try:
        target = resolve(url, prefixes)
    except CallbackRefused as exc:
        return Attempt(
            None, f"callback URL refused: {exc}", retry=False, delivered=False, elapsed_ms=_ms_since(started)
        )
    except socket.gaierror as exc:  # EAI_AGAIN: the name server is away for now
        return Attempt(
            None,
            f"looking up the callback host failed for now ({exc.strerror})",
            retry=True,
            delivered=False,
            elapsed_ms=_ms_since(started),
        )
    attempt = send(target, body, secret, timeout_s=timeout_s, now=now, ssl_context=ssl_context)
    attempt.elapsed_ms = _ms_since(started)
    return attempt


def send(
    target: Target,
    body: bytes,
    secret: str,
    *,
    timeout_s: float = 10.0,
    now: float | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> Attempt:
    """The POST of `deliver` to an already checked `Target`, without looking anything up.

    Pinning: the request's URL has the target's *address* as its host; the `Host` header is the
    URL's host[:port], and for https httpx's `sni_hostname` request extension makes the TLS
    server name (SNI) and the certificate's host name check the URL's host, not the IP. The
    client ignores environment proxies and never follows redirects. When connecting to an
    address fails outright (refused, unreachable), the next of `target.addresses` is tried;
    after a time-out or anything later, not. Arguments and result as for `deliver`.
    """
    started = time.monotonic()
    timestamp = int(time.time() if now is None else now)
    parsed = httpx.URL(target.url)
    headers = {
        "Host": parsed.netloc.decode("ascii"),
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "Accept-Encoding": "identity",
        SIGNATURE_HEADER: sign(body, secret, timestamp),
    }
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    verify: ssl.SSLContext = ssl_context if ssl_context is not None else default_ssl_context()
    attempt = Attempt(None, "no address to connect to", retry=True, delivered=False, elapsed_ms=0.0)
    with httpx.Client(
        trust_env=False, follow_redirects=False, timeout=httpx.Timeout(timeout_s), verify=verify
    ) as client:
        for address in target.addresses:
            request = client.build_request(
                "POST", parsed.copy_with(host=address), content=body, headers=headers, extensions=extensions
            )
            try:
                attempt = _exchange(client, request, started, timeout_s)
            except httpx.HTTPError as exc:
                attempt = _failed_attempt(exc, target, address, timeout_s)
                if isinstance(exc, httpx.ConnectError):  # connecting failed outright: the next address
                    continue
            break
    attempt.elapsed_ms = _ms_since(started)
    return attempt


def _exchange(client: httpx.Client, request: httpx.Request, started: float, timeout_s: float) -> Attempt:
    """Sends `request`, reads at most `MAX_RESPONSE_BYTES` of the answer (undecoded), classifies."""
    response = client.send(request, stream=True)
    try:
        received = bytearray()
        deadline = started + timeout_s
        for chunk in response.iter_raw():
            received += chunk
            if len(received) >= MAX_RESPONSE_BYTES or time.monotonic() > deadline:
                break
        content = bytes(received[:MAX_RESPONSE_BYTES])
    except httpx.HTTPError:
        content = b""  # the status is what counts; a broken body does not change it
    finally:
        response.close()
    code = response.status_code
    if 200 <= code < 300:
        return Attempt(code, None, retry=False, delivered=True, elapsed_ms=0.0)
    if 300 <= code < 400:
        location = excerpt(response.headers.get("location", "").encode("utf-8", "replace"))
        to = f" to {location}" if location else ""
        return Attempt(
            code,
            f"the receiver answered {code}, a redirect{to}; redirects are not followed, "
            f"give the final URL as callback_url",
            retry=False,
            delivered=False,
            elapsed_ms=0.0,
        )
    said = excerpt(content)
    said = f": {said}" if said else ""
    if code >= 500:
        return Attempt(code, f"the receiver answered {code}{said}", retry=True, delivered=False, elapsed_ms=0.0)
    return Attempt(code, f"the receiver answered {code}{said}", retry=False, delivered=False, elapsed_ms=0.0)


def _failed_attempt(exc: httpx.HTTPError, target: Target, address: str, timeout_s: float) -> Attempt:
    """The `Attempt` of a request to `address` that failed with `exc`: a connection error, a
    time-out (saying in which phase) or a broken connection are worth retrying; another failure
    of the request is not."""
    if isinstance(exc, httpx.ConnectError):
        return Attempt(
            None,
            f"could not connect to {_where(target, address)}: {describe_error(exc)}",
            retry=True,
            delivered=False,
            elapsed_ms=0.0,
        )
    if isinstance(exc, httpx.TimeoutException):
        phase = {
            httpx.ConnectTimeout: "connecting",
            httpx.ReadTimeout: "waiting for the answer",
            httpx.WriteTimeout: "sending",
            httpx.PoolTimeout: "waiting for a connection",
        }
        return Attempt(
            None,
            f"timed out after {timeout_s:g} s {phase.get(type(exc), 'in transit')} ({_where(target, address)})",
            retry=True,
            delivered=False,
            elapsed_ms=0.0,
        )
    if isinstance(exc, (httpx.NetworkError, httpx.RemoteProtocolError)):
        return Attempt(
            None,
            f"the connection to {_where(target, address)} failed: {describe_error(exc)}",
            retry=True,
            delivered=False,
            elapsed_ms=0.0,
        )
    return Attempt(None, f"the request failed: {describe_error(exc)}", retry=False, delivered=False, elapsed_ms=0.0)


@functools.cache
def default_ssl_context() -> ssl.SSLContext:
    """httpx's default verifying context, built once (building it reads the CA file): certifi's
    CAs, or those of `SSL_CERT_FILE` / `SSL_CERT_DIR` when set when it is first built."""
    return httpx.create_ssl_context()


def _where(target: Target, address: str) -> str:
    host = f"[{target.host}]" if ":" in target.host else target.host
    shown = f"[{address}]" if ":" in address else address
    return f"{host}:{target.port}" if target.host == address else f"{host}:{target.port} ({shown})"


def describe_error(exc: BaseException) -> str:
    """The exception's message, as an `excerpt`, without the C source locations `ssl` adds ("(_ssl.c:1006)")."""
    text = re.sub(r"\s*\(_ssl\.c:\d+\)", "", str(exc)) or type(exc).__name__
    return excerpt(text.encode("utf-8", "replace"))


def excerpt(raw: bytes) -> str:
    """At most `_EXCERPT_CHARS` printable characters of a receiver's answer (UTF-8, undecodable bytes
    replaced, whitespace runs folded to one space), for error messages shown to operators."""
    text = " ".join(raw.decode("utf-8", "replace").split())
    text = "".join(ch for ch in text if ch.isprintable())
    return text if len(text) <= _EXCERPT_CHARS else text[: _EXCERPT_CHARS - 1] + "…"


def _ms_since(started: float) -> float:
    return (time.monotonic() - started) * 1000.0


def backoff_s(attempt: int, *, base_s: float = 2.0, cap_s: float = 300.0) -> float:
    """Seconds to wait before retry number `attempt` (1-based: the delay after the first failure).

    The ceiling is `base_s * 2**(attempt-1)`, at most `cap_s`; the delay is uniform in
    [ceiling/2, ceiling] (half fixed, half random: AWS's "equal jitter", so retries of many
    callbacks failing together spread out, yet no delay is shorter than half its ceiling).
    With the defaults: 1-2 s, 2-4 s, 4-8 s, ... and 150-300 s from the 9th retry on.

    Raises:
        ValueError: `attempt` < 1.
    """
    if attempt < 1:
        raise ValueError(f"retries are numbered from 1, not {attempt}")
    ceiling = cap_s if attempt > 64 else min(cap_s, base_s * 2.0 ** (attempt - 1))
    return random.uniform(ceiling / 2, ceiling)
