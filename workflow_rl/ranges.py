"""The range of every numeric setting, of every command and of the Python API: one table, :data:`RANGES`.

A setting is a config field (``TrainConfig``, ``PPOConfig``, ``SearchConfig``, ``PlanConfig`` as ``plan_*``,
``CurvesConfig``, ``BenchConfig``) or a flag written by hand (``demo --n-envs``); its key is its name as the flag's dest
spells it (``n_envs``, ``plan_top_k``), or ``command.name`` where one command's flag means something else than the
setting of that name (``replay.episodes``). The configs' ``validate()`` and the flags' argparse types
(``cli.numbers.Ranged``, which ``cli.flags`` and ``cli.build_parser`` give every numeric flag) read their bounds here,
so a value out of range is refused in one line naming the flag and its range, wherever it enters; a new numeric setting
gets its range here, or, for ``TrainConfig`` and ``PPOConfig``, on its field (``rl.config.setting``;
tests/test_ranges.py fails for one that has none). Other checks (memory, cores, a product of settings) come on top. """
from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass

from workflow_rl.checks import (MAX_BENCH_CYBORG_STEPS, MAX_BENCH_REPEATS, MAX_EPISODE_LENGTH, MAX_EPISODES,
                                MAX_REPLAY_STEPS, MAX_SEED, check_float, check_int, flag)


@dataclass(frozen=True)
class Range:
    """A setting's bounds: ``lo`` to ``hi`` inclusive (``lo`` excluded with ``lo_open``), integers or finite floats,
    and why the bound is where it is (said in the argparse message and in ``--help``)."""

    lo: int | float
    hi: int | float
    why: str
    kind: type = int
    lo_open: bool = False
    hi_open: bool = False
    grouped: bool = True
    """Write the bounds with thousands separators (not for bit limits such as 2147483647)."""

    def text(self) -> str:
        """The range as a message says it: ``1..100`` for integers, ``(0, 1]`` for numbers."""
        if self.kind is int:
            return f"{self.lo:,}..{self.hi:,}" if self.grouped else f"{self.lo}..{self.hi}"
        return f"{'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}{')' if self.hi_open else ']'}"

    def contains(self, v) -> bool:
        return (self.lo < v if self.lo_open else self.lo <= v) and (v < self.hi if self.hi_open else v <= self.hi)

    def check(self, name: str, value):
        """``value`` if it is of this range's kind and within it; otherwise one ValueError naming ``name``."""
        if self.kind is int:
            return check_int(name, value, self.lo, self.hi)
        check_float(name, value, self.lo, self.hi, lo_open=self.lo_open)
        if self.hi_open and value >= self.hi:
            raise ValueError(f"{name} must be < {self.hi:g}, got {value:g}")
        return value


MAX_ENVS = 1 << 22
"""Most environments stepped at once (``--n-envs``, bench sizes): 4x the largest batch the engines are benchmarked
at (``bench --cuda-sizes`` 1<<20); the engine state alone is about 700 bytes an env (3 GB here) and a training
rollout a hundred times that, so more can only be a typo (the memory check refuses most of this already)."""
MAX_ENV_EPISODES = 10**9
"""Most episodes per env (``--max-episodes``, ``--post-gate-episodes``, ``--min-episodes``): the universal recipe's
'never' (its ``--num-episodes`` budget stops the run); 10**9 100-step episodes of one env are decades of play."""
MAX_TRAINING_EPISODES = 10**10
"""Most training episodes of a run or a search (``--num-episodes``, ``--total-episodes``): 10**12 env-steps at
100 steps, months at the 2.5M transitions/s one H200 trains at (the CUDA recipe spends 9.8M)."""
MAX_THREADS = 1024
"""Most threads ``--threads`` or ``WORKFLOW_RL_THREADS`` may ask for: more than any machine this runs on has
cores; torch crashes (a segmentation fault, no message) when asked for a million."""
MAX_WORKERS = 4 * MAX_THREADS
"""Most worker processes (static bound; ``resources.check_workers`` also allows at most 4 per usable core)."""
MAX_BATCH_RUNS = 1024
"""Most runs trained in one batch (``train --seeds``, ``search --seeds-per-workflow``): the studies use 5; each
run holds its own networks and envs, which the memory check also counts."""
N_ACTIONS, N_HOSTS, N_WORKFLOWS = 145, 13, 120
"""CAGE2's blue actions and hosts, and the orders of its five host types (5! workflows): tests/test_ranges.py
checks them against ``sim.tables`` and ``workflow.all_workflows``."""

