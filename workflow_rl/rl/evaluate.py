"""Held-out evaluation on the CAGE2 protocol: returns with 95% intervals, and compliance.

Fixed seeds, fresh episodes of 30/50/100 steps against each red agent, mean and 95% confidence interval of the blue
(environment-only) return, and workflow compliance of the fixes.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field, fields
from typing import Callable

import numpy as np
import torch

from workflow_rl import anchors, seeding
from workflow_rl.checks import check_episodes
from workflow_rl.envs.factory import make_vector_env, parse_red_agent
from workflow_rl.rl.actor import ActFn, start_round
from workflow_rl.rl.compliance import ComplianceTracker
from workflow_rl.rl.envstep import TorchStepper
from workflow_rl.sim import tables
from workflow_rl.workflow import Workflow

EVAL_SEED = 20_240_601   # held out: training seeds never reach this stream (see evaluate())
CAGE2_WINNER = {cell: a.mean for cell, a in anchors.winner().items()}
"""The CAGE2 winner's published agent (CardiffUni: two PPO specialists and red fingerprinting) per cell, measured on
the CybORG we run (``workflow_rl.anchors``; the leaderboard's numbers were another CybORG)."""


ROUND_STRIDE = seeding.EVAL_ROUND_STRIDE
"""Round r of an evaluation is seeded ``seed + ROUND_STRIDE * r`` (``workflow_rl.seeding.eval_round_seed``)."""


@dataclass
class Episodes:
    """Every episode of one cell, in its seeded order: the arrays a cell's statistics are computed from
    (:func:`cell_result`), kept so that two evaluations of the same episodes can be compared episode by episode
    (``episodes.csv``, ``rl.episodes.compare``).

    Episode i was played in round ``(i * stride + offset) // round_size`` (seeded ``seed + ROUND_STRIDE * round``)
    by env ``(i * stride + offset) % round_size`` of it (that seed's stream of that index): its identity on its
    engine. :func:`evaluate_cells` deals a cell's episodes into rounds in order (stride 1, offset 0);
    :func:`evaluate_workflows` deals workflow j's episode i to place ``i * workflows + j``."""
    seed: int
    round_size: int
    returns: np.ndarray                 # (episodes,) float64: the return after the cell's length
    compliant: np.ndarray | None        # (episodes,) fix counts under the workflow; None: none was counted
    violating: np.ndarray | None
    stride: int = 1
    offset: int = 0

    def places(self) -> tuple[np.ndarray, np.ndarray]:
        """(round, env within the round) of each episode."""
        flat = np.arange(len(self.returns), dtype=np.int64) * self.stride + self.offset
        return flat // self.round_size, flat % self.round_size


@dataclass
class EvalResult:
    red_agent: str
    length: int
    episodes: int
    mean: float
    std: float
    ci95: float
    compliance: float | None
    fixes: int
    played: Episodes | None = field(default=None, repr=False, compare=False)
    """The per-episode numbers behind the statistics (not in :func:`result_dict`: a JSON report stays small)."""


def cell_result(red_agent: str, length: int, played: Episodes) -> EvalResult:
    """A cell's statistics from its episodes: mean return, sample std, normal 95% half-width, and under a workflow
    the share of compliant fixes over all its episodes' fixes. The one place they are computed, so a cell's numbers
    are those of its rows in ``episodes.csv``."""
    r = played.returns
    n = len(r)
    std = float(r.std(ddof=1)) if n > 1 else 0.0
    counted = played.compliant is not None
    comp = float(played.compliant.sum()) if counted else 0.0
    fixes = comp + float(played.violating.sum()) if counted else 0.0
    return EvalResult(red_agent, length, n, float(r.mean()) if n else float("nan"), std,
                      1.96 * std / math.sqrt(n) if n else float("nan"), comp / fixes if fixes > 0 else None,
                      int(fixes), played)


def evaluate_policy(act: ActFn, red_agent: str, length: int = 100, episodes: int = 1000, engine: str = "native",
                    seed: int = EVAL_SEED, workflow: Workflow | None = None, device: str = "cpu",
                    batch: int = 4096, **engine_options) -> EvalResult:
    """Run ``episodes`` fresh episodes of ``length`` steps (in batches of up to ``batch`` envs)."""
    return evaluate_cells(act, [red_agent], [length], episodes, engine, seed, workflow, device, batch,
                          **engine_options)[0]


def evaluate_cells(act: ActFn | dict[int, ActFn], red_agents: list[str], lengths: list[int], episodes: int = 1000,
                   engine: str = "native", seed: int = EVAL_SEED, workflow: Workflow | None = None,
                   device: str = "cpu", batch: int = 4096, workers: int | None = None,
                   deadline: float | None = None, stop: Callable[[], bool] | None = None,
                   **engine_options) -> list[EvalResult]:
    """The CAGE2 protocol's cells, red agent x length, in that order: ``episodes`` fresh episodes per red agent of
    ``max(lengths)`` steps, each cell's return being the running return after its length. ``act`` a dict {length:
    acting function}, for a policy told the episode's length (the planner): each length plays its own episodes
    (:func:`play_cells`).

    Why one episode serves every length: episodes end only by the time limit and neither engine nor policy sees the
    limit, so the first L steps of a longer episode are an L-step episode (on the native engine bit for bit: the
    counter-based streams do not depend on the length; ``tests/rl/test_evaluate_cells.py``). That cuts real CybORG's
    cost of the 30/50/100 protocol from 180 to 100 steps per episode and pairs the cells' episodes.

    Episodes run in rounds of up to ``batch`` envs (real CybORG: ``workers`` processes, default the CPU count), the
    red agents' rounds interleaved, round r seeded ``seed + 7919 r`` (``seeding.eval_round_seed``; env i of a
    round: that seed's stream i, so a round's first k envs play what a k-env round would). ``deadline`` (a
    ``time.monotonic()`` value) stops starting rounds once passed, and so does ``stop()`` returning True (a Ctrl-C):
    each cell then reports the episodes it finished (``EvalResult.episodes``; at least one round's).
    """
    check_episodes("episodes", episodes)
    reds = [parse_red_agent(r) for r in red_agents]
    n = round_size(engine, episodes, workers, batch)
    envs = {}
    played = []
    try:
        for part in round_parts(reds, episodes, n):
            if part.round > 0 and part.first and ((deadline is not None and time.monotonic() > deadline)
                                                  or (stop and stop())):
                break
            if part.red_agent not in envs:
                envs[part.red_agent] = make_vector_env(n, part.red_agent, engine=engine, episode_length=max(lengths),
                                                       device=device, seed=seed, **engine_options)
            played.append((part, play_part(envs[part.red_agent], act, seed, part, lengths, workflow, device)))
    finally:
        for env in envs.values():
            env.close()
    return gather_cells(reds, lengths, seed, n, played, workflow is not None)


@dataclass(frozen=True)
class RoundPart:
    """One red agent's part of one round of :func:`evaluate_cells`: round ``round`` (seeded
    ``seeding.eval_round_seed(seed, round)``) played against ``red_agent`` by a round's envs, of which the first
    ``take`` are kept (all but in the last round). ``first``: the round's first part (where a stop is looked at).
    A part is the unit a distributed evaluation ships (``runs.evaluate_ray``): played anywhere, on fresh envs, by
    an acting function brought to where the parts before it leave it (:func:`skip_part`), it gives what
    :func:`evaluate_cells` gives it."""
    round: int
    red_agent: str
    take: int
    first: bool = False


def round_parts(red_agents: list[str], episodes: int, n: int) -> list[RoundPart]:
    """The parts :func:`evaluate_cells` plays for ``episodes`` per red agent in rounds of ``n`` envs, in the order
    it plays them: round by round, the red agents' parts in their order within each."""
    done = {r: 0 for r in red_agents}
    parts, round_ = [], 0
    while any(done[r] < episodes for r in red_agents):
        first = True
        for red in red_agents:
            if done[red] >= episodes:
                continue
            take = min(n, episodes - done[red])
            parts.append(RoundPart(round_, red, take, first))
            done[red] += take
            first = False
        round_ += 1
    return parts


def play_part(env, act: ActFn | dict[int, ActFn], seed: int, part: RoundPart, lengths: list[int],
              workflow: Workflow | None, device: str) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Part ``part`` of an evaluation of episode seed ``seed`` played in ``env`` (its red agent's, of the round's
    envs): per length its kept envs' returns, compliant and violating fix counts (:func:`play_cells`)."""
    rank = torch.as_tensor(workflow.rank if workflow else np.arange(5), device=device)
    cols = play_cells(env, act, seeding.eval_round_seed(seed, part.round), lengths, workflow is not None, rank, device)
    return {L: tuple(c[:part.take] for c in cs) for L, cs in cols.items()}


def gather_cells(red_agents: list[str], lengths: list[int], seed: int, n: int, played: list[tuple[RoundPart, dict]],
                 counted: bool) -> list[EvalResult]:
    """The cells (red agent x length, in that order) of the parts ``played`` ((part, :func:`play_part`'s result), in
    :func:`round_parts`' order; a prefix of them where a stop cut the evaluation) of episode seed ``seed`` in rounds
    of ``n`` envs; ``counted``: a workflow's fixes were counted."""
    running = {r: {L: ([], [], []) for L in lengths} for r in red_agents}   # per length: returns, compliant, violating
    for part, cols in played:
        for L, col3 in cols.items():
            for kept, col in zip(running[part.red_agent][L], col3):
                kept.append(col)
    out = []
    for red in red_agents:
        for L in lengths:
            ret, comp, viol = (np.concatenate(c) if c else np.zeros(0) for c in running[red][L])
            out.append(cell_result(red, L, Episodes(seed, n, ret, comp if counted else None,
                                                    viol if counted else None)))
    return out


def can_skip(act: ActFn | dict[int, ActFn]) -> bool:
    """Whether :func:`skip_part` can bring ``act`` (or each of a dict's acting functions) past parts it does not
    play: it carries ``skip_episode`` (``rl.planning.planner.make_act``'s, ``scripted_act``,
    ``greedy_workflow_act``). Another (an agent class's, ``rl.interface``: its objects keep what they keep) must
    play every part itself, in order."""
    return all(callable(getattr(a, "skip_episode", None)) for a in (act.values() if isinstance(act, dict) else [act]))


def skip_part(act: ActFn | dict[int, ActFn], n: int, lengths: list[int]) -> None:
    """Bring ``act`` to where playing one part of a round of ``n`` envs (:func:`play_cells`: one episode of
    ``max(lengths)`` steps, or with a dict one of each length by its own acting function) would leave it, without
    playing it: what it carries from episode to episode (a sampled act's generator, the planner's episode count and
    belief streams) moves as though it had; so a part played after the skips of those before it plays what it plays
    in :func:`evaluate_cells`."""
    if isinstance(act, dict):
        for L in lengths:
            act[L].skip_episode(n, L)
    else:
        act.skip_episode(n, max(lengths))


def round_size(engine: str, episodes: int, workers: int | None = None, batch: int = 4096) -> int:
    """The envs :func:`evaluate_cells` plays a round with: up to ``batch``; on real CybORG one process per env, as
    many as ``workers`` (default: the CPU cores), not one per episode."""
    if engine == "cyborg":
        batch = min(batch, workers or max(1, os.cpu_count() or 1))
    return min(batch, episodes)


def play_cells(env, act: ActFn | dict[int, ActFn], seed: int, lengths: list[int], count: bool, rank: torch.Tensor,
               device: str) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """:func:`_play_round`'s per-length results. ``act`` one acting function: one episode of ``max(lengths)`` steps
    serves every length. A dict {length: acting function}: a policy that knows the episode's length acts
    differently near its end, so the first L steps of a longer episode are not its L-step episode; each length then
    plays its own episodes, from the same ``reset(seed)`` (the same episodes, paired with a one-function run's)."""
    if not isinstance(act, dict):
        return _play_round(env, act, seed, lengths, count, rank, device)
    missing = sorted(set(lengths) - set(act))
    if missing:
        raise ValueError(f"no acting function for the episode length(s) {missing}: give one per length")
    return {L: _play_round(env, act[L], seed, [L], count, rank, device)[L] for L in lengths}


def play_steps(env, act: ActFn, seed: int, steps: int, device: str = "cpu"):
    """The one episode loop of an evaluation: from ``reset(seed)`` (``act`` told the round starts there), ``steps``
    steps of ``act`` in every env of ``env``, yielding ``(t, actions, access, step)`` after each: the actions
    played, red's true access before them (a copy) and the step's outputs (:class:`~workflow_rl.rl.envstep.StepOut`;
    on the native engine views the next step overwrites). :func:`_play_round` and ``rl.behaviour`` read it."""
    stepper = TorchStepper(env, device)
    obs, access = stepper.reset(seed=seed)
    start_round(act, seed)
    for t in range(steps):
        a = act(obs, t).to(torch.int64)
        step = stepper.step(a)
        yield t, a, access, step
        obs, access = step.obs.clone(), step.access.clone()


def _play_round(env, act: ActFn, seed: int, lengths: list[int], count: bool, rank: torch.Tensor,
                device: str) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """One episode of ``max(lengths)`` steps in every env of ``env`` from ``reset(seed)``: per length, each env's
    running return and (``count``) its compliant and violating fix counts after that many steps under the type
    ranks ``rank`` ((5,), or (N, 5): each env's own workflow)."""
    tracker = ComplianceTracker(env.num_envs, device)
    ret = torch.zeros(env.num_envs, dtype=torch.float64, device=device)
    out = {}
    for t, a, access, step in play_steps(env, act, seed, max(lengths), device):
        if count:
            tracker.step(a, access, rank, 0.0)
        ret += step.reward.to(torch.float64)
        if t + 1 in lengths:
            out[t + 1] = (ret.cpu().numpy().copy(), tracker.compliant.cpu().numpy().copy(),
                          tracker.violations.cpu().numpy().copy())
    return out


def evaluate_workflows(act_for: Callable[[torch.Tensor], ActFn], workflows: list[Workflow], red_agents: list[str],
                       lengths: list[int], episodes: int = 100, engine: str = "native", seed: int = EVAL_SEED,
                       device: str = "cpu", batch: int = 4096, **engine_options) -> list[tuple[str, EvalResult]]:
    """The cells of :func:`evaluate_cells` for many workflows at once: ``episodes`` fresh episodes per workflow and
    red agent, every workflow's episodes in the same vector env, each env under its own workflow (its encoding in
    the policy input, its type ranks for compliance), instead of one evaluation per workflow.

    ``act_for(encodings)``: the acting function for a round whose envs carry ``encodings`` (N, 25). Per red agent
    the (workflow, episode) pairs are dealt round-robin over the workflows into rounds of up to ``batch`` envs,
    round r seeded ``seed + 7919 r`` as in :func:`evaluate_cells` (so each workflow's episodes are independent of
    the others' count, not paired with them). Returns (workflow codes, result) per red agent, workflow and length,
    in that order."""
    check_episodes("episodes", episodes)
    reds = [parse_red_agent(r) for r in red_agents]
    w_count = len(workflows)
    total = w_count * episodes
    n = min(batch, total)
    enc = torch.as_tensor(np.stack([w.encode() for w in workflows]), device=device)
    ranks = torch.as_tensor(np.stack([w.rank for w in workflows]), device=device)
    sums = {(r, L): np.zeros((3, w_count, episodes)) for r in reds for L in lengths}   # return, compliant, violating
    for red in reds:
        env = make_vector_env(n, red, engine=engine, episode_length=max(lengths), device=device, seed=seed,
                              **engine_options)
        try:
            for round_, start in enumerate(range(0, total, n)):
                flat = np.arange(start, start + n) % total   # a last partial round plays extra envs, not counted
                wf, ep = flat % w_count, flat // w_count
                take = min(n, total - start)
                idx = torch.as_tensor(wf, device=device)
                out = _play_round(env, act_for(enc[idx]), seeding.eval_round_seed(seed, round_), lengths, True,
                                  ranks[idx], device)
                for L, cols in out.items():
                    for i, col in enumerate(cols):
                        sums[(red, L)][i, wf[:take], ep[:take]] = col[:take]
        finally:
            env.close()
    return [(w.codes, cell_result(red, L, Episodes(seed, n, *sums[(red, L)][:, j], stride=w_count, offset=j)))
            for red in reds for j, w in enumerate(workflows) for L in lengths]


# ----------------------------------------------------------------------------------------------------- baselines
def scripted_act(name: str, seed: int = 0) -> ActFn:
    """A scripted policy from :mod:`workflow_rl.policies` as an acting function; the random one as a
    :class:`RandomAct`."""
    from workflow_rl.policies import POLICIES

    if name == "random":
        return RandomAct(seed)
    policy, rng = POLICIES[name], np.random.default_rng(seed)

    def act(obs: torch.Tensor, t: int) -> torch.Tensor:
        return torch.as_tensor(policy(t, obs.cpu().numpy(), rng), device=obs.device)

    def skip_episode(n: int, steps: int) -> None:
        """An episode of ``n`` envs not played (``skip_part``): the draws it would have made (none of the scripted
        policies draws but ``random``, a :class:`RandomAct`; one that did would draw by the batch's size, not by what
        it sees, so blank observations draw the same numbers)."""
        blank = np.zeros((n, 4 * tables.N_HOSTS), np.float32)
        for t in range(steps):
            policy(t, blank, rng)

    act.skip_episode = skip_episode
    return act


class RandomAct:
    """The random baseline (a uniform action each step) as an acting function whose draws belong to the episode:
    env i of the round reset with seed R draws its step-t action from (``seed``, R, i, t) alone
    (``seeding.random_actions``). So an episode is played alike in a one-round evaluation, in round r of a longer
    one and in the part that ``evaluate --after`` plays of it, and the parts of an evaluation ``join`` into the
    evaluation of all their episodes, as a greedy agent's do: the random baseline acts one way whatever the mode,
    its cells are labelled greedy, and a draw shared across the rounds of one process (it was: one numpy generator)
    made every part differ from the single run. The harness calls :meth:`start_round` at each round's reset
    (``rl.actor.start_round``); before it, R is ``seed``."""

    def __init__(self, seed: int = 0):
        self.seed = seed
        self.start_round(seed)

    def start_round(self, round_seed: int) -> None:
        self.key = seeding.random_act_key(self.seed, round_seed)

    def __call__(self, obs: torch.Tensor, t: int) -> torch.Tensor:
        return torch.as_tensor(seeding.random_actions(self.key, len(obs), t, tables.N_ACTIONS), device=obs.device)

    def skip_episode(self, n: int, steps: int) -> None:
        """An episode not played (``skip_part``): nothing to bring along, each round's draws are its own."""


def greedy_workflow_act(workflow: Workflow) -> ActFn:
    """The origin system's greedy workflow heuristic, on what blue can see: Restore the visibly compromised host
    (Compromised = User or Privileged) whose unit type ranks first in the workflow (lowest host index on ties),
    otherwise Sleep. User0 is skipped: its foothold cannot be cleared."""
    host_rank = torch.as_tensor(workflow.host_rank())

    def act(obs: torch.Tensor, t: int) -> torch.Tensor:
        bits = obs.reshape(obs.shape[0], tables.N_HOSTS, 4) > 0.5
        flagged = bits[..., 3]
        flagged[:, tables.USER0] = False
        score = torch.where(flagged, host_rank.to(obs.device) * tables.N_HOSTS + torch.arange(tables.N_HOSTS,
                                                                                       device=obs.device), 10_000)
        h = score.argmin(1)
        return torch.where(flagged.any(1), tables.A_RESTORE + h, torch.zeros_like(h))

    act.skip_episode = lambda n, steps: None   # it keeps nothing from episode to episode (``skip_part``)
    return act


def across_seeds(values: list[float]) -> dict:
    """Mean, sample std and 95% Student-t interval half-width of per-seed results (the seeds are the samples; the
    half-width is NaN for one seed)."""
    from scipy import stats

    v = np.asarray(values, float)
    std = float(v.std(ddof=1)) if len(v) > 1 else 0.0
    half = float(stats.t.ppf(0.975, len(v) - 1) * std / np.sqrt(len(v))) if len(v) > 1 else float("nan")
    return {"n": len(v), "mean": float(v.mean()), "std": std, "ci95": half, "values": v.tolist()}


def result_dict(r: EvalResult) -> dict:
    """A cell's statistics as a JSON-ready dict (its per-episode numbers left out: they go to ``episodes.csv``)."""
    return {f.name: getattr(r, f.name) for f in fields(r) if f.name != "played"}
