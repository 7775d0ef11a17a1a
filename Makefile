# The two commands: `make run` and `make test`. Both set everything up first.
SHELL := /bin/bash
.ONESHELL:
.SHELLFLAGS := -eu -o pipefail -c

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
NODE_STAMP := agent_server/node_modules/.installed-stamp

.PHONY: setup run test lint typecheck clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

$(NODE_STAMP): agent_server/package.json agent_server/package-lock.json
	npm ci --prefix agent_server --no-audit --no-fund --loglevel=error
	touch $@

setup: $(STAMP) $(NODE_STAMP)

# Upstream: the local provider simulator unless ANTHROPIC_BASE_URL is set or
# TRINITY_UPSTREAM=real (then the real providers, or whatever the URL says).
SIMULATOR_URL := http://127.0.0.1:8100

run: setup
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput --verbosity 0
	$(PY) manage.py ensure_admin
	if [ -n "$${ANTHROPIC_BASE_URL:-}" ]; then
	  export TRINITY_ANTHROPIC_BASE_URL="$$ANTHROPIC_BASE_URL"
	  exec $(VENV)/bin/honcho -f deploy/Procfile.dev start web worker beat
	elif [ "$${TRINITY_UPSTREAM:-simulator}" = real ]; then
	  exec $(VENV)/bin/honcho -f deploy/Procfile.dev start web worker beat
	else
	  export TRINITY_ANTHROPIC_BASE_URL=$(SIMULATOR_URL) TRINITY_CODEX_BASE_URL=$(SIMULATOR_URL)
	  $(PY) manage.py seed_demo
	  exec $(VENV)/bin/honcho -f deploy/Procfile.dev start
	fi

test: setup
	exports=$$($(PY) tests/backends.py)
	eval "$$exports"
	$(PY) manage.py makemigrations --check --dry-run
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy .
	$(PY) -m pytest

clean:
	rm -rf $(VENV) var agent_server/node_modules
