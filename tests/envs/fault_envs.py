"""Envs that misbehave on purpose, for the worker-fault tests (importable by worker processes)."""
import os
import time

import gymnasium as gym
import numpy as np


class FaultyEnv(gym.Env):
    def __init__(self, fault: str, at_step: int = 3):
        self.fault, self.at_step, self.t = fault, at_step, 0
        if fault == "slow start":   # an env that takes a while to build (real CybORG loads its scenario)
            time.sleep(1.0)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (52,), np.float32)
        self.action_space = gym.spaces.Discrete(145)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(52, np.float32), {"red_access": np.zeros(13, np.int8)}

    def step(self, action):
        self.t += 1
        if self.t == self.at_step:
            if self.fault == "raise":
                raise RuntimeError("boom in the worker")
            if self.fault == "die":
                os._exit(3)
            if self.fault == "hang":
                time.sleep(60)
        return np.zeros(52, np.float32), 0.0, False, False, {"red_access": np.zeros(13, np.int8)}


class FaultyFn:
    def __init__(self, fault):
        self.fault = fault

    def __call__(self):
        return FaultyEnv(self.fault)
