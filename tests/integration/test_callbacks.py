"""Callback delivery (server/delivery/callbacks.py) against a real HTTP listener on this machine: the
signature, the retry classification, the allow-list, special addresses, and that the request goes
to the address that was checked. Nothing of ours is mocked; the listener is http.server."""

from __future__ import annotations

import ipaddress
import json
import re
import shutil
import socket
import ssl
import subprocess
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from server.delivery.callbacks import USER_AGENT, backoff_s, deliver, send
from server.delivery.signing import SIGNATURE_HEADER, sign, verify
from server.delivery.targets import CallbackRefused, Target, allowed_prefix, resolve, special_address

SECRET = "s3cret-for-tests"
BODY = (
    json.dumps({"id": "sub-1", "verdict": "ACCEPTED", "score": 1.0, "note": "ünïcode  spacing"}, ensure_ascii=False)
    + "\n"
).encode("utf-8")


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    local: tuple  # the listener's address the TCP connection came to
    sni: str | None


class Receiver:
    """A real HTTP(S) listener in a thread. `script` lists the answers to give, in order (then
    200): an int status, 302 (Location: /elsewhere on this listener), "hang" (no answer until the
    test ends), or ("big", status) (a 1 MiB body). Records every request and counts every TCP
    connection accepted, so a test can prove nothing reached it."""

    def __init__(self, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None):
        self.requests: list[Received] = []
        self.connections = 0
        self.script: list[object] = []
        self.release = threading.Event()
        self.sni: list[str | None] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.requests.append(
                    Received(
                        "POST",
                        self.path,
                        {k.lower(): v for k, v in self.headers.items()},
                        body,
                        self.connection.getsockname()[:2],
                        receiver.sni[-1] if receiver.sni else None,
                    )
                )
                action = receiver.script.pop(0) if receiver.script else 200
                if action == "hang":
                    receiver.release.wait(10)
                    return
                payload = b'{"error": "bad hook"}'
                if isinstance(action, tuple):
                    action, payload = action[1], b"x" * (1 << 20)
                self.send_response(action)
                if action == 302:
                    self.send_header("Location", "/elsewhere")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except OSError:
                    pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

            def process_request(self, request: socket.socket, client_address: object) -> None:
                receiver.connections += 1
                super().process_request(request, client_address)

            def handle_error(self, request: object, client_address: object) -> None:
                pass

        self.server = Server((host, 0), Handler)
        if tls is not None:
            tls.sni_callback = lambda sock, name, ctx: self.sni.append(name)
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.host, self.port = host, self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def base(self, host: str | None = None, scheme: str = "http") -> str:
        host = host or self.host
        return f"{scheme}://{f'[{host}]' if ':' in host else host}:{self.port}/"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Receiver:
    listener = Receiver()
    yield listener
    listener.close()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# --- signatures --------------------------------------------------------------------------------


def test_a_delivered_callback_is_signed_and_arrives_byte_for_byte(receiver: Receiver) -> None:
    before = int(time.time())
    attempt = deliver(receiver.base() + "hooks/verdict", BODY, SECRET, [receiver.base() + "hooks/"], timeout_s=5)
    assert (attempt.status_code, attempt.error, attempt.retry, attempt.delivered) == (200, None, False, True)
    assert attempt.elapsed_ms > 0
    [got] = receiver.requests
    assert got.path == "/hooks/verdict" and got.body == BODY
    assert got.headers["content-type"] == "application/json" and got.headers["user-agent"] == USER_AGENT
    header = got.headers[SIGNATURE_HEADER.lower()]
    match = re.fullmatch(r"t=(\d+),v1=([0-9a-f]{64})", header)
    assert match and before <= int(match[1]) <= time.time() + 1
    t = int(match[1])
    assert verify(header, got.body, SECRET)
    assert not verify(header, got.body, "another secret")
    assert not verify(header, got.body.replace(b"ACCEPTED", b"REJECTED"), SECRET)
    assert not verify(header, got.body + b" ", SECRET)
    assert not verify(header, got.body, SECRET, now=t + 301), "a stale timestamp was accepted"
    assert not verify(header, got.body, SECRET, now=t - 301), "a timestamp from the future was accepted"
    assert verify(header, got.body, SECRET, now=t + 299)


