# Two commands for a fresh machine with only python3: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# What each command needs, installed once and again only when pyproject.toml changes: `make run` the
# daemon with its channels' libraries; `make test` that and the test extra (pytest, Synapse,
# Playwright, ...). The test install covers the run install, so it marks both done.
RUN_EXTRAS := discord,matrix,slack,email,signal,googlechat,dingtalk,teams,feishu,whatsapp-linked
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
# setuptools announces every editable install with a multi-line notice; that notice alone is hidden.
PIP_INSTALL := PYTHONWARNINGS='ignore:Editable installation:UserWarning' $(BIN)/pip install --quiet

.PHONY: run test test-fast setup browser sandbox-tools mail-server irc-server redis bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(PIP_INSTALL) -e '.[$(RUN_EXTRAS)]'
	touch $(RUN_STAMP)

$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(PIP_INSTALL) -e '.[$(RUN_EXTRAS),test]'
	touch $(TEST_STAMP) $(RUN_STAMP)

setup: $(RUN_STAMP)

# Set up, write config + workspace on first run (never overwriting), start the daemon.
run: $(RUN_STAMP)
	@home="$${CLAWGATE_HOME:-$$HOME/.clawgate}"; \
	if [ ! -f "$$home/config.toml" ]; then $(BIN)/clawgate init --yes; fi
	$(BIN)/clawgate gateway

# The browser tests (tests/e2e/test_web_e2e.py) use the system Chromium. Install it when it is missing
# and we may (root, apt-get); otherwise those tests fail with one line naming the package.
browser:
	@if ! command -v chromium >/dev/null 2>&1 && [ -z "$$CLAWGATE_TEST_CHROMIUM" ] \
	    && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing chromium for the browser tests (apt-get, once)"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } \
	    >/dev/null 2>&1 || echo "chromium could not be installed; the browser tests will fail (apt-get install chromium)"; \
	fi

# exec's mount layer (agent/tools/mounts.py: the agent's own files read-only, no network for programs)
# is bubblewrap; its tests need it. Installed the same way as chromium: when missing and we may.
sandbox-tools:
	@if ! command -v bwrap >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing bubblewrap for exec's sandbox (apt-get, once)"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap; } \
	    >/dev/null 2>&1 || echo "bubblewrap could not be installed; exec's mount-layer tests will fail"; \
	fi

# The email channel's tests run against a real IMAP server, Dovecot (tests/email_servers.py starts it on
# a loopback port from a generated config). Installed the same way: when missing and we may.
mail-server:
	@if ! command -v dovecot >/dev/null 2>&1 && [ ! -x /usr/sbin/dovecot ] && [ "$$(id -u)" = 0 ] \
	    && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing dovecot-imapd for the email tests (apt-get, once)"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends dovecot-imapd; } \
	    >/dev/null 2>&1 || echo "dovecot-imapd could not be installed; the email tests will fail (apt-get install dovecot-imapd)"; \
	fi

# The IRC channel's tests run against a real IRC network: InspIRCd with Anope's NickServ (accounts, SASL,
# account-tag; tests/irc_server.py). Installed the same way: when missing and we may.
irc-server:
	@if { ! command -v inspircd >/dev/null 2>&1 && [ ! -x /usr/sbin/inspircd ]; } || { ! command -v anope >/dev/null 2>&1 && [ ! -x /usr/sbin/anope ]; }; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing inspircd and anope for the IRC tests (apt-get, once)"; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends inspircd anope; } \
	      >/dev/null 2>&1 || echo "inspircd/anope could not be installed; the IRC tests will fail (apt-get install inspircd anope)"; \
	  fi; \
	fi

# The fleet tests (tests/e2e/fleet/) start a real redis-server (Debian package redis-server). Installed
# the same way: when missing and we may; otherwise those tests fail with one line naming the package.
redis:
	@if ! command -v redis-server >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing redis-server for the fleet tests (apt-get, once)"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server; } \
	    >/dev/null 2>&1 || echo "redis-server could not be installed; the fleet tests will fail (apt-get install redis-server)"; \
	fi

# The suite runs in parallel worker processes (pytest-xdist), each starting the real servers it needs
# (Synapse, Dovecot, redis-server, Chromium) on its own loopback ports and temp dirs. Many tests wait on
# a daemon's I/O, so more workers than cores pay; TEST_WORKERS was measured on a loaded 2-core machine
# (docs/testing.md). worksteal: a worker that runs out takes queued tests from a busy one.
TEST_WORKERS ?= 4
PYTEST_PARALLEL := $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal
# Everything (CI runs this). The slowest 15 tests are printed at the end, so a slow test is seen where
# it is added.
test: $(TEST_STAMP) browser sandbox-tools mail-server irc-server redis
	$(PYTEST_PARALLEL) --durations=15

# What a developer runs while working: unit and conformance cases, not those marked e2e (the real
# daemon, tests/e2e/) or slow (docs/testing.md).
test-fast: $(TEST_STAMP) sandbox-tools mail-server irc-server redis
	$(PYTEST_PARALLEL) -m "not e2e and not slow" --durations=10

bench: $(TEST_STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) build *.egg-info
