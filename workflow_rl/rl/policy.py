"""A trained agent as a policy: the steps every acting loop shares, written once.

Acting with a trained agent is more than ``agent.act(obs)``: the policy input is the observation, a workflow
encoding and the agent's episode memory (``rl.memory``), which starts blank at each episode's first step, sees each
observation before the choice and takes each chosen action after it; the agent's ``--opening`` overrides its first
choices (``rl.ppo.opening_action``); and all of it happens on the agent's device. Evaluation
(:func:`workflow_rl.rl.evaluate.agent_act`, hence ``evaluate``, ``replay`` and a search's screen), the planner's
acting, its rollouts and its true-state bound (``workflow_rl.rl.planning.planner``) all act through a :class:`Policy`,
so those steps cannot drift apart between them.

The per-episode state is explicit: the memory tensor ((n, dim), or None for an agent without memory) that
:meth:`Policy.reset` returns and the caller carries from step to step (``Memory.saw`` and ``Memory.took`` update it
in place, as training does). A Policy itself holds no episode state, so one Policy serves any number of batches.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from workflow_rl.rl.memory import Memory, policy_input
from workflow_rl.rl.ppo import WORKFLOW_DIM, Agent, opening_action, opening_at
from workflow_rl.workflow import Workflow


@dataclass(frozen=True, eq=False)
class Policy:
    """An agent, the workflow encoding its inputs carry, and (through the agent) its memory, opening and device.

    Frozen: what a policy is does not change while it acts; a policy for another workflow or device is a new one.
    ``encoding`` is (25,) -- one workflow (zeros: unconstrained) for every env -- or (N, 25), each env of an
    N-env batch under its own (``rl.evaluate.evaluate_workflows``); it lives on the agent's device."""

    agent: Agent
    encoding: torch.Tensor

    @classmethod
    def of(cls, agent: Agent, workflow: Workflow | None = None, encodings: torch.Tensor | None = None) -> Policy:
        """The policy of ``agent`` under ``workflow`` (None: the zero encoding), or with ``encodings`` (N, 25),
        one per env."""
        enc = torch.as_tensor(workflow.encode() if workflow else np.zeros(WORKFLOW_DIM, np.float32)) \
            if encodings is None else encodings
        return cls(agent, enc.to(agent.device))

    @property
    def device(self) -> torch.device:
        """Where the policy computes: the agent's weights' device (:attr:`Agent.device`)."""
        return self.agent.device

    @property
    def memory(self) -> Memory:
        return self.agent.memory

    @property
    def opening(self) -> tuple[int, ...]:
        return self.agent.opening

    def reset(self, n: int) -> torch.Tensor | None:
        """The state of ``n`` envs at an episode's first step: blank memory on the policy's device (None without
        memory)."""
        return self.memory.blank(n, self.device)

    def inputs(self, obs: torch.Tensor, mem: torch.Tensor | None) -> torch.Tensor:
        """The policy input for observations ``obs`` (n, 52) on the policy's device: the memory ``mem`` first sees
        them (in place: memory at step t includes this step's observation), then observation, encoding and memory
        are joined."""
        self.memory.saw(mem, obs)
        return policy_input(obs, self.encoding.expand(obs.shape[0], WORKFLOW_DIM), mem)

    def took(self, mem: torch.Tensor | None, actions: torch.Tensor) -> None:
        """Record, in place, the actions (n,) the envs took this step in their memory."""
        self.memory.took(mem, actions)

    def forced(self, t: int) -> int | None:
        """The opening's action at step ``t`` of an episode; None once the policy chooses."""
        return opening_at(self.opening, t)

    def greedy(self, x: torch.Tensor) -> torch.Tensor:
        """The most likely action for each policy input of ``x`` (impossible decoys masked): what
        ``agent.act(x, greedy=True)`` chooses, without computing the value."""
        with torch.no_grad():
            return self.agent.logits(x).argmax(-1)

    def act(self, obs: torch.Tensor, mem: torch.Tensor | None, t: int, greedy: bool = True,
            generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(actions (n,), state) at step ``t`` for observations ``obs`` (n, 52) on any device, ``mem`` the state
        the previous step returned: blank again at ``t`` 0 or when the batch changes size (None is always
        accepted). Greedy, or sampled with ``generator``; during the opening the policy still chooses (a sampled
        run's draws do not depend on the opening) and the opening's action replaces its choice. The actions come
        back on ``obs``'s device."""
        o = obs.to(self.device)
        if t == 0 or mem is None or mem.shape[0] != o.shape[0]:
            mem = self.reset(o.shape[0])
        x = self.inputs(o, mem)
        with torch.no_grad():
            a = opening_action(self.opening, t, self.agent.act(x, generator, greedy=greedy)[0])
        self.took(mem, a)
        return a.to(obs.device), mem
