"""Workflow-conditioned PPO: the agent network, GAE with time-limit bootstrapping, and the clipped-surrogate update.

CleanRL's PPO (orthogonal init, Adam eps 1e-5, advantage normalisation, clipped value loss, entropy bonus, gradient
clipping, minibatch epochs), with GAE and the loss as pure functions. :func:`ppo_step` is the minibatch step that
trains: ``rl.stack.StackedUpdate`` (the trainer's update) runs it over the epochs and minibatches for a stack of
networks at once, and ``rl.stack.ppo_update``, one network's update, is that update for a stack of one.

Truncation: CAGE2 episodes end only at the time limit, and the observation carries no clock, so the policy faces a
stationary, infinite-horizon discounted task. A truncated step is therefore *bootstrapped* with the value of the
episode's last observation (SB3's treatment), and the GAE recursion stops at the episode boundary; a real
termination (none in CAGE2) would bootstrap with 0. ``tests/rl/test_ppo.py`` pins both against exact answers.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from workflow_rl.rl.memory import Memory


OBS_DIM, WORKFLOW_DIM, N_ACTIONS = 52, 25, 145


def input_dim(memory: Memory = Memory()) -> int:
    """Width of the policy input: observation, workflow encoding and the episode memory (``rl.memory``)."""
    return OBS_DIM + WORKFLOW_DIM + memory.dim


def network_params(hidden: tuple[int, ...], memory: Memory = Memory()) -> int:
    """Parameters of one :class:`Agent` (actor and critic MLPs, weights and biases), without building it."""
    def mlp(out: int) -> int:
        sizes = [input_dim(memory), *hidden, out]
        return sum(i * o + o for i, o in zip(sizes, sizes[1:]))

    return mlp(N_ACTIONS) + mlp(1)


def network_bytes(hidden: tuple[int, ...], memory: Memory, minibatch: int) -> int:
    """Bytes one member of a training batch needs for its network, estimated before anything is allocated: float32
    weights held five times (the member built alone, its row of the stacked parameter, the gradient and Adam's two
    moments) plus a minibatch's activations through actor and critic, forward and backward (about three copies)."""
    return 4 * (5 * network_params(hidden, memory) + 3 * 2 * minibatch * sum(hidden))


@dataclass
class PPOConfig:
    """PPO hyperparameters (CleanRL defaults where they fit)."""

    learning_rate: float = 5e-4
    """Adam step size."""
    gamma: float = 0.99
    """discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    num_minibatches: int = 8
    """minibatches per epoch."""
    update_epochs: int = 4
    """passes over each rollout."""
    clip_coef: float = 0.2
    """surrogate clipping."""
    clip_vloss: bool = True
    """clip the value loss like the policy loss."""
    ent_coef: float = 0.01
    """entropy bonus."""
    vf_coef: float = 0.5
    """value-loss weight."""
    max_grad_norm: float = 0.5
    """global gradient-norm clip."""
    norm_adv: bool = True
    """normalise advantages per minibatch."""
    reward_scale: float = 0.1
    """rewards are multiplied by this before GAE (CAGE2 returns reach -1000; values train better near 1)."""
    hidden: tuple[int, ...] = (64, 64)
    """hidden layer sizes of actor and critic."""
    decoy_memory: bool = False
    """add to the policy input which decoys blue has placed this episode (104 bits): CAGE2's observation does not
    show them, so without it a policy cannot tell a new decoy from a repeat, which does nothing (RESULTS.md, issue
    I)."""
    red_memory: bool = False
    """add to the policy input, per host, whether red activity and an exploit were seen this episode (26 bits): the
    observation shows a scan only on the step it happens, so without it a policy forgets which hosts red has found
    (rl/memory.py)."""
    mask_decoys: bool = False
    """with --decoy-memory: a Restore clears its host's decoy bits, and decoys that cannot take effect (wrong OS,
    port taken, already in place) are masked out of the policy's choice (rl/memory.py)."""
    clock_memory: bool = False
    """add to the policy input the steps taken so far this episode / 100 (1 input; rl/memory.py)."""
    opening: tuple[int, ...] = ()
    """blue's first actions of every episode, fixed (action indices 0..144, e.g. 51 116 55: two decoys on User2
    and one on Enterprise0, the CAGE2 winner's start actions); the policy acts from the step after them. The
    policy's own opening is tied to its later play (``cage2`` made to play this one untrained loses 0.1 to 0.7 points
    per cell), so an opening is trained with, not added after: training plays it and leaves its steps out of the
    update (RESULTS.md, issue M)."""


def _layer(i: int, o: int, std: float = float(np.sqrt(2))) -> nn.Linear:
    layer = nn.Linear(i, o)
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, 0.0)
    return layer


def _mlp(inp: int, hidden: tuple[int, ...], out: int, out_std: float) -> nn.Sequential:
    layers, d = [], inp
    for h in hidden:
        layers += [_layer(d, h), nn.Tanh()]
        d = h
    layers.append(_layer(d, out, out_std))
    return nn.Sequential(*layers)