class _Table(dict):
    """:data:`RANGES`: the entries written here, and the ranges ``TrainConfig`` and ``PPOConfig`` declare on their
    fields (``rl.config.setting``), which ``rl.config`` adds (:func:`declare`) as it loads. This module cannot import
    it (``rl.config`` imports this one: a cycle), so a training setting's range is there once ``rl.config`` is
    imported, as every command and config that has such a setting does; reading one before is a KeyError saying
    so."""

    declared = False

    def __missing__(self, k):
        if not self.declared:
            raise KeyError(f"{k!r}: the training settings' ranges are declared by workflow_rl.rl.config: import it "
                           "first")
        raise KeyError(k)


def declare(ranges: dict[str, Range]) -> None:
    """Add the ranges a config declares on its fields (``rl.config`` calls it once it has loaded); a setting is
    declared once, so a key the table already holds is an error."""
    clash = sorted(set(ranges) & set(dict.keys(RANGES)))
    if clash:
        raise KeyError(f"ranges declared twice: {', '.join(clash)}")
    dict.update(RANGES, ranges)
    RANGES.declared = True



SEEDS = Range(0, MAX_SEED, "a 64-bit seed", grouped=False)
LENGTHS = Range(1, MAX_EPISODE_LENGTH, "the engines count steps in 32 bits", grouped=False)
EVAL_EPISODES = Range(1, MAX_EPISODES, "no evaluation needs more episodes per cell")
ENVS = Range(1, MAX_ENVS, "4x the largest batch benchmarked; 700 bytes of engine state per env")
ENV_EPISODES = Range(0, MAX_ENV_EPISODES, "per env; the run's budget, not this, should stop a long run")
TRAINING_EPISODES = Range(1, MAX_TRAINING_EPISODES, "10**12 env-steps: months on a GPU")
SHARE = Range(0.0, 1.0, "a share", float)
WORKERS = Range(1, MAX_WORKERS, "and at most 4 per usable core", grouped=False)
BATCH_RUNS = Range(1, MAX_BATCH_RUNS, "runs in one batch; the studies use 5")

RANGES: dict[str, Range] = _Table({
    # TrainConfig and PPOConfig: declared on their fields (rl.config, ``setting``), added by ``declare``
    # ------------------------------------------------------------------------------------------------ SearchConfig
    "total_episodes": TRAINING_EPISODES,
    "gp_beta": Range(0.0, 1e6, "the schedule's beta is 20 to 40; 1e6 already ranks by uncertainty alone", float),
    "n_init": Range(1, N_WORKFLOWS, "a design of more would be cut silently: there are 120 workflows"),
    "eval_episodes": EVAL_EPISODES,
    "eval_length": LENGTHS,
    "max_iterations": Range(1, 10**6, "the search stops when no workflow is left anyway (120)"),
    "batch_workflows": Range(1, N_WORKFLOWS, "there are 120 workflows; more slots can never fill"),
    "universal_fraction": Range(0.0, 1.0, "the share of --total-episodes that trains the universal agent", float,
                                lo_open=True, hi_open=True),
    "pick_margin": Range(0.0, 1.0, "a compliance margin", float),
    "seeds_per_workflow": BATCH_RUNS,
    # ------------------------------------------------------------------------------- PlanConfig (evaluate, replay)
    "plan_particles": Range(1, 1 << 20, "engine states per env's belief; the memory check bounds them too"),
    "plan_top_k": Range(1, N_ACTIONS, "CAGE2 has 145 actions"),
    "plan_horizon": Range(0, 10_000, "steps per rollout; an episode is 100"),
    "plan_rollouts": Range(1, 1 << 20, "futures per candidate; the memory check bounds them too"),
    "plan_max_rollouts": Range(0, 1 << 20, "the adaptive rule's most futures per candidate (0: off); the memory "
                               "check bounds them too"),
    "plan_fix_candidates": Range(0, 2 * N_HOSTS, "a Remove and a Restore per host"),
    "plan_analyse_candidates": Range(0, N_HOSTS, "an Analyse per host"),
    "plan_mismatch_penalty": Range(0.0, 1000.0, "at 745 one wrong bit already weighs the smallest float; more "
                                   "overflows log-weights to inf", float, lo_open=True),
    "plan_min_fit": Range(0.0, 1.0, "a probability (the belief's fit); 0 never falls back to the greedy policy",
                          float),
    "plan_max_violation": Range(0.0, 1.0, "a probability", float),
    "plan_min_gain": Range(0.0, 1000.0, "standard errors; at 1000 nothing ever replaces the policy's choice", float),
    "plan_gamma": Range(0.0, 1.0, "a discount", float),
    "plan_value_scale": Range(0.0, 10_000.0, "1 / the agent's reward scale (10 for the shipped agents)", float),
    # ------------------------------------------------------------------------- ExpertConfig (expert-iterate)
    "rounds": Range(1, 100_000, "rounds of play-then-train; each plays and trains minutes at most"),
    "episodes_per_round": Range(1, 1_000_000, "planned episodes per round; the memory check bounds their beliefs"),
    "epochs": Range(1, 10_000, "passes over one round's decisions"),
    "minibatch": Range(1, 10**9, "decisions per gradient step"),
    "kl_coef": Range(0.0, 1e6, "a loss weight", float),
    "override_weight": Range(0.0, 1e6, "a loss weight", float),
    "keep_margin": Range(0.0, 1.0, "a share of the starting margin: 0 penalises only a flip, 1 any shrinking", float),
    "value_coef": Range(0.0, 1e6, "a loss weight", float),
    "held_out": Range(0.0, 0.9, "a share of the round's episodes; some must stay to train on", float),
    # ---------------------------------------------------------------------------- CurvesConfig (curves) and tools
    "episodes": EVAL_EPISODES,
    "native_episodes": EVAL_EPISODES,
    "shard_episodes": EVAL_EPISODES,
    "workers": WORKERS,
    # --------------------------------------------------------------------------------------------- hand-written
    "threads": Range(1, MAX_THREADS, "more than any machine has cores; torch crashes on a million"),
    "seeds": BATCH_RUNS,
    "train.eval_episodes": Range(0, MAX_EPISODES, "0 skips it; no evaluation needs more episodes"),
    "lengths": LENGTHS,
    "cyborg_episodes": EVAL_EPISODES,
    "time_limit": Range(1, 30 * 86_400, "seconds: 30 days"),
    "episode_seed": SEEDS,
    "ray_workers": WORKERS,
    "ray_cpus_per_task": Range(0.0, float(MAX_THREADS), "no machine has more cores", float, lo_open=True),
    "sizes": ENVS,
    "native_sizes": ENVS,
    "cuda_sizes": ENVS,
    "cyborg_steps": Range(1, MAX_BENCH_CYBORG_STEPS, "minutes of CybORG per cell"),
    "repeats": Range(1, MAX_BENCH_REPEATS, "the median stops moving after a few dozen"),
    "native_min_steps": Range(1, 10**10, "env-steps per timed run: minutes at the kernel's speed"),
    "replay.episodes": Range(1, MAX_REPLAY_STEPS, "a replay page holds 100,000 steps (episodes x length)"),
    "replay.length": LENGTHS,   # and --episodes x --length at most 100,000 (checks.check_replay_steps)
})
"""Every numeric setting's range, by key (see the module docstring)."""