def test_the_signature_is_stripes_scheme_and_verify_is_strict() -> None:
    import hashlib
    import hmac

    header = sign(b'{"a":1}', "k", 1700000000)
    assert header == "t=1700000000,v1=" + hmac.new(b"k", b'1700000000.{"a":1}', hashlib.sha256).hexdigest()
    now = 1700000000
    good = header.split("v1=")[1]
    assert verify(f"t={now},v1={'0' * 64},v1={good}", b'{"a":1}', "k", now=now), "a rotated secret's v1 failed"
    assert verify(f" t={now} , v1={good} ", b'{"a":1}', "k", now=now)
    for malformed in [
        "",
        "garbage",
        f"v1={good}",
        f"t={now}",
        f"t=abc,v1={good}",
        f"t=-1,v1={good}",
        f"t={now},v1=ü",
        f"t={now},v2={good}",
    ]:
        assert not verify(malformed, b'{"a":1}', "k", now=now), malformed
    assert not verify(header, b'{"a":1}', "", now=now)
    with pytest.raises(ValueError):
        sign(b"x", "", now)


# --- retries -----------------------------------------------------------------------------------


def test_500_twice_then_200_is_retried_then_delivered(receiver: Receiver) -> None:
    receiver.script = [500, 500, 200]
    url, prefixes = receiver.base() + "hook", [receiver.base()]
    attempts = [deliver(url, BODY, SECRET, prefixes, timeout_s=5) for _ in range(3)]
    assert [(a.status_code, a.retry, a.delivered) for a in attempts] == [
        (500, True, False),
        (500, True, False),
        (200, False, True),
    ]
    assert "500" in attempts[0].error and attempts[2].error is None
    assert [r.body for r in receiver.requests] == [BODY] * 3


def test_400_is_not_retried_and_says_what_the_receiver_said(receiver: Receiver) -> None:
    receiver.script = [400]
    attempt = deliver(receiver.base() + "hook", BODY, SECRET, [receiver.base()], timeout_s=5)
    assert (attempt.status_code, attempt.retry, attempt.delivered) == (400, False, False)
    assert "400" in attempt.error and "bad hook" in attempt.error


def test_a_huge_answer_is_read_only_in_part(receiver: Receiver) -> None:
    receiver.script = [("big", 400)]
    attempt = deliver(receiver.base() + "hook", BODY, SECRET, [receiver.base()], timeout_s=5)
    assert (attempt.status_code, attempt.retry) == (400, False)
    assert len(attempt.error) < 300


def test_a_redirect_is_not_followed_nor_retried(receiver: Receiver) -> None:
    receiver.script = [302]
    attempt = deliver(receiver.base() + "hook", BODY, SECRET, [receiver.base()], timeout_s=5)
    assert (attempt.status_code, attempt.retry, attempt.delivered) == (302, False, False)
    assert "redirect" in attempt.error and "/elsewhere" in attempt.error
    time.sleep(0.1)
    assert [r.path for r in receiver.requests] == ["/hook"], "the redirect was followed"


def test_a_receiver_that_hangs_times_out_and_is_retried(receiver: Receiver) -> None:
    receiver.script = ["hang"]
    started = time.monotonic()
    attempt = deliver(receiver.base() + "hook", BODY, SECRET, [receiver.base()], timeout_s=0.3)
    assert time.monotonic() - started < 3
    assert (attempt.status_code, attempt.retry, attempt.delivered) == (None, True, False)
    assert "timed out" in attempt.error and "0.3 s" in attempt.error
    assert 250 <= attempt.elapsed_ms < 3000


def test_a_closed_port_is_retried() -> None:
    port = _closed_port()
    attempt = deliver(f"http://127.0.0.1:{port}/hook", BODY, SECRET, [f"http://127.0.0.1:{port}/"], timeout_s=2)
    assert (attempt.status_code, attempt.retry, attempt.delivered) == (None, True, False)
    assert "could not connect" in attempt.error and "Traceback" not in attempt.error


