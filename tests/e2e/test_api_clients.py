"""API clients through a real server on loopback: keys, scope, ownership, batches, `fields`,
`external_id`, and signed callbacks received by a real HTTP listener."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from graders.pipeline import JudgeConfig
from server.delivery.signing import SIGNATURE_HEADER, verify
from tests.support import PROBLEMS, Server, free_port, remat_judge

pytestmark = [pytest.mark.e2e, pytest.mark.jail]
SIN = (PROBLEMS / "remat_sin_sin" / "reference.py").read_text()


class Listener:
    """A real HTTP receiver on 127.0.0.1 that records every POST and answers with the statuses
    it is given, in order (then 200)."""

    def __init__(self, statuses: list[int] | None = None):
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.statuses = list(statuses or [])
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                owner.received.append((dict(self.headers), body))
                self.send_response(owner.statuses.pop(0) if owner.statuses else 200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture(scope="module")
def listener() -> Iterator[Listener]:
    receiver = Listener()
    yield receiver
    receiver.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, judge_config: JudgeConfig) -> Iterator[Server]:
    srv = Server(
        tmp_path_factory.mktemp("clients-data"),
        env={"REMAT_JUDGE_ALLOW_ANONYMOUS_API": "false", "REMAT_JUDGE_RATE_LIMIT": ""},
    ).start()
    yield srv
    srv.stop()


def create_client(server: Server, name: str, *args: str) -> dict[str, str]:
    done = remat_judge("clients", "create", name, "--data-dir", str(server.data_dir), *args, env=dict(os.environ))
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def client_for(server: Server, key: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=server.url, timeout=120, headers=headers)


def wait_done(client: httpx.Client, submission_id: str, timeout_s: float = 120) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        body = client.get(f"/api/v1/submissions/{submission_id}").json()
        if body["status"] in ("done", "failed"):
            return body
        time.sleep(0.3)
    raise AssertionError(f"{submission_id} not graded in {timeout_s} s")


def test_keys_scope_and_ownership(server: Server) -> None:
    lms = create_client(server, "lms")
    scoped = create_client(server, "scoped", "--problems", "remat_sin_sin")
    assert set(lms) == {"client_id", "api_key", "callback_secret"} and lms["api_key"].startswith("rjk_")
    with client_for(server, None) as anonymous:
        assert anonymous.get("/api/v1/problems").status_code == 200  # reading problems stays public
        refused = anonymous.post("/api/v1/submissions", json={"problem": "remat_sin_sin", "source": SIN})
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
    with client_for(server, "rjk_not-a-key") as forged:
        assert forged.get("/api/v1/submissions/0123").status_code == 401
    with client_for(server, lms["api_key"]) as mine, client_for(server, scoped["api_key"]) as theirs:
        body = mine.post(
            "/api/v1/submissions",
            params={"wait": "true"},
            json={"problem": "remat_sin_sin", "source": SIN, "external_id": "student-7/1"},
        ).json()
        assert body["verdict"] == "ACCEPTED" and body["external_id"] == "student-7/1"
        assert theirs.get(f"/api/v1/submissions/{body['id']}").status_code == 404  # another client's
        out_of_scope = theirs.post("/api/v1/submissions", json={"problem": "checkpoint_dot_policy", "source": SIN})
        assert out_of_scope.status_code == 403 and "remat_sin_sin" in out_of_scope.json()["detail"]
        assert mine.get(f"/api/v1/submissions/{body['id']}", params={"fields": "id,verdict"}).json() == {
            "id": body["id"],
            "verdict": "ACCEPTED",
        }
        assert mine.get(f"/api/v1/submissions/{body['id']}", params={"fields": "id,source"}).status_code == 422
        listed = mine.get("/api/v1/submissions", params={"external_id": "student-7/1"}).json()["submissions"]
        assert [s["id"] for s in listed] == [body["id"]]
        assert theirs.get("/api/v1/submissions", params={"external_id": "student-7/1"}).json() == {"submissions": []}
    done = remat_judge("clients", "revoke", "scoped", "--data-dir", str(server.data_dir), env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    with client_for(server, scoped["api_key"]) as revoked:
        assert revoked.post("/api/v1/submissions", json={"problem": "remat_sin_sin", "source": SIN}).status_code == 401


def test_a_batch_accepts_and_refuses_items_on_their_own(server: Server) -> None:
    key = create_client(server, "batcher")["api_key"]
    items = [
        {"problem": "remat_sin_sin", "source": SIN, "external_id": "b-1"},
        {"problem": "remat_sin_sin", "source": "   "},
        {"problem": "no_such_problem", "source": SIN},
        {"problem": "remat_sin_sin", "source": "x" * 70_000},
        {"problem": "remat_sin_sin", "source": "\n" + SIN, "external_id": "b-2"},
        {"problem": "remat_sin_sin", "source": ""},
        {"problem": "remat_sin_sin", "source": SIN, "external_id": "x" * 129},
    ]
    with client_for(server, key) as client:
        answer = client.post("/api/v1/submissions/batch", json={"submissions": items})
        assert answer.status_code == 202, answer.text
        got = answer.json()["items"]
        assert [(i["index"], i["error"]) for i in got] == [
            (0, None),
            (1, 422),
            (2, 404),
            (3, 413),
            (4, None),
            (5, 422),
            (6, 422),
        ]
        assert got[1]["detail"] == got[5]["detail"] == "the source is empty"
        assert "external_id" in got[6]["detail"]
        ids = [got[0]["id"], got[4]["id"]]
        for submission_id in ids:
            wait_done(client, submission_id)
        read = client.get(
            "/api/v1/submissions/batch", params={"ids": ",".join([*ids, "0" * 32]), "fields": "id,verdict,external_id"}
        ).json()
        assert read["submissions"] == [
            {"id": ids[0], "verdict": "ACCEPTED", "external_id": "b-1"},
            {"id": ids[1], "verdict": "ACCEPTED", "external_id": "b-2"},
            {"id": "0" * 32, "error": 404, "detail": "no such submission"},
        ]
        assert client.post("/api/v1/submissions/batch", json={"submissions": [items[0]] * 21}).status_code == 422


def test_callbacks_are_signed_retried_and_confined_to_the_allowlist(server: Server) -> None:
    receiver = Listener(statuses=[500, 503])  # fails twice, then takes it
    try:
        lms = create_client(server, "hooked", "--callback-allow", receiver.url)
        with client_for(server, lms["api_key"]) as client:
            elsewhere = f"http://127.0.0.1:{free_port()}/hooks"
            refused = client.post(
                "/api/v1/submissions", json={"problem": "remat_sin_sin", "source": SIN, "callback_url": elsewhere}
            )
            assert refused.status_code == 422 and "allowed callback prefixes" in refused.json()["detail"]
            submission_id = client.post(
                "/api/v1/submissions",
                json={
                    "problem": "remat_sin_sin",
                    "source": SIN,
                    "external_id": "cb-1",
                    "callback_url": receiver.url + "remat",
                },
            ).json()["id"]
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and len(receiver.received) < 3:
                time.sleep(0.2)
            state = client.get(f"/api/v1/submissions/{submission_id}").json()
            while state["callback"]["status"] == "pending" and time.monotonic() < deadline:
                time.sleep(0.2)
                state = client.get(f"/api/v1/submissions/{submission_id}").json()
    finally:
        receiver.close()
    assert len(receiver.received) == 3
    headers, body = receiver.received[-1]
    verdict = json.loads(body)
    assert verdict["id"] == submission_id and verdict["verdict"] == "ACCEPTED" and verdict["external_id"] == "cb-1"
    signature = next(v for k, v in headers.items() if k.lower() == SIGNATURE_HEADER.lower())
    assert verify(signature, body, lms["callback_secret"])
    assert not verify(signature, body, "rjs_another-secret")
    assert not verify(signature, body.replace(b"ACCEPTED", b"REJECTED"), lms["callback_secret"])
    assert state["callback"] == {
        "url": receiver.url + "remat",
        "status": "delivered",
        "attempts": 3,
        "last_status_code": 200,
        "last_error": None,
    }


def test_the_web_and_the_api_refuse_the_same_inputs_with_the_same_words(server: Server) -> None:
    key = create_client(server, "words")["api_key"]
    with client_for(server, key) as client:
        api = client.post("/api/v1/submissions", json={"problem": "remat_sin_sin", "source": " \n "})
    assert api.status_code == 422
    with httpx.Client(base_url=server.url, timeout=30, follow_redirects=True) as browser:
        page = browser.get("/signup")
        token = page.text.split('name="csrf_token" value="')[1].split('"')[0]
        browser.post(
            "/signup",
            data={"email": "w@example.org", "display_name": "W", "password": "correct horse 1", "csrf_token": token},
        )
        token = browser.get("/problems/remat_sin_sin").text.split('name="csrf_token" value="')[1].split('"')[0]
        web = browser.post(
            "/problems/remat_sin_sin/submit",
            data={"source": " \n ", "csrf_token": token},
            headers={"accept": "application/json"},
        )
    assert web.status_code == api.status_code and web.json()["detail"] == api.json()["detail"]


def test_docs_work_offline_and_describe_the_key(server: Server) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        page = client.get("/docs").text
        assert "/docs-assets/swagger-ui-bundle.js" in page and "cdn" not in page.lower()
        assert client.get("/docs-assets/swagger-ui-bundle.js").status_code == 200
        spec = client.get("/openapi.json").json()
    assert "APIKey" in spec["components"]["securitySchemes"]
    post = spec["paths"]["/api/v1/submissions"]["post"]
    assert post["security"] == [{"APIKey": []}] and "401" in post["responses"]
    assert "/api/v1/submissions/batch" in spec["paths"]
