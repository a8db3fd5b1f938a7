"""Expert iteration: the network learns the planner's choices, and the planner then plans with the better network.

Each decision of :class:`~workflow_rl.rl.planning.planner.Planner` searches (belief particles, rollouts of each
candidate) and is otherwise thrown away. A round here keeps it: (a) :func:`play_round` plays episodes on the native
engine with the planner choosing every step after the agent's opening, each env under a workflow drawn per episode
(or none, as the universal agent was trained: ``none_share``), recording for each planned decision the policy input
the network sees (observation, that episode's workflow encoding, episode memory), the action mask the memory implies,
the planner's choice, its candidates with their mean rollout returns, and the step's reward; (b) :func:`train_round`
trains the network towards the choices and reports agreement (the network's greedy action equals the planner's
choice) on the training episodes and on held-out episodes, before and after; (c) the next round plans with the
trained network.

The training target (:func:`policy_loss`) differs by decision. Where the planner overrode the network's greedy
choice (1-4% of decisions with the shipped agent), it is the planner's choice (cross-entropy, ``override_weight``).
Where it agreed, it is the round's starting policy (soft and detached: KL, ``kl_coef``), and the agreed action's
logit margin over the next-best action may shrink to ``keep_margin`` of its start but no further (a hinge): the
shipped agent's policy is flat (median top probability 0.14, median gap to the second 0.03), so a KL anchor alone
lets near-tied rows flip. Plain cross-entropy on every choice flipped them by the hundred: on one round of 64
planned 100-step episodes from pretrained:universal (6,208 decisions, 3.2% overridden; tested on a second round's),
it kept the greedy choice on 83% of the training decisions the planner agreed with and 72% of the test's; the soft
target alone 95% and 94% (learning 44% of the training overrides, 12% of the test's); this rule 99.5% and 96% (32%
and 6%). No rule measured learnt the test's overrides without changing ten times as many of its agreed choices
(benchmarks/results/planning/expert_iteration/README.md has the table). The value head learns the observed
discounted returns (scaled, bootstrapped at the time limit, as PPO's critic learns them; ``value_coef``).

Each round is a pure function of the weights it starts from, the settings and (seed, round): a fresh Adam each
round, every draw seeded, so a resumed run redoes a killed round exactly.

The job that writes a run folder is ``workflow_rl.runs.expert_iteration``; the command ``workflow-rl
expert-iterate``. The measured run (CPU; 64 episodes of 100 steps took two to five minutes a round on one core of a
shared machine, training seconds)::

    workflow-rl expert-iterate --init pretrained:universal --rounds 10 --episodes-per-round 64 \\
        --episode-length 100 --red-agent mix --workflow all --none-share 0.5 --out runs/exit-universal
    workflow-rl evaluate runs/exit-universal/checkpoints/latest.pt --workflow none --out runs/exit-eval

did not improve the greedy shipped agent: paired on 1,000 episodes per red agent it stayed within 0.07 of it for eight
rounds and ended worse (B_line -0.05 +- 0.04, Meander -0.12 +- 0.17), with compliance under one workflow below 0.95
after rounds 9 and 10 (benchmarks/results/planning/expert_iteration/README.md).

The planner settings are the ``--plan-*`` flags of ``evaluate --plan``; ``--resume`` continues after the last
finished round. A GPU does not help: the planner computes on the CPU (``planner.on_cpu``).
"""
from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from workflow_rl import seeding
from workflow_rl.checks import check_episode_length, check_float, check_int, check_seed, check_types, flag
from workflow_rl.envs.native_env import NativeVectorEnv, red_kind_weights
from workflow_rl.rl.compliance import classify_fixes
from workflow_rl.rl.memory import MASKED
from workflow_rl.rl.planning.belief import ParticleBelief
from workflow_rl.rl.planning.planner import PlanConfig, Planner
from workflow_rl.rl.ppo import Agent
from workflow_rl.sim import tables as T
from workflow_rl.workflow import Workflow, is_workflow_list, parse_workflow_arg, parse_workflow_list

