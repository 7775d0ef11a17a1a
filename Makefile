# The two commands: `make run` and `make test`. Both set everything up first.
SHELL := /bin/bash
.ONESHELL:
.SHELLFLAGS := -eu -o pipefail -c

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
NODE_STAMP := agent_server/node_modules/.installed-stamp
CODEX_STAMP := agent_server/codex_cli/node_modules/.installed-stamp
PANEL_STAMP := frontend/node_modules/.installed-stamp

.PHONY: setup run stop test clean chromium panel bench-fleet agent-user sandbox-tools

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

$(NODE_STAMP): agent_server/package.json agent_server/package-lock.json
	npm ci --prefix agent_server --no-audit --no-fund --loglevel=error
	touch $@

# The Codex CLI (Codex agents' runtime), pinned apart from the Claude CLI.
$(CODEX_STAMP): agent_server/codex_cli/package.json agent_server/codex_cli/package-lock.json
	npm ci --prefix agent_server/codex_cli --no-audit --no-fund --loglevel=error
	touch $@

$(PANEL_STAMP): frontend/package.json frontend/package-lock.json
	npm ci --prefix frontend --no-audit --no-fund --loglevel=error
	touch $@

# Browser tests drive Debian's Chromium (never a downloaded browser).
chromium:
	if [ ! -x /usr/bin/chromium ]; then
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
	  else
	    echo "browser tests need Debian's chromium: sudo apt-get install chromium"
	  fi
	fi

panel: $(PANEL_STAMP)
	npm run --prefix frontend build

# The unprivileged OS user the CLI runs as when an agent server started on its own (not
# by the platform, e.g. the tests' servers) runs as root (agent_server/isolation.py);
# the platform's local runtime gives each agent a user of its own instead
# (agents/runtimes/agent_users.py). Idempotent; as another user there is nothing to
# create (the CLI then runs as that user: the weak, same-user mode).
AGENT_USER := $(or $(TRINITY_AGENT_USER),trinity-agent)
# Its ids come from the agent users' own range (agents/runtimes/agent_users.py,
# AGENT_ID_MIN..AGENT_ID_MAX): a system uid (999 and down) is one that containers'
# users run as on this kernel, and a kill of every process of the agent's uid would
# reach them. One made by an older `make setup` in the system range is made again.
AGENT_IDS := 1900000000 1909999999
agent-user:
	if [ "$$(id -u)" = 0 ]; then
	  read -r low high <<< '$(AGENT_IDS)'
	  uid=$$(id -u '$(AGENT_USER)' 2>/dev/null || true)
	  if [ -n "$$uid" ] && [ "$$uid" -lt "$$low" ]; then
	    userdel '$(AGENT_USER)'
	    uid=""
	  fi
	  if [ -z "$$uid" ]; then
	    useradd --system --user-group --no-create-home --no-log-init \
	      -K SYS_UID_MIN=$$low -K SYS_UID_MAX=$$high -K SYS_GID_MIN=$$low -K SYS_GID_MAX=$$high \
	      --home-dir /nonexistent --shell /usr/sbin/nologin '$(AGENT_USER)'
	  fi
	fi

# The sandbox each local agent's CLI runs in (agent_server/sandbox.py): Debian's
# bubblewrap, socat for the relay to its forwarder inside, setpriv (util-linux) to drop
# to the agent's user. Installed as root like Chromium; without them (another user, no
# apt) agents run without a sandbox and say so (isolation separate-user or same-user).
sandbox-tools:
	missing=""
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"
	command -v socat >/dev/null || missing="$$missing socat"
	command -v setpriv >/dev/null || missing="$$missing util-linux"
	if [ -n "$$missing" ]; then
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing
	  else
	    echo "the agents' sandbox needs:$$missing (sudo apt-get install$$missing)"
	  fi
	fi

setup: $(STAMP) $(NODE_STAMP) $(CODEX_STAMP) panel agent-user sandbox-tools

# Ports (`PORT=9000 make run` or `make run PORT=9000`): web on PORT, the provider
# simulator on SIMULATOR_PORT, the gateway on GATEWAY_PORT. trinity/settings.py validates
# them when the first manage.py command of `run` loads it, so a bad value stops before
# anything listens.
PORT := $(or $(PORT),8000)
SIMULATOR_PORT := $(or $(SIMULATOR_PORT),8100)
# The gateway (python -m gateway): people's own Claude Code and Codex CLIs on the pool.
GATEWAY_PORT := $(or $(GATEWAY_PORT),8200)
# Upstream: the local provider simulator unless ANTHROPIC_BASE_URL is set or
# TRINITY_UPSTREAM=real (then the real providers, or whatever the URL says).
SIMULATOR_URL = http://127.0.0.1:$(SIMULATOR_PORT)
HONCHO_START := $(VENV)/bin/honcho -f deploy/Procfile.dev start -p $(PORT)