def test_environment_proxies_are_ignored(receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    dead = f"http://127.0.0.1:{_closed_port()}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, dead)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    attempt = deliver(receiver.base() + "hook", BODY, SECRET, [receiver.base()], timeout_s=5)
    assert attempt.delivered and len(receiver.requests) == 1


def test_backoff_grows_and_is_capped() -> None:
    for attempt in range(1, 15):
        ceiling = min(300.0, 2.0 * 2 ** (attempt - 1))
        for _ in range(50):
            assert ceiling / 2 <= backoff_s(attempt) <= ceiling
    assert 150 <= backoff_s(10_000) <= 300
    assert backoff_s(3, base_s=1, cap_s=3) <= 3
    assert min(backoff_s(6) for _ in range(20)) > max(backoff_s(2) for _ in range(20))
    with pytest.raises(ValueError):
        backoff_s(0)


# --- the allow-list ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://lms.example.org/hooks/x", "https://lms.example.org/hooks/"),
        ("HTTPS://LMS.Example.ORG:443/hooks/x?y=1", "https://lms.example.org/hooks/"),
        ("https://lms.example.org/hooks/", "https://lms.example.org/hooks/"),
        ("https://lms.example.org/hooks", None),
        ("https://lms.example.org/hooks-evil/", None),
        ("https://lms.example.org/Hooks/x", None),
        ("http://lms.example.org/hooks/x", None),
        ("https://lms.example.org:8443/hooks/x", None),
        ("https://lms.example.org.evil.com/hooks/x", None),
        ("https://lms.example.org/hooks/../admin", None),
        ("https://lms.example.org/hooks/%2e%2e/admin", None),
        ("https://lms.example.org/hooks%2F..%2Fadmin", None),
        ("https://lms.example.org/hooks/..%5cadmin", None),
        ("https://user:pw@lms.example.org/hooks/x", None),
        ("https://lms.example.org\\@evil.com/hooks/x", None),
        ("https://a.org/hooks", "https://a.org/hooks"),
        ("https://a.org/hooks/x", "https://a.org/hooks"),
        ("https://a.org/hooksx", None),
        ("http://h/x", "http://h:80/"),
        ("http://h:80/x", "http://h:80/"),
        ("ftp://h/x", None),
        ("not a url", None),
    ],
)
def test_allowed_prefix_compares_parsed_urls(url: str, expected: str | None) -> None:
    prefixes = ["https://lms.example.org/hooks/", "https://a.org/hooks", "http://h:80/"]
    assert allowed_prefix(url, prefixes) == expected


def test_a_url_outside_every_prefix_is_refused_before_connecting(receiver: Receiver) -> None:
    base = receiver.base()
    for url, prefixes in [
        (base + "other/x", [base + "hooks/"]),
        (base + "hooksx", [base + "hooks"]),
        (f"http://user:pw@127.0.0.1:{receiver.port}/hooks/x", [base]),
        (f"ftp://127.0.0.1:{receiver.port}/hooks/x", [base, f"ftp://127.0.0.1:{receiver.port}/"]),
        (base + "hooks/x", [f"http://localhost:{receiver.port}/"]),
        (base + "hooks/x", []),
        (f"http://localhost:{receiver.port}/hooks/x", [base]),
    ]:
        attempt = deliver(url, BODY, SECRET, prefixes, timeout_s=2)
        assert (attempt.status_code, attempt.retry, attempt.delivered) == (None, False, False), url
        assert attempt.error.startswith("callback URL refused"), attempt.error
    time.sleep(0.1)
    assert receiver.connections == 0 and receiver.requests == []


def test_resolve_refuses_with_reasons() -> None:
    with pytest.raises(CallbackRefused, match="only http and https"):
        resolve("ftp://a.org/x", ["ftp://a.org/"])
    with pytest.raises(CallbackRefused, match="user name or password"):
        resolve("https://u@a.org/x", ["https://a.org/"])
    with pytest.raises(CallbackRefused, match="not under any"):
        resolve("https://a.org/x", ["https://b.org/"])
    with pytest.raises(CallbackRefused, match="does not resolve"):
        resolve("https://callbacks.invalid/x", ["https://callbacks.invalid/"])


# --- special addresses -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("::ffff:192.168.0.1", "private"),
        ("172.16.0.1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("100.64.0.1", "not global"),
        ("2002:c0a8:0001::1", "private"),
        ("8.8.8.8", None),
        ("2606:4700:4700::1111", None),
    ],
)
def test_special_addresses(address: str, kind: str | None) -> None:
    assert special_address(address) == kind


def test_a_loopback_address_named_by_the_prefix_is_allowed(receiver: Receiver) -> None:
    attempt = deliver(receiver.base() + "hook", BODY, SECRET, [receiver.base()], timeout_s=5)
    assert attempt.delivered and receiver.requests[0].local[0] == "127.0.0.1"


def test_localhost_named_by_the_prefix_is_allowed(receiver: Receiver) -> None:
    prefix = receiver.base("localhost")
    target = resolve(prefix + "hook", [prefix])
    assert all(ipaddress.ip_address(a).is_loopback for a in target.addresses)
    attempt = deliver(prefix + "hook", BODY, SECRET, [prefix], timeout_s=5)
    if not attempt.delivered and "127.0.0.1" not in target.addresses:
        pytest.skip(f"localhost resolves to {target.addresses} only, the listener is on 127.0.0.1")
    assert attempt.delivered, attempt.error
    assert receiver.requests[0].headers["host"] == f"localhost:{receiver.port}"


