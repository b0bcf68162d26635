"""Where outbound HTTP may go (callbacks, and the LMS calls of `server.lti.ags`): URLs under an
allowed prefix (`allowed_prefix`: parsed URLs are compared, not strings), never a loopback,
link-local, private, reserved, multicast or unspecified address unless the prefix names it, and
the host looked up once (`resolve`, `lookup`) so the address checked is the address connected to."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass, field
from urllib.parse import unquote

import httpx

_DEFAULT_PORTS = {"http": 80, "https": 443}


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class CallbackRefused(Exception):
    """The URL may not be called: not http(s), userinfo, not under an allowed prefix, a special
    address the prefix does not name, or a host that does not resolve. Never worth retrying; the
    message says why, for the client."""


@dataclass(frozen=True)
class ParsedUrl:
    """A callback or LMS URL as httpx parses it, with its scheme, host and port made explicit."""

    url: httpx.URL
    scheme: str
    host: str  # lower case, IDNA (ASCII), IPv6 without brackets
    port: int  # explicit or the scheme's default
    path: str  # as sent (percent-encoded, dot segments removed by httpx)


def parse_url(url: str) -> ParsedUrl:
    """The URL parsed with httpx, the parser that also builds the request (no parser differential).

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
    return ParsedUrl(parsed, scheme, host, port, path)


def check_prefix(prefix: str) -> str:
    """Validates one `--callback-allow` prefix (for the command line); returns it unchanged.

    Raises:
        ValueError: not an http(s) URL with a host, or it has userinfo, a query or a fragment
            (such a prefix would never allow anything).
    """
    try:
        parsed = parse_url(prefix)
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
        target = parse_url(url)
    except CallbackRefused:
        return None
    for prefix in prefixes:
        try:
            allowed = parse_url(prefix)
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
    parsed = parse_url(url)
    prefix = allowed_prefix(url, prefixes)
    if prefix is None:
        raise CallbackRefused(f"{parsed.url} is not under any of this client's allowed callback prefixes")
    addresses = lookup(parsed.host, parsed.port)
    prefix_host = parse_url(prefix).host
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
