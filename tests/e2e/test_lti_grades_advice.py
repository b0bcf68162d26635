"""Saying why grades do not arrive: a judge whose allowed LTI networks do not include
the platform's (the simulated platform and gradebook on 127.0.0.1, a loopback address; a campus
Moodle on 10.0.0.0/8 is the same case) says so when the platform is registered, on /lti/setup
and in its connection test; a score it refused is shown to the course's staff on the gradebook;
and an admin sends refused scores again once the cause is fixed."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import pytest

from server.store.db import make_engine
from server.store.lti import lti_email
from server.store.lti_passback import PassbackStore
from tests.e2e.test_lti_grade_passback import RIGHT, SCORE_SCOPE, submit_on_the_web, wait_for_verdict, wait_until
from tests.lti_gradebook import Gradebook
from tests.lti_platform import INSTRUCTOR, Browser, Platform, start_tool
from tests.support import Server, remat_judge

pytestmark = [pytest.mark.e2e]
ADVICE = "127.0.0.1 is a loopback address: add 127.0.0.0/8 to REMAT_JUDGE_LTI_ALLOW_NETWORKS"


@pytest.fixture(scope="module")
def platform() -> Iterator[Platform]:
    lms = Platform(client_id="advice-client")
    yield lms
    lms.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, platform: Platform) -> Iterator[Server]:
    srv = start_tool(tmp_path_factory.mktemp("lti-advice"), platform, workers=1)  # the default: no allowed networks
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def book(server: Server, platform: Platform) -> Iterator[Gradebook]:
    import httpx

    gradebook = Gradebook(
        jwks=httpx.get(f"{server.url}/lti/jwks", timeout=10).json(), client_id=platform.client_id
    ).start()
    args = platform.register_args("deployment-1")
    args[args.index("--auth-token-url") + 1] = gradebook.token_url
    done = remat_judge(*args, "--data-dir", str(server.data_dir), env=dict(os.environ))
    assert done.returncode == 0 and ADVICE in re.sub(r"\s+", " ", done.stderr), done.stdout + done.stderr
    yield gradebook
    gradebook.stop()


def csrf(page: str) -> str:
    return page.split('name="csrf_token" value="')[1].split('"')[0]


def test_a_refused_score_is_said_at_registration_on_setup_and_on_the_staffs_gradebook(
    server: Server, platform: Platform, book: Gradebook
) -> None:
    platform.with_launch(
        sub="advice-student", name="Ada Advice", ags={"scope": [SCORE_SCOPE], "lineitem": book.lineitem_url("5")}
    )
    student = Browser(server.url)
    assert student.launch(platform).response.status_code == 200
    assert wait_for_verdict(server, submit_on_the_web(student.client, server.url, RIGHT)) == ("ACCEPTED", 1.0)
    student.close()
    passbacks = PassbackStore(make_engine(f"sqlite:///{(server.data_dir / 'remat-judge.db').resolve()}"))
    wait_until(lambda: [r.status for r in passbacks.rows() if r.sub == "advice-student"] == ["refused"])
    assert book.token_requests == []  # the judge never called the refused address

    teacher = Browser(server.url)  # staff of the LMS course, not an admin of the judge
    platform.with_launch(sub="advice-teacher", name="Tess Teacher", roles=INSTRUCTOR)
    assert teacher.launch(platform).response.status_code == 200
    courses = teacher.client.get(f"{server.url}/instructor/courses").text
    key = re.search(r"/instructor/courses/(lti-[\w-]+)", courses).group(1)  # type: ignore[union-attr]
    page = re.sub(r"\s+", " ", teacher.client.get(f"{server.url}/instructor/courses/{key}").text)
    assert "1 grade did not reach the LMS gradebook" in page and ADVICE in page
    cell = page.split('data-problem="remat_sin_sin"')[1].split("</td>")[0]
    assert "1.00 (1)" in cell and "not in LMS (refused)" in cell
    assert teacher.client.get(f"{server.url}/lti/setup").status_code == 403

    done = remat_judge(
        "users",
        "role",
        lti_email(platform.issuer, "advice-teacher"),
        "admin",
        "--data-dir",
        str(server.data_dir),
        env=dict(os.environ),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    setup = teacher.client.get(f"{server.url}/lti/setup").text
    assert ADVICE in re.sub(r"\s+", " ", setup) and "1 not delivered" in setup
    platform_id = re.search(r'name="platform_id" value="(\d+)"', setup).group(1)  # type: ignore[union-attr]
    tested = re.sub(
        r"\s+",
        " ",
        teacher.client.post(
            f"{server.url}/lti/setup/test", data={"platform_id": platform_id, "csrf_token": csrf(setup)}
        ).text,
    )
    assert re.search(r'data-check="keyset"><strong>keyset: works</strong>: 1 key\(s\)', tested), tested[-3000:]
    assert re.search(r'data-check="access token"><strong>access token: fails</strong>: token URL refused', tested)
    assert ADVICE in tested

    grades = teacher.client.get(f"{server.url}/lti/grades").text
    resent = teacher.client.post(f"{server.url}/lti/grades/resend", data={"csrf_token": csrf(grades)})
    assert resent.status_code == 200 and "1 grade will be sent again" in resent.text
    wait_until(lambda: [r.status for r in passbacks.rows() if r.sub == "advice-student"] == ["refused"])

    # an admin makes a one-time registration URL from the set-up page (shown once)
    made = teacher.client.post(
        f"{server.url}/lti/setup/registration-url", data={"csrf_token": csrf(setup), "expires_minutes": "30"}
    )
    url = re.search(r'<pre id="registration-url">([^<]+)</pre>', made.text).group(1)  # type: ignore[union-attr]
    assert url.startswith(f"{server.url}/lti/dynamic-registration/") and "30 minutes" in made.text
    opened = teacher.client.get(url)
    assert opened.status_code == 400 and "openid_configuration" in opened.text  # usable, waiting for the LMS
    assert teacher.client.post(f"{server.url}/lti/setup/registration-url", data={}).status_code == 403  # CSRF
    teacher.close()
