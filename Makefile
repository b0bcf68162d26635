# remat-judge: `make run` starts the judge on 127.0.0.1:8000, `make test` runs the whole suite.
# Both create .venv, install the pinned dependencies and bubblewrap (apt, when root) first.

PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.installed-stamp
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: setup run test bench clean bwrap

setup: $(STAMP) bwrap

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

run: setup
	$(VENV)/bin/remat-judge serve --host $(HOST) --port $(PORT)

test: setup
	$(VENV)/bin/python -m pytest

bench: setup
	$(VENV)/bin/python bench/latency.py

clean:
	rm -rf $(VENV) data .pytest_cache test-artifacts
