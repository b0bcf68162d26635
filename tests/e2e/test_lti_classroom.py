"""A classroom behind one address, through a real server on the default LTI limits: 300
students of a lab behind one campus NAT, seen through a trusted proxy's X-Forwarded-For, launch
within a minute without a 429; the address's 601st launch in that minute is refused with
Retry-After, while another address still launches. The proxy here is 127.0.0.1 (uvicorn's default
trusted proxy; `serve --forwarded-allow-ips` names others)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from urllib.parse import urlencode

import httpx
import pytest

from tests.lti_platform import Browser, LaunchSpec, Platform, parse_form
from tests.support import Server, remat_judge

pytestmark = [pytest.mark.e2e]
LAB, OTHER = "198.51.100.23", "203.0.113.9"  # the lab's NAT address, and someone elsewhere


@pytest.fixture(scope="module")
def platform() -> Iterator[Platform]:
    lms = Platform(client_id="classroom-client")
    yield lms
    lms.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, platform: Platform) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("lti-classroom")
    srv = Server(data, workers=1, env={"REMAT_JUDGE_RATE_LIMIT": ""}).start()  # the LTI limits are the defaults
    platform.redirect_uris = [f"{srv.url}/lti/launch"]
    done = remat_judge(*platform.register_args("deployment-1"), "--data-dir", str(data), env=dict(os.environ))
    assert done.returncode == 0, done.stdout + done.stderr
    yield srv
    srv.stop()


def launch_as(server: Server, platform: Platform, student: int, address: str) -> int:
    """One student's whole launch (login, the platform's form post, landing) from `address`; the
    status of the first answer that is not a redirect, or of the refusal."""
    with httpx.Client(timeout=30, headers={"X-Forwarded-For": address}) as client:
        login = client.get(
            f"{server.url}/lti/login?"
            + urlencode(
                {
                    "iss": platform.issuer,
                    "login_hint": f"s{student}",
                    "target_link_uri": f"{server.url}/lti/launch",
                    "client_id": platform.client_id,
                    "lti_deployment_id": "deployment-1",
                }
            ),
            follow_redirects=False,
        )
        if login.status_code != 302:
            return login.status_code
        page = client.get(login.headers["location"])
        action, fields = parse_form(page.text)
        landed = client.post(action, data=fields, follow_redirects=True)
        return landed.status_code


def test_a_lab_of_300_behind_one_address_launches_in_a_minute(server: Server, platform: Platform) -> None:
    from concurrent.futures import ThreadPoolExecutor

    for student in range(300):
        platform.by_login_hint[f"s{student}"] = LaunchSpec(sub=f"lab-student-{student}", name=f"Student {student}")
    started = time.monotonic()
    with ThreadPoolExecutor(8) as lab:  # students launch at once
        codes = list(lab.map(lambda student: launch_as(server, platform, student, LAB), range(300)))
    took_s = time.monotonic() - started
    assert codes == [200] * 300 and took_s < 60, (sorted(set(codes)), took_s)
    print(f"300 first launches from one address: {took_s:.1f} s")

    # the rest of the address's 600 launches a minute (logins are what is counted), then a refusal
    with httpx.Client(timeout=30, headers={"X-Forwarded-For": LAB}) as client:
        logins = [
            client.get(
                f"{server.url}/lti/login",
                params={
                    "iss": platform.issuer,
                    "login_hint": f"x{i}",
                    "target_link_uri": f"{server.url}/lti/launch",
                    "client_id": platform.client_id,
                },
                follow_redirects=False,
            )
            for i in range(301)
        ]
    assert [r.status_code for r in logins[:300]] == [302] * 300
    assert logins[300].status_code == 429 and 1 <= int(logins[300].headers["retry-after"]) <= 60
    assert "too many LTI launches" in logins[300].text
    platform.with_launch(sub="elsewhere", name="Elsewhere Student")
    assert launch_as(server, platform, 999, OTHER) == 200  # another address has its own count
    browser = Browser(server.url)  # and the tests' own address (127.0.0.1, no header) too
    assert browser.launch(platform).response.status_code == 200
    browser.close()
