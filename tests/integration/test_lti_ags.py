"""AGS client (server/lti/ags.py) against a real simulated LMS gradebook on loopback
(tests/lti_gradebook.py): the token flow with a verified client assertion, score passback with
Moodle's 400/409 rules, ordering of timestamps, the best/last rules, and failure classification."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from server.lti.ags import SCOPE_LINEITEM, SCOPE_RESULT_READONLY, SCOPE_SCORE, AgsClient, TokenError
from server.lti.keys import ToolKey, thumbprint
from server.lti.scores import (
    CANVAS_SUBMISSION_CLAIM,
    SCORE_CONTENT_TYPE,
    Score,
    iso_ms,
    next_timestamp,
    score_body,
    scores_url,
)
from tests.lti_gradebook import Gradebook

CLIENT_ID = "client-123"
ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$")


def make_key() -> ToolKey:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return ToolKey(private_key=private, kid=thumbprint(private.public_key()))


@dataclass(frozen=True)
class FakePlatform:
    issuer: str
    client_id: str
    auth_token_url: str
    token_audience: str | None = None


@pytest.fixture(scope="module")
def key() -> ToolKey:
    return make_key()


@pytest.fixture
def book(key: ToolKey):
    gradebook = Gradebook(jwks=key.jwks(), client_id=CLIENT_ID).start()
    yield gradebook
    gradebook.stop()


@pytest.fixture
def platform(book: Gradebook) -> FakePlatform:
    return FakePlatform(issuer="https://lms.example", client_id=CLIENT_ID, auth_token_url=book.token_url)


@pytest.fixture
def client() -> AgsClient:
    return AgsClient(timeout_s=5, allow_networks=["127.0.0.0/8"])


def score(user: str, given: float, at: datetime, **kw) -> Score:
    return Score(user_id=user, score_given=given, score_maximum=1.0, timestamp=at, **kw)


# --- pure rules ------------------------------------------------------------------------------


def test_next_timestamp_is_strictly_newer_in_whole_seconds() -> None:
    t0 = datetime(2026, 11, 23, 21, 0, 0, 100_000, tzinfo=UTC)
    assert next_timestamp(t0, None) == t0
    same_second = t0 + timedelta(milliseconds=500)
    bumped = next_timestamp(same_second, t0)
    assert bumped == datetime(2026, 11, 23, 21, 0, 1, tzinfo=UTC)
    # a third verdict in the same wall-clock second moves on again
    assert next_timestamp(t0 + timedelta(milliseconds=800), bumped) == bumped + timedelta(seconds=1)
    later = t0 + timedelta(seconds=5)
    assert next_timestamp(later, bumped) == later
    # a clock that went backwards still gives a newer second
    assert next_timestamp(t0 - timedelta(seconds=3), t0) == datetime(2026, 11, 23, 21, 0, 1, tzinfo=UTC)
    # other zones are compared as instants and returned in UTC
    other = datetime(2026, 11, 23, 22, 0, 0, 300_000, tzinfo=timezone(timedelta(hours=1)))
    assert next_timestamp(other, t0) == datetime(2026, 11, 23, 21, 0, 1, tzinfo=UTC)
    with pytest.raises(ValueError):
        next_timestamp(datetime(2026, 1, 1), None)


def test_scores_url_and_body() -> None:
    assert (
        scores_url("https://m/mod/lti/services.php/2/lineitems/7/lineitem?type_id=1")
        == "https://m/mod/lti/services.php/2/lineitems/7/lineitem/scores?type_id=1"
    )
    assert (
        scores_url("https://canvas/api/lti/courses/1/line_items/5")
        == "https://canvas/api/lti/courses/1/line_items/5/scores"
    )
    assert scores_url("https://x/items/5/") == "https://x/items/5/scores"
    at = datetime(2026, 11, 23, 21, 0, 0, 123_456, tzinfo=UTC)
    body = score_body(score("u1", 0.5, at, submitted_at=at - timedelta(seconds=3), comment="2/4 tests"))
    assert body == {
        "userId": "u1",
        "scoreGiven": 0.5,
        "scoreMaximum": 1.0,
        "activityProgress": "Completed",
        "gradingProgress": "FullyGraded",
        "timestamp": "2026-11-23T21:00:00.123+00:00",
        "comment": "2/4 tests",
        CANVAS_SUBMISSION_CLAIM: {"submittedAt": "2026-11-23T20:59:57.123+00:00"},
    }
    assert "comment" not in score_body(score("u1", 0.5, at))
    with pytest.raises(ValueError):
        iso_ms(datetime(2026, 1, 1))


# --- tokens ----------------------------------------------------------------------------------


def test_token_flow_verified_and_cached(
    client: AgsClient, platform: FakePlatform, key: ToolKey, book: Gradebook
) -> None:
    token = client.access_token(platform, key, [SCOPE_SCORE, SCOPE_RESULT_READONLY])
    assert token and client.token_fetches == 1
    sent = book.token_requests[-1]
    assert sent["grant_type"] == "client_credentials"
    assert sent["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    assert set(sent["scope"].split(" ")) == {SCOPE_SCORE, SCOPE_RESULT_READONLY}
    import jwt

    claims = jwt.decode(sent["client_assertion"], options={"verify_signature": False})
    assert claims["iss"] == claims["sub"] == CLIENT_ID and claims["aud"] == book.token_url
    assert claims["exp"] - claims["iat"] == 300
    # cached per (platform, scopes): same scopes in another order reuse it; other scopes do not
    assert client.access_token(platform, key, [SCOPE_RESULT_READONLY, SCOPE_SCORE]) == token
    assert client.token_fetches == 1
    other = client.access_token(platform, key, [SCOPE_SCORE, SCOPE_LINEITEM])
    assert other != token and client.token_fetches == 2
    # every assertion has its own jti
    jtis = {jwt.decode(r["client_assertion"], options={"verify_signature": False})["jti"] for r in book.token_requests}
    assert len(jtis) == len(book.token_requests) == 2


def test_token_refetched_shortly_before_expiry(key: ToolKey) -> None:
    book = Gradebook(jwks=key.jwks(), client_id=CLIENT_ID, expires_in=2).start()
    try:
        platform = FakePlatform("https://lms.example", CLIENT_ID, book.token_url)
        client = AgsClient(allow_networks=["127.0.0.0/8"])  # used for at most half of 2 s
        first = client.access_token(platform, key, [SCOPE_SCORE])
        assert client.access_token(platform, key, [SCOPE_SCORE]) == first
        time.sleep(1.1)
        assert client.access_token(platform, key, [SCOPE_SCORE]) != first
        assert client.token_fetches == 2
    finally:
        book.stop()


def test_token_audience_used_when_registered(key: ToolKey) -> None:
    audience = "https://auth.brightspace.example/core/connect/token"
    book = Gradebook(jwks=key.jwks(), client_id=CLIENT_ID, audience=audience).start()
    try:
        client = AgsClient(allow_networks=["127.0.0.0/8"])
        with pytest.raises(TokenError) as refused:  # aud = token URL: refused by this platform
            client.access_token(FakePlatform("https://d2l", CLIENT_ID, book.token_url), key, [SCOPE_SCORE])
        assert refused.value.status_code == 401 and not refused.value.retry
        assert "audience" in str(refused.value).lower()
        assert client.access_token(FakePlatform("https://d2l", CLIENT_ID, book.token_url, audience), key, [SCOPE_SCORE])
    finally:
        book.stop()


def test_assertion_signed_by_another_key_is_refused(client: AgsClient, platform: FakePlatform, book: Gradebook) -> None:
    impostor = make_key()
    with pytest.raises(TokenError) as refused:
        client.access_token(platform, impostor, [SCOPE_SCORE])
    assert refused.value.status_code == 401 and not refused.value.retry
    # same kid, other key: the signature check itself refuses it
    forged = ToolKey(private_key=impostor.private_key, kid=book.jwks["keys"][0]["kid"])
    with pytest.raises(TokenError) as refused:
        client.access_token(platform, forged, [SCOPE_SCORE])
    assert "signature" in str(refused.value).lower()


def test_replayed_assertion_is_refused(
    client: AgsClient, platform: FakePlatform, key: ToolKey, book: Gradebook
) -> None:
    client.access_token(platform, key, [SCOPE_SCORE])
    replay = dict(book.token_requests[-1])
    answer = httpx.post(book.token_url, data=replay, trust_env=False)
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_grant"


# --- scores ----------------------------------------------------------------------------------


def test_two_scores_same_second_arrive_in_order(
    client: AgsClient, platform: FakePlatform, key: ToolKey, book: Gradebook
) -> None:
    lineitem = book.lineitem_url("7")
    first_verdict = datetime.now(UTC).replace(microsecond=100_000)
    second_verdict = first_verdict + timedelta(milliseconds=300)  # the same second
    last_sent = None
    for given, verdict_at in ((0.0, first_verdict), (1.0, second_verdict)):
        stamp = next_timestamp(verdict_at, last_sent)
        delivery = client.send_score(
            platform, key, lineitem, score("student-1", given, stamp, submitted_at=verdict_at - timedelta(seconds=2))
        )
        assert delivery.delivered and delivery.status_code == 200, delivery.error
        last_sent = stamp
    received = book.accepted("7", "student-1")
    assert [s["scoreGiven"] for s in received] == [0.0, 1.0]
    seconds = [int(datetime.fromisoformat(s["timestamp"]).timestamp()) for s in received]
    assert seconds[0] < seconds[1]
    for sent in received:
        assert ISO_MS.match(sent["timestamp"])
        assert sent["activityProgress"] == "Completed" and sent["gradingProgress"] == "FullyGraded"
        assert sent["scoreMaximum"] == 1.0 and sent["userId"] == "student-1"
        assert ISO_MS.match(sent[CANVAS_SUBMISSION_CLAIM]["submittedAt"])
    for request in book.requests:
        assert request.headers["content-type"] == SCORE_CONTENT_TYPE
        assert request.headers["authorization"].startswith("Bearer ")
        assert request.path == "/lineitems/7/lineitem/scores"
    assert client.token_fetches == 1  # one token for both


def test_same_second_without_the_rule_is_409_not_retried(
    client: AgsClient, platform: FakePlatform, key: ToolKey, book: Gradebook
) -> None:
    at = datetime.now(UTC).replace(microsecond=100_000)
    assert client.send_score(platform, key, book.lineitem_url("8"), score("u", 0.0, at)).delivered
    late = client.send_score(platform, key, book.lineitem_url("8"), score("u", 1.0, at + timedelta(milliseconds=500)))
    assert late.status_code == 409 and not late.delivered and not late.retry
    assert "earlier timestamp" in (late.error or "")
    assert [s["scoreGiven"] for s in book.accepted("8", "u")] == [0.0]


def test_moodle_type_id_query_is_kept(client: AgsClient, platform: FakePlatform, key: ToolKey, book: Gradebook) -> None:
    delivery = client.send_score(
        platform, key, book.lineitem_url("3", "?type_id=1"), score("u", 1.0, datetime.now(UTC))
    )
    assert delivery.delivered, delivery.error
    assert book.requests[-1].path == "/lineitems/3/lineitem/scores"
    assert book.requests[-1].query == {"type_id": ["1"]}


def test_401_refetches_the_token_once(client: AgsClient, platform: FakePlatform, key: ToolKey, book: Gradebook) -> None:
    assert client.send_score(platform, key, book.lineitem_url("4"), score("u", 0.5, datetime.now(UTC))).delivered
    book.revoke_all()  # the cached token is now expired on the platform's side
    at = datetime.now(UTC) + timedelta(seconds=2)
    delivery = client.send_score(platform, key, book.lineitem_url("4"), score("u", 1.0, at))
    assert delivery.delivered, delivery.error
    assert client.token_fetches == 2
    assert [r.status for r in book.requests] == [200, 401, 200]


def test_401_twice_is_not_retried_forever(
    client: AgsClient, platform: FakePlatform, key: ToolKey, book: Gradebook
) -> None:
    # a token without the score scope: the platform answers 401 every time
    delivery = client.send_score(
        platform, key, book.lineitem_url("5"), score("u", 1.0, datetime.now(UTC)), scopes=[SCOPE_LINEITEM]
    )
    assert delivery.status_code == 401 and delivery.token_refused and not delivery.delivered and not delivery.retry
    assert client.token_fetches == 2 and [r.status for r in book.requests] == [401, 401]


def test_5xx_is_retryable_then_delivered(
    client: AgsClient, platform: FakePlatform, key: ToolKey, book: Gradebook
) -> None:
    book.script = [503]
    at = datetime.now(UTC)
    failed = client.send_score(platform, key, book.lineitem_url("6"), score("u", 1.0, at))
    assert failed.status_code == 503 and failed.retry and not failed.delivered
    again = client.send_score(platform, key, book.lineitem_url("6"), score("u", 1.0, at))
    assert again.delivered


def test_400_is_not_retried_and_reports_the_message(
    client: AgsClient, platform: FakePlatform, key: ToolKey, book: Gradebook
) -> None:
    book.script = [400]
    delivery = client.send_score(platform, key, book.lineitem_url("6"), score("u", 1.0, datetime.now(UTC)))
    assert delivery.status_code == 400 and not delivery.retry and "scripted 400" in (delivery.error or "")
    # the gradebook's own rule: a score without the required fields is a 400 with Moodle's message
    token = client.access_token(platform, key, [SCOPE_SCORE])
    answer = httpx.post(
        scores_url(book.lineitem_url("6")),
        content=b'{"userId": "u", "scoreGiven": 1}',
        headers={"Authorization": f"Bearer {token}", "Content-Type": SCORE_CONTENT_TYPE},
        trust_env=False,
    )
    assert answer.status_code == 400 and "missing" in answer.json()["message"]


def test_connection_refused_is_retryable(
    client: AgsClient, platform: FakePlatform, key: ToolKey, book: Gradebook
) -> None:
    token = client.access_token(platform, key, [SCOPE_SCORE])
    book.stop()
    delivery = client.post_score(book.lineitem_url("1"), token, score("u", 1.0, datetime.now(UTC)))
    assert delivery.status_code is None and delivery.retry and not delivery.delivered


def test_loopback_refused_unless_allowed(platform: FakePlatform, key: ToolKey, book: Gradebook) -> None:
    strict = AgsClient()
    with pytest.raises(TokenError) as refused:
        strict.access_token(platform, key, [SCOPE_SCORE])
    assert not refused.value.retry and "loopback" in str(refused.value)
    delivery = strict.post_score(book.lineitem_url("1"), "t", score("u", 1.0, datetime.now(UTC)))
    assert not delivery.retry and not delivery.delivered and "loopback" in (delivery.error or "")
    assert book.requests == [] and book.token_requests == []