def test_a_host_name_resolving_to_a_special_address_is_refused_even_when_named_by_the_prefix() -> None:
    name = socket.gethostname()
    try:
        ipaddress.ip_address(name)
        pytest.skip(f"the host name {name!r} is an IP literal")
    except ValueError:
        pass
    if name.lower() in ("localhost", "") or name.lower().endswith(".localhost"):
        pytest.skip(f"the host name is {name!r}, which a prefix may name")
    try:
        addresses = list(dict.fromkeys(info[4][0] for info in socket.getaddrinfo(name, 80, type=socket.SOCK_STREAM)))
    except socket.gaierror as exc:
        pytest.skip(f"this machine's host name {name!r} does not resolve ({exc})")
    special = [a for a in addresses if special_address(a)]
    if not special:
        pytest.skip(f"this machine's host name {name!r} resolves to {addresses}: no special address")
    try:
        listener = Receiver(host=special[0])
    except OSError as exc:
        pytest.skip(f"cannot listen on {special[0]}, which {name!r} resolves to ({exc})")
    try:
        prefix = f"http://{name}:{listener.port}/"
        attempt = deliver(prefix + "hook", BODY, SECRET, [prefix], timeout_s=2)
        assert (attempt.status_code, attempt.retry, attempt.delivered) == (None, False, False)
        assert special_address(special[0]) in attempt.error and "names the address" in attempt.error
        time.sleep(0.1)
        assert listener.connections == 0, f"{name} ({special[0]}) was connected to"
        # The control: the same listener, named by its IP, does receive.
        control = deliver(listener.base() + "hook", BODY, SECRET, [listener.base()], timeout_s=5)
        assert control.delivered and listener.connections == 1
    finally:
        listener.close()


# --- pinning -----------------------------------------------------------------------------------


def test_the_request_goes_to_the_checked_address_not_to_a_new_lookup(receiver: Receiver) -> None:
    """The host name of this target does not resolve at all (RFC 6761 .invalid): the request
    can only arrive if it went to the pinned address, with the URL's host in the Host header."""
    with pytest.raises(socket.gaierror):
        socket.getaddrinfo("callbacks.invalid", receiver.port)
    target = Target(
        url=f"http://callbacks.invalid:{receiver.port}/hook",
        host="callbacks.invalid",
        port=receiver.port,
        scheme="http",
        address="127.0.0.1",
    )
    attempt = send(target, BODY, SECRET, timeout_s=5)
    assert attempt.delivered, attempt.error
    [got] = receiver.requests
    assert got.headers["host"] == f"callbacks.invalid:{receiver.port}" and got.local == ("127.0.0.1", receiver.port)
    assert got.path == "/hook" and verify(got.headers[SIGNATURE_HEADER.lower()], got.body, SECRET)


def test_deliver_connects_to_the_address_resolve_checked(receiver: Receiver) -> None:
    prefix = receiver.base("localhost")
    target = resolve(prefix + "hook", [prefix])
    if target.address != "127.0.0.1":
        pytest.skip(f"localhost resolves to {target.addresses} first; the listener is on 127.0.0.1")
    attempt = deliver(prefix + "hook", BODY, SECRET, [prefix], timeout_s=5)
    assert attempt.delivered
    [got] = receiver.requests
    assert got.local == (target.address, receiver.port) and got.headers["host"] == f"localhost:{receiver.port}"


def test_the_next_checked_address_is_tried_when_one_refuses(receiver: Receiver) -> None:
    target = Target(
        url=f"http://callbacks.invalid:{receiver.port}/hook",
        host="callbacks.invalid",
        port=receiver.port,
        scheme="http",
        address="127.0.0.3",
        addresses=("127.0.0.3", "127.0.0.1"),
    )
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.3", receiver.port)) == 0:
            pytest.skip("127.0.0.3 accepts connections on the listener's port")
    attempt = send(target, BODY, SECRET, timeout_s=5)
    assert attempt.delivered, attempt.error
    assert receiver.requests[0].local == ("127.0.0.1", receiver.port)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Self-signed certificates made with the openssl command: one for callbacks.invalid, one for
    another name."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make test certificates")
    folder = tmp_path_factory.mktemp("certs")
    made = {}
    for label, name in [("right", "callbacks.invalid"), ("wrong", "elsewhere.invalid")]:
        cert, key = folder / f"{label}.pem", folder / f"{label}.key"
        subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                str(key),
                "-out",
                str(cert),
                "-days",
                "2",
                "-subj",
                f"/CN={name}",
                "-addext",
                f"subjectAltName=DNS:{name}",
            ],
            check=True,
            capture_output=True,
            timeout=30,
        )
        made[label], made[label + "_key"] = cert, key
    return made


