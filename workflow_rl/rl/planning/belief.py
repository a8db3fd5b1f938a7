"""A particle belief over the hidden CAGE2 state, the particles being native-engine states.

Blue sees 52 bits a step; the state behind them (red's sessions and knowledge, the scripted red agent's own state
machine, decoys, which red agent it is) is hidden. :class:`ParticleBelief` keeps ``n`` engine states, advances them
all with blue's actual action through the engine itself, and weights each by how well it reproduces the observation
blue actually got: weight ``exp(-mismatch_penalty * d)`` for ``d`` differing bits, so on the native engine, whose
observation is an exact function of the state and the step's draws, a particle that reproduces the observation
outweighs any that does not by ``e^penalty`` per bit, and on an engine the model matches less exactly (real CybORG) a
near miss still counts. Every update resamples (systematic) and gives every particle a fresh RNG key
(``sim.native.rekey``), so copies of one particle play independent futures; the red agent is the engine's
``red_kind`` field, drawn per particle from a prior at the start, so the belief over it is the particles' share.

When no particle reproduces the observation (they "die out"), the belief is re-seeded from the start state: fresh
particles replay blue's actions of the episode so far, filtered the same way at every step, and the re-seeded set
is kept when its best match is at least as close as the old one's.

How well the model fits is :attr:`ParticleBelief.fit`: the particles' mean likelihood of blue's last observation
before they were resampled, ``mean exp(-mismatch_penalty * d)`` -- on the native engine the share of particles that
predicted it exactly, a particle estimate of the chance of that observation given the episode so far under the
prior's attackers. A belief whose prior holds the attacker keeps some particle reproducing every observation, a fit
of 1/particles or more (B_line and Meander under ``mix``: never below 0.002 on the native engine, 0.001 -- one
particle of 1024 -- in 100 real-CybORG episodes); against an attacker outside the prior it falls to e^-penalty or
less within a few steps, re-seeding included (each family attacker under ``mix``: at step 1-33, 7 in most;
``benchmarks/results/planning/fallback/``), which is how the planner knows its model is wrong
(``planner.PlanConfig.min_fit``).

Deterministic: the same seed, actions and observations give the same particles.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workflow_rl.checks import check_seed
from workflow_rl.ranges import check
from workflow_rl.envs.native_env import red_kind_weights
from workflow_rl.sim import attackers
from workflow_rl.sim import native as sim
from workflow_rl.sim import tables as T

NEVER_ENDS = 1_000_000_000
"""The episode length particles and rollouts run with: they never truncate (blue does not know the episode's
length, and a harness may end it at 30, 50 or 100 steps)."""


@dataclass(frozen=True)
class BeliefConfig:
    """How many particles, the prior over red agents, and how hard a mismatched observation bit counts."""

    particles: int = 1024   # the planner's default (planner.PlanConfig.particles)
    red_agent: str = "mix"
    """the prior over the red agent (a name or mixture ``envs.names.red_weights`` takes); ``mix``: B_line or
    Meander, 50/50, as the shipped agent was trained."""
    mismatch_penalty: float = 10.0
    """log-weight lost per observation bit a particle gets wrong (exact match wins by e^10 per bit)."""
    official_bugs: bool = True

    def validate(self) -> BeliefConfig:
        check("plan_particles", self.particles)   # the ranges of --plan-particles and --plan-mismatch-penalty
        check("plan_mismatch_penalty", self.mismatch_penalty)
        red_kind_weights(self.red_agent)   # a ValueError naming the accepted names
        return self


class ParticleBelief:
    """A weighted set of native-engine states for one episode of one env (see the module docstring)."""

    def __init__(self, config: BeliefConfig = BeliefConfig(), seed: int = 0):
        self.config = config.validate()
        self.seed = check_seed("seed", seed)
        self.n = config.particles
        self._prior = red_kind_weights(config.red_agent)   # each episode's, until widened (:meth:`widen`)
        self.buffers = sim.allocate_buffers(self.n)
        self.episode = -1
        self.reset()

    # --------------------------------------------------------------------------------------------------- public
    def reset(self) -> None:
        """A new episode: every particle is the start state, its red agent drawn from the prior."""
        self.episode += 1
        self._episode_prior = self._prior
        self.widened_at: int | None = None   # the step :meth:`widen` re-seeded this episode at
        self.actions: list[int] = []
        self.observations: list[np.ndarray] = []
        self._draws = 0
        self.reseeds = 0
        self.state, self.access = self._start(self._stream(0))
        self.weights = np.full(self.n, 1.0 / self.n)
        self.distance = np.zeros(self.n, np.int64)
        self.fit = 1.0   # nothing observed yet: nothing the model failed to predict

    def skip_episode(self) -> None:
        """An episode this belief does not follow (played elsewhere: ``rl.evaluate.skip_part``): its count moves on,
        so the next :meth:`reset` draws the particles of the episode after it."""
        self.episode += 1

    def update(self, action: int, obs) -> None:
        """Blue took ``action`` and then saw ``obs`` (52 bits): advance, weight, resample, re-seed if dead; :attr:`fit`
        is then the kept particles' (the re-seeded set's where it is kept: its last step's)."""
        obs = np.asarray(obs, np.float32).reshape(4 * T.N_HOSTS)
        self.actions.append(int(action))
        self.observations.append(obs.copy())
        state, access, dist, fit = self._filter_step(self.state, int(action), obs)
        if dist.min() > 0:
            fresh = self._replay()
            if fresh[2].min() <= dist.min():
                state, access, dist, fit = fresh
                self.reseeds += 1
        self.state, self.access, self.distance, self.fit = state, access, dist, fit
        self.weights = np.full(self.n, 1.0 / self.n)

    def widen(self, red_agent: str) -> None:
        """Re-seed this episode's belief from the start state under another prior over red (``red_agent``, as
        :attr:`BeliefConfig.red_agent` takes it), replaying blue's actions and observations so far: the planner's
        second chance where the first prior is rejected (``planner.PlanConfig.fallback_prior``). Later re-seeds of
        the episode draw from it too; the next :meth:`reset` returns to the config's prior."""
        self._episode_prior = red_kind_weights(red_agent)
        self.widened_at = len(self.actions)
        self.state, self.access, self.distance, self.fit = self._replay()
        self.weights = np.full(self.n, 1.0 / self.n)
        self.reseeds += 1

    def sample(self, m: int, rng: np.random.Generator) -> np.ndarray:
        """Indices of ``m`` particles drawn by weight."""
        return rng.choice(self.n, size=m, p=self.weights)

    def red_posterior(self) -> np.ndarray:
        """(K,) probability of each red kind (``sim.attackers``: one per registered attacker, by kind)."""
        return np.bincount(self.state.red_kind.astype(np.int64), self.weights, attackers.n_kinds())

    def access_probs(self) -> np.ndarray:
        """(13, 3) probability of each host's red access level (none, user, privileged)."""
        out = np.zeros((T.N_HOSTS, 3))
        for level in range(3):
            out[:, level] = ((self.access == level) * self.weights[:, None]).sum(0)
        return out

    # -------------------------------------------------------------------------------------------------- helpers
    def _stream(self, k: int) -> int:
        """A seed for the ``k``-th batch of fresh keys of this episode (deterministic in the belief's seed)."""
        return int(np.random.SeedSequence([self.seed, self.episode, k]).generate_state(1, np.uint64)[0] >> 1)

    def _start(self, seed: int) -> tuple[sim.SimState, np.ndarray]:
        state = sim.allocate_state(self.n)
        sim.seed_state(state, seed, self._episode_prior)
        sim.reset_envs(state, self.buffers)
        return state, self.buffers.access.copy()

    def _filter_step(self, state: sim.SimState, action: int, obs: np.ndarray):
        """Step ``state`` (in place) with ``action``, weight by the observation, resample and re-key: the new
        (state, access, distances of the kept particles, the fit: the stepped particles' mean likelihood of ``obs``,
        every particle weighing the same before it, as every resampling leaves them)."""
        b = self.buffers
        sim.step(state, np.full(self.n, action, np.int64), b, NEVER_ENDS, self.config.official_bugs)
        dist = sim.obs_distance(b.obs, obs)
        logw = -self.config.mismatch_penalty * (dist - dist.min())
        w = np.exp(logw)
        fit = float(w.mean() * np.exp(-self.config.mismatch_penalty * dist.min()))   # underflows to 0, never NaN
        idx = _systematic(w / w.sum(), self._uniform())
        new = sim.take_state(state, idx)
        self._draws += 1
        sim.rekey(new, self._stream(self._draws))
        return new, b.access[idx].copy(), dist[idx], fit

    def _uniform(self) -> float:
        return float(np.random.default_rng([self.seed, self.episode, self._draws, 1]).random())

    def _replay(self):
        """Fresh particles from the start state filtered along the whole episode so far."""
        self._draws += 1
        state, access = self._start(self._stream(self._draws))
        dist, fit = np.zeros(self.n, np.int64), 1.0
        for a, o in zip(self.actions, self.observations):
            state, access, dist, fit = self._filter_step(state, a, o)
        return state, access, dist, fit


def _systematic(p: np.ndarray, u: float) -> np.ndarray:
    """Systematic resampling: ``len(p)`` indices, index i about ``len(p) * p[i]`` times, from one uniform ``u``."""
    n = len(p)
    c = np.cumsum(p)
    c[-1] = 1.0
    return np.searchsorted(c, (u + np.arange(n)) / n, side="right").clip(0, n - 1)
