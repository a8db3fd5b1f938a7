"""What a defender does, and where its return goes: blue's actions and the parts of its return, per episode.

A return says how well a defender did, not why. Two agents 14 points apart against the same attacker (the held-out
protocol's UserHopper: its specialist and the general agents) may lose their points to Restores they pay for, to
hosts red keeps, or to Impact; and they get there by different actions. A CAGE2 step's reward is the sum of three
parts (``sim.rules._step_env``), each exact in tenths:

- **restore**: -1 for each Restore blue plays;
- **access**: each host red holds with privileged access after the step costs its confidentiality value
  (``sim.tables.CONF_TENTHS``: -1 the Enterprise hosts and Op_Server0, -0.1 the other hosts but User0, 0 User0);
- **impact**: -10 each step OTService is down on Op_Server0 (what is left: return - restore - access).

:func:`profile` plays the episodes an evaluation of the same seed plays (``rl.evaluate.evaluate_cells``: round r
seeded ``seeding.eval_round_seed(seed, r)``, env i that seed's stream i), so its returns are the evaluation's, episode
for episode, and a profile is read beside the evaluation's ``episodes.csv`` (``workflow-rl compare`` pairs those).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from workflow_rl import seeding
from workflow_rl.checks import check_episode_length, check_episodes
from workflow_rl.envs.factory import make_vector_env, parse_red_agent
from workflow_rl.rl.actor import ActFn
from workflow_rl.rl.evaluate import EVAL_SEED, Episodes, cell_result, play_steps, round_parts, round_size
from workflow_rl.sim import tables as T

KINDS = ("Sleep", "Monitor", "Analyse", "Remove", "Decoy", "Restore")
"""Blue's action kinds, in action-index order (a Decoy of any of the eight services is one kind)."""
PARTS = ("restore", "access", "impact")


def action_kind(action: int) -> int:
    """The :data:`KINDS` index of blue action ``action`` (0..144)."""
    a = int(action)
    if a <= T.A_MONITOR:
        return a
    return 2 + sum(a >= b for b in (T.A_REMOVE, T.A_DECOY, T.A_RESTORE))


_KIND_OF = np.array([action_kind(a) for a in range(T.N_ACTIONS)])
_HOST_OF = np.array([T.blue_action_host(a) for a in range(T.N_ACTIONS)])


@dataclass(frozen=True)
class Profile:
    """``episodes`` episodes of ``length`` steps of one defender against ``red_agent`` (episode seed ``seed``)."""

    red_agent: str
    length: int
    seed: int
    returns: np.ndarray
    """(E,) float64: each episode's return (the evaluation's)"""
    actions: np.ndarray
    """(E, 145) int32: how often each episode played each blue action"""
    held: np.ndarray
    """(E, 13) int32: the steps of each episode after which red held privileged access to each host"""
    clean_restores: np.ndarray
    """(E,) int32: each episode's Restores of a host red had no foothold on (no access at all, not even a user's)
    when blue played them: a cost that took nothing from red (a Restore also clears the host's decoys)"""

    @property
    def episodes(self) -> int:
        return len(self.returns)

    def parts(self) -> dict[str, np.ndarray]:
        """Each episode's return split into :data:`PARTS` ((E,) float64 each; they sum to ``returns``)."""
        total = np.rint(self.returns * 10).astype(np.int64)
        restore = -T.RESTORE_COST_TENTHS * self.actions[:, T.A_RESTORE:].sum(1).astype(np.int64)
        access = -(self.held.astype(np.int64) @ T.CONF_TENTHS.astype(np.int64))
        impact = total - restore - access
        if ((impact > 0) | (impact % T.IMPACT_PENALTY_TENTHS != 0)).any():   # what is left must be whole Impacts
            raise ValueError("the returns are not Restores, access and Impact alone: were they played by rl.behaviour "
                             "on an engine with CAGE2's reward?")
        return {"restore": restore / 10, "access": access / 10, "impact": impact / 10}

    def kinds(self) -> np.ndarray:
        """(E, 6): each episode's count of each of :data:`KINDS`."""
        out = np.zeros((self.episodes, len(KINDS)), np.int64)
        for k in range(len(KINDS)):
            out[:, k] = self.actions[:, _KIND_OF == k].sum(1)
        return out

    def repeated_decoys(self) -> np.ndarray:
        """(E,): each episode's Decoys that repeat one it already placed (same service, same host): they do
        nothing (the decoy's port is taken), and blue's observation does not show which decoys are in place."""
        return np.clip(self.actions[:, T.A_DECOY:T.A_RESTORE].astype(np.int64) - 1, 0, None).sum(1)

    def by_host(self, kind: str) -> np.ndarray:
        """(E, 13): each episode's count of actions of ``kind`` (one of :data:`KINDS` but Sleep and Monitor) on
        each host."""
        if kind not in KINDS[2:]:
            raise ValueError(f"kind must be one of {', '.join(KINDS[2:])}, got {kind!r}")
        k = KINDS.index(kind)
        out = np.zeros((self.episodes, T.N_HOSTS), np.int64)
        for h in range(T.N_HOSTS):
            out[:, h] = self.actions[:, (_KIND_OF == k) & (_HOST_OF == h)].sum(1)
        return out


