"""Decision-time planning with the native engine as the model, and one acting function for any shipped agent.

At each step blue's belief (:class:`workflow_rl.rl.planning.belief.ParticleBelief`, engine states weighted by the real
observations) is the root. For the policy's ``top_k`` actions the planner plays ``rollouts`` futures of ``horizon``
steps each: a particle drawn from the belief, the candidate action, then the policy itself (greedy) as the default
policy, all ``top_k x rollouts`` futures as one batch of engine envs stepped together. The candidate with the best
mean return is taken; under a workflow, among the candidates whose chance of being a compliance violation
(``rl.compliance``: a fix whose host is not of the first compromised unit type, in the particle's true state) is at
most ``max_violation``. Every candidate is scored on the same particles with the same RNG keys (common random
numbers), so their difference is not blurred by red's dice.

The planner knows when its model is wrong: where blue's observation is unlikely under every attacker the belief's
prior holds (its fit, ``ParticleBelief.fit``, below ``min_fit`` after the belief has tried re-seeding), the belief is
re-seeded once under a wider prior (``fallback_prior``), and where that too is rejected the planned ``act`` plays the
greedy policy's own action for the rest of that env's episode instead of trusting rollouts of an attacker that is
not there (``PlanConfig.observe``).

:func:`make_act` is the one acting API: ``act(obs, t)`` for a shipped agent, a checkpoint or a loaded agent, greedy,
sampled or planned, that any harness -- the native engine's evaluation, real CybORG, a user's own loop -- drives step
by step: it is told only what blue sees, so the environment is whatever calls it, and the native engine is only the
planner's model.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch

from workflow_rl import seeding
from workflow_rl.checks import check_bool, check_episode_length, check_int, check_seed, check_types

from workflow_rl.ranges import check_fields
from workflow_rl.resources import check_memory
from workflow_rl.rl.planning.belief import NEVER_ENDS, BeliefConfig, ParticleBelief
from workflow_rl.envs.factory import engine_bytes_per_env
from workflow_rl.envs.native_env import cuda_engine, red_kind_weights
from workflow_rl.rl.compliance import classify_fixes
from workflow_rl.rl.config import check_choices, one_of
from workflow_rl.rl.memory import MASKED
from workflow_rl.rl.ppo import N_ACTIONS, WORKFLOW_DIM, Agent
from workflow_rl.rl.actor import ActFn, Actor
from workflow_rl.sim import attackers
from workflow_rl.sim import native as sim
from workflow_rl.sim import tables as T
from workflow_rl.workflow import Workflow

WIDE_PRIOR = ",".join(f"{name}:1" for name in (*attackers.cage2(attacking=True), *attackers.family()))
"""CAGE2's two attackers and the family's six (``sim.attackers``), equal odds: :attr:`PlanConfig.fallback_prior`'s
default."""

POLICY_ROW_BYTES = 4096
"""Bytes of one rollout env's pass through the policy: its input (up to 208 float32), two 256-wide hidden layers
and 145 logits, rounded up (the shipped agents' sizes; the planner's estimate does not see the agent's)."""


@dataclass(frozen=True)
class PlanConfig:
    """The planner's settings; each is a flag of ``workflow-rl evaluate --plan`` (``--plan-particles`` ...)."""

    particles: int = 1024
    """engine states in the belief. 1024 since issue U (256 before): a 256-particle belief now and then loses red's
    true access on a host, and planning on it can go far wrong (Meander 100: 1024 gains +1.54 ± 0.56 over greedy
    where 256 lost -0.96 ± 2.44), at the same 11-13 ms a decision; more than 1024 adds nothing measurable
    (benchmarks/results/planning/README.md, "Issue U")."""
    top_k: int = 3
    """candidate actions: the policy's k most likely (1, without fix candidates: no search, the greedy policy).
    Measured with the episode length known (Meander, first 100 evaluation episodes, 100 steps): 5 gains +0.79 ±
    0.45 over greedy against 3's +0.65 ± 0.39 (paired 5 - 3: +0.13 ± 0.23) at 15.5 ms instead of 11 -- not kept."""
    horizon: int = 25
    """steps per rollout, the candidate's own step included (0: no search). Measured with the true state as the
    one particle (Meander, 24 paired 100-step episodes, benchmarks/results/planning/README.md): 1-3 steps lose to
    the greedy policy, 10 ties it, 25 gains about a point; with the belief, 40 chooses as 25 does."""
    rollouts: int = 8
    """futures per candidate, each from a particle drawn from the belief (the same ones for every candidate). 16
    gains nothing measurable over 8 at 1.4x the time (benchmarks/results/planning/README.md)."""
    fix_candidates: int = 2
    """also try up to this many fixes the belief points at, beside the policy's top-k: Remove on a host where red
    most likely holds a user session, Restore where a privileged one (probability at least 1/2; not User0, red's
    foothold); those already among the top-k cost nothing. 0: the policy's candidates only. 2 against 0: no cell
    worse, Meander 100 +0.36 ± 0.20 (benchmarks/results/planning/README.md)."""
    analyse_candidates: int = 0
    """also try Analyse on up to this many hosts where the belief is most split on whether red is there (its
    probability of any access nearest 1/2, within [0.2, 0.8]; not User0): the one candidate whose worth is what it
    reveals, which the rollouts see when the policy acts on the particle's own observation after it. 0: none. Off
    by default: 1 gains +0.04 ± 0.04 on Meander 100 (benchmarks/results/planning/README.md)."""
    max_rollouts: int = 0
    """adaptive rollouts: when above ``rollouts``, a candidate still undecided after its futures -- its mean gain
    over the policy's choice above minus one standard error but not above ``min_gain`` of them -- gets ``rollouts``
    more (on freshly drawn particles, paired with as many more of the policy's choice), until every candidate is
    decided or has ``max_rollouts``. 0 (or at most ``rollouts``): a fixed ``rollouts`` per candidate; off by
    default: where candidates stay undecided the belief itself is split (benchmarks/results/planning/README.md)."""
    red_agent: str = "mix"
    """the belief's prior over the red agent (``envs.names.red_weights``: a name, ``mix``, ``family`` or
    ``NAME:W,...`` of any registered attackers). ``mix`` (B_line or Meander), as the shipped agent was trained: B_line
    and Meander then play exactly as measured on real CybORG (Meander 100: +1.19 over greedy); the family comes in
    through ``fallback_prior`` only where ``mix`` is rejected, and an attacker that neither holds meets the greedy
    fallback (``min_fit``), which needs no model of it (issue Y's held-out attackers)."""
    mismatch_penalty: float = 10.0
    """log-weight a particle loses per observation bit it gets wrong."""
    min_fit: float = 1e-4
    """the fallback: once the belief's fit (``ParticleBelief.fit``: its particles' mean likelihood of blue's
    observation, re-seeding tried) falls below this, the model is rejected: the belief is re-seeded once under
    ``fallback_prior``, and where that too is rejected the env plays the greedy policy's own action for the rest of
    its episode (0: never). Below 1 / --plan-particles (a single particle reproducing the observation) and above
    e^-penalty (every one a bit off), so at the defaults it rejects exactly when no particle, even re-seeded,
    reproduces what blue saw: under ``mix`` against B_line and Meander that never happened (30 planned native and 50
    greedy real-CybORG episodes each), against each family attacker it happened at step 1-33 (7 in most). For
    the episode, not the step: a wrong model's survivors can fit a quiet step again, switching between the
    planner's plan and the policy's breaks both, and a rejected belief re-seeds (replays its episode) nearly every
    step (benchmarks/results/planning/fallback/README.md)."""
    fallback_prior: str = WIDE_PRIOR
    """a wider prior over red to re-seed the belief with, once, where ``red_agent``'s is rejected (a name or
    mixture as ``red_agent`` takes); planning goes on while it fits, and the greedy policy takes over where it too
    is rejected. '' (none): straight to the greedy policy. Default :data:`WIDE_PRIOR`, every registered attacker
    of CAGE2 and of the family: B_line and Meander play exactly as under ``red_agent`` alone (never rejected), and
    an attacker the wider prior holds is planned against instead of played greedy (benchmarks/results/planning/
    fallback/README.md)."""
    max_violation: float = 0.05
    """under a workflow: the most chance of a compliance violation a candidate may have."""
    min_gain: float = 2.0
    """a candidate replaces the policy's own first choice only when its mean return beats it by more than this many
    standard errors of their paired difference (0: by any amount): near-equal candidates (two decoys whose payoff
    lies beyond the horizon) differ by noise, and switching on noise breaks the policy's own plan. 1 and 0 gain
    nothing measurable over 2 (benchmarks/results/planning/README.md)."""
    gamma: float = 0.99
    """the rollouts' discount (the agent's own, PPO's --gamma): their return is sum gamma^h r_h (plus gamma^horizon
    times the critic's value with ``value_scale``)."""
    value_scale: float = 0.0
    """add the critic's value of the rollout's last state, times this: the environment reward per unit of value, 1 /
    the agent's --reward-scale (10 for the shipped agents). 0, the default: rollout rewards only -- the shipped
    critic misjudges states off its own policy's path (1-step rollouts plus its value lost 23 points on Meander)."""
    device: str = one_of("cpu", ("cpu", "cuda"))
    """where the rollouts run: 'cpu' (the engine's CPU kernel and the policy, on one core) or 'cuda' (the engine's
    CUDA kernel and a GPU copy of the policy: thousands of rollouts a decision, so raise --plan-rollouts); the belief
    stays on the CPU. The two choose alike (one rule source, one counter-based RNG; the policy's float rounding on a
    GPU may differ in the last bits: tests/rl/planning/test_planner_cuda.py); the cost of a decision on a GPU is
    measured by benchmarks/device/gpu_check.py's planner stage."""

    def validate(self) -> PlanConfig:
        """This config, or one ValueError naming the flag and the fix."""
        check_types(self, lambda f: "--plan-" + f.replace("_", "-"))
        check_fields(self, spell=lambda f: "--plan-" + f.replace("_", "-"), prefix="plan_")   # workflow_rl/ranges.py
        check_choices(self, lambda f: "--plan-" + f.replace("_", "-"))
        if self.device == "cuda":
            try:
                cuda_engine()   # numba-cuda and a GPU it can use
            except ValueError as e:
                why = str(e).removeprefix("device='cuda'").lstrip(": ")
                raise ValueError(f"--plan-device cuda: {why}") from None
        self.belief().validate()
        if self.fallback_prior:
            try:
                red_kind_weights(self.fallback_prior)
            except ValueError as e:
                raise ValueError(f"--plan-fallback-prior: {e}") from None
        self.check_memory(1)
        return self

    def memory_bytes(self, envs: int = 1) -> int:
        """Bytes planning ``envs`` envs at once holds, estimated from the settings alone: each env's belief, its
        particles' engine states about three times over (the particles, their filtered copy, a re-seeded set:
        ``planning.belief``), plus the one rollout batch all decisions share: (top-k + fix + analyse candidates) x
        rollouts engine envs, their drawn states and step buffers, and a policy row each (:data:`POLICY_ROW_BYTES`).
        Each setting has its own range, but their product can still be terabytes."""
        engine = engine_bytes_per_env()
        batch = (self.top_k + self.fix_candidates + self.analyse_candidates) * max(self.rollouts, self.max_rollouts)
        return envs * 3 * self.particles * engine + batch * (2 * engine + POLICY_ROW_BYTES)

    def check_memory(self, envs: int) -> None:
        """Refuse settings (and a batch of ``envs`` envs) whose planner would not fit in memory, naming the
        settings that cost the most."""
        beliefs = envs * 3 * self.particles * engine_bytes_per_env()
        fix = ("lower --plan-particles" + (" or plan fewer envs at once" if envs > 1 else "")
               if beliefs > self.memory_bytes(envs) - beliefs else "lower --plan-rollouts or --plan-top-k")
        what = (f"planning with --plan-particles {self.particles:,}, --plan-rollouts {self.rollouts:,} x (--plan-top-k "
                f"{self.top_k} + --plan-fix-candidates {self.fix_candidates}) candidates"
                + (f" for {envs:,} envs at once" if envs > 1 else ""))
        check_memory(what, self.memory_bytes(envs), fix)

    def belief(self, official_bugs: bool = True) -> BeliefConfig:
        """The belief these settings give, its particles stepped with CybORG's ``official_bugs`` or without them:
        pass the planner's own setting (:class:`Planner`), so the belief's model and the rollouts' are one engine."""
        return BeliefConfig(self.particles, self.red_agent, self.mismatch_penalty, official_bugs)

    def rejects(self, belief: ParticleBelief) -> bool:
        """Whether ``belief``'s model is rejected: its fit below :attr:`min_fit`."""
        return belief.fit < self.min_fit

    def observe(self, belief: ParticleBelief, action: int, obs) -> bool:
        """Tell ``belief`` blue took ``action`` and saw ``obs``, with the fallback's rule: a rejected model is
        re-seeded once under :attr:`fallback_prior` (``ParticleBelief.widen``). Returns whether it is rejected for
        good: the env then plays the greedy policy for the rest of its episode and the belief is told no more (it
        would re-seed every step). The one rule of the planned ``act`` and of expert iteration's play."""
        belief.update(action, obs)
        if self.rejects(belief) and self.fallback_prior and belief.widened_at is None:
            belief.widen(self.fallback_prior)
        return self.rejects(belief)


@dataclass
class Decision:
    """What one planned step found: the candidates (policy order), their mean returns and violation chances."""

    action: int
    candidates: np.ndarray
    returns: np.ndarray
    violation: np.ndarray


class Planner:
    """Rollout planning for one agent (see the module docstring); holds the rollout batch's buffers."""

    def __init__(self, agent, workflow: Workflow | None, config: PlanConfig = PlanConfig(), seed: int = 0,
                 official_bugs: bool = True):
        self.config = config.validate()
        self.actor = Actor.of(on_cpu(agent), workflow)   # the policy it plans with, on the CPU
        self.engine = cuda_engine() if config.device == "cuda" else None   # the rollouts' engine: None, the CPU's
        self.rollout_actor = self.actor if self.engine is None or not torch.cuda.is_available() else Actor.of(
            copy.deepcopy(self.actor.agent).to("cuda"), workflow)   # (torch without CUDA: numba's simulator, tests)
        self.seed = check_seed("seed", seed)
        self.official_bugs = official_bugs
        self.rank = torch.as_tensor(workflow.rank) if workflow else None
        self.buffers = {}   # rollout buffers by batch size (the candidates' count varies with fix_candidates)
        self.decisions = 0

    def choose(self, particles: sim.SimState, access: np.ndarray, weights: np.ndarray, x: torch.Tensor,
               mem: torch.Tensor | None, stream: tuple[int, ...] | None = None,
               steps_left: int | None = None) -> Decision:
        """The action for policy input ``x`` (1, D) with episode memory ``mem`` (1, M) or None, given particles
        (a SimState), their true red access (n, 13) and weights (n,). ``stream`` (e.g. env, episode, step) names
        the draws of this decision; by default, the planner's count of decisions. ``steps_left``: the steps the
        episode has left, this one included, when the harness says (None: unknown); rollouts then stop at the
        episode's end (horizon ``min(horizon, steps_left)``), so candidates are compared on the reward that counts
        and not on steps a 30-step episode never plays."""
        cfg = self.config
        horizon = cfg.horizon if steps_left is None else min(cfg.horizon, check_int("steps_left", steps_left, 1))
        logits = self.actor.logits(x)[0]
        k = min(cfg.top_k, int((logits > MASKED / 2).sum()))   # never a masked (impossible) decoy
        cands = torch.topk(logits, k).indices.numpy()
        if cfg.fix_candidates:
            extra = [a for a in fix_candidates(access, weights, cfg.fix_candidates + k) if a not in cands]
            cands = np.concatenate([cands, np.asarray(extra[:cfg.fix_candidates], np.int64)])
            k = len(cands)
        if cfg.analyse_candidates:
            extra = [a for a in analyse_candidates(access, weights, cfg.analyse_candidates + k) if a not in cands]
            cands = np.concatenate([cands, np.asarray(extra[:cfg.analyse_candidates], np.int64)])
            k = len(cands)
        if k == 1 or horizon == 0:
            return Decision(int(cands[0]), cands, np.zeros(k), np.zeros(k))
        rng = np.random.default_rng([self.seed, *(stream if stream is not None else (self.decisions,))])
        self.decisions += 1
        r = cfg.rollouts
        ends = steps_left is not None and steps_left <= cfg.horizon   # the rollout ends where the episode does
        p = weights / weights.sum()

        def futures(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            """``r`` more returns for each candidate of ``rows`` (their indices), on fresh particles and keys shared
            by every row (common random numbers); and the particles drawn."""
            idx = rng.choice(len(weights), size=r, p=p)
            state = sim.take_state(particles, np.tile(idx, len(rows)))
            state.key[:] = np.tile(sim.env_keys(int(rng.integers(1 << 62)), r), len(rows))
            first = np.repeat(cands[rows], r).astype(np.int64)
            return self.rollout(state, first, mem, horizon, bootstrap=not ends).reshape(len(rows), r), idx

        per, idx = futures(np.arange(k))
        per, drawn = [list(row) for row in per], [idx] * k
        undecided = np.ones(k, bool)
        while True:
            gain = [np.asarray(per[i]) - np.asarray(per[0][:len(per[i])]) for i in range(k)]
            mean = np.array([g.mean() for g in gain])
            se = np.array([g.std(ddof=1) / np.sqrt(len(g)) if len(g) > 1 else 0.0 for g in gain])
            better = mean > cfg.min_gain * se   # the policy's choice, row 0, is never "better" than itself
            undecided &= (se > 0) & ~better & (mean > -se) & (np.array([len(x) for x in per]) < cfg.max_rollouts)
            undecided[0] = False
            if not undecided.any():
                break
            rows = np.concatenate([[0], np.flatnonzero(undecided)])
            more, idx = futures(rows)
            for j, i in enumerate(rows):   # row 0's new futures pair with each undecided row's (same particles, keys):
                per[i].extend(more[j])     # the undecided only shrink, so each has as many as row 0
                drawn[i] = np.concatenate([drawn[i], idx])
        returns = np.array([np.mean(x) for x in per])
        violation = np.zeros(k)
        if self.rank is not None:
            for i in range(k):
                _, viol, _ = classify_fixes(torch.full((len(drawn[i]),), int(cands[i]), dtype=torch.int64),
                                            torch.as_tensor(access[drawn[i]]), self.rank)
                violation[i] = viol.to(torch.float64).mean().item()
        allowed = violation <= cfg.max_violation
        if not allowed.any():
            allowed = violation == violation.min()
        keep = allowed & (better | (np.arange(k) == 0)) if allowed[0] else allowed
        best = int(np.argmax(np.where(keep, returns, -np.inf)))   # first of equals: the policy's order
        return Decision(int(cands[best]), cands, returns, violation)

    def rollout(self, state: sim.SimState, first: np.ndarray, mem: torch.Tensor | None, horizon: int,
                bootstrap: bool = True) -> np.ndarray:
        """Return of each env of ``state`` (stepped in place): ``first`` actions, then the greedy policy for
        ``horizon - 1`` steps, the episode memory starting from ``mem``; plus the critic's value of the last state
        (``value_scale``) when ``bootstrap`` (not when the rollout ends where the episode does)."""
        n = len(first)
        actor, cfg = self.rollout_actor, self.config
        if self.engine is None:
            b = self.buffers.get(n) or self.buffers.setdefault(n, sim.allocate_buffers(n))
        else:
            state = self.engine.to_device(state, layout="C")
            b = self.buffers.get(n) or self.buffers.setdefault(n, self.engine.to_device(sim.allocate_buffers(n),
                                                                                        layout="C"))
        m = None if mem is None else mem.to(actor.device).expand(n, -1).clone()
        a = torch.as_tensor(first, device=actor.device)
        ret, discount = torch.zeros(n, dtype=torch.float64, device=actor.device), 1.0
        for h in range(horizon):
            if h:
                a = actor.greedy(actor.inputs(_tensor(b.obs, actor.device), m))
            actor.took(m, a)
            if self.engine is None:
                sim.step(state, a.numpy(), b, NEVER_ENDS, self.official_bugs)
            else:
                self.engine.step(state, _device_array(a), b, NEVER_ENDS, self.official_bugs)
            ret += discount * _tensor(b.reward, actor.device)   # the product in float32, as the engine's reward
            discount *= cfg.gamma
        if cfg.value_scale > 0 and bootstrap:
            with torch.no_grad():
                ret += discount * cfg.value_scale * actor.value(actor.inputs(_tensor(b.obs, actor.device), m))
        return ret.cpu().numpy()


def _tensor(array, device: torch.device) -> torch.Tensor:
    """An engine output as a tensor on ``device``: a numpy array as it is, a GPU array without a copy where the
    policy is on the GPU too (``__cuda_array_interface__``), else copied to the host."""
    if isinstance(array, np.ndarray):
        return torch.from_numpy(array)
    return torch.as_tensor(array, device=device) if device.type == "cuda" else torch.from_numpy(array.copy_to_host())


def _device_array(a: torch.Tensor):
    """Actions (n,) int64 as the CUDA kernel reads them: a view of a GPU tensor, or a copy of a CPU one."""
    from numba import cuda

    return cuda.as_cuda_array(a) if a.is_cuda else cuda.to_device(a.numpy())


def fix_candidates(access: np.ndarray, weights: np.ndarray, m: int) -> list[int]:
    """Up to ``m`` fixes, most likely needed first, for particles' red access (n, 13) with ``weights`` (n,): Remove
    host h for a user session (level 1), Restore h for a privileged one (2), each whose probability is at least 1/2;
    never on User0, where red starts with privileges in every particle."""
    w = weights / weights.sum()
    p_user, p_priv = w @ (access == 1), w @ (access == 2)
    hosts = [h for h in range(T.N_HOSTS) if h != T.USER0]
    scored = [(p_user[h], T.A_REMOVE + h) for h in hosts] + [(p_priv[h], T.A_RESTORE + h) for h in hosts]
    scored = [(p, a) for p, a in scored if p >= 0.5]
    return [a for _, a in sorted(scored, key=lambda pa: (-pa[0], pa[1]))[:m]]


def analyse_candidates(access: np.ndarray, weights: np.ndarray, m: int) -> list[int]:
    """Up to ``m`` Analyse actions, most split first, for particles' red access (n, 13) with ``weights`` (n,): the
    hosts whose probability of any red access is within [0.2, 0.8], nearest 1/2 first; never User0."""
    w = weights / weights.sum()
    p_any = w @ (access > 0)
    hosts = [h for h in range(T.N_HOSTS) if h != T.USER0 and 0.2 <= p_any[h] <= 0.8]
    return [T.A_ANALYSE + h for h in sorted(hosts, key=lambda h: (abs(p_any[h] - 0.5), h))[:m]]


def on_cpu(agent):
    """``agent`` if it is on the CPU, else a CPU copy of it (the caller's agent stays where it is). The planner's
    belief and root choice compute on the CPU: its particles are numpy arrays, and it calls the network on one
    input a decision, where a GPU's launch and copy costs would outweigh its arithmetic. So ``evaluate --plan
    --device cuda`` plans on a CPU copy of the agent while its greedy and sampled modes run on the GPU; the rollouts
    go to the GPU with ``PlanConfig.device`` 'cuda'."""
    if agent.device.type == "cpu":
        return agent
    return copy.deepcopy(agent).to("cpu")


def make_act(name: str | Agent = "pretrained:universal", plan: PlanConfig | None = None, seed: int = 0,
             workflow: Workflow | None = None, episode_length: int | None = None, *, greedy: bool = True,
             generator: torch.Generator | None = None, encodings: torch.Tensor | None = None,
             official_bugs: bool = True) -> ActFn:
    """``act(obs, t)``, the one way to act with a trained agent: ``name`` a shipped agent (``pretrained:NAME``), a
    checkpoint file (both loaded on the CPU) or a loaded :class:`Agent` (it acts where it is). Greedy by default;
    ``greedy=False`` samples with ``generator`` (None: torch's global one; give a seeded generator for repeatable
    draws); with ``plan`` the planner chooses (greedy only, on a CPU copy of the agent: :func:`on_cpu`; ``seed``
    seeds its draws). ``workflow`` overrides the agent's own; ``encodings`` (N, 25) instead gives each env of an
    N-env batch its own workflow (not planned). ``episode_length``: the steps every episode has, when the harness
    knows it (CAGE2's cells: 30, 50 or 100); the planner then plays only the steps left (``t`` must stay below
    it). None: unknown, rollouts play their full horizon; greedy and sampled play never see it.

    ``obs`` is one observation (52,) -- then ``act`` returns an int -- or a batch (N, 52) of independent envs --
    then an (N,) int64 tensor on ``obs``'s device; numpy, torch or a list. ``t`` is the step within the episode:
    call it at every step, ``t`` 0 first (it starts the episode's memory and belief); the action it returns is the
    one the memory and belief assume blue played. E.g. driving real CybORG through its ``ChallengeWrapper``
    (52-bit observations, integer actions 0..144; ``envs.cyborg.CybORGEnv`` is one)::

        act = make_act("pretrained:universal", PlanConfig(), episode_length=100)
        obs = wrapper.reset()
        for t in range(100):
            obs, reward, done, info = wrapper.step(act(obs, t))
    """
    _check_make_act(name, plan, seed, greedy, generator)
    check_bool("official_bugs", official_bugs)
    encodings = _check_encodings(encodings)
    if isinstance(name, str):
        from workflow_rl.rl import pretrained

        agent, own = pretrained.load(name, "cpu", planned=plan is not None)   # on the CPU, where the planner computes
    else:
        agent, own = name, None
    workflow = resolve_workflow(workflow, own)
    if episode_length is not None:
        check_episode_length("episode_length", episode_length)
    if plan is None:
        return _acting(Actor.of(agent, workflow, encodings), greedy, generator, episode_length)
    if not greedy or encodings is not None:
        raise ValueError("a planned act is greedy and plans under one workflow: drop greedy=False and encodings, "
                         "or plan=None")
    return _planned(Planner(agent, workflow, plan, seed, official_bugs), plan, seed, official_bugs, episode_length)


def _check_make_act(name, plan, seed, greedy, generator) -> None:
    """:func:`make_act`'s arguments, checked at the call: one error naming the argument (TypeError for a wrong
    kind, ValueError for a wrong value), not an error from deep inside torch or string code."""
    if not (isinstance(name, Agent) or (isinstance(name, str) and name)):
        raise TypeError(f"name={name!r}: use a shipped agent's name such as 'pretrained:universal', a checkpoint "
                         "file's path or a loaded Agent")
    if plan is not None and not isinstance(plan, PlanConfig):
        raise TypeError(f"plan={plan!r}: use None (no planning) or a PlanConfig")
    check_seed("seed", seed)
    check_bool("greedy", greedy)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator={generator!r}: use None or a torch.Generator")


def _check_encodings(encodings) -> torch.Tensor | None:
    """``make_act``'s per-env workflow encodings as a float32 tensor: (N, 25) finite numbers (numpy or torch);
    None stays None. A wrong shape or a NaN is one ValueError here, not a torch error deep inside the network or a
    silently NaN policy."""
    if encodings is None:
        return None
    if not isinstance(encodings, (torch.Tensor, np.ndarray)):
        raise TypeError(f"encodings={type(encodings).__name__}: use an (N, {WORKFLOW_DIM}) tensor or array, one "
                        "workflow encoding per env (Workflow.encode())")
    enc = torch.as_tensor(encodings, dtype=torch.float32)
    if enc.dim() != 2 or enc.shape[1] != WORKFLOW_DIM or enc.shape[0] < 1:
        raise ValueError(f"encodings must be (N, {WORKFLOW_DIM}), one workflow encoding per env "
                         f"(Workflow.encode()), got shape {tuple(enc.shape)}")
    if not torch.isfinite(enc).all():
        raise ValueError("encodings hold NaN or inf: use Workflow.encode() of each env's workflow")
    return enc


def resolve_workflow(workflow, own: Workflow | None) -> Workflow | None:
    """``workflow`` as a :class:`Workflow` (None: unconstrained): None takes the agent's own (``own``); a Workflow,
    or its text as ``--workflow`` takes it (``"D,OS,E,OH,U"``; ``"none"``: unconstrained play)."""
    from workflow_rl.workflow import parse_workflow_arg

    if workflow is None:
        return own
    if isinstance(workflow, Workflow):
        return workflow
    if isinstance(workflow, str):
        try:
            return parse_workflow_arg(workflow)
        except ValueError as e:
            raise ValueError(f"workflow={workflow!r}: {e}") from None
    raise TypeError(f"workflow={workflow!r}: use None, a Workflow or its text such as 'D,OS,E,OH,U'")


def _acting(actor: Actor, greedy: bool, generator: torch.Generator | None, episode_length: int | None) -> ActFn:
    """:func:`make_act`'s greedy or sampled ``act``: :meth:`Actor.act` on the actor's device, carrying the
    episode's memory from call to call."""
    st = {"mem": None}

    def act(obs, t: int):
        t = _check_call(t, episode_length)
        o = _observations(obs)
        a, st["mem"] = actor.act(o, st["mem"], t, greedy, generator)
        return int(a[0]) if np.ndim(obs) == 1 else a

    def skip_episode(n: int, steps: int) -> None:
        """An episode of ``n`` envs and ``steps`` steps not played (``rl.evaluate.skip_part``): a sampled act draws
        what it would have (every step one uniform per env and action: ``ppo.choose_actions``' Gumbel-max, whose
        draws do not depend on the logits); a greedy one keeps nothing from episode to episode."""
        st["mem"] = None
        if not greedy:
            for _ in range(steps):
                torch.rand((n, N_ACTIONS), generator=generator, device=generator.device)

    if greedy or generator is not None:   # torch's global generator is everyone's: its draws cannot be replayed
        act.skip_episode = skip_episode
    return act


def _planned(planner: Planner, plan: PlanConfig, seed: int, official_bugs: bool,
             episode_length: int | None) -> ActFn:
    """:func:`make_act`'s planned ``act``: the planner's choice per env from its own particle belief, on the CPU
    (a batch on a GPU gets its actions back there); an env whose belief's model is rejected (``PlanConfig.min_fit``)
    re-seeds it under ``fallback_prior`` where one is set, and where that too is rejected (or none is set) plays the
    greedy policy's action for the rest of its episode, its belief no longer followed."""
    actor = planner.actor
    st: dict = {"n": None, "mem": None, "beliefs": [], "last": None, "episode": -1, "fell": []}

    def act(obs, t: int):
        t = _check_call(t, episode_length)
        where = obs.device if isinstance(obs, torch.Tensor) else None   # a GPU engine's batch: read on the CPU
        o = _observations(obs).cpu()
        n = o.shape[0]
        if t == 0 or st["n"] != n:   # a new episode (or a new batch): blank memory, beliefs at the start state
            if len(st["beliefs"]) != n:
                plan.check_memory(n)   # a belief per env of the batch
            st["n"], st["mem"] = n, actor.reset(n)
            st["episode"] += 1
            if len(st["beliefs"]) == n:
                for b in st["beliefs"]:
                    b.reset()   # the next episode's particles: the belief's own next stream
            else:
                st["beliefs"] = [ParticleBelief(plan.belief(official_bugs), seeding.sub_seed(seed, i))
                                 for i in range(n)]
            st["fell"] = [None] * n
        else:
            for i, b in enumerate(st["beliefs"]):
                if st["fell"][i] is None and plan.observe(b, int(st["last"][i]), o[i].numpy()):
                    st["fell"][i] = t
        mem = st["mem"]
        x = actor.inputs(o, mem)
        forced = actor.forced(t)
        a = torch.full((n,), forced, dtype=torch.int64) if forced is not None else torch.as_tensor(
            [int(actor.greedy(x[i:i + 1])[0]) if st["fell"][i] is not None else
             planner.choose(b.state, b.access, b.weights, x[i:i + 1], None if mem is None else mem[i:i + 1],
                            (i, st["episode"], t), None if episode_length is None else episode_length - t).action
             for i, b in enumerate(st["beliefs"])], dtype=torch.int64)
        actor.took(mem, a)
        st["last"] = a.numpy().copy()
        return int(a[0]) if np.ndim(obs) == 1 else a if where is None else a.to(where)

    def skip_episode(n: int, steps: int) -> None:
        """An episode of ``n`` envs not played (``rl.evaluate.skip_part``): what an episode moves on, the act's
        episode count (the decisions' streams) and each belief's (its particles' streams), moves on; a batch of
        another size gets its fresh beliefs, as a played one would."""
        st["episode"] += 1
        st["n"], st["mem"] = None, None   # the next episode starts afresh, as after any episode
        if len(st["beliefs"]) == n:
            for b in st["beliefs"]:
                b.skip_episode()
        else:
            st["beliefs"] = [ParticleBelief(plan.belief(official_bugs), seeding.sub_seed(seed, i)) for i in range(n)]

    act.beliefs = lambda: st["beliefs"]   # the current episode's beliefs, one per env (diagnostics)
    act.fallbacks = lambda: list(st["fell"])   # per env, the step its model was rejected at this episode, or None
    act.widenings = lambda: [b.widened_at for b in st["beliefs"]]   # per env, the step it took the fallback prior
    act.skip_episode = skip_episode
    return act


def _check_call(t, episode_length: int | None) -> int:
    """``t`` checked (:func:`check_step`) and, when the episode's length is known, below it."""
    t = check_step(t)
    if episode_length is not None and not 0 <= t < episode_length:
        raise ValueError(f"act was called at step t={t} of an episode of episode_length={episode_length}: "
                         f"t counts 0..{episode_length - 1} (pass the harness's own episode length)")
    return t


def _observations(obs) -> torch.Tensor:
    """``obs`` as an (N, 52) float tensor: checked by :func:`check_observation` (a CPU copy), except a batch
    already on a GPU, whose shape alone is checked (reading its bits back each step would stall the device)."""
    if isinstance(obs, torch.Tensor) and obs.device.type != "cpu":
        width = 4 * T.N_HOSTS
        if obs.dim() not in (1, 2) or obs.shape[-1] != width or obs.numel() == 0:
            raise ValueError(f"act takes one observation of shape ({width},) or a batch (N, {width}), got shape "
                             f"{tuple(obs.shape)}")
        return obs.reshape(-1, width).float()
    return torch.as_tensor(check_observation(obs.detach().cpu() if isinstance(obs, torch.Tensor) else obs))


def check_observation(obs) -> np.ndarray:
    """``obs`` as the (N, 52) float32 batch ``act`` computes on, or one ValueError saying what ``act`` takes: one
    CAGE2 observation of 52 bits (4 per host, as the native engine and CybORG's ChallengeWrapper give them) or a
    batch (N, 52) of them, every value 0 or 1. A wrong length or a NaN would otherwise surface as a reshape error or
    a silent wrong action, and the belief weighs particles by the bits they match."""
    width = 4 * T.N_HOSTS
    try:
        a = np.asarray(obs)
    except (ValueError, TypeError) as e:
        raise ValueError(f"act takes an observation of {width} values (or a batch (N, {width})): {e}") from None
    if a.dtype != bool and not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
        raise ValueError(f"act takes an observation of {width} numbers 0 or 1, got values of type {a.dtype}")
    if a.ndim not in (1, 2) or a.shape[-1] != width or a.size == 0:
        raise ValueError(f"act takes one observation of shape ({width},) or a batch (N, {width}), got shape "
                         f"{a.shape}")
    bits = a.astype(np.float32)
    if not np.all((bits == 0) | (bits == 1)):
        bad = a.reshape(-1)[~((bits == 0) | (bits == 1)).reshape(-1)][0]
        raise ValueError(f"act takes observation bits 0 or 1 (CAGE2's {width}-bit observation), got {bad}")
    return bits.reshape(-1, width)


def check_step(t) -> int:
    """``t`` as an int, or a ValueError: the step within the episode, an integer >= 0 (0 starts an episode)."""
    if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)) or t < 0:
        raise ValueError(f"act takes the step within the episode as an integer t >= 0 (0 first), got {t!r}")
    return int(t)




