"""Every numeric setting, of every command and of the Python API's configs, has a finite range in the one table
(``workflow_rl/ranges.py``), and a value outside it ends in one ``error:`` line naming the flag (exit status 2):
a new flag or config field without a range fails here."""
import argparse
import math

import pytest
from helpers import run_main
from helpers import assert_one_error_line   # tests/ is on the path (conftest.py)

from workflow_rl import resources
from workflow_rl.ranges import RANGES, key, numeric_fields

POSITIONAL = {"evaluate": ["sleep"], "replay": ["sleep"]}
"""What a command needs before its flags (a baseline checkpoint that loads nothing)."""


def _configs():
    from workflow_rl.bench import BenchConfig
    from workflow_rl.curves import CurvesConfig
    from workflow_rl.rl.config import TrainConfig
    from workflow_rl.rl.planning.belief import BeliefConfig
    from workflow_rl.rl.planning.planner import PlanConfig
    from workflow_rl.rl.ppo import PPOConfig
    from workflow_rl.runs.search import SearchRun
    from workflow_rl.runs.train import TrainRun
    from workflow_rl.search.config import SearchConfig

    # (the dataclass, the prefix of its keys, the command whose own entries it reads)
    return [(TrainConfig, "", None), (PPOConfig, "", None), (SearchConfig, "", None), (PlanConfig, "plan_", None),
            (BeliefConfig, "plan_", None), (CurvesConfig, "", None), (BenchConfig, "", None), (TrainRun, "", "train"),
            (SearchRun, "", None)]


def _numeric_flags():
    """(command, option, table key) of every flag of every command that takes a number."""
    from workflow_rl.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    flags = []
    for command, p in sub.choices.items():
        for action in p._actions:
            k = getattr(action.type, "range_key", None)
            if k is not None:
                flags.append((command, action.option_strings[0], k))
                continue
            numeric_default = any(isinstance(d, (int, float)) and not isinstance(d, bool)
                                  for d in (action.default if isinstance(action.default, (list, tuple))
                                            else [action.default]))
            assert action.type not in (int, float) and not (numeric_default and action.nargs != 0), \
                f"{command} {action.option_strings}: a number without a range in workflow_rl/ranges.py"
    return flags


def test_every_numeric_flag_shows_its_range_in_help():
    """``workflow-rl COMMAND --help`` states each numeric flag's range in that flag's own help, the table's text."""
    from workflow_rl.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    shown = {(c, a.option_strings[0]): a.help for c, p in sub.choices.items() for a in p._actions if a.option_strings}
    flags = _numeric_flags()
    assert len(flags) > 100
    for command, option, k in flags:
        text = shown[command, option]
        assert f"(range {RANGES[k].text()}" in text and text.endswith(")"), f"{command} {option}: no range in help"
    assert "(range 1..4,194,304)" in " ".join(sub.choices["train"].format_help().split())
    assert "per core this process may use)" in shown["evaluate", "--workers"]   # the machine's cap, not only the table's


def test_every_numeric_flag_of_every_command_reads_its_range_from_the_table():
    flags = _numeric_flags()
    assert {c for c, _, _ in flags} >= {"train", "search", "evaluate", "replay", "demo", "parity", "curves", "bench"}
    for command, option, k in flags:
        assert k in RANGES, f"{command} {option}: no range"


@pytest.mark.parametrize("cls,prefix,command", _configs(), ids=lambda x: getattr(x, "__name__", repr(x)))
def test_every_numeric_field_of_the_public_configs_has_a_range_its_default_is_in(cls, prefix, command):
    import dataclasses

    names = numeric_fields(cls)
    assert names, cls
    defaults = cls() if cls.__name__ != "SearchConfig" else cls()
    for name in names:
        r = RANGES[key(prefix + name, command)]
        value = getattr(defaults, name)
        for v in value if isinstance(value, (tuple, list)) else () if value is None else (value,):
            r.check(name, v)
    assert {f.name for f in dataclasses.fields(cls)} >= set(names)


def test_every_range_is_finite_and_its_constants_are_cage2s():
    from workflow_rl.sim import tables as T
    from workflow_rl import ranges
    from workflow_rl.workflow import all_workflows

    for k, r in RANGES.items():
        assert math.isfinite(r.lo) and math.isfinite(r.hi) and r.lo <= r.hi and r.why, k
        assert r.kind in (int, float) and isinstance(r.hi, r.kind) and isinstance(r.lo, r.kind), k
    assert (ranges.N_ACTIONS, ranges.N_HOSTS, ranges.N_WORKFLOWS) == (T.N_ACTIONS, T.N_HOSTS, len(all_workflows()))


