"""Mock of the judge's submission endpoints, for trying the front-end without the real server.

    python web/dev/mock_server.py [--port 8765]      then open http://127.0.0.1:8765/

Serves web/dev/index.html at /, the built bundle (server/web/static/dist/) at /static/dist/, and:
  POST /problems/demo/submit          201 {"id", "status": "queued", "status_url", "panel_url"}
                                      (400/403/422 {"detail"} on errors; source containing
                                      FAIL_422 gets a 422; a form post without
                                      `Accept: application/json` gets a plain HTML page, like
                                      the real server's no-JS path)
  GET  /submissions/<id>/status       queued, queued, running, running, then done
  GET  /submissions/<id>/panel        a line with TeX ("Submission #<id>: ...") and the verdict panel
                                      of web/dev/verdicts/wrong_policy.json
  GET  /canned/<name>[?wide=1]        a page with the panel of web/dev/verdicts/<name>.json inside
                                      the problem page's layout (wrong_policy, accepted, old_report;
                                      wide=1: the desktop two-column layout), with /static/style.css
  GET  /static/style.css              the server's stylesheet
The panels are the real server/web/templates/_panel.html rendered by server.web.panel (run the mock
with the project's venv); with only the standard library it serves a stand-in panel instead.
The canned verdicts carry every field of the verdict JSON, including judged=false checks, the
residuals' source and matched, and the backward-pass FLOPs (old_report.json: a report stored before
those fields existed).
"""

from __future__ import annotations

import argparse
import html
import itertools
import json
import mimetypes
import re
import threading
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DIST = REPO / "server" / "web" / "static" / "dist"
STYLE = REPO / "server" / "web" / "static" / "style.css"
VERDICTS = HERE / "verdicts"
CSRF_TOKEN = "mock-csrf-token"
VERDICT = "WRONG_POLICY"
# Poll number (1-based) -> status; later polls are "done".
SCHEDULE = ["queued", "queued", "running", "running"]

_ids = itertools.count(1)
_lock = threading.Lock()
_polls: dict[str, int] = {}
_sources: dict[str, str] = {}


def canned(name: str) -> dict:
    """A canned verdict report (web/dev/verdicts/<name>.json)."""
    return json.loads((VERDICTS / f"{name}.json").read_text(encoding="utf-8"))


def panel_html(name: str, record_id: str) -> str:
    """The real verdict panel for a canned report, or a stand-in without the project's packages."""
    report = canned(name)
    try:
        import sys

        sys.path.insert(0, str(REPO))
        from server.web.panel import render_panel
    except ImportError:
        return (
            f'<section class="verdict-panel" data-verdict="{html.escape(report["verdict"])}">'
            f"<p>{html.escape(report['verdict'])} (stand-in: run the mock with the project's venv "
            "to see the real panel)</p></section>"
        )
    return render_panel(report, record_id)


def canned_page(name: str, wide: bool) -> str:
    """A page like /problems/<slug> after a submission: the panel inside the workbench."""
    layout = "page wide" if wide else "page"
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(name)} (canned verdict) · remat-judge mock</title>"
        '<link rel="icon" href="data:,"><link rel="stylesheet" href="/static/style.css"></head><body>'
        f'<main class="{layout}"><div class="problem-layout">'
        '<article class="statement"><h1>Checkpoint with a dot policy</h1><p>A canned verdict from '
        f"<code>web/dev/verdicts/{html.escape(name)}.json</code>, rendered by the real panel template.</p></article>"
        '<section class="workbench"><h2>Your solution</h2><div id="verdict-panel">'
        + panel_html(name, name)
        + "</div></section></div></main></body></html>"
    )


def parse_form(content_type: str, body: bytes) -> dict[str, str]:
    """multipart/form-data (what fetch + FormData sends) or urlencoded (plain form post)."""
    if content_type.startswith("application/x-www-form-urlencoded"):
        return {k: v[0] for k, v in parse_qs(body.decode("utf-8"), keep_blank_values=True).items()}
    if content_type.startswith("multipart/form-data"):
        msg = BytesParser(policy=HTTP).parsebytes(
            b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body
        )
        fields: dict[str, str] = {}
        for part in msg.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if name:
                payload = part.get_payload(decode=True) or b""
                fields[name] = payload.decode(part.get_content_charset() or "utf-8")
        return fields
    return {}


