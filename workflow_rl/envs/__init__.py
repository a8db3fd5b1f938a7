"""Engines behind one vector-env contract: :func:`make_vector_env`."""
import gymnasium as _gym

from workflow_rl.envs.factory import RED_AGENTS, make_vector_env, parse_red_agent

if "workflow_rl/CAGE2-v0" not in _gym.registry:
    _gym.register("workflow_rl/CAGE2-v0", entry_point="workflow_rl.envs.native_env:NativeEnv")

__all__ = ["make_vector_env", "parse_red_agent", "RED_AGENTS"]