def _outside(r):
    """A value above the range and one below it, as typed."""
    above = r.hi + 1 if r.kind is int else r.hi * 2 + 1
    below = r.lo - 1 if r.kind is int else r.lo if r.lo_open else r.lo - 1
    return str(above), str(below)


def _cases():
    cases = []
    for command, option, k in _numeric_flags():
        above, below = _outside(RANGES[k])
        cases.append((command, option, above, k))
        cases.append((command, option, below, None))
    return cases


CASES = _cases()


@pytest.mark.parametrize("command,option,value,k", CASES, ids=[f"{c} {o} {v}" for c, o, v, _ in CASES])
def test_a_value_outside_its_range_is_refused_in_one_line(command, option, value, k, capsys, tmp_path, monkeypatch):
    """Every numeric flag of every command, just past each end of its range (the refusal names the flag, and past
    the top its bound): nothing runs, nothing is written."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(resources, "usable_cores", lambda: 2)
    rc, _, err = run_main([command, *POSITIONAL.get(command, []), option, value], capsys)
    assert_one_error_line(rc, err, option)
    if k is not None:
        r = RANGES[k]
        bounds = (f"{r.hi:,}", f"{r.hi}", f"{r.hi:g}", *(["use at most"] if k in ("workers", "n_workers") else []))
        assert any(s in err for s in bounds), err   # worker counts: the cores' bound, lower, comes first
    assert not list(tmp_path.iterdir()), "a refused command wrote"


@pytest.mark.parametrize("args,match", [
    (["train", "--n-envs", str(10**30)], r"--n-envs must be in \[1, 4194304\]"),
    (["train", "--max-episodes", str(10**19)], r"--max-episodes must be in \[1, 1000000000\]"),
    (["train", "--num-episodes", str(10**30)], r"--num-episodes must be in"),
    (["train", "--hidden", "64", str(2**40)], r"--hidden must be in \[1, 1048576\]"),
    (["train", "--update-epochs", str(2**63)], r"--update-epochs must be in \[1, 1000\]"),
    (["train", "--ent-coef", "1e300"], r"--ent-coef must be in \[0, 100\]"),
    (["search", "--total-episodes", str(10**30)], r"--total-episodes must be in"),
    (["search", "--batch-workflows", "1000"], r"--batch-workflows must be in \[1, 120\]"),
    (["evaluate", "sleep", "--plan-mismatch-penalty", "1e300"], r"--plan-mismatch-penalty must be in \[0, 1000\]"),
    (["evaluate", "sleep", "--time-limit", str(10**400)], r"--time-limit: must be in 1..2,592,000"),
    (["replay", "sleep", "--episodes", str(10**30)], r"--episodes: must be in 1..100,000"),
    (["demo", "--n-envs", str(2**63)], r"--n-envs: must be in 1..4,194,304"),
    (["bench", "--sizes", "1", str(2**40)], r"--sizes: must be in 1..4,194,304"),
    (["bench", "--native-min-steps", str(10**30)], r"--native-min-steps: must be in 1..10,000,000,000"),
    (["bench", "--cuda-sizes", str(2**63)], r"--cuda-sizes: must be in"),
    (["curves", "--shard-episodes", str(10**30)], r"--shard-episodes must be in \[1, 10000000\]"),
    (["search", "--ray-cpus-per-task", "inf"], r"--ray-cpus-per-task: must be in \(0, 1024\]"),
])
def test_absurd_values_are_refused_naming_the_flag_and_its_range(args, match, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, _, err = run_main(args, capsys)
    assert_one_error_line(rc, err, match)


def test_the_python_api_reads_the_same_ranges():
    from workflow_rl.rl.config import TrainConfig
    from workflow_rl.rl.planning.planner import PlanConfig
    from workflow_rl.runs.train import TrainRun, train
    from workflow_rl.search.config import SearchConfig

    with pytest.raises(ValueError, match=r"--n-envs must be in \[1, 4194304\]"):
        TrainConfig(n_envs=2**40).validate_settings()
    with pytest.raises(ValueError, match=r"--total-episodes must be in"):
        SearchConfig(total_episodes=10**30).validate()
    with pytest.raises(ValueError, match=r"--plan-min-gain must be in \[0, 1000\]"):
        PlanConfig(min_gain=1e300).validate()
    with pytest.raises(ValueError, match=r"--seeds must be in \[1, 1024\]"):
        train(TrainConfig(n_envs=2, max_episodes=1), TrainRun(seeds=10**6))
