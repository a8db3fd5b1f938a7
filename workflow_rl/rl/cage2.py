"""``BlueAgent``: a trained agent with CybORG's agent interface, so it drops into CAGE2's own evaluation loop.

CybORG's evaluation script builds one agent object and, for each cell (30/50/100 steps x red agent), calls
``agent.get_action(observation, action_space)`` every step and ``agent.end_episode()`` after every episode; it never
tells the agent the episode's length. This class counts the step itself (``make_act``'s ``t``), starts a new
episode at ``end_episode`` and, like that loop, plays length-unknown unless told otherwise. Importing or
constructing it changes no global state (threads, seeds, environment variables).
"""
from __future__ import annotations

import numpy as np
import torch

from workflow_rl.rl import pretrained
from workflow_rl.rl.planning.planner import PlanConfig, make_act, resolve_workflow
from workflow_rl.sim import tables
from workflow_rl.checks import check_seed

__all__ = ["BlueAgent"]


def _plan_config(plan) -> PlanConfig | None:
    """``plan`` as a :class:`PlanConfig`: None or False (greedy), True (the default planner) or a PlanConfig."""
    if plan is None or plan is False:
        return None
    if plan is True:
        return PlanConfig()
    if isinstance(plan, PlanConfig):
        return plan.validate()
    raise TypeError(f"plan={plan!r}: use None (greedy), True (the default planner) or a PlanConfig")


class BlueAgent:
    """A CAGE2 blue agent: ``name`` a shipped agent (``pretrained:NAME``) or a checkpoint file; ``plan`` None
    (greedy), True or a :class:`PlanConfig` (the planner, with the native engine as its model); ``workflow`` the
    order to follow (None: the agent's own; ``"none"``: unconstrained); ``seed`` the planner's draws;
    ``episode_length`` only for a harness that knows it (CybORG's evaluation loop does not: leave it None).

    ``get_action`` takes the observation as CybORG's ``ChallengeWrapper`` gives it: the 52-bit vector, or the
    ``(observation, info)`` pair csle-cyborg's gymnasium-style ``reset`` returns."""

    def __init__(self, name: str = "pretrained:universal", plan=None, workflow=None, seed: int = 0,
                 episode_length: int | None = None):
        if not isinstance(name, str) or not name:
            raise TypeError(f"name={name!r}: use a shipped agent's name such as 'pretrained:universal' or a "
                            "checkpoint file's path")
        check_seed("seed", seed)
        self.name = name
        self.plan = _plan_config(plan)
        self.seed = int(seed)
        self.episode_length = episode_length
        with torch.random.fork_rng(devices=[]):   # building the network draws its (replaced) initial weights
            agent, own = pretrained.load(name, "cpu", planned=self.plan is not None)
        self.workflow = resolve_workflow(workflow, own)
        self._act = make_act(agent, self.plan, self.seed, self.workflow, episode_length)
        self.t = 0

    def get_action(self, observation, action_space=None) -> int:
        """The action (an int in 0..144) for this step's observation; the step count moves on by one.
        ``action_space`` (CybORG passes the wrapper's, a dict of its action kinds) is only checked when it gives a
        number of actions."""
        if isinstance(observation, tuple) and len(observation) == 2 and isinstance(observation[1], dict):
            observation = observation[0]   # csle-cyborg's reset returns (observation, info)
        if isinstance(observation, dict):
            raise ValueError("BlueAgent takes the ChallengeWrapper's 52-bit observation, got a dict (CybORG's raw "
                             "observation): wrap CybORG as ChallengeWrapper(env=cyborg, agent_name='Blue')")
        n = getattr(action_space, "n", action_space)   # gymnasium's Discrete(n).n is a numpy integer
        if isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_)) and n != tables.N_ACTIONS:
            raise ValueError(f"BlueAgent plays CAGE2 Scenario2's {tables.N_ACTIONS} blue actions (ChallengeWrapper("
                             f"env=cyborg, agent_name='Blue')), but the action space has {n}")
        if self.episode_length is not None and self.t >= self.episode_length:
            raise RuntimeError(f"get_action was called {self.t + 1} times in an episode of episode_length="
                               f"{self.episode_length}: call end_episode() after each episode")
        obs = np.asarray(observation, np.float32)
        if obs.size != 4 * tables.N_HOSTS:
            raise ValueError(f"BlueAgent plays one env: get_action takes one {4 * tables.N_HOSTS}-bit observation, "
                             f"got shape {obs.shape}; for a batch of envs act with "
                             "workflow_rl.rl.planning.planner.make_act (obs (N, 52))")
        action = self._act(obs.reshape(4 * tables.N_HOSTS), self.t)
        self.t += 1
        return int(action)

    def end_episode(self) -> None:
        """The episode is over: the next ``get_action`` is the first step of a new one (blank memory, a fresh
        belief)."""
        self.t = 0

    def train(self, results=None) -> None:
        """Not supported: a BlueAgent plays a trained agent (train one with ``workflow-rl train``)."""
        raise NotImplementedError("BlueAgent plays a trained agent and does not learn online: train one with "
                                  "`workflow-rl train` and pass its checkpoint as name=")

    def set_initial_values(self, action_space=None, observation=None) -> None:
        """Nothing to set: the agent knows CAGE2's 145 actions and its observation layout (a no-op)."""

    def __repr__(self) -> str:
        wf = "none" if self.workflow is None else str(self.workflow)
        return f"BlueAgent({self.name!r}, plan={self.plan is not None}, workflow={wf})"

