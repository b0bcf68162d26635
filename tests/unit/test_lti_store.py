"""The LTI tables through `LtiStore` on migrated SQLite and PostgreSQL databases: registrations, single-use
states, nonces and launch tokens, accounts keyed by (issuer, sub) that never merge an existing
email, resource links with their AGS endpoint."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from server.store import migrate
from server.store.accounts import NO_PASSWORD, SiteRole, UserStore
from server.store.courses import CourseRole
from server.store.db import make_engine, utcnow
from server.store.lti_store import LtiStore
from server.web.sessions import check_password


@pytest.fixture(params=["sqlite", "postgresql"])
def lti(request: pytest.FixtureRequest, tmp_path: Path) -> LtiStore:
    """A store on a migrated SQLite file, and on a fresh PostgreSQL database (tests/services.py)."""
    url = f"sqlite:///{tmp_path / 'judge.db'}" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    migrate.upgrade(url)
    return LtiStore(make_engine(url))


def register(lti: LtiStore, *deployments: str, client_id: str = "c-1"):  # type: ignore[no-untyped-def]
    return lti.register(
        issuer="https://lms.example",
        client_id=client_id,
        deployment_ids=list(deployments or ["d-1"]),
        auth_login_url="https://lms.example/auth",
        auth_token_url="https://lms.example/token",
        keyset_url="https://lms.example/jwks",
    )


def test_register_update_list_remove(lti: LtiStore) -> None:
    first = register(lti, "d-1", "d-2", "d-1")
    assert first.deployment_ids == ("d-1", "d-2") and first.token_audience is None
    updated = lti.register(
        issuer="https://lms.example",
        client_id="c-1",
        deployment_ids=["d-3"],
        auth_login_url="https://lms.example/auth2",
        auth_token_url="https://lms.example/token",
        keyset_url="https://lms.example/jwks",
        token_audience="https://lms.example/aud",
    )
    assert updated.id == first.id and updated.deployment_ids == ("d-1", "d-2", "d-3")
    assert updated.auth_login_url.endswith("/auth2") and updated.token_audience == "https://lms.example/aud"
    register(lti, client_id="c-2")
    assert [p.client_id for p in lti.platforms_for("https://lms.example")] == ["c-1", "c-2"]
    assert [p.client_id for p in lti.platforms_for("https://lms.example", "c-2")] == ["c-2"]
    lti.start_login(first.id)
    lti.save_resource_link(
        platform_id=first.id,
        deployment_id="d-1",
        resource_link_id="r",
        context_id=None,
        title=None,
        problem="p",
        ags=None,
    )
    assert lti.remove("https://lms.example", "c-1") and not lti.remove("https://lms.example", "c-1")
    assert [p.client_id for p in lti.platforms()] == ["c-2"] and lti.resource_links() == []


def test_a_state_is_used_once_and_expires(lti: LtiStore) -> None:
    platform = register(lti)
    state, nonce, binding = lti.start_login(platform.id)
    assert binding is None
    taken = lti.consume_login(state)
    assert taken is not None and (taken.platform_id, taken.nonce) == (platform.id, nonce)
    assert lti.consume_login(state) is None
    assert lti.consume_login("never-issued") is None
    old_state, _, _ = lti.start_login(platform.id, ttl_s=-1)
    assert lti.consume_login(old_state) is None


def test_a_nonce_is_accepted_once(lti: LtiStore) -> None:
    until = utcnow() + timedelta(minutes=5)
    assert lti.use_nonce("https://lms.example", "n-1", until=until)
    assert not lti.use_nonce("https://lms.example", "n-1", until=until)
    assert lti.use_nonce("https://other.example", "n-1", until=until)  # nonces are per issuer


def test_a_launch_token_is_used_once_and_expires(lti: LtiStore) -> None:
    user = lti.account_for(issuer="https://lms.example", sub="s", name="S", email=None, role=CourseRole.STUDENT)
    token = lti.make_launch_token(user.id, "/problems/p")
    assert lti.peek_launch_token(token) == (user.id, "/problems/p")
    assert lti.use_launch_token(token) == (user.id, "/problems/p")
    assert lti.use_launch_token(token) is None and lti.peek_launch_token(token) is None
    expired = lti.make_launch_token(user.id, "/problems/p", ttl_s=-1)
    assert lti.peek_launch_token(expired) is None and lti.use_launch_token(expired) is None


def test_accounts_are_keyed_by_issuer_and_sub_and_never_take_or_merge_an_email(lti: LtiStore) -> None:
    users: UserStore = lti.users
    existing = users.create(email="ada@uni.example", display_name="Ada", password_hash="x")
    ada = lti.account_for(
        issuer="https://lms.example", sub="42", name="Ada L", email="ada@uni.example", role=CourseRole.STUDENT
    )
    assert ada.id != existing.id and ada.email.startswith("lti-") and ada.email.endswith("@lti.invalid")
    assert ada.contact_email == "ada@uni.example"
    same = lti.account_for(
        issuer="https://lms.example", sub="42", name="Ada Lovelace", email="ada@uni.example", role=CourseRole.STAFF
    )
    # an LMS instructor launch is a course role: the account's site role never changes
    assert same.id == ada.id and same.display_name == "Ada Lovelace" and same.role == SiteRole.USER
    other_lms = lti.account_for(
        issuer="https://other.example", sub="42", name=None, email=None, role=CourseRole.STUDENT
    )
    assert other_lms.id not in (ada.id, existing.id) and other_lms.display_name == "LTI user"
    fresh = lti.account_for(
        issuer="https://lms.example", sub="43", name="Bo", email="bo@uni.example", role=CourseRole.STUDENT
    )
    # the platform's email is a contact, not a sign-in email: a password sign-up with it stays possible
    assert fresh.email.endswith("@lti.invalid") and fresh.contact_email == "bo@uni.example"
    assert users.by_email("bo@uni.example") is None
    assert check_password(fresh, "")[0] is False and fresh.password_hash == NO_PASSWORD  # launches only
    assert users.get(existing.id).display_name == "Ada"  # type: ignore[union-attr]


def test_resource_links_keep_their_ags_endpoint(lti: LtiStore) -> None:
    platform = register(lti)
    ags = {
        "scope": ["https://purl.imsglobal.org/spec/lti-ags/scope/score"],
        "lineitem": "https://lms.example/li/1?type_id=3",
        "lineitems": "https://lms.example/li",
    }
    link = lti.save_resource_link(
        platform_id=platform.id,
        deployment_id="d-1",
        resource_link_id="r-1",
        context_id="c",
        title="T",
        problem="remat_sin_sin",
        ags=ags,
    )
    again = lti.save_resource_link(
        platform_id=platform.id,
        deployment_id="d-1",
        resource_link_id="r-1",
        context_id="c",
        title="T2",
        problem="remat_sin_sin",
        ags=None,
    )
    assert again.id == link.id and again.title == "T2" and again.ags_lineitem == ags["lineitem"]
    assert again.ags_scope == '["https://purl.imsglobal.org/spec/lti-ags/scope/score"]'
    assert len(lti.resource_links(platform.id)) == 1


def test_a_storage_login_keeps_only_the_hash_of_its_binding(lti: LtiStore) -> None:
    """With a postMessage storage target, the login makes a binding value for the platform's
    storage: the table holds its SHA-256, a peek leaves the login usable, and only the value
    itself matches (not its hash, not another login's value)."""
    platform = register(lti)
    state, _, binding = lti.start_login(
        platform.id,
        storage_target="post_message_forwarding",
        relaunch={"iss": "https://lms.example", "login_hint": "h"},
    )
    _, _, other = lti.start_login(platform.id, storage_target="_parent")
    assert binding and other and binding != other
    peeked = lti.peek_login(state)
    assert peeked is not None and peeked.storage_target == "post_message_forwarding"
    assert peeked.relaunch == {"iss": "https://lms.example", "login_hint": "h"}
    assert peeked.binding_hash != binding and binding not in repr(peeked)
    taken = lti.consume_login(state)
    assert taken is not None and taken.binding_matches(binding)
    assert (
        not taken.binding_matches(other)
        and not taken.binding_matches("")
        and not taken.binding_matches(taken.binding_hash or "")
    )
    assert lti.peek_login(state) is None
