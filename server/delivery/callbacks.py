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
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
import random
import re
import socket
import ssl
import time
from dataclasses import dataclass, field
from urllib.parse import unquote

import httpx

SIGNATURE_HEADER = "X-Remat-Judge-Signature"
USER_AGENT = "remat-judge-callback/1"
MAX_RESPONSE_BYTES = 64 * 1024
_DEFAULT_PORTS = {"http": 80, "https": 443}
_EXCERPT_CHARS = 200

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


# --- signatures ------------------------------------------------------------------------------


def sign(body: bytes, secret: str, timestamp: int) -> str:
    """The signature header's value for `body` sent at `timestamp`.

    Args:
        body: the exact bytes POSTed. secret: the client's `callback_secret` (used as UTF-8).
        timestamp: unix seconds (an integer; it is signed as its ASCII decimal form).
    Returns:
        `t=<timestamp>,v1=<hex HMAC-SHA256 of b"<timestamp>." + body>`.
    Raises:
        ValueError: `secret` is empty (an HMAC under an empty key proves nothing).
    """
    if not secret:
        raise ValueError("a callback secret is required to sign a callback")
    timestamp = int(timestamp)
    return f"t={timestamp},v1={_mac(body, secret, timestamp)}"


def verify(header: str, body: bytes, secret: str, *, tolerance_s: float = 300, now: float | None = None) -> bool:
    """What a receiver does with the signature header: True when one of its `v1` signatures is
    the HMAC of this timestamp and body under `secret`, and the timestamp is within `tolerance_s`
    seconds (either side) of `now` (unix seconds; default the clock).

    Parses `t` (the first one) and every `v1` (several may be present while a secret is being
    rotated); unknown keys are ignored. Compares in constant time (`hmac.compare_digest`). A
    malformed header is False, never an exception.
    """
    timestamp: int | None = None
    candidates: list[bytes] = []
    for part in header.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep:
            continue
        if key == "t" and timestamp is None:
            if not re.fullmatch(r"[0-9]{1,15}", value):
                return False
            timestamp = int(value)
        elif key == "v1":
            candidates.append(value.encode("utf-8", "replace"))
    if timestamp is None or not candidates or not secret:
        return False
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance_s:
        return False
    expected = _mac(body, secret, timestamp).encode("ascii")
    matched = False
    for candidate in candidates:  # no early exit: every candidate is compared
        matched |= hmac.compare_digest(expected, candidate)
    return matched


def _mac(body: bytes, secret: str, timestamp: int) -> str:
    return hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode("ascii") + body, hashlib.sha256).hexdigest()


# --- where a callback may go -----------------------------------------------------------------


class CallbackRefused(Exception):
    """The URL may not be called: not http(s), userinfo, not under an allowed prefix, a special
    address the prefix does not name, or a host that does not resolve. Never worth retrying; the
    message says why, for the client."""


@dataclass(frozen=True)
class _Parsed:
    url: httpx.URL
    scheme: str
    host: str  # lower case, IDNA (ASCII), IPv6 without brackets
    port: int  # explicit or the scheme's default
    path: str  # as sent (percent-encoded, dot segments removed by httpx)


def _parse(url: str) -> _Parsed:
    """Parses with httpx, the parser that also builds the request (no parser differential).

    Raises:
        CallbackRefused: not a URL, not http(s), userinfo, no host, a port outside 1-65535, or an
            encoded dot segment or backslash in the path.
    """
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise CallbackRefused(f"not a valid URL ({exc})") from None
    scheme = parsed.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise CallbackRefused(f"only http and https URLs are called, not {scheme or 'a relative URL'}")
    if parsed.userinfo:
        raise CallbackRefused("a user name or password in the URL is not allowed")
    host = parsed.raw_host.decode("ascii").lower()
    if not host:
        raise CallbackRefused("the URL has no host")
    port = parsed.port if parsed.port is not None else _DEFAULT_PORTS[scheme]
    if not 1 <= port <= 65535:
        raise CallbackRefused(f"port {port} is outside 1-65535")
    path = parsed.raw_path.decode("ascii").partition("?")[0] or "/"
    decoded = unquote(path)
    if "\\" in decoded or any(segment in (".", "..") for segment in decoded.split("/")):
        raise CallbackRefused("the URL's path has an encoded '.' or '..' segment or a backslash")
    return _Parsed(parsed, scheme, host, port, path)


def check_prefix(prefix: str) -> str:
    """Validates one `--callback-allow` prefix (for the command line); returns it unchanged.

    Raises:
        ValueError: not an http(s) URL with a host, or it has userinfo, a query or a fragment
            (such a prefix would never allow anything).
    """
    try:
        parsed = _parse(prefix)
    except CallbackRefused as exc:
        raise ValueError(f"callback prefix {prefix!r}: {exc}") from None
    if parsed.url.query or parsed.url.fragment:
        raise ValueError(f"callback prefix {prefix!r}: a prefix has no query or fragment")
    return prefix


