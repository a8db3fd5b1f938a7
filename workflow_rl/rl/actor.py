"""A trained agent as an actor: the steps every acting loop shares, written once.

Acting with a trained agent is more than ``agent.act(obs)``: the policy input is the observation, a workflow
encoding and the agent's episode memory (``rl.memory``), which starts blank at each episode's first step, sees each
observation before the choice and takes each played action after it; the agent's ``--opening`` overrides its first
choices; and all of it happens on the agent's device. Every acting path goes through an :class:`Actor`, so those
steps cannot drift apart: training's rollout (``rl.trainer``, an actor of the whole
:class:`~workflow_rl.rl.stack.AgentStack`) and its episode workers (``rl.episode_workers``), the one public acting
function :func:`~workflow_rl.rl.planning.planner.make_act` (hence ``evaluate``, ``replay`` and a search's screen),
the planner's choices, rollouts and true-state bound.

The per-episode state is explicit: the memory tensor ((n, dim), or None for an agent without memory) that
:meth:`Actor.reset` returns and the caller carries from step to step (:meth:`Actor.inputs` and :meth:`Actor.took`
update it in place). An Actor itself holds no episode state, so one Actor serves any number of batches.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from workflow_rl.rl.memory import Memory, forget, policy_input
from workflow_rl.rl.ppo import WORKFLOW_DIM, Agent, choose_actions, opening_at
from workflow_rl.workflow import Workflow

ActFn = Callable[[torch.Tensor, int], torch.Tensor]
"""``act(obs, t)``: the actions (N,) int64 for observations (N, 52) at step ``t`` of the envs' episodes (0 first),
on ``obs``'s device; what every evaluation harness calls (``rl.evaluate``, ``rl.viewer``). ``make_act``'s also take
one observation (52,) -- then they return an int -- or numpy. One whose draws belong to its episodes (the random
baseline, ``rl.evaluate.RandomAct``) has a ``start_round(seed)`` method, which every harness calls as it resets a
round of envs with ``seed`` (:func:`start_round`)."""


def start_round(act: ActFn, seed: int) -> None:
    """Tell ``act`` that a round of envs starts from ``reset(seed)``, if it asks to know (``start_round``): env i's
    draws can then be that episode's own, the same in whichever evaluation, part or round size plays it."""
    start = getattr(act, "start_round", None)
    if start is not None:
        start(seed)