def key(name: str, command: str | None = None) -> str:
    """The table's key of setting ``name`` (a flag's dest) of ``command``: ``command.name`` where that has its own
    entry, else ``name``; a KeyError naming the fix where neither has one."""
    if command is not None and f"{command}.{name}" in RANGES:
        return f"{command}.{name}"
    if name not in RANGES:
        raise KeyError(f"{flag(name)}{' of ' + command if command else ''} has no range: give it one in "
                       "workflow_rl/ranges.py")
    return name


def check(name: str, value, command: str | None = None, spell=flag):
    """``value`` if setting ``name`` may hold it; otherwise one ValueError naming its flag (``spell(name)``) and the
    range."""
    return RANGES[key(name, command)].check(spell(name), value)


def numeric_fields(cls) -> list[str]:
    """The fields of dataclass ``cls`` that hold numbers (``int``, ``float``, optionally ``| None`` or a list of
    them; not bool): the ones the table must bound."""
    names = []
    for name, hint in typing.get_type_hints(cls).items():
        if typing.get_origin(hint) in (typing.Union, types.UnionType):   # X | None; int | str is no number
            kinds = [a for a in typing.get_args(hint) if a is not type(None)]
            hint = kinds[0] if len(kinds) == 1 else None
        if typing.get_origin(hint) in (tuple, list):
            hint = typing.get_args(hint)[0]
        if hint in (int, float) and name in {f.name for f in dataclasses.fields(cls)}:
            names.append(name)
    return names


def check_fields(config, names=None, spell=flag, prefix: str = "", command: str | None = None) -> None:
    """Check each numeric field of ``config`` (or those ``names``) that is set (None means "decide for me") against
    the table (key ``prefix + name``, of ``command``), a list field value by value; each refusal names
    ``spell(name)``."""
    for name in numeric_fields(type(config)) if names is None else names:
        value = getattr(config, name)
        r = RANGES[key(prefix + name, command)]
        for v in value if isinstance(value, (tuple, list)) else () if value is None else (value,):
            r.check(spell(name), v)