def allowed_prefix(url: str, prefixes: list[str]) -> str | None:
    """The first of `prefixes` that `url` falls under, or None.

    Parsed URLs are compared, not strings: scheme and host case-insensitively (hosts as IDNA),
    ports with the default filled in (`http://h/` == `http://h:80/`), and the prefix's path must
    be a path-prefix of the URL's: a prefix ending in "/" allows what starts with it
    (`/hooks/` allows `/hooks/x`, not `/hooks-evil/`), one without allows its own path and
    what is below it (`/hooks` allows `/hooks` and `/hooks/x`, not `/hooksx`). Paths compare
    case-sensitively, after httpx removed dot segments. None for a URL with userinfo, not
    http(s), or otherwise refused by the checks `resolve` makes before looking anything up;
    prefixes `check_prefix` refuses are skipped. No name is looked up here.
    """
    try:
        target = _parse(url)
    except CallbackRefused:
        return None
    for prefix in prefixes:
        try:
            allowed = _parse(prefix)
        except CallbackRefused:
            continue
        if allowed.url.query or allowed.url.fragment:
            continue
        if (allowed.scheme, allowed.host, allowed.port) != (target.scheme, target.host, target.port):
            continue
        base = allowed.path
        if base.endswith("/") and target.path.startswith(base):
            return prefix
        if not base.endswith("/") and (target.path == base or target.path.startswith(base + "/")):
            return prefix
    return None


def special_address(address: str | IPAddress) -> str | None:
    """Why `address` may not be called without being named, or None for a global address.

    "unspecified", "loopback", "link-local", "multicast", "reserved", "private", or "not global"
    (e.g. 100.64.0.0/10, documentation ranges); IPv6 addresses that embed an IPv4 one
    (IPv4-mapped `::ffff:a.b.c.d`, 6to4, Teredo) are judged by that IPv4 address too.
    Classification is the standard library's `ipaddress` (its IANA special-purpose registries).
    """
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    candidates: list[IPAddress] = [ip]
    if isinstance(ip, ipaddress.IPv6Address):  # the embedded IPv4 address first: its kind is the apt one
        candidates[:0] = [embedded for embedded in (ip.ipv4_mapped, ip.sixtofour, *(ip.teredo or ())) if embedded]
    for candidate in candidates:
        for kind in ("unspecified", "loopback", "link_local", "multicast", "reserved", "private"):
            if getattr(candidate, f"is_{kind}"):
                return kind.replace("_", "-")
        if not candidate.is_global:
            return "not global"
    return None


@dataclass(frozen=True)
class Target:
    """Where one callback goes, checked.

    Attributes:
        url: the URL as httpx normalizes it. host: its host (lower case, IDNA, IPv6 without
        brackets). port: explicit or the scheme's default. scheme: "http" or "https".
        address: the IP to connect to (the first of `addresses`). addresses: every address the
        host resolved to, all checked, in the resolver's order (`send` tries the next only when
        connecting to one fails outright).
    """

    url: str
    host: str
    port: int
    scheme: str
    address: str
    addresses: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.addresses:
            object.__setattr__(self, "addresses", (self.address,))