def play_true_state(agent, workflow: Workflow | None, config: PlanConfig, red: int, episodes: int, steps: int,
                    seed: int, planner_seed: int = 0) -> np.ndarray:
    """(episodes,) returns over ``steps`` native steps of the planner given the true state as its one particle
    (the engine's own state each step, its RNG key replaced, so the planner knows the present, not red's future
    dice): the planner's upper bound, which a perfect belief would reach. Episodes as ``NativeVectorEnv(episodes,
    red, seed=seed)`` plays them."""
    from workflow_rl.envs.native_env import NativeVectorEnv

    planner = Planner(agent, workflow, config, planner_seed)
    actor = planner.actor
    env = NativeVectorEnv(episodes, red, max(steps, 1), seed=seed)
    obs, info = env.reset(seed=seed)
    access, mem, ret = info["red_access"], actor.reset(episodes), np.zeros(episodes)
    for t in range(steps):
        x = actor.inputs(torch.as_tensor(obs), mem)
        truth = env.sim_state()
        forced = actor.forced(t)
        a = torch.full((episodes,), forced, dtype=torch.int64) if forced is not None else torch.as_tensor(
            [planner.choose(sim.take_state(truth, [i]), access[i:i + 1], np.ones(1), x[i:i + 1],
                            None if mem is None else mem[i:i + 1], (i, t)).action for i in range(episodes)])
        actor.took(mem, a)
        obs, r, _, _, info = env.step(a.numpy())
        access, ret = info["red_access"], ret + r
    return ret