RANDOM_INIT = "none"
"""``--init none``: random weights, in the network the universal recipe trains (``rl.recipes``)."""


@dataclass(frozen=True)
class ExpertConfig:
    """Everything an expert-iteration run depends on (saved as expert_iteration.json); flags of ``workflow-rl
    expert-iterate``, the planner's the ``--plan-*`` flags."""

    init: str = "pretrained:universal"
    """the network the first round plans with: a shipped agent (pretrained:NAME), a checkpoint file, or 'none' for
    random weights in the universal recipe's network (256 256, decoy memory with masks, the winner's opening)"""
    rounds: int = 3
    """rounds of play-then-train; each ends with a checkpoint (a resumed run may raise it to go on)"""
    episodes_per_round: int = 32
    """planned episodes played per round, all envs stepped together; the round's training data (less the held-out
    share)"""
    episode_length: int = 100
    """steps per episode (CAGE2's longest cell, the one the shipped agent's opening and memory were trained for)"""
    red_agent: str = "mix"
    """red agent or mixture the episodes are played against (one drawn per episode), as the universal agent trained"""
    workflow: str = "all"
    """the workflows episodes are played under: a list ('all', 'named', ';'-separated), one per episode drawn
    uniformly, or one workflow, or 'none' (unconstrained); each episode's workflow encoding is in the inputs trained
    on, and the planner keeps its compliance limit under it (--plan-max-violation), so compliance is learnt too"""
    none_share: float = 0.5
    """the share of episodes played with no workflow (zero encoding), as the universal agent was trained (its
    --none-share): without it the network would unlearn unconstrained play; ignored with --workflow none"""
    epochs: int = 4
    """passes over the round's training decisions; few, as the data are one round's and the KL term anchors the rest"""
    minibatch: int = 256
    """decisions per gradient step"""
    learning_rate: float = 1e-4
    """Adam step size (a fresh Adam each round); small, as the network starts from a good policy"""
    kl_coef: float = 1.0
    """on the decisions where the planner kept the network's greedy choice, the weight of KL(round's starting policy
    || network): there the target is the starting policy itself (soft, detached), so the loop does not move what the
    planner agreed with"""
    override_weight: float = 1.0
    """on the decisions where the planner overrode the network's greedy choice, the weight of the cross-entropy to the
    planner's choice (relative to an agreed decision's terms; the loss is the mean over decisions)"""
    keep_margin: float = 0.5
    """on the decisions where the planner kept the greedy choice, the share of that action's starting logit margin
    over the next-best action it keeps: a hinge penalises the margin below keep_margin x its start (0: only once the
    choice flips; 1: any shrinking), as KL alone lets the flat policy's near-tied choices flip"""
    value_coef: float = 0.5
    """weight of the value head's squared error to the observed returns (PPO's --vf-coef); 0: leave the critic"""
    max_grad_norm: float = 0.5
    """global gradient-norm clip (PPO's)"""
    held_out: float = 0.25
    """share of each round's episodes left out of training, on which agreement with the planner is reported (0: none)"""
    seed: int = 0
    """seeds the episodes, the workflow draws, the planner, the split and the minibatches of every round; episodes use
    their own stream, never the evaluation's (rl.evaluate.EVAL_SEED)"""
    plan: PlanConfig = field(default_factory=PlanConfig)
    """the planner that plays the episodes (its defaults: those of evaluate --plan)"""

    def validate(self) -> ExpertConfig:
        """This config, or one ValueError naming the flag and the fix."""
        check_types(self)
        from workflow_rl.ranges import check_fields

        check_fields(self)   # every number within its range of the one table (workflow_rl/ranges.py)
        if not self.init.strip():
            raise ValueError("--init is empty: name a shipped agent (pretrained:universal), a checkpoint file or none")
        check_int(flag("rounds"), self.rounds, 1, 100_000)
        check_int(flag("episodes_per_round"), self.episodes_per_round, 1, 1_000_000)
        check_episode_length(flag("episode_length"), self.episode_length)
        red_kind_weights(self.red_agent)
        self.workflows()
        check_float(flag("none_share"), self.none_share, 0.0, 1.0)
        check_int(flag("epochs"), self.epochs, 1, 10_000)
        check_int(flag("minibatch"), self.minibatch, 1)
        check_float(flag("learning_rate"), self.learning_rate, 0.0, 1.0, lo_open=True)
        for name in ("kl_coef", "value_coef", "override_weight"):
            check_float(flag(name), getattr(self, name), 0.0, 1e6)
        check_float(flag("max_grad_norm"), self.max_grad_norm, 0.0, lo_open=True)
        check_float(flag("keep_margin"), self.keep_margin, 0.0, 1.0)
        check_float(flag("held_out"), self.held_out, 0.0, 0.9)
        if self.held_out > 0 and self.episodes_per_round < 2:
            raise ValueError(f"--held-out {self.held_out:g} needs at least 2 episodes per round (one to train on, one "
                             "held out): raise --episodes-per-round, or --held-out 0")
        check_seed(flag("seed"), self.seed)
        if not isinstance(self.plan, PlanConfig):
            raise ValueError(f"plan={self.plan!r}: use a PlanConfig")
        self.plan.validate()
        self.plan.check_memory(self.episodes_per_round)   # a belief per env of the round
        return self

    def workflows(self) -> tuple[Workflow, ...]:
        """The workflows episodes draw from (empty: every episode unconstrained)."""
        if is_workflow_list(self.workflow):
            return parse_workflow_list(self.workflow)
        w = parse_workflow_arg(self.workflow)
        return () if w is None else (w,)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ExpertConfig:
        d = dict(d)
        return cls(**{**d, "plan": PlanConfig(**d.get("plan", {}))})


