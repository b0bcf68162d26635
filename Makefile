# remat-judge: `make run` starts the judge on 127.0.0.1:8000, `make test` runs the whole suite.
# Both create .venv, install the pinned dependencies and bubblewrap (apt, when root) first;
# `make test` also installs PostgreSQL, redis-server and docker-compose (apt, when root).

PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.installed-stamp
HOST   ?= 127.0.0.1
PORT   ?= 8000

WEB_BUNDLE := server/web/static/dist/app.js

.PHONY: setup run test test-fast lint bench bench-throughput clean bwrap web chromium services

setup: $(STAMP) bwrap web

$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -c requirements.lock -e '.[test]'
	touch $(STAMP)

# The jail needs bubblewrap and libseccomp (for its seccomp filter); setpriv (util-linux) is part
# of every Debian system.
bwrap:
	@if ! command -v bwrap >/dev/null 2>&1 || ! ldconfig -p | grep -q 'libseccomp\.so\.2'; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing bubblewrap and libseccomp2"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends bubblewrap libseccomp2 >/dev/null 2>&1 || \
	    { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends bubblewrap libseccomp2 >/dev/null; }; \
	  else \
	    echo "bubblewrap or libseccomp2 is missing: install them (Debian/Ubuntu: sudo apt-get install bubblewrap libseccomp2)"; exit 1; \
	  fi; \
	fi

# The editor bundle (CodeMirror, KaTeX), built reproducibly from web/package-lock.json. The pages
# work without it (a plain textarea, TeX shown as text), so a machine without npm still runs.
web: $(WEB_BUNDLE)

$(WEB_BUNDLE): web/package.json web/package-lock.json web/build.mjs $(wildcard web/src/*.js)
	@if command -v npm >/dev/null 2>&1; then \
	  cd web && npm ci --no-audit --no-fund --loglevel=error && npm run build --silent; \
	else \
	  echo "npm not found: the pages will use a plain textarea instead of the editor"; \
	fi

# Browser tests drive Debian's Chromium (test tools' own browser downloads fail here).
chromium:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium for the browser tests"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >/dev/null 2>&1 || \
	    { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >/dev/null; } || \
	    echo "chromium could not be installed: the browser tests will say why they skip"; \
	  fi; \
	fi

# The scaled-out tests start their own PostgreSQL and redis-server processes (on free loopback
# ports, in temporary folders: nothing listens elsewhere) and check docker-compose.yml with
# docker-compose; `run` needs none of them. Debian's postgresql package keeps its programs in
# /usr/lib/postgresql/<version>/bin, where the tests look for them.
services:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	{ command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; } || missing="$$missing postgresql"; \
	command -v docker-compose >/dev/null 2>&1 || missing="$$missing docker-compose"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing$$missing for the scaled-out tests"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing >/dev/null 2>&1 || \
	    { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing >/dev/null; } || \
	    echo "$$missing could not be installed: the tests that need them will say why they skip"; \
	  else \
	    echo "missing:$$missing (Debian/Ubuntu: sudo apt-get install$$missing): the tests that need them will skip"; \
	  fi; \
	fi

run: setup
	$(VENV)/bin/remat-judge serve --host $(HOST) --port $(PORT)

test: setup chromium services
	$(VENV)/bin/python -m pytest

# The fast layer (about two minutes on 2 cores, measured quiet): unit tests and FastAPI TestClient tests with real SQLite,
# ruff, mypy and the import contracts; no jail, no server process, no network, no browser.
test-fast: setup
	$(VENV)/bin/python -m pytest tests/unit -q

# The habits on their own (also checked inside test-fast and test): ruff's rules and format, mypy,
# and the import contracts of pyproject.toml's [tool.importlinter].
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

bench: setup
	$(VENV)/bin/python bench/latency.py 10 --pause-s 3

bench-throughput: setup
	$(VENV)/bin/python bench/throughput.py

clean:
	rm -rf $(VENV) data .pytest_cache test-artifacts web/node_modules server/web/static/dist
