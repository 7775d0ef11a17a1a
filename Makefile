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
	cd agent_server && npm ci --no-audit --no-fund --loglevel=error
	touch $@

setup: $(STAMP) $(NODE_STAMP)

run: setup
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput --verbosity 0
	$(PY) manage.py ensure_admin
	exec $(VENV)/bin/honcho -f deploy/Procfile.dev start

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