def episode_workflows(cfg: ExpertConfig, round_: int) -> list[Workflow | None]:
    """The workflow (None: unconstrained) of each episode of round ``round_``: episode i's own stream
    ``(seed, round, i)``, none with probability ``none_share``, else one of :meth:`ExpertConfig.workflows`
    uniformly."""
    pool = cfg.workflows()
    out = []
    for i in range(cfg.episodes_per_round):
        rng = np.random.default_rng([cfg.seed, 1, round_, i])
        none = not pool or (cfg.none_share > 0 and rng.random() < cfg.none_share)
        out.append(None if none else pool[int(rng.integers(len(pool)))])
    return out


def round_seed(cfg: ExpertConfig, round_: int, what: int | str) -> int:
    """A seed for part ``what`` (0 episodes, 1 planner, 2 split, 3 minibatches, or its name) of round ``round_``
    (``workflow_rl.seeding.expert_round_seed``)."""
    return seeding.expert_round_seed(cfg.seed, round_, what)


@dataclass
class RoundData:
    """One round's planned play, decision by decision (N decisions; the opening's forced steps are not decisions)
    and episode by episode (E episodes)."""

    x: torch.Tensor
    """(N, D) float32: the policy input the network saw (observation, the episode's workflow encoding, memory)."""
    mask: torch.Tensor
    """(N, 145) bool: the actions the policy may choose (impossible decoys masked by the decoy memory)."""
    action: torch.Tensor
    """(N,) int64: the planner's choice."""
    greedy: torch.Tensor
    """(N,) int64: the playing network's own greedy choice (the planner's first candidate)."""
    candidates: torch.Tensor
    """(N, C) int64: the candidates the planner scored, policy order first, -1 padding."""
    candidate_returns: torch.Tensor
    """(N, C) float64: each candidate's mean rollout return (NaN padding; 0 where the planner did not search)."""
    value_target: torch.Tensor
    """(N,) float32: the observed discounted return from the decision on, times the agent's reward scale, plus the
    discounted value of the episode's last state (time-limit bootstrap): what PPO's critic learns."""
    episode: torch.Tensor
    """(N,) int64: the episode (0..E-1) of each decision."""
    step: torch.Tensor
    """(N,) int64: the step within the episode."""
    workflow_index: np.ndarray
    """(E,) int64: each episode's workflow (``Workflow.index``, 0..119), -1 for none."""
    returns: np.ndarray
    """(E,) float64: each episode's (undiscounted, environment) return."""
    violations: np.ndarray
    """(E,) int64: fixes violating the episode's workflow (0 for unconstrained episodes)."""
    fixes: np.ndarray
    """(E,) int64: counted fixes (compliant or violating) under the episode's workflow."""

    @property
    def decisions(self) -> int:
        return int(self.action.shape[0])


