"""``make_vector_env``: the public contract every engine, trainer and user builds on."""
from __future__ import annotations

from typing import Any

import gymnasium as gym

from workflow_rl.checks import check_bool, check_episode_length

from workflow_rl.resources import check_memory
from workflow_rl.devices import check_device
from workflow_rl.envs.names import (ENGINES, RED_AGENTS, check_engine_plays, is_mixture,  # noqa: F401
                                    parse_red_agent, red_weights)  # (re-exported)


def make_vector_env(num_envs: int, red_agent: str = "B_lineAgent", engine: str = "native",
                    episode_length: int = 100, seed: int | None = None, device: str = "cpu",
                    **engine_options: Any) -> gym.vector.VectorEnv:
    """``num_envs`` CAGE2 Scenario2 blue-defender envs as a ``gymnasium.vector.VectorEnv``.

    ``red_agent``: one red agent (``B_lineAgent``, ``RedMeanderAgent``, ``SleepAgent`` or an alias) or a mixture
    (``mix``, or weights such as ``B_lineAgent:0.5,RedMeanderAgent:0.5``): each env draws one red agent per episode
    from it, from its own random stream (so the draw, like everything else, depends only on the seed and the env
    index). Blue is not told which one it faces.

    Observations are float32 (num_envs, 52), actions ints in 0..144, rewards float32; episodes are truncated at
    ``episode_length`` and reset in the same step (``metadata["autoreset_mode"] == AutoresetMode.SAME_STEP``, last
    observation in ``info["final_obs"]``). ``info["red_access"]`` is the true red access per host, (num_envs, 13)
    int8: 0 none, 1 user, 2 privileged; after a step, ``info["red_action"]`` (num_envs, 3) int8 is red's action of
    that step: kind (``sim.tables.RED_ACTIONS`` index), target (host; the subnet for DiscoverRemoteSystems; -1 none),
    success (0/1).

    engine="native" runs on ``device="cpu"`` (the numba CPU kernel) or ``device="cuda"`` (the same rules compiled as a
    CUDA kernel with numba-cuda; ``env.step_tensor`` keeps everything on the GPU). Options: ``official_bugs`` (default
    True: reproduce CybORG's OTService-restore and Vsftpd bugs; False fixes both), ``copy`` (default True; False
    returns engine buffers overwritten by the next step), ``gpu_layout`` (CUDA only: "F", the default, or "C", the
    memory order of the GPU arrays: see ``sim.native.GPU_LAYOUTS``).
    engine="cyborg" options: ``vectorization`` ("sync", "pipes", "shared_memory"), ``start_method``
    ("spawn", "fork", "forkserver" or None), ``scenario`` (folder with Scenario2.yaml, or
    $WORKFLOW_RL_CAGE2_SCENARIO), ``timeout`` (seconds a worker may take per step before every worker is stopped
    and :class:`~workflow_rl.envs.cyborg_vector.EngineWorkerError` is raised; default 120).
    """
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
    check_episode_length("episode_length", episode_length)
    red = parse_red_agent(red_agent)
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}: use one of {', '.join(ENGINES)}")
    device = check_device(device)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"seed must be an integer or None, got {seed!r}")

    if engine == "native":
        _check_native_options(engine_options, device)
        for name in ("official_bugs", "copy"):
            if name in engine_options:
                check_bool(name, engine_options[name])
        check_memory(f"num_envs={num_envs:,}", num_envs * engine_bytes_per_env(), "use fewer envs")
        from workflow_rl.envs.native_env import CudaVectorEnv, NativeVectorEnv, red_kind_weights

        if device.startswith("cuda"):
            return CudaVectorEnv(num_envs, red_kind_weights(red), episode_length, seed, device=device,
                                 **engine_options)
        return NativeVectorEnv(num_envs, red_kind_weights(red), episode_length, seed, **engine_options)

    _check_options(engine_options, {"vectorization", "start_method", "scenario", "timeout"}, engine)
    if device != "cpu":
        raise ValueError(f"the cyborg engine runs on the CPU: use device='cpu', not {device!r}")
    check_engine_plays(red, engine)
    check_memory(f"num_envs={num_envs:,}", num_envs * cyborg_bytes_per_env(
        engine_options.get("vectorization", "sync") != "sync", red), "use fewer envs")
    from workflow_rl.envs.cyborg_vector import make_cyborg_vector_env

    return make_cyborg_vector_env(num_envs, red, episode_length, seed, **engine_options)


def _check_native_options(options: dict, device: str) -> None:
    """The native engine's options; one ValueError naming the fix otherwise. The device picks the build of the one
    rule source (the CPU kernel or the CUDA kernel), so the torch tensor path's ``backend`` and ``compile`` options
    are gone."""
    for removed in ("backend", "compile"):
        if removed in options:
            raise ValueError(f"the {removed} option was removed with the torch tensor path: the native engine is one "
                             f"numba source compiled for the CPU (device='cpu') and as a CUDA kernel "
                             f"(device='cuda'); drop {removed}")
    _check_options(options, {"official_bugs", "copy", "gpu_layout"}, "native")
    if "gpu_layout" in options and not device.startswith("cuda"):
        raise ValueError("gpu_layout is the memory order of the CUDA engine's arrays: use it with device='cuda'")
    if device != "cpu" and not device.startswith("cuda"):
        raise ValueError(f"the native engine runs on the CPU or an NVIDIA GPU: use device='cpu' or 'cuda', not "
                         f"{device!r}")


def _check_options(options: dict, allowed: set, engine: str) -> None:
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(unknown)} for engine {engine!r}: allowed are "
                         f"{', '.join(sorted(allowed))}")


CYBORG_ENV_BYTES = 2 << 20
"""Memory one real CybORG env holds in its process (``envs.cyborg.CybORGEnv``: its simulation, red agent and
wrapper), rounded up from 1.4 MB measured (resident memory grown per env over eight envs stepped through a 100-step
episode; tracemalloc counts 0.6 MB of Python objects). ~3,000 times the native engine's ~700 bytes."""
CYBORG_PROCESS_BYTES = 128 << 20
"""Memory one worker process of real CybORG holds (``vectorization`` pipes or shared_memory, episode workers: a
Python with CybORG imported, one env): measured 82 to 118 MB of proportional set size (220 MB resident, the shared
libraries counted whole)."""


def cyborg_bytes_per_env(processes: bool, red_agent: str = "B_lineAgent") -> int:
    """Bytes one real CybORG env costs: in a process of its own (``processes``) or beside the others in this one;
    a red mixture builds one CybORG per agent of the mixture."""
    envs = len(red_weights(red_agent)) * CYBORG_ENV_BYTES
    return envs + (CYBORG_PROCESS_BYTES if processes else 0)


def engine_bytes_per_env() -> int:
    """Bytes the native engine holds per env: its state and step buffers (the real CybORG engine holds far more
    per env, in its own processes; the native figure is the floor)."""
    from workflow_rl.sim import native as N

    return N.state_bytes_per_env(N.allocate_state(1)) + sum(a.nbytes for a in N.allocate_buffers(1))