def lookup(host: str, port: int) -> list[str]:
    """The IPv4 and IPv6 addresses `host` resolves to for TCP (`socket.getaddrinfo`), each once,
    in the resolver's order. Checking them is the caller's (`resolve`; `server.lti.ags`).

    Raises:
        CallbackRefused: the name does not resolve, or has no IPv4/IPv6 address.
        socket.gaierror: with `EAI_AGAIN` only: the name server did not answer now (worth retrying).
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        if exc.errno == socket.EAI_AGAIN:
            raise
        raise CallbackRefused(f"the host {host} does not resolve ({exc.strerror})") from None
    addresses: list[str] = []
    for family, _, _, _, sockaddr in infos:
        if family in (socket.AF_INET, socket.AF_INET6) and str(sockaddr[0]) not in addresses:
            addresses.append(str(sockaddr[0]))
    if not addresses:
        raise CallbackRefused(f"the host {host} has no IPv4 or IPv6 address")
    return addresses


def resolve(url: str, prefixes: list[str]) -> Target:
    """Checks `url` against `prefixes`, looks its host up once (`socket.getaddrinfo`, TCP), and
    checks every address it resolves to.

    An address that `special_address` flags (loopback, link-local, private, reserved, multicast,
    unspecified, not global; IPv4-mapped IPv6 judged as IPv4) is refused unless the matching
    prefix names it: the prefix's host is that IP literal, or the prefix's host is "localhost"
    and the address is loopback. A host *name* resolving to such an address is refused even
    when a prefix names the host (name it by IP instead). The prefix check comes first, so no
    name outside the allow-list is ever looked up.

    Raises:
        CallbackRefused: see the class; the message says which check failed.
        socket.gaierror: with `EAI_AGAIN` only: the name server did not answer now (worth
            retrying, unlike a name that does not exist).
    """
    parsed = _parse(url)
    prefix = allowed_prefix(url, prefixes)
    if prefix is None:
        raise CallbackRefused(f"{parsed.url} is not under any of this client's allowed callback prefixes")
    addresses = lookup(parsed.host, parsed.port)
    prefix_host = _parse(prefix).host
    named = _literal(prefix_host)
    for address in addresses:
        ip = ipaddress.ip_address(address)
        kind = special_address(ip)
        if kind is None or _strip_scope(ip) == named or (prefix_host == "localhost" and ip.is_loopback):
            continue
        suggestion = f"{ip}" if ip.version == 4 else f"[{ip}]"
        raise CallbackRefused(
            f"{parsed.host} resolves to {ip} ({kind}); calling {kind} addresses needs an allowed prefix "
            f"that names the address, e.g. {parsed.scheme}://{suggestion}:{parsed.port}/"
        )
    return Target(
        url=str(parsed.url),
        host=parsed.host,
        port=parsed.port,
        scheme=parsed.scheme,
        address=addresses[0],
        addresses=tuple(addresses),
    )


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _strip_scope(ip: IPAddress) -> IPAddress:
    if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id:
        return ipaddress.IPv6Address(str(ip).partition("%")[0])
    return ip


# --- delivering ------------------------------------------------------------------------------


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
    verify: ssl.SSLContext = ssl_context if ssl_context is not None else _default_ssl_context()
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
            except httpx.ConnectError as exc:
                attempt = Attempt(
                    None,
                    f"could not connect to {_where(target, address)}: {_describe(exc)}",
                    retry=True,
                    delivered=False,
                    elapsed_ms=0.0,
                )
                continue
            except httpx.TimeoutException as exc:
                phase = {
                    httpx.ConnectTimeout: "connecting",
                    httpx.ReadTimeout: "waiting for the answer",
                    httpx.WriteTimeout: "sending",
                    httpx.PoolTimeout: "waiting for a connection",
                }
                attempt = Attempt(
                    None,
                    f"timed out after {timeout_s:g} s {phase.get(type(exc), 'in transit')} ({_where(target, address)})",
                    retry=True,
                    delivered=False,
                    elapsed_ms=0.0,
                )
            except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
                attempt = Attempt(
                    None,
                    f"the connection to {_where(target, address)} failed: {_describe(exc)}",
                    retry=True,
                    delivered=False,
                    elapsed_ms=0.0,
                )
            except httpx.HTTPError as exc:
                attempt = Attempt(
                    None, f"the request failed: {_describe(exc)}", retry=False, delivered=False, elapsed_ms=0.0
                )
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
        location = _excerpt(response.headers.get("location", "").encode("utf-8", "replace"))
        to = f" to {location}" if location else ""
        return Attempt(
            code,
            f"the receiver answered {code}, a redirect{to}; redirects are not followed, "
            f"give the final URL as callback_url",
            retry=False,
            delivered=False,
            elapsed_ms=0.0,
        )
    said = _excerpt(content)
    said = f": {said}" if said else ""
    if code >= 500:
        return Attempt(code, f"the receiver answered {code}{said}", retry=True, delivered=False, elapsed_ms=0.0)
    return Attempt(code, f"the receiver answered {code}{said}", retry=False, delivered=False, elapsed_ms=0.0)


@functools.cache
def _default_ssl_context() -> ssl.SSLContext:
    """httpx's default verifying context, built once (building it reads the CA file): certifi's
    CAs, or those of `SSL_CERT_FILE` / `SSL_CERT_DIR` when set when it is first built."""
    return httpx.create_ssl_context()


def _where(target: Target, address: str) -> str:
    host = f"[{target.host}]" if ":" in target.host else target.host
    shown = f"[{address}]" if ":" in address else address
    return f"{host}:{target.port}" if target.host == address else f"{host}:{target.port} ({shown})"


def _describe(exc: BaseException) -> str:
    """The exception's message without the C source locations `ssl` adds ("(_ssl.c:1006)")."""
    text = re.sub(r"\s*\(_ssl\.c:\d+\)", "", str(exc)) or type(exc).__name__
    return _excerpt(text.encode("utf-8", "replace"))


def _excerpt(raw: bytes) -> str:
    text = " ".join(raw.decode("utf-8", "replace").split())
    text = "".join(ch for ch in text if ch.isprintable())
    return text if len(text) <= _EXCERPT_CHARS else text[: _EXCERPT_CHARS - 1] + "…"


def _ms_since(started: float) -> float:
    return (time.monotonic() - started) * 1000.0


# --- retries ---------------------------------------------------------------------------------


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