def play_round(agent: Agent, cfg: ExpertConfig, round_: int, gamma: float, reward_scale: float) -> RoundData:
    """Round ``round_``'s episodes played by the planner with ``agent`` (see the module docstring): all
    ``episodes_per_round`` envs of one :class:`NativeVectorEnv` stepped together, each env planned on its own
    belief, as ``make_act``'s planned ``act`` plans a batch (one :class:`Planner` per workflow; the episode's memory
    and belief start blank); an env whose belief's model is rejected for good (``PlanConfig.observe``) plays the
    network's own action from then on, and those steps are not recorded: a wrong model's choices are no target."""
    E, L = cfg.episodes_per_round, cfg.episode_length
    wfs = episode_workflows(cfg, round_)
    planners: dict = {}
    planner_seed = round_seed(cfg, round_, "planner")
    for w in wfs:
        if w not in planners:
            planners[w] = Planner(agent, w, cfg.plan, planner_seed, official_bugs=True)
    actors = [planners[w].actor for w in wfs]
    env = NativeVectorEnv(E, red_kind_weights(cfg.red_agent), L, seed=round_seed(cfg, round_, "episodes"))
    obs, info = env.reset()
    access = info["red_access"]
    beliefs = [ParticleBelief(cfg.plan.belief(True), seeding.sub_seed(planner_seed, i)) for i in range(E)]
    mems = [a.reset(1) for a in actors]
    fell = np.zeros(E, bool)   # the belief's model rejected for good (PlanConfig.observe): greedy, nothing recorded
    rewards = np.zeros((L, E))
    rec = {k: [] for k in ("x", "mask", "action", "greedy", "cands", "rets", "episode", "step")}
    violations, fixes = np.zeros(E, np.int64), np.zeros(E, np.int64)
    last = None
    for t in range(L):
        o = torch.as_tensor(obs, dtype=torch.float32)
        actions = np.zeros(E, np.int64)
        for i in range(E):
            if t and not fell[i]:
                fell[i] = cfg.plan.observe(beliefs[i], int(last[i]), o[i].numpy())
            actor = actors[i]
            x = actor.inputs(o[i:i + 1], mems[i])
            forced = actor.forced(t)
            if forced is not None:
                a = forced
            elif fell[i]:   # no planner's choice to learn from: the network's own
                a = int(actor.greedy(x)[0])
            else:
                b = beliefs[i]
                d = planners[wfs[i]].choose(b.state, b.access, b.weights, x, mems[i], (i, round_, t))
                a = d.action
                rec["x"].append(x[0].clone())
                rec["mask"].append(actor.logits(x)[0] > MASKED / 2)
                rec["action"].append(a)
                rec["greedy"].append(int(d.candidates[0]))
                rec["cands"].append(np.asarray(d.candidates, np.int64))
                rec["rets"].append(np.asarray(d.returns, np.float64))
                rec["episode"].append(i)
                rec["step"].append(t)
            actor.took(mems[i], torch.tensor([a]))
            actions[i] = a
            if wfs[i] is not None:
                comp, viol, _ = classify_fixes(torch.tensor([a]), torch.as_tensor(access[i:i + 1]),
                                               torch.as_tensor(wfs[i].rank))
                violations[i] += int(viol[0])
                fixes[i] += int(comp[0]) + int(viol[0])
        last = actions
        obs, r, _, trunc, info = env.step(actions)
        rewards[t] = r
        access = info["red_access"]
    final = torch.as_tensor(info["final_obs"], dtype=torch.float32)   # every env ends at step L together
    with torch.no_grad():
        v_end = np.array([float(actors[i].value(actors[i].inputs(final[i:i + 1], mems[i]))[0]) for i in range(E)])
    # scaled discounted return from each step on, bootstrapped with the critic's value of the last state
    togo = np.zeros((L + 1, E))
    togo[L] = v_end
    for t in reversed(range(L)):
        togo[t] = reward_scale * rewards[t] + gamma * togo[t + 1]
    ep, st = np.asarray(rec["episode"], np.int64), np.asarray(rec["step"], np.int64)
    width = max((len(c) for c in rec["cands"]), default=1)
    cands = np.full((len(ep), width), -1, np.int64)
    rets = np.full((len(ep), width), np.nan)
    for j, (c, v) in enumerate(zip(rec["cands"], rec["rets"])):
        cands[j, :len(c)], rets[j, :len(v)] = c, v
    D = agent.actor[0].in_features
    return RoundData(
        x=torch.stack(rec["x"]) if rec["x"] else torch.zeros((0, D)),
        mask=torch.stack(rec["mask"]) if rec["mask"] else torch.zeros((0, T.N_ACTIONS), dtype=torch.bool),
        action=torch.as_tensor(rec["action"], dtype=torch.int64),
        greedy=torch.as_tensor(rec["greedy"], dtype=torch.int64),
        candidates=torch.as_tensor(cands), candidate_returns=torch.as_tensor(rets),
        value_target=torch.as_tensor(togo[st, ep], dtype=torch.float32),
        episode=torch.as_tensor(ep), step=torch.as_tensor(st),
        workflow_index=np.array([-1 if w is None else w.index for w in wfs], np.int64),
        returns=rewards.sum(0), violations=violations, fixes=fixes)


