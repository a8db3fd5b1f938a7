"""Real CybORG envs behind gymnasium's vector classes: in-process, one process per env over pipes, or processes
writing observations into shared memory (gymnasium ``SyncVectorEnv`` / ``AsyncVectorEnv``)."""
from __future__ import annotations

import gymnasium as gym
from gymnasium.vector import AutoresetMode

from workflow_rl.envs.cyborg import CybORGEnv, install_scenario
from workflow_rl.envs.factory import START_METHODS, VECTORIZATIONS


class _EnvFn:
    """Picklable env constructor (spawned workers rebuild the env from it)."""

    def __init__(self, red: str, episode_length: int, scenario, seed):
        self.red, self.episode_length, self.scenario, self.seed = red, episode_length, scenario, seed

    def __call__(self):
        return CybORGEnv(self.red, self.episode_length, self.scenario, self.seed)


class SeededVectorEnv(gym.vector.VectorWrapper):
    """Gives env i the seed ``seed + i`` on the first reset, so a run seed defines every env's stream."""

    def __init__(self, env: gym.vector.VectorEnv, seed: int | None):
        super().__init__(env)
        self._seed = seed
        self._seeded = False

    def reset(self, *, seed=None, options=None):
        if seed is None and not self._seeded and self._seed is not None:
            seed = self._seed
        self._seeded = True
        if isinstance(seed, int):
            seed = [seed + i for i in range(self.num_envs)]
        return self.env.reset(seed=seed, options=options)


def make_cyborg_vector_env(num_envs: int, red: str, episode_length: int, seed: int | None,
                           vectorization: str = "sync", start_method: str | None = None, scenario=None):
    if vectorization not in VECTORIZATIONS:
        raise ValueError(f"unknown vectorization {vectorization!r}: use one of {', '.join(VECTORIZATIONS)}")
    if start_method not in START_METHODS:
        raise ValueError(f"unknown start_method {start_method!r}: use spawn, fork, forkserver or None")
    install_scenario(scenario)  # fail here, with the fix, rather than inside a worker
    fns = [_EnvFn(red, episode_length, scenario, None) for _ in range(num_envs)]
    mode = AutoresetMode.SAME_STEP
    if vectorization == "sync":
        env = gym.vector.SyncVectorEnv(fns, autoreset_mode=mode)
    else:
        env = gym.vector.AsyncVectorEnv(fns, shared_memory=vectorization == "shared_memory", context=start_method,
                                        autoreset_mode=mode)
    return SeededVectorEnv(env, seed)
