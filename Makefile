# Two entry points for a fresh machine with Python 3.11 and make:
#   make run   - install into .venv and run the main job (snakemake, all configured targets)
#   make test  - install into .venv and run the test suite
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
CORES  ?= all

.PHONY: run test install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml requirements.lock
	$(BIN)/pip install --quiet -c requirements.lock -e '.[test]'
	# matbench 0.6 pins scikit-learn 1.0.1 / scipy 1.7.3, which do not build on Python 3.11;
	# its scorer and loader run on current versions, so the peer is installed without deps.
	$(BIN)/pip install --quiet --no-deps matbench==0.6
	touch $@

install: $(VENV)/.installed

# Rules call the `crucible` command: the venv's scripts go first on PATH.
run: install
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --cores $(CORES) --workflow-profile profiles/default

test: install
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q

clean:
	rm -rf results logs .snakemake