def split_episodes(cfg: ExpertConfig, round_: int, episodes: int) -> np.ndarray:
    """(E,) bool: the episodes held out of round ``round_``'s training (a seeded ``held_out`` share, at least one
    when the share is above 0, never all)."""
    held = np.zeros(episodes, bool)
    if cfg.held_out > 0 and episodes > 1:
        n = min(episodes - 1, max(1, int(round(cfg.held_out * episodes))))
        held[np.random.default_rng(round_seed(cfg, round_, "split")).permutation(episodes)[:n]] = True
    return held


def agreement(agent: Agent, data: RoundData, rows: torch.Tensor) -> float:
    """The share of ``rows`` (indices into ``data``) where the network's greedy action is the planner's choice
    (NaN for no rows)."""
    if len(rows) == 0:
        return float("nan")
    with torch.no_grad():
        return float((agent.logits(data.x[rows]).argmax(-1) == data.action[rows]).float().mean())


def policy_loss(logits: torch.Tensor, old_logits: torch.Tensor, choice: torch.Tensor, greedy: torch.Tensor,
                cfg: ExpertConfig) -> tuple[torch.Tensor, dict]:
    """The policy's loss on a batch of decisions (module docstring): the mean over decisions of, where the planner
    overrode the greedy choice (``choice != greedy``), ``override_weight`` x the cross-entropy to ``choice``; where it
    agreed, ``kl_coef`` x KL(starting policy || network) plus the hinge ``relu(keep_margin x starting margin - margin)``
    on the agreed action's logit margin over the next-best. ``old_logits`` are the round's starting network's
    (detached). Returns the loss and, for the log, each term's sum and count of decisions."""
    logp = torch.log_softmax(logits, -1)
    old_logp = torch.log_softmax(old_logits, -1)
    over = choice != greedy
    ce = -logp.gather(1, choice[:, None])[:, 0]
    kl = (old_logp.exp() * (old_logp - logp)).sum(-1)
    keep = torch.relu(cfg.keep_margin * margin(old_logits, greedy) - margin(logits, greedy))
    loss = torch.where(over, cfg.override_weight * ce, cfg.kl_coef * kl + keep).mean()
    n_over = int(over.sum())
    with torch.no_grad():
        parts = {"ce_loss": (float(ce[over].sum()), n_over), "kl": (float(kl[~over].sum()), len(over) - n_over),
                 "keep_loss": (float(keep[~over].sum()), len(over) - n_over)}
    return loss, parts


