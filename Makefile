# Two entry points (see README): `make app` and `make test` (lint, then pytest).
# Both create .venv when it is missing and install the package with every
# extra; a second run finds the stamp up to date and installs nothing.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export DGLBACKEND := pytorch

.PHONY: setup app lint test system-deps notebooks

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade --quiet pip
	$(PY) -m pip install --quiet -e ".[all]"
	@# Dash ships a JupyterLab source extension (share/jupyter/lab/extensions/dash-jupyterlab.tgz) that makes
	@# JupyterLab open with a "Build Recommended" dialog; nothing here needs it, so no build check.
	@mkdir -p $(VENV)/etc/jupyter/labconfig
	@printf '{"buildCheck": false, "buildAvailable": false}\n' > $(VENV)/etc/jupyter/labconfig/page_config.json
	@touch $(STAMP)

# Debian's Chromium drives the browser tests and Kaleido's PNG export.
system-deps:
	@test -x /usr/bin/chromium && test -x /usr/bin/chromedriver || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null)

app: setup
	$(PY) app.py

# ruff (lint rules and formatting) over the whole repository, mypy over the
# layers listed in pyproject.toml's [tool.mypy] files. LINT_PATHS narrows
# the ruff checks, e.g. `make lint LINT_PATHS="workbench/sim tests/test_sim.py"`.
LINT_PATHS ?= .
lint: setup
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(PY) -m mypy

# Re-execute the notebooks in place (fast mode, a PNG beside every figure), so GitHub shows
# their outputs; tests/test_notebooks.py fails while a notebook's code is newer than its outputs.
notebooks: setup system-deps
	$(PY) -m workbench.notebook_outputs

test: setup system-deps lint
	$(PY) -m pytest -q -p no:cacheprovider
