"""workflow-rl: workflow-conditioned reinforcement learning for CAGE Challenge 2 blue agents."""

__version__ = "0.1.0"
__all__ = ["make_vector_env", "parse_red_agent", "RED_AGENTS", "__version__"]
_FROM_ENVS = ("make_vector_env", "parse_red_agent", "RED_AGENTS")


def __getattr__(name: str):
    """The engines' entry points, loaded on first use (``from workflow_rl import make_vector_env`` works as ever):
    ``import workflow_rl`` loads no numpy, gymnasium or torch, so the ``workflow-rl`` command reaches its Ctrl-C
    handling (``cli.main``) in milliseconds, before anything slow loads. ``import workflow_rl.envs`` registers the
    gymnasium env."""
    if name in _FROM_ENVS:
        from workflow_rl import envs

        return getattr(envs, name)
    raise AttributeError(f"module 'workflow_rl' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_FROM_ENVS])
