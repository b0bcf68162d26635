"""Insight for teachers through a real server: web accounts and API clients submit the
same policy mistake written three ways, a correct solution and a renamed copy of it; the CLI's
`problems insight` (all submitters, and one course's students) and the course staff's page group
them by policy, count students and later ACCEPTED, and find the identical programs; staff of a
course see their course only; a student's panel says how many others fixed the same mistake
only once the course's staff turn it on."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.integration.test_insight import NO_POLICY_DECORATED, NO_POLICY_RENAMED, RENAMED_COPY
from tests.support import PROBLEMS, Server, remat_judge

pytestmark = [pytest.mark.e2e, pytest.mark.jail]
SLUG = "checkpoint_dot_policy"
DOT = PROBLEMS / SLUG
NO_POLICY = (DOT / "wrong" / "checkpoint_without_policy.py").read_text()
REFERENCE = (DOT / "reference.py").read_text()
EVERYTHING = (DOT / "wrong" / "everything_saveable.py").read_text()
PASSWORD = "correct horse 42"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("insight"), env={"REMAT_JUDGE_RATE_LIMIT": ""}).start()
    yield srv
    srv.stop()


def cli(server: Server, *args: str) -> str:
    done = remat_judge(*args, "--data-dir", str(server.data_dir), env=dict(os.environ))
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def csrf_of(page: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]


def account(server: Server, email: str, name: str) -> httpx.Client:
    client = httpx.Client(base_url=server.url, timeout=120, follow_redirects=True)
    client.post(
        "/signup",
        data={
            "email": email,
            "display_name": name,
            "password": PASSWORD,
            "csrf_token": csrf_of(client.get("/signup").text),
        },
    )
    client.post(
        "/signin", data={"email": email, "password": PASSWORD, "csrf_token": csrf_of(client.get("/signin").text)}
    )
    assert client.get("/me", follow_redirects=False).status_code == 200
    return client


def submit_web(client: httpx.Client, source: str) -> str:
    token = csrf_of(client.get(f"/problems/{SLUG}").text)
    answer = client.post(
        f"/problems/{SLUG}/submit", data={"source": source, "csrf_token": token}, headers={"accept": "application/json"}
    )
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def submit_api(server: Server, key: str, source: str) -> str:
    answer = httpx.post(
        f"{server.url}/api/v1/submissions",
        json={"problem": SLUG, "source": source},
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    )
    assert answer.status_code == 202, answer.text
    return answer.json()["id"]


def wait_graded(server: Server, ids: list[str]) -> None:
    from server.store.db import make_engine
    from server.store.submissions import SubmissionStore

    store = SubmissionStore(make_engine(f"sqlite:///{(server.data_dir / 'remat-judge.db').resolve()}"))
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if all((r := store.get(i)) is not None and r.status == "done" for i in ids):
            return
        time.sleep(0.5)
    raise AssertionError("not graded in time")


def test_clusters_identical_programs_and_peer_insight(server: Server) -> None:
    key_a = json.loads(cli(server, "clients", "create", "lms-a"))["api_key"]
    key_b = json.loads(cli(server, "clients", "create", "lms-b"))["api_key"]
    ada, bob = account(server, "ada@uni.example", "Ada"), account(server, "bob@uni.example", "Bob")
    cai, tess = account(server, "cai@uni.example", "Cai"), account(server, "tess@uni.example", "Tess")
    cli(server, "courses", "create", "rm-1", "--title", "Remat 1")
    cli(server, "courses", "enroll", "rm-1", "ada@uni.example", "bob@uni.example", "--role", "student")
    cli(server, "courses", "enroll", "rm-1", "tess@uni.example", "--role", "staff")
    cli(server, "courses", "assign", "rm-1", SLUG)

    ids = {"ada wrong": submit_web(ada, NO_POLICY)}
    time.sleep(1.1)  # ada's ACCEPTED comes after her mistake
    ids |= {
        "ada right": submit_web(ada, REFERENCE),
        "bob wrong": submit_web(bob, NO_POLICY_RENAMED),
        "cai everything": submit_web(cai, EVERYTHING),
        "client a wrong": submit_api(server, key_a, NO_POLICY_DECORATED),
        "client b copy": submit_api(server, key_b, RENAMED_COPY),
    }
    wait_graded(server, list(ids.values()))

    everyone = json.loads(cli(server, "problems", "insight", SLUG, "--json"))
    clusters = {
        c["verdict"] + (" everything" if c["example"] == ids["cai everything"] else ""): c for c in everyone["clusters"]
    }
    assert set(clusters) == {"WRONG_POLICY", "WRONG_POLICY everything", "ACCEPTED"}, everyone
    mistake = clusters["WRONG_POLICY"]
    assert (mistake["students"], mistake["submissions"], mistake["later_accepted"]) == (3, 3, 1)
    assert (
        mistake["example"] == ids["ada wrong"]
        and "does not save 2 x f32[1024,256] from `dot_general`" in mistake["summary"]
    )
    assert (clusters["ACCEPTED"]["students"], clusters["ACCEPTED"]["submissions"]) == (2, 2)
    assert clusters["ACCEPTED"]["summary"] == "saves what the reference saves"
    groups = sorted((sorted(g["submissions"]), g["students"]) for g in everyone["identical_groups"])
    assert groups == sorted(
        [
            (sorted([ids["ada wrong"], ids["bob wrong"], ids["client a wrong"]]), 3),
            (sorted([ids["ada right"], ids["client b copy"]]), 2),
        ]
    )
    table = cli(server, "problems", "insight", SLUG)
    assert "identical programs" in table and "1 of 3" in table

    course = json.loads(cli(server, "problems", "insight", SLUG, "--course", "rm-1", "--json"))
    assert {(c["verdict"], c["students"], c["later_accepted"]) for c in course["clusters"]} == {
        ("WRONG_POLICY", 2, 1),
        ("ACCEPTED", 1, 0),
    }
    assert [(sorted(g["submissions"]), g["students"]) for g in course["identical_groups"]] == [
        (sorted([ids["ada wrong"], ids["bob wrong"]]), 2)
    ]

    page = tess.get(f"/instructor/courses/rm-1/insight/{SLUG}")
    assert page.status_code == 200 and "does not save" in page.text
    assert ids["cai everything"] not in page.text and ids["client a wrong"] not in page.text  # the course's only
    assert ids["bob wrong"] in page.text  # an identical group of the course
    assert tess.get(f"/instructor/problems/{SLUG}/insight").status_code == 403  # every submitter: admins only
    assert bob.get(f"/instructor/courses/rm-1/insight/{SLUG}", follow_redirects=False).status_code in (403, 404)

    assert "same mistake" not in bob.get(f"/submissions/{ids['bob wrong']}").text  # off by default
    course_page = tess.get("/instructor/courses/rm-1").text
    assert (
        tess.post(
            "/instructor/courses/rm-1/peers", data={"peer_insight": "on", "csrf_token": csrf_of(course_page)}
        ).status_code
        == 200
    )
    said = re.sub(r"\s+", " ", bob.get(f"/submissions/{ids['bob wrong']}").text)
    assert "1 other in your course made the same mistake and later got ACCEPTED" in said
    assert "same mistake" not in ada.get(f"/submissions/{ids['ada right']}").text  # not on an ACCEPTED
    assert "same mistake" not in tess.get(f"/submissions/{ids['bob wrong']}").text  # only to its author
