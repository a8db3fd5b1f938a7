"""workflow-rl: workflow-conditioned reinforcement learning for CAGE Challenge 2 blue agents."""
from workflow_rl.envs import RED_AGENTS, make_vector_env, parse_red_agent

__version__ = "0.1.0"
__all__ = ["make_vector_env", "parse_red_agent", "RED_AGENTS", "__version__"]