def profile(act: ActFn, red_agent: str, episodes: int = 500, length: int = 100, seed: int = EVAL_SEED,
            engine: str = "native", batch: int = 4096, workers: int | None = None, **engine_options) -> Profile:
    """Play ``episodes`` episodes of ``length`` steps of ``act`` against ``red_agent`` (one attacker or a mixture),
    the episodes ``evaluate_cells`` plays for the same seed, ``batch`` and (real CybORG) ``workers``, and record
    each one's blue actions and red's privileged access per host after each step (``info["red_access"]``). The envs
    run ``length + 1`` steps an episode so that the last step's access is that episode's, not the next one's (the
    first L steps of a longer episode are the L-step episode: neither engine nor policy sees the limit)."""
    check_episodes("episodes", episodes)
    check_episode_length("length", length)
    red = parse_red_agent(red_agent)
    n = round_size(engine, episodes, workers, batch)
    env = make_vector_env(n, red, engine=engine, episode_length=length + 1, seed=seed, **engine_options)
    rounds = []
    try:
        for part in round_parts([red], episodes, n):
            rounds.append([x[:part.take] for x in _play(env, act, seeding.eval_round_seed(seed, part.round), length)])
    finally:
        env.close()
    return Profile(red, length, seed, *(np.concatenate(cols) for cols in zip(*rounds)))


def _play(env, act: ActFn, seed: int, length: int) -> tuple[np.ndarray, ...]:
    """One episode of ``length`` steps in every env from ``reset(seed)``: returns, action counts, held steps, clean
    Restores (:class:`Profile`'s fields in order)."""
    n = env.num_envs
    ret = torch.zeros(n, dtype=torch.float64)
    counts = torch.zeros(n, T.N_ACTIONS, dtype=torch.int32)
    held = torch.zeros(n, T.N_HOSTS, dtype=torch.int32)
    clean = torch.zeros(n, dtype=torch.int32)
    ones = torch.ones(n, 1, dtype=torch.int32)
    for _, a, access, step in play_steps(env, act, seed, length):
        counts.scatter_add_(1, a[:, None], ones)
        host = (a - T.A_RESTORE).clamp(min=0)
        clean += ((a >= T.A_RESTORE) & (access.gather(1, host[:, None])[:, 0] == T.ACCESS_NONE)).to(torch.int32)
        ret += step.reward.to(torch.float64)
        held += (step.access == T.ACCESS_PRIVILEGED).to(torch.int32)
    return ret.numpy(), counts.numpy(), held.numpy(), clean.numpy()


def summary(p: Profile) -> dict:
    """``p`` as JSON-ready means per episode with 95% intervals (normal, over the episodes, as an evaluation's
    cells: ``rl.evaluate.cell_result``): the return and its parts, each action kind, and per host the Restores and
    Decoys blue played and the steps red held it."""
    def mean_ci(x: np.ndarray) -> dict:
        c = cell_result(p.red_agent, p.length, Episodes(p.seed, p.episodes, np.asarray(x, np.float64), None, None))
        return {"mean": round(c.mean, 4), "ci95": round(c.ci95, 4)}

    kinds = p.kinds()
    return {
        "red_agent": p.red_agent, "length": p.length, "seed": p.seed, "episodes": p.episodes,
        "return": mean_ci(p.returns),
        "parts": {k: mean_ci(v) for k, v in p.parts().items()},
        "kinds": {k: mean_ci(kinds[:, i]) for i, k in enumerate(KINDS)},
        "repeated_decoys": mean_ci(p.repeated_decoys()),
        "clean_restores": mean_ci(p.clean_restores),
        "restores": {T.HOSTS[h]: round(float(c), 3) for h, c in enumerate(p.by_host("Restore").mean(0))},
        "decoys": {T.HOSTS[h]: round(float(c), 3) for h, c in enumerate(p.by_host("Decoy").mean(0))},
        "red_held": {T.HOSTS[h]: round(float(c), 3) for h, c in enumerate(p.held.mean(0))},
    }


__all__ = ["KINDS", "PARTS", "Profile", "action_kind", "profile", "summary"]