@dataclass(frozen=True, eq=False)
class Actor:
    """An agent (an :class:`Agent`, or training's :class:`~workflow_rl.rl.stack.AgentStack`), the workflow
    encoding its inputs carry, its opening, and (through the agent) its memory and device.

    Frozen: what an actor is does not change while it acts; an actor for another workflow or device is a new one
    (training's envs switch workflows in place: it writes into ``encoding``). ``encoding`` is (25,) -- one workflow
    (zeros: unconstrained) for every env -- or (..., 25), env by env (``rl.evaluate.evaluate_workflows``' (N, 25),
    the trainer's (Q, n, 25)): the batch's observations are then read in that shape. It lives on the agent's
    device."""

    agent: Agent
    encoding: torch.Tensor
    opening: tuple[int, ...] = ()

    @classmethod
    def of(cls, agent: Agent, workflow: Workflow | None = None, encodings: torch.Tensor | None = None,
           opening: tuple[int, ...] | None = None) -> Actor:
        """The actor of ``agent`` under ``workflow`` (None: the zero encoding), or with ``encodings`` (N, 25),
        one per env; ``opening`` (default: the agent's own) its forced first actions."""
        enc = torch.as_tensor(workflow.encode() if workflow else np.zeros(WORKFLOW_DIM, np.float32)) \
            if encodings is None else encodings
        device = next(agent.parameters()).device
        return cls(agent, enc.to(device), tuple(agent.opening if opening is None else opening))

    @property
    def device(self) -> torch.device:
        """Where the actor computes: the agent's weights' device."""
        return next(self.agent.parameters()).device

    @property
    def memory(self) -> Memory:
        return self.agent.memory

    # ---------------------------------------------------------------------------------------- episode state
    def reset(self, n: int) -> torch.Tensor | None:
        """The state of ``n`` envs at an episode's first step: blank memory on the actor's device (None without
        memory)."""
        return self.memory.blank(n, self.device)

    def inputs(self, obs: torch.Tensor, mem: torch.Tensor | None) -> torch.Tensor:
        """The policy input for observations ``obs`` (n, 52) on the actor's device: the memory ``mem`` first sees
        them (in place: memory at step t includes this step's observation), then observation, encoding and memory
        are joined -- (n, D), or in the encoding's batch shape (the trainer's (Q, n, D))."""
        self.memory.saw(mem, obs)
        lead = obs.shape[:1] if self.encoding.dim() == 1 else self.encoding.shape[:-1]
        return policy_input(obs.reshape(*lead, -1), self.encoding.expand(*lead, WORKFLOW_DIM),
                            None if mem is None else mem.reshape(*lead, -1))

    def took(self, mem: torch.Tensor | None, actions: torch.Tensor) -> None:
        """Record, in place, the actions (n,) the envs played this step in their memory."""
        self.memory.took(mem, actions)

    @staticmethod
    def forget(mem: torch.Tensor | None, ended: torch.Tensor) -> None:
        """Blank, in place, the memory of the envs whose episode ``ended`` (n,) bool (their next step starts one)."""
        forget(mem, ended)

    # ------------------------------------------------------------------------------------------- choosing
    def forced(self, t: int) -> int | None:
        """The opening's action at step ``t`` of an episode; None once the policy chooses."""
        return opening_at(self.opening, t)

    @staticmethod
    def play(actions: torch.Tensor, forced: int | None) -> torch.Tensor:
        """What the envs play: the opening's action ``forced`` (:meth:`forced`) while it lasts, else ``actions``."""
        return actions if forced is None else torch.full_like(actions, forced)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """The policy's logits for inputs ``x``, impossible decoys masked (``Memory.mask``)."""
        with torch.no_grad():
            return self.agent.logits(x)

    def greedy(self, x: torch.Tensor) -> torch.Tensor:
        """The most likely action for each policy input of ``x`` (impossible decoys masked)."""
        return self.logits(x).argmax(-1)

    def sample(self, x: torch.Tensor, generator: torch.Generator | None, params: dict | None = None):
        """(actions, log-probabilities, values) sampled with ``generator``: training's step. ``params``: an
        ``AgentStack``'s weights as views (``AgentStack.params``), taken once per rollout."""
        return self.agent.act(x, generator) if params is None else self.agent.act(x, generator, params)

    def value(self, x: torch.Tensor, params: dict | None = None) -> torch.Tensor:
        """The critic's value of each policy input of ``x`` (``params``: as :meth:`sample`)."""
        return self.agent.value(x) if params is None else self.agent.value(x, params)

    def act(self, obs: torch.Tensor, mem: torch.Tensor | None, t: int, greedy: bool = True,
            generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(actions (n,), state) at step ``t`` for observations ``obs`` (n, 52) on any device, ``mem`` the state
        the previous step returned: blank again at ``t`` 0 or when the batch changes size (None is always
        accepted). Greedy, or sampled with ``generator``; during the opening a sampled actor still draws (its
        draws do not depend on the opening) and the opening's action replaces its choice. The actions come back
        on ``obs``'s device."""
        o = obs.to(self.device)
        if t == 0 or mem is None or mem.shape[0] != o.shape[0]:
            mem = self.reset(o.shape[0])
        x = self.inputs(o, mem)
        a = choose_actions(self.logits(x), generator, greedy)
        a = self.play(a, self.forced(t))
        self.took(mem, a)
        return a.to(obs.device), mem
