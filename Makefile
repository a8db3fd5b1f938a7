# Two commands: `make run` (set up + main job on the native engine) and `make test` (set up + test suite).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch comes first so the project's torch range is already met (a local CPU wheel on the project's machines).
TORCH_SPEC ?= torch==2.13.0
SCENARIO ?= $(firstword $(wildcard ../shared/cage2/scenario))

.PHONY: setup run test bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev,cyborg,ray,tb]"
	@if [ -n "$(SCENARIO)" ]; then $(VENV)/bin/workflow-rl cyborg-setup --scenario "$(SCENARIO)"; fi
	touch $@

# the main job: a GP-UCB workflow search on the native engine (about 2-5 minutes on a 2-core laptop)
RUN_EPISODES ?= 60000
run: setup
	$(VENV)/bin/workflow-rl search --total-episodes $(RUN_EPISODES) --out runs/search-$$(date +%Y%m%d-%H%M%S)

test: setup
	WORKFLOW_RL_CAGE2_SCENARIO="$(abspath $(SCENARIO))" $(PY) -m pytest -q

bench: setup
	$(PY) benchmarks/bench_native.py

clean:
	rm -rf $(VENV) build *.egg-info