class Agent(nn.Module):
    """Actor (77 -> 64 -> 64 -> 145, tanh) and a separate critic (77 -> 64 -> 64 -> 1); more inputs with an
    episode ``memory`` (``rl.memory``); ``opening``: the fixed first actions it was trained with (every acting
    function plays them: ``rl.actor.Actor.play``)."""

    def __init__(self, hidden: tuple[int, ...] = (64, 64), memory: Memory = Memory(), opening: tuple[int, ...] = ()):
        super().__init__()
        self.hidden, self.memory, self.opening = tuple(hidden), memory, tuple(opening)
        self.actor = _mlp(input_dim(memory), self.hidden, N_ACTIONS, 0.01)
        self.critic = _mlp(input_dim(memory), self.hidden, 1, 1.0)

    @property
    def device(self) -> torch.device:
        """Where the weights are: every acting function moves its inputs here (``rl.actor.Actor``, under
        ``make_act`` and the planner), so an agent on a GPU is fed from a CPU engine and the reverse."""
        return next(self.parameters()).device

    def value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x).squeeze(-1)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """The actor's logits, impossible decoys masked where the memory says so (``Memory.mask``)."""
        return self.memory.mask(self.actor(x), x)

    def act(self, x: torch.Tensor, generator: torch.Generator | None = None, greedy: bool = False):
        """(action, log_prob, value) for a batch of policy inputs, sampling with ``generator``."""
        return (*sample_actions(self.logits(x), generator, greedy), self.value(x))

    def evaluate(self, x: torch.Tensor, action: torch.Tensor):
        """(log_prob, entropy, value) of given actions."""
        return (*logp_entropy(self.logits(x), action), self.value(x))


def sample_actions(logits: torch.Tensor, generator: torch.Generator | None, greedy: bool = False):
    """(action, log_prob) from logits of any batch shape: :func:`choose_actions`' action and its log-probability."""
    logp_all = torch.log_softmax(logits, -1)
    action = choose_actions(logits, generator, greedy)
    return action, logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1)


def choose_actions(logits: torch.Tensor, generator: torch.Generator | None, greedy: bool = False) -> torch.Tensor:
    """The actions for logits of any batch shape: the most likely (``greedy``), or sampled by Gumbel-max with
    ``generator`` (seeded). Acting needs only this (``rl.actor.Actor.act``: no critic, no log-probabilities, half
    the network's cost per step); training's step adds the rest (:func:`sample_actions`).

    The uniforms are drawn on the generator's own device and moved to the logits': an evaluation's CPU generator
    (``evaluate --mode sampled --seed S``) then draws the same numbers whether the agent runs on the CPU or a GPU,
    so a sampled evaluation on CUDA plays the CPU's episodes up to float rounding of the logits (training's
    generator lives on the run's device: there the move is no move, and CUDA graphs capture it)."""
    if greedy:
        return logits.argmax(-1)
    where = generator.device if generator is not None else logits.device
    u = torch.rand(logits.shape, generator=generator, device=where).to(logits.device).clamp_(1e-20, 1.0)
    return (logits - torch.log(-torch.log(u))).argmax(-1)


def opening_at(opening: tuple[int, ...], t: int) -> int | None:
    """The opening's action at step ``t`` of an episode (0-based); None once the policy acts."""
    return opening[t] if t < len(opening) else None


def logp_entropy(logits: torch.Tensor, action: torch.Tensor):
    """(log_prob of ``action``, entropy) under categorical ``logits``."""
    logp_all = torch.log_softmax(logits, -1)
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1), entropy