# Agent servers outlive web and worker by design (a restarted web finds them); the
# demo's must not outlive `make run`: once honcho stops (Ctrl-C), `run` stops them.
run: setup
	export PORT='$(PORT)' SIMULATOR_PORT='$(SIMULATOR_PORT)' TRINITY_GATEWAY_PORT='$(GATEWAY_PORT)'
	$(PY) manage.py migrate --noinput
	$(PY) manage.py createcachetable
	$(PY) manage.py collectstatic --noinput --verbosity 0
	$(PY) manage.py ensure_admin
	trap '$(PY) manage.py agents_stop_all' EXIT
	if [ -n "$${ANTHROPIC_BASE_URL:-}" ]; then
	  export TRINITY_ANTHROPIC_BASE_URL="$$ANTHROPIC_BASE_URL"
	  $(HONCHO_START) web worker beat gateway
	elif [ "$${TRINITY_UPSTREAM:-simulator}" = real ]; then
	  $(HONCHO_START) web worker beat gateway
	else
	  export TRINITY_ANTHROPIC_BASE_URL=$(SIMULATOR_URL) TRINITY_CODEX_BASE_URL=$(SIMULATOR_URL) \
	    TRINITY_OPENAI_BASE_URL=$(SIMULATOR_URL) TRINITY_CODEX_AUTH_URL=$(SIMULATOR_URL) \
	    TRINITY_CLAUDE_OAUTH_AUTHORIZE_URL=$(SIMULATOR_URL)/oauth/authorize \
	    TRINITY_CLAUDE_OAUTH_TOKEN_URL=$(SIMULATOR_URL)/v1/oauth/token \
	    TRINITY_CHATGPT_OAUTH_AUTHORIZE_URL=$(SIMULATOR_URL)/oauth/authorize
	  $(PY) manage.py seed_demo
	  $(HONCHO_START)
	fi

# Stop every agent server recorded in the database (e.g. after `make run` was killed
# without the chance to stop them itself).
stop: $(STAMP)
	$(PY) manage.py agents_stop_all

# The container tests (tests/docker, tests/deploy/test_compose_up.py) run on the engine
# deploy/engine.py finds, or on one it starts under .docker-engine/ and stops at the end.
test: setup chromium
	npm test --prefix frontend
	exports=$$($(PY) tests/backends.py)
	eval "$$exports"
	engine=$$($(PY) deploy/engine.py up)
	eval "$$engine"
	trap '$(PY) deploy/engine.py down' EXIT
	$(PY) manage.py makemigrations --check --dry-run
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy .
	$(PY) -m pytest

# The fleet benchmark: every policy over the kept traces (or TRACE=path/to/trace.jsonl),
# a markdown table on stdout, PNG plots in var/bench-fleet (docs/benchmarks.md). The
# bounds come from each trace's sidecar; REFRESH_BOUNDS=1 solves them again (minutes).
# HOLDOUT=N runs N traces the policy never saw instead, drawn from SEED (random unless
# given, printed first; none kept) on 2 processes: ~5 min for 50.
bench-fleet: $(STAMP)
	$(PY) -m bench.fleet $(if $(HOLDOUT),--holdout '$(HOLDOUT)' $(if $(SEED),--seed '$(SEED)'),$(if $(TRACE),--trace '$(TRACE)') $(if $(REFRESH_BOUNDS),--refresh-bounds) --out var/bench-fleet)

clean:
	rm -rf $(VENV) .venv-bench-litellm var agent_server/node_modules agent_server/codex_cli/node_modules frontend/node_modules frontend/dist

# Benchmarks (bench/README.md; not part of `make test`). The turn benchmarks need a
# Postgres server and an empty Redis database, e.g.
#   make bench-turn BENCH_DATABASE_URL=postgres://root@127.0.0.1:5432/trinity \
#                   BENCH_REDIS_URL=redis://127.0.0.1:6379/3
.PHONY: bench bench-turn
bench-turn: $(STAMP)
	$(PY) bench/turn_overhead.py
	$(PY) bench/walked_turn.py

# The turn storm (bench/storm.py): 500 concurrent turns, 50 agents, two gunicorn
# processes and a Celery worker; the same two variables as bench-turn, and e.g.
# STORM_ARGS="--cli-agents 0 --turns 200".
.PHONY: bench-storm
bench-storm: $(STAMP) $(NODE_STAMP)
	$(PY) bench/storm.py $(STORM_ARGS)

# The credential forwarder's added latency (bench/forwarder.py): the real CLI through
# the forwarder against the CLI straight to the simulator, interleaved, e.g.
# FORWARDER_ARGS="--pairs 40 --requests 1000".
.PHONY: bench-forwarder
bench-forwarder: $(STAMP) $(NODE_STAMP)
	$(PY) bench/forwarder.py $(FORWARDER_ARGS)

# What the gateway adds (bench/gateway.py): the same ~50 KB CLI requests direct to the
# simulator, through a bare TCP splice relay, through the gateway and through LiteLLM's
# proxy (installed once into .venv-bench-litellm), interleaved; then 200 concurrent streams.
# The same two variables as bench-turn, and e.g. GATEWAY_ARGS="--requests 1000 --bursts 5".
.PHONY: bench-gateway
bench-gateway: $(STAMP)
	$(PY) bench/gateway.py $(GATEWAY_ARGS)

# What the local runtime's sandbox adds to a turn's spawn (bench/sandbox.py; as root
# with bubblewrap), e.g. SANDBOX_ARGS="--spawns 300 --turns 40".
.PHONY: bench-sandbox
bench-sandbox: $(STAMP) $(NODE_STAMP) sandbox-tools
	$(PY) bench/sandbox.py $(SANDBOX_ARGS)

# Live turns' event streams against the API (bench/sse.py): one web process, GET
# /api/agents idle and beside 100 open streams; the same two variables as bench-turn,
# and e.g. SSE_ARGS="--streams 200 --requests 600".
.PHONY: bench-sse
bench-sse: $(STAMP)
	$(PY) bench/sse.py $(SSE_ARGS)

bench: $(STAMP) bench-turn
	$(PY) bench/ranking.py
	$(PY) bench/sweep.py
