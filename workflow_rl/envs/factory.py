"""``make_vector_env``: the public contract every engine, trainer and user builds on."""
from __future__ import annotations

from typing import Any

import gymnasium as gym

from workflow_rl.checks import check_bool, check_memory
from workflow_rl.envs.names import ENGINES, RED_AGENTS, check_device, parse_red_agent  # noqa: F401 (re-exported)
from workflow_rl.sim import tables as T


def make_vector_env(num_envs: int, red_agent: str = "B_lineAgent", engine: str = "native",
                    episode_length: int = 100, seed: int | None = None, device: str = "cpu",
                    **engine_options: Any) -> gym.vector.VectorEnv:
    """``num_envs`` CAGE2 Scenario2 blue-defender envs as a ``gymnasium.vector.VectorEnv``.

    Observations are float32 (num_envs, 52), actions ints in 0..144, rewards float32; episodes are truncated at
    ``episode_length`` and reset in the same step (``metadata["autoreset_mode"] == AutoresetMode.SAME_STEP``, last
    observation in ``info["final_obs"]``). ``info["red_access"]`` is the true red access per host, (num_envs, 13)
    int8: 0 none, 1 user, 2 privileged.

    engine="native" options: ``official_bugs`` (default True: reproduce CybORG's OTService-restore and Vsftpd bugs;
    False fixes both), ``copy`` (default True; False returns engine buffers overwritten by the next step),
    ``backend`` ("numba": the compiled CPU kernel, default on CPU; "torch": the tensor path, default on cuda/mps),
    ``compile`` (torch backend: wrap the step in torch.compile).
    engine="cyborg" options: ``vectorization`` ("sync", "pipes", "shared_memory"), ``start_method``
    ("spawn", "fork", "forkserver" or None), ``scenario`` (folder with Scenario2.yaml, or
    $WORKFLOW_RL_CAGE2_SCENARIO), ``timeout`` (seconds a worker may take per step before every worker is stopped
    and :class:`~workflow_rl.envs.cyborg_vector.EngineWorkerError` is raised; default 120).
    """
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
    if isinstance(episode_length, bool) or not isinstance(episode_length, int) or episode_length < 1:
        raise ValueError(f"episode_length must be an integer >= 1, got {episode_length!r}")
    red = parse_red_agent(red_agent)
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}: use one of {', '.join(ENGINES)}")
    device = check_device(device)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"seed must be an integer or None, got {seed!r}")

    if engine == "native":
        _check_options(engine_options, {"official_bugs", "copy", "backend", "compile"}, engine)
        for name in ("official_bugs", "copy", "compile"):
            if name in engine_options:
                check_bool(name, engine_options[name])
        check_memory(f"num_envs={num_envs:,}", num_envs * engine_bytes_per_env(), "use fewer envs")
        backend = engine_options.pop("backend", "numba" if device == "cpu" else "torch")
        if backend not in ("numba", "torch"):
            raise ValueError(f"unknown backend {backend!r}: use 'numba' (CPU kernel) or 'torch' (tensor path)")
        if backend == "numba" and device != "cpu":
            raise ValueError(f"the numba backend runs on the CPU: use device='cpu' or backend='torch' for {device!r}")
        from workflow_rl.envs.native import NativeVectorEnv, TensorVectorEnv

        if backend == "torch":
            return TensorVectorEnv(num_envs, T.RED_AGENT_NAMES[red], episode_length, seed, device=device,
                                   **engine_options)
        if "compile" in engine_options:
            raise ValueError("compile=True applies to backend='torch' only")
        return NativeVectorEnv(num_envs, T.RED_AGENT_NAMES[red], episode_length, seed, **engine_options)

    _check_options(engine_options, {"vectorization", "start_method", "scenario", "timeout"}, engine)
    if device != "cpu":
        raise ValueError(f"the cyborg engine runs on the CPU: use device='cpu', not {device!r}")
    from workflow_rl.envs.cyborg_vector import make_cyborg_vector_env

    return make_cyborg_vector_env(num_envs, red, episode_length, seed, **engine_options)


def _check_options(options: dict, allowed: set, engine: str) -> None:
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(unknown)} for engine {engine!r}: allowed are "
                         f"{', '.join(sorted(allowed))}")


def engine_bytes_per_env() -> int:
    """Bytes the native engine holds per env: its state and step buffers (the real CybORG engine holds far more
    per env, in its own processes; the native figure is the floor)."""
    from workflow_rl.sim import native as N

    return N.state_bytes_per_env(N.allocate_state(1)) + sum(a.nbytes for a in N.allocate_buffers(1))
