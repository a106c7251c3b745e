# Two commands for a fresh machine with only python3: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test setup bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@# setuptools announces every editable install with a multi-line notice; that notice alone is hidden.
	PYTHONWARNINGS='ignore:Editable installation:UserWarning' $(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

# Set up, write config + workspace on first run (never overwriting), start the daemon.
run: $(STAMP)
	@home="$${CLAWGATE_HOME:-$$HOME/.clawgate}"; \
	if [ ! -f "$$home/config.toml" ]; then $(BIN)/clawgate init --yes; fi
	$(BIN)/clawgate gateway

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) build *.egg-info
