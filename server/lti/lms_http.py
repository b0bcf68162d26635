"""HTTP to an LMS, pinned and without redirects: `PinnedClient.request` (the AGS client's token
and score calls, dynamic registration, the set-up page's connection test, the NRPS roster), the
refusal of a URL it does not call (`AgsRefused`) and the words for it (`network_refusal`).

Host safety (compare `server.delivery.callbacks`): platform URLs (token URL) are registered by an
administrator with `remat-judge lti register`, and line item URLs come from the platform-signed
id_token, so no allow-list of prefixes is asked for. What is kept: http(s) only, no userinfo, the
host looked up once and the request pinned to the checked address (no DNS rebinding), environment
proxies ignored, redirects never followed (a bearer token is never re-sent elsewhere), answers read
up to `MAX_RESPONSE_BYTES`, timeouts on every operation. Special addresses (loopback, private,
link-local such as 169.254.169.254, ...; `server.delivery.targets.special_address`) are refused unless
they fall in `allow_networks`: a campus Moodle on a private network is legitimate, so an operator
lists its network (e.g. "10.0.0.0/8"); cloud metadata stays unreachable unless named.
"""

from __future__ import annotations

import ipaddress
import ssl
import time
from collections.abc import Iterable
from dataclasses import dataclass

import httpx

from server.delivery.callbacks import default_ssl_context
from server.delivery.targets import CallbackRefused, lookup, parse_url, special_address

USER_AGENT = "remat-judge-lti/1"


MAX_RESPONSE_BYTES = 64 * 1024


class AgsRefused(Exception):
    """A URL that is not called (scheme, userinfo, special address outside `allow_networks`, no
    such host). Never worth retrying."""


@dataclass
class _Answer:
    """An answer, its body cut at the request's `max_bytes` (`truncated`: there was more)."""

    status_code: int
    body: bytes
    headers: httpx.Headers
    truncated: bool = False


class PinnedClient:
    """HTTP for the LMS calls: each request pinned to a checked address, no redirects (see the
    module docstring). Thread-safe.

    Args:
        timeout_s: per connect/read/write, and for reading a whole answer.
        allow_networks: special-address networks that may be called (e.g. ["10.0.0.0/8"] for a
            campus Moodle; tests: ["127.0.0.0/8"]).
        ssl_context: trusted CAs for https (default httpx's).
    """

    def __init__(
        self,
        *,
        timeout_s: float = 10.0,
        allow_networks: Iterable[str] = (),
        ssl_context: ssl.SSLContext | None = None,
    ):
        self.timeout_s = timeout_s
        self.allow_networks = [ipaddress.ip_network(n, strict=False) for n in allow_networks]
        self.ssl_context = ssl_context

    def _addresses(self, host: str, port: int) -> list[str]:
        try:
            addresses = lookup(host, port)
        except CallbackRefused as exc:
            raise AgsRefused(str(exc)) from None
        for address in addresses:
            ip = ipaddress.ip_address(address.partition("%")[0])
            kind = special_address(ip)
            if kind is not None and not any(ip in network for network in self.allow_networks):
                raise AgsRefused(network_refusal(host, ip, kind))
        return addresses

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str],
        content: bytes = b"",
        max_bytes: int = MAX_RESPONSE_BYTES,
    ) -> _Answer:
        """One request pinned to a checked address, no redirects, the answer read up to
        `max_bytes` (`_Answer.truncated` says when there was more): the AGS calls, dynamic
        registration, the set-up page's connection test and the NRPS roster (`server.lti.nrps`).

        Raises:
            AgsRefused: see the class. httpx.TransportError (incl. time-outs), socket.gaierror
            (EAI_AGAIN): worth retrying.
        """
        try:
            parsed = parse_url(url)
        except CallbackRefused as exc:
            raise AgsRefused(str(exc)) from None
        addresses = self._addresses(parsed.host, parsed.port)
        headers = {
            "Host": parsed.url.netloc.decode("ascii"),
            "User-Agent": USER_AGENT,
            "Accept-Encoding": "identity",
            **headers,
        }
        extensions = {"sni_hostname": parsed.host} if parsed.scheme == "https" else {}
        verify = self.ssl_context if self.ssl_context is not None else default_ssl_context()
        started = time.monotonic()
        last: Exception | None = None
        with httpx.Client(
            trust_env=False, follow_redirects=False, timeout=httpx.Timeout(self.timeout_s), verify=verify
        ) as client:
            for address in addresses:
                request = client.build_request(
                    method, parsed.url.copy_with(host=address), content=content, headers=headers, extensions=extensions
                )
                try:
                    response = client.send(request, stream=True)
                except httpx.ConnectError as exc:
                    last = exc
                    continue
                try:
                    received = bytearray()
                    for chunk in response.iter_raw():
                        received += chunk
                        if len(received) > max_bytes or time.monotonic() > started + self.timeout_s:
                            break
                except httpx.HTTPError:
                    pass
                finally:
                    response.close()
                return _Answer(
                    response.status_code, bytes(received[:max_bytes]), response.headers, len(received) > max_bytes
                )
        assert last is not None
        raise last


# Where a special address usually sits, so advice names a network an operator recognises.
_SUGGESTED_NETWORKS = [
    ipaddress.ip_network(n)
    for n in (
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "fc00::/7",
        "fe80::/10",
    )
]


def network_refusal(host: str, ip: ipaddress.IPv4Address | ipaddress.IPv6Address, kind: str) -> str:
    """ "10.0.0.5 is a private address: add 10.0.0.0/8 to REMAT_JUDGE_LTI_ALLOW_NETWORKS" (the
    usual block of a special address, or the address alone): why a request is refused, and
    `server.lti.ags.network_advice`."""
    network = next((n for n in _SUGGESTED_NETWORKS if ip in n), ipaddress.ip_network(ip))
    what = f"{ip} is a {kind} address" if host == str(ip) else f"{host} resolves to {ip}, a {kind} address"
    return f"{what}: add {network} to REMAT_JUDGE_LTI_ALLOW_NETWORKS"