def margin(logits: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """(N,): each row's logit of ``action`` less the largest other logit (masked actions are never the largest
    unless all others are)."""
    top = logits.gather(1, action[:, None])[:, 0]
    return top - logits.scatter(1, action[:, None], float("-inf")).max(-1).values


def train_round(agent: Agent, data: RoundData, cfg: ExpertConfig, round_: int) -> dict:
    """Train ``agent`` in place towards the planner's choices of ``data`` (:func:`policy_loss`, and the value head
    towards the observed returns): its held-out episodes (:func:`split_episodes`) left out; returns the round's
    statistics (agreement before and after on the training and held-out decisions, on the training decisions the
    planner agreed with and on those it overrode, the last epoch's mean losses: cross-entropy per overridden
    decision, KL and hinge per agreed one)."""
    held = torch.as_tensor(split_episodes(cfg, round_, len(data.returns)))[data.episode]
    train_rows = torch.nonzero(~held).squeeze(1)
    held_rows = torch.nonzero(held).squeeze(1)
    over = data.action != data.greedy
    stats = {"decisions": data.decisions, "train_decisions": len(train_rows), "held_out_decisions": len(held_rows),
             "agree_train_before": agreement(agent, data, train_rows),
             "agree_held_out_before": agreement(agent, data, held_rows)}
    old = copy.deepcopy(agent).eval()
    for p in old.parameters():
        p.requires_grad_(False)
    optimizer = torch.optim.Adam(agent.parameters(), lr=cfg.learning_rate, eps=1e-5)
    gen = torch.Generator().manual_seed(round_seed(cfg, round_, "minibatches"))
    n = len(train_rows)
    names = ("ce_loss", "kl", "keep_loss", "value_loss")
    sums = {k: [0.0, 0] for k in names}
    for _ in range(cfg.epochs if n else 0):
        perm = train_rows[torch.randperm(n, generator=gen)]
        sums = {k: [0.0, 0] for k in names}
        for start in range(0, n, cfg.minibatch):
            idx = perm[start:start + cfg.minibatch]
            x = data.x[idx]
            with torch.no_grad():
                old_logits = old.logits(x)
            p_loss, parts = policy_loss(agent.logits(x), old_logits, data.action[idx], data.greedy[idx], cfg)
            v_loss = 0.5 * ((agent.value(x) - data.value_target[idx]) ** 2).mean()
            loss = p_loss + cfg.value_coef * v_loss
            if not torch.isfinite(loss):
                raise ValueError(f"expert iteration diverged in round {round_ + 1} (a non-finite loss): lower "
                                 f"--learning-rate (now {cfg.learning_rate:g})")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), cfg.max_grad_norm)
            optimizer.step()
            for k, (total, count) in {**parts, "value_loss": (float(v_loss.detach()) * len(idx), len(idx))}.items():
                sums[k][0] += total
                sums[k][1] += count
    stats.update({k: total / count if count else float("nan") for k, (total, count) in sums.items()})
    stats["agree_train_after"] = agreement(agent, data, train_rows)
    stats["agree_held_out_after"] = agreement(agent, data, held_rows)
    for name, rows in (("agreed", train_rows[~over[train_rows]]), ("overridden", train_rows[over[train_rows]])):
        stats[f"agree_train_{name}_after"] = agreement(agent, data, rows)
    return stats


def round_row(round_: int, data: RoundData, stats: dict) -> dict:
    """The log row of a finished round: what was played (episodes, decisions, mean return, compliance of the
    constrained episodes' fixes, how often the planner overrode the greedy choice) and what training did."""
    counted = int(data.fixes.sum())
    constrained = data.workflow_index >= 0
    return {"round": round_ + 1, "episodes": len(data.returns), "constrained_episodes": int(constrained.sum()),
            "mean_return": float(data.returns.mean()),
            "compliance": float(1 - data.violations.sum() / counted) if counted else float("nan"),
            "planner_overrides": float((data.action != data.greedy).float().mean()) if data.decisions else
            float("nan"), **stats}


def finite_or_none(v):
    """A log value as JSON keeps it (NaN as None)."""
    return None if isinstance(v, float) and math.isnan(v) else v
