# Two commands: `make run` (set up + main job on the native engine) and `make test` (set up + test suite).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch comes first so the project's torch range is already met (a local CPU wheel on the project's machines).
TORCH_SPEC ?= torch==2.13.0
SCENARIO ?= $(firstword $(wildcard ../shared/cage2/scenario))

.PHONY: setup run test bench results clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev,cyborg,ray,tb]"
	@if [ -n "$(SCENARIO)" ]; then $(VENV)/bin/workflow-rl cyborg-setup --scenario "$(SCENARIO)"; fi
	touch $@

# the main job: a workflow search on the native engine from the shipped universal agent (pretrained:universal, one
# network for all 120 workflows; its training and its shipped screen of all 120 are not counted, its card says
# what they cost): the GP fine-tunes its pick within the budget (3,000 episodes: one workflow, to the compliance gate
# and then 10 episodes per env, with the agent's own alignment reward). Measured (benchmarks/results/recipe/makerun/):
# answers 2.5-2.6 points above the ground truth's best, the same confidence set as a 9,000-episode fine-tune
# (10 -> 40 episodes per env after the gate: no better answer, 2.6x the CPU; makerun_9k/), 44-48 s of search on the
# quiet 2-core box. `make run RUN_FROM=` searches from scratch instead (every workflow trained from nothing; 60,000
# episodes, 40 per env after the gate: slower, weaker answers).
RUN_FROM ?= --init-checkpoint pretrained:universal --post-gate-episodes 10
ifeq ($(strip $(RUN_FROM)),)
RUN_EPISODES ?= 60000
else
RUN_EPISODES ?= 3000
endif
run: setup
	$(VENV)/bin/workflow-rl search --total-episodes $(RUN_EPISODES) $(RUN_FROM) --out runs/search-$$(date +%Y%m%d-%H%M%S)

# two test workers (pytest-xdist), each given whole files (a file's module fixtures and a toy attacker's numba
# kernels built once, not once per worker): pytest 578-608 s on a fresh clone of the 2-core machine (2026-12-02;
# 705 s dealing single tests), `make test` with the clone's setup 11 min 9 s
test: setup
	WORKFLOW_RL_CAGE2_SCENARIO="$(abspath $(SCENARIO))" $(PY) -m pytest -q -n 2 --dist loadfile

# the engine benchmarks: every engine mode (engines.*) and the native kernel alone (native.*, the README's speed row)
# into benchmarks/results; the same as `workflow-rl bench` (benchmarks/README.md)
bench: setup
	$(VENV)/bin/workflow-rl bench --overwrite

# docs/results.md and the README's results table from the committed result files, docs/layout.md from the modules
results: setup
	$(PY) benchmarks/results_page.py
	$(PY) benchmarks/layout_page.py

clean:
	rm -rf $(VENV) build *.egg-info