def _tls_receiver(certificates: dict[str, Path], label: str) -> Receiver:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certificates[label], certificates[label + "_key"])
    return Receiver(tls=context)


def test_https_to_a_pinned_address_still_checks_the_certificate_for_the_host_name(
    certificates: dict[str, Path],
) -> None:
    trusted = ssl.create_default_context(cafile=str(certificates["right"]))
    trusted.load_verify_locations(cafile=str(certificates["wrong"]))
    for label, expect_delivered in [("right", True), ("wrong", False)]:
        listener = _tls_receiver(certificates, label)
        try:
            target = Target(
                url=f"https://callbacks.invalid:{listener.port}/hook",
                host="callbacks.invalid",
                port=listener.port,
                scheme="https",
                address="127.0.0.1",
            )
            attempt = send(target, BODY, SECRET, timeout_s=5, ssl_context=trusted)
            assert attempt.delivered is expect_delivered, attempt.error
            if expect_delivered:
                [got] = listener.requests
                assert got.sni == "callbacks.invalid" and got.headers["host"] == f"callbacks.invalid:{listener.port}"
                assert got.body == BODY
            else:
                assert listener.requests == [] and attempt.status_code is None
                assert "certificate" in attempt.error.lower() and "_ssl.c" not in attempt.error
        finally:
            listener.close()


def test_a_revoked_client_gets_no_callback_not_even_after_a_regrade(receiver: Receiver, tmp_path: Path) -> None:
    """Revoking a client stops its callbacks at once: one pending when it was revoked, and those a
    regrade makes pending again, are refused without a connection."""
    from server.store import migrate
    from server.store.accounts import ClientStore
    from server.store.db import make_engine
    from server.store.regrades import RegradeStore
    from server.store.submissions import CallbackStatus, SubmissionStore
    from server.submissions.callback_sender import CallbackSender

    url = f"sqlite:///{tmp_path / 'judge.db'}"
    migrate.upgrade(url)
    engine = make_engine(url)
    store, clients = SubmissionStore(engine), ClientStore(engine)
    REPORT = '{"problem": "remat_sin_sin", "verdict": "ACCEPTED", "score": 1.0}'
    client, _ = clients.create("lms", callback_allow=[receiver.base()])
    sender = CallbackSender(store, clients, max_attempts=3, timeout_s=5)

    def graded(callback_url: str) -> str:
        record = store.create(problem="remat_sin_sin", source="x = 1", client_id=client.id, callback_url=callback_url)
        assert store.claim(record.id, worker_id="w", lease_s=60, max_attempts=3).record is not None
        assert store.finish(
            record.id, verdict="ACCEPTED", score=1.0, problem_version="v", result_json=REPORT, worker_id="w"
        )
        store.callback_due_now(record.id)
        return record.id

    delivered = graded(receiver.base() + "hook")
    assert sender.send(store.claim_due_callbacks(lease_s=30)[0]) == CallbackStatus.DELIVERED
    assert len(receiver.requests) == 1
    pending = graded(receiver.base() + "hook")
    assert clients.revoke("lms")
    assert sender.send(store.claim_due_callbacks(lease_s=30)[0]) == CallbackStatus.REFUSED
    assert store.get(pending).callback_last_error == "the API client was revoked"
    RegradeStore(engine).start("remat_sin_sin", problem_version="v2", requested_by="admin")
    for submission_id in (delivered, pending):
        assert store.claim(submission_id, worker_id="w", lease_s=60, max_attempts=3).record is not None
        assert store.finish(
            submission_id, verdict="WRONG_ANSWER", score=0.34, problem_version="v2", result_json=REPORT, worker_id="w"
        )
        store.callback_due_now(submission_id)
    assert [sender.send(r) for r in store.claim_due_callbacks(lease_s=30)] == [CallbackStatus.REFUSED] * 2
    assert receiver.connections == 1  # only the delivery made before the revocation
    engine.dispose()