class Handler(BaseHTTPRequestHandler):
    server_version = "remat-judge-mock/1"

    def log_message(self, fmt: str, *args) -> None:  # keep test output quiet
        if getattr(self.server, "verbose", False):
            super().log_message(fmt, *args)

    # -- helpers -------------------------------------------------------------------------------
    def send_body(self, status: int, body: bytes, content_type: str, headers: dict | None = None):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_json(self, status: int, obj) -> None:
        self.send_body(status, json.dumps(obj).encode(), "application/json")

    def send_file(self, path: Path) -> None:
        if not path.is_file():
            self.send_json(404, {"detail": "Not Found"})
            return
        ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        if ctype.startswith("text/") or ctype == "application/javascript":
            ctype += "; charset=utf-8"
        self.send_body(200, path.read_bytes(), ctype)

    # -- routes --------------------------------------------------------------------------------
    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path in ("/", "/index.html"):
            self.send_file(HERE / "index.html")
            return
        if path == "/static/style.css":
            self.send_file(STYLE)
            return
        m = re.fullmatch(r"/canned/(\w+)", path)
        if m:
            if not (VERDICTS / f"{m.group(1)}.json").is_file():
                self.send_json(404, {"detail": "No such canned verdict"})
                return
            wide = parse_qs(urlsplit(self.path).query).get("wide") == ["1"]
            self.send_body(200, canned_page(m.group(1), wide).encode(), "text/html; charset=utf-8")
            return
        if path.startswith("/static/dist/"):
            rel = path[len("/static/dist/") :]
            target = (DIST / rel).resolve()
            if DIST.resolve() not in target.parents:
                self.send_json(404, {"detail": "Not Found"})
                return
            self.send_file(target)
            return
        m = re.fullmatch(r"/submissions/(\w+)/(status|panel)", path)
        if m:
            sid, what = m.groups()
            with _lock:
                if sid not in _polls:
                    self.send_json(404, {"detail": "No such submission"})
                    return
                if what == "status":
                    _polls[sid] += 1
                    n = _polls[sid]
            if what == "status":
                if n <= len(SCHEDULE):
                    self.send_json(200, {"status": SCHEDULE[n - 1], "verdict": None})
                else:
                    self.send_json(200, {"status": "done", "verdict": VERDICT})
                return
            panel = (
                "<p>Submission #" + html.escape(sid) + ": the policy saves residuals that the "
                'budget <span class="math inline">2^{20}</span> does not allow.</p>' + panel_html(VERDICT.lower(), sid)
            )
            self.send_body(200, panel.encode(), "text/html; charset=utf-8")
            return
        self.send_json(404, {"detail": "Not Found"})

    do_HEAD = do_GET

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        if path != "/problems/demo/submit":
            self.send_json(404, {"detail": "Not Found"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        fields = parse_form(self.headers.get("Content-Type") or "", self.rfile.read(length))
        wants_json = "application/json" in (self.headers.get("Accept") or "")
        error = None
        if fields.get("csrf_token") != CSRF_TOKEN:
            error = (403, "CSRF token missing or invalid.")
        elif not fields.get("source", "").strip():
            error = (400, "The source code is empty.")
        elif "FAIL_422" in fields.get("source", ""):
            error = (422, "Mock rejection: the source contains FAIL_422.")
        if error:
            status, detail = error
            if wants_json:
                self.send_json(status, {"detail": detail})
            else:
                self.send_body(status, f"<p>{html.escape(detail)}</p>".encode(), "text/html; charset=utf-8")
            return
        sid = f"s{next(_ids)}"
        with _lock:
            _polls[sid] = 0
            _sources[sid] = fields["source"]
        if not wants_json:
            page = (
                "<!doctype html><title>Submission queued</title>"
                f"<p>Submission {sid} queued (no-JS path). "
                f'<a href="/submissions/{sid}/panel">Verdict</a></p>'
            )
            self.send_body(200, page.encode(), "text/html; charset=utf-8")
            return
        self.send_json(
            201,
            {
                "id": sid,
                "status": "queued",
                "status_url": f"/submissions/{sid}/status",
                "panel_url": f"/submissions/{sid}/panel",
            },
        )


def make_server(host: str = "127.0.0.1", port: int = 0, verbose: bool = False) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    server.verbose = verbose  # type: ignore[attr-defined]
    return server


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8765)
    args = ap.parse_args()
    if not (DIST / "app.js").is_file():
        print(f"warning: {DIST / 'app.js'} is missing: run `npm ci && npm run build` in web/ first")
    server = make_server(args.host, args.port, verbose=True)
    print(f"mock judge on http://{args.host}:{server.server_address[1]}/")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
