"""Pure parts of the LTI 1.3 launch (server/lti/launch.py, server/lti/keys.py): id_token checks
(IMS Security Framework 5.1.3), the LIS role mapping, the problem a launch opens, the tool's key
and its RFC 7638 kid."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from server.lti.id_token import verify_id_token
from server.lti.keys import KEY_FILE, load_or_create, thumbprint
from server.lti.launch import (
    CLAIM_CUSTOM,
    CLAIM_TARGET_LINK_URI,
    LaunchError,
    launch_of,
    problem_of,
    role_for,
)
from server.store.courses import CourseRole
from tests.lti_platform import INSTRUCTOR, LIS, STUDENT, TEACHING_ASSISTANT, LaunchSpec, Platform

ISSUER, CLIENT = "https://lms.example", "judge-client"


@pytest.fixture(scope="module")
def platform() -> Platform:
    lms = Platform(client_id=CLIENT, issuer=ISSUER)
    yield lms  # type: ignore[misc]
    lms.close()


def verify(platform: Platform, token: str, nonce: str = "n-1") -> dict[str, Any]:
    def key_for(kid: str) -> Any:
        if kid != platform.kid:
            raise LaunchError(403, "unknown kid")
        return platform.key.public_key()

    return verify_id_token(
        token, issuer=ISSUER, client_id=CLIENT, deployment_ids=("deployment-1",), expected_nonce=nonce, key_for=key_for
    )


def token(platform: Platform, nonce: str = "n-1", **changes: Any) -> str:
    spec = LaunchSpec(**changes)
    return platform.sign(platform.claims(nonce, spec), key=spec.key)


def test_a_good_launch_verifies(platform: Platform) -> None:
    claims = verify(platform, token(platform, ags={"lineitem": "https://lms.example/li/1", "scope": []}))
    launch = launch_of(claims)
    assert (launch.issuer, launch.sub, launch.deployment_id, launch.resource_link_id, launch.problem, launch.role) == (
        ISSUER,
        "student-1",
        "deployment-1",
        "link-1",
        "remat_sin_sin",
        CourseRole.STUDENT,
    )
    assert launch.ags == {"lineitem": "https://lms.example/li/1", "scope": []}
    assert launch.name == "Ada Student" and launch.email == "ada.student@lms.example"


def test_an_audience_list_with_this_tool_as_azp_verifies(platform: Platform) -> None:
    assert verify(platform, token(platform, aud=[CLIENT, "other"], azp=CLIENT))["azp"] == CLIENT


BAD = {
    "another key": (dict(key="other"), "signature"),
    "expired": (dict(exp_in_s=-100, iat_offset_s=-400), "expired"),
    "issued in the future": (dict(iat_offset_s=600), "future"),
    "wrong audience": (dict(aud="other-tool"), "another tool"),
    "several audiences, no azp": (dict(aud=[CLIENT, "other"]), "authorized party"),
    "azp of another tool": (dict(aud=[CLIENT, "other"], azp="other"), "authorized party"),
    "another nonce": (dict(nonce="n-2"), "nonce"),
    "unknown deployment": (dict(deployment_id="deployment-9"), "deployment"),
    "deep linking message": (dict(message_type="LtiDeepLinkingRequest"), "LtiResourceLinkRequest"),
    "LTI 1.1": (dict(version="1.1.0"), "version"),
    "no resource link": (dict(resource_link_id=""), "resource link"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_tokens_are_refused(platform: Platform, name: str) -> None:
    changes, words = BAD[name]
    with pytest.raises(LaunchError, match=words) as refused:
        verify(platform, token(platform, **changes))
    assert refused.value.status_code == 403


def test_only_rs256_with_a_kid_is_accepted(platform: Platform) -> None:
    claims = platform.claims("n-1", LaunchSpec())
    for forged in (
        jwt.encode(claims, "a-shared-secret-of-32-bytes-at-least!!", algorithm="HS256", headers={"kid": platform.kid}),
        jwt.encode(claims, platform.key, algorithm="RS512", headers={"kid": platform.kid}),
        jwt.encode(claims, None, algorithm="none"),
    ):
        with pytest.raises(LaunchError, match="only RS256"):
            verify(platform, forged)
    with pytest.raises(LaunchError, match="kid"):
        verify(platform, jwt.encode(claims, platform.key, algorithm="RS256"))
    with pytest.raises(LaunchError, match="readable"):
        verify(platform, "not-a-jwt")


def test_missing_claims_are_refused(platform: Platform) -> None:
    for claim in ("sub", "nonce", "exp", "iat"):
        claims = platform.claims("n-1", LaunchSpec())
        del claims[claim]
        with pytest.raises(LaunchError):
            verify(platform, platform.sign(claims))


@pytest.mark.parametrize(
    "roles,role",
    [
        (STUDENT, CourseRole.STUDENT),
        ([], CourseRole.STUDENT),
        (INSTRUCTOR, CourseRole.STAFF),
        (TEACHING_ASSISTANT, CourseRole.STAFF),
        ([LIS + "membership#ContentDeveloper"], CourseRole.STAFF),
        ([LIS + "membership#Administrator"], CourseRole.STAFF),
        ([LIS + "institution/person#Administrator"], CourseRole.STAFF),
        ([LIS + "institution/person#Instructor"], CourseRole.STUDENT),  # an instructor elsewhere, not of this course
        ([LIS + "membership#Mentor", LIS + "membership#Learner"], CourseRole.STUDENT),
        (["Instructor"], CourseRole.STAFF),
        ([LIS + "membership/Learner#Learner"], CourseRole.STUDENT),
        ([42, None], CourseRole.STUDENT),
    ],
)
def test_roles_map_to_the_judges_roles(roles: list[Any], role: CourseRole) -> None:
    assert role_for(roles) == role


def test_the_problem_comes_from_the_custom_claim_or_the_target_link_uri() -> None:
    assert (
        problem_of(
            {
                CLAIM_CUSTOM: {"problem": "remat_sin_sin"},
                CLAIM_TARGET_LINK_URI: "https://judge/lti/launch?problem=other",
            }
        )
        == "remat_sin_sin"
    )
    assert (
        problem_of({CLAIM_TARGET_LINK_URI: "https://judge/lti/launch?problem=checkpoint_dot_policy"})
        == "checkpoint_dot_policy"
    )
    for claims in (
        {},
        {CLAIM_CUSTOM: {"problem": "../etc/passwd"}},
        {CLAIM_TARGET_LINK_URI: "https://judge/lti/launch"},
        {CLAIM_CUSTOM: "problem=x"},
    ):
        with pytest.raises(LaunchError) as refused:
            problem_of(claims)
        assert refused.value.status_code == 400


def test_the_thumbprint_is_rfc_7638s() -> None:
    """RFC 7638 section 3.1's example key and thumbprint."""
    n = (
        "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMs"
        "tn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvR"
        "L5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"
    )
    public = RSAAlgorithm.from_jwk({"kty": "RSA", "n": n, "e": "AQAB"})
    assert thumbprint(public) == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"  # type: ignore[arg-type]


def test_the_tools_key_is_made_once_and_kept_private(tmp_path: Path) -> None:
    key = load_or_create(tmp_path)
    assert stat.S_IMODE(os.stat(tmp_path / KEY_FILE).st_mode) == 0o600
    assert isinstance(key.private_key, rsa.RSAPrivateKey) and key.private_key.key_size == 2048
    again = load_or_create(tmp_path)
    assert again.kid == key.kid == key.public_jwk()["kid"]
    signed = key.sign({"iss": "judge", "exp": int(time.time()) + 60})
    public = RSAAlgorithm.from_jwk(key.jwks()["keys"][0])
    assert jwt.get_unverified_header(signed)["kid"] == key.kid
    assert jwt.decode(signed, public, algorithms=["RS256"])["iss"] == "judge"  # type: ignore[arg-type]
    assert "d" not in key.public_jwk() and "BEGIN PUBLIC KEY" in key.public_pem()