def gae(rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor, terminated: torch.Tensor,
        episode_end: torch.Tensor, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimates over a (T, N) rollout.

    ``next_values[t]`` is V of the state after step t (for a truncated step: of the episode's final observation);
    ``terminated[t]`` zeroes that bootstrap; ``episode_end[t]`` (terminated or truncated) stops the recursion.
    Returns (advantages, returns = advantages + values).
    """
    T_ = rewards.shape[0]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[0])
    for t in reversed(range(T_)):
        delta = rewards[t] + gamma * next_values[t] * (1.0 - terminated[t]) - values[t]
        last = delta + gamma * lam * (1.0 - episode_end[t]) * last
        adv[t] = last
    return adv, adv + values


def bootstrapped_gae(rewards: torch.Tensor, values: torch.Tensor, last_value: torch.Tensor, final_values: torch.Tensor,
                     ends: torch.Tensor, cfg: "PPOConfig") -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`gae` of a (T, ...) rollout whose episodes end only by truncation: V(s_{t+1}) is the value the next step
    computed anyway (``last_value`` after the last step), and a truncated step (``ends``) bootstraps with
    ``final_values``, V of the episode's last observation."""
    next_values = torch.where(ends > 0, final_values, torch.cat([values[1:], last_value.unsqueeze(0)], 0))
    return gae(rewards, values, next_values, torch.zeros_like(ends), ends, cfg.gamma, cfg.gae_lambda)


def clipped_losses(newlogp, entropy, newv, old_logp, adv, ret, old_v, cfg: "PPOConfig", reduce):
    """PPO's clipped surrogate, (optionally clipped) value loss and entropy, each reduced by ``reduce`` (in training:
    :func:`masked_mean`, each member's mean over its own rows); also returns (logratio, ratio) for the statistics."""
    logratio = newlogp - old_logp
    ratio = logratio.exp()
    pg_loss = reduce(torch.max(-adv * ratio, -adv * ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef)))
    if cfg.clip_vloss:
        v_clipped = old_v + (newv - old_v).clamp(-cfg.clip_coef, cfg.clip_coef)
        v_loss = 0.5 * reduce(torch.max((newv - ret) ** 2, (v_clipped - ret) ** 2))
    else:
        v_loss = 0.5 * reduce((newv - ret) ** 2)
    return pg_loss, v_loss, reduce(entropy), logratio, ratio


@dataclass
class Rollout:
    """Flattened rollout tensors for one update: (N, ...) for one network, (n, N, ...) for a stack of n."""

    x: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    values: torch.Tensor


STAT_NAMES = ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac")
"""the loss statistics :func:`ppo_step` returns, in its order."""


def masked_mean(x: torch.Tensor, m: torch.Tensor, cnt: torch.Tensor) -> torch.Tensor:
    """Each member's mean of ``x`` (n, B) over its own rows (``m`` (n, B) of 0/1, ``cnt`` = m.sum(1)); 0 where a
    member has none."""
    return (x * m).sum(1) / cnt.clamp(min=1)


@torch.no_grad()
def clip_rows(grad: torch.Tensor, max_norm: float) -> None:
    """``clip_grad_norm_`` applied to each member's gradient (a row of ``grad``) on its own."""
    coef = (max_norm / (grad.norm(dim=1) + 1e-6)).clamp(max=1.0)
    grad.mul_(coef.unsqueeze(1))


def ppo_step(net: nn.Module, optimizer, mb: Rollout, mask: torch.Tensor, cfg: PPOConfig,
             members: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """One PPO minibatch step: the update that trains (``rl.stack.StackedUpdate`` runs it for every minibatch of every
    epoch, eagerly or replayed as a CUDA graph; ``rl.stack.ppo_update`` is it for one network).

    Why a stack: training updates ``n`` independent networks at once, the rows of one (n, P) parameter ``net.flat``
    (``rl.stack.AgentStack``; a single run is a stack of one), so every tensor here is (n, B): ``mb``'s fields are a
    minibatch's B rows of each member's rollout and ``mask`` (n, B, 0/1 floats) marks the rows a member trains on (a
    member whose budget covers fewer envs has rows masked out). ``members`` (indices into the stack): ``mb`` holds
    only those members' rows, the others are left out of the forward pass (the eager update of a partial batch).

    Per member, CleanRL's step: advantages normalised over its own rows (unbiased std), the clipped surrogate, the
    clipped value loss and the entropy as means over its own rows, ``loss = pg - ent_coef * entropy + vf_coef * v``.
    The members' losses are summed for one backward pass (they share no weights, so each row of the gradient is its
    own member's), each row is clipped to ``max_grad_norm`` on its own, and Adam steps the members with rows in this
    minibatch only (one with none keeps its weights and Adam state). No host synchronisation, so a CUDA graph can
    capture it: the gradient is dropped first, the captured backward then allocates the one every replay rewrites.

    Returns the members' statistics, (5, n) in :data:`STAT_NAMES` order, and their row counts (n,)."""
    optimizer.zero_grad()
    cnt = mask.sum(1)
    newlogp, entropy, newv = net.evaluate(mb.x, mb.actions, members)
    adv = mb.advantages
    if cfg.norm_adv:
        mean = masked_mean(adv, mask, cnt).unsqueeze(1)
        var = (((adv - mean) ** 2) * mask).sum(1) / (cnt - 1).clamp(min=1)
        adv = (adv - mean) / (var.sqrt().unsqueeze(1) + 1e-8)
    pg_loss, v_loss, ent, logratio, ratio = clipped_losses(
        newlogp, entropy, newv, mb.logprobs, adv, mb.returns, mb.values, cfg, lambda x: masked_mean(x, mask, cnt))
    loss = (pg_loss - cfg.ent_coef * ent + cfg.vf_coef * v_loss).sum()
    loss.backward()
    stepped = cnt > 0
    if members is not None:
        stepped = torch.zeros(net.n, dtype=torch.bool, device=mask.device).index_copy_(0, members, stepped)
    clip_rows(net.flat.grad, cfg.max_grad_norm)
    optimizer.step(stepped)
    with torch.no_grad():
        stats = torch.stack([pg_loss, v_loss, ent, masked_mean((ratio - 1) - logratio, mask, cnt),
                             masked_mean(((ratio - 1.0).abs() > cfg.clip_coef).float(), mask, cnt)])
    return stats, cnt


