"""The native engine behind gymnasium's vector API (``gymnasium.vector.VectorEnv``)."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

from workflow_rl.checks import check_bool, check_episode_length, check_int, check_seed
from workflow_rl.envs.names import red_weights
from workflow_rl.sim import attackers
from workflow_rl.sim import native as sim
from workflow_rl.sim import tables as T


def red_kind_weights(red_agent: str) -> np.ndarray:
    """(K,) float64 probabilities of the engine's K red kinds (``sim.attackers``: one per registered attacker, by
    kind) for a red agent or mixture name (``envs.names.red_weights``)."""
    w = np.zeros(attackers.n_kinds())
    for name, p in red_weights(red_agent).items():
        w[attackers.kind_of(name)] = p
    return w


def reset_seed(seed, num_envs: int) -> int | tuple[int, ...]:
    """A ``reset(seed=...)`` checked: an integer seed, or a list (tuple, array) of ``num_envs`` of them (numpy
    integers as ints); one ValueError naming the fix otherwise."""
    if isinstance(seed, (list, tuple, np.ndarray)):
        seeds = list(np.asarray(seed, dtype=object).ravel()) if isinstance(seed, np.ndarray) else list(seed)
        if len(seeds) != num_envs or (isinstance(seed, np.ndarray) and seed.ndim != 1):
            raise ValueError(f"reset(seed=...) takes one seed or a list of one seed per env ({num_envs}), got "
                             f"{len(seeds)}")
        return tuple(check_seed(f"seed[{i}]", _plain(s)) for i, s in enumerate(seeds))
    return check_seed("seed", _plain(seed))


def _fresh_seed() -> int:
    return int(np.random.SeedSequence().generate_state(1, np.uint64)[0])


def _plain(value):
    """A numpy integer as a Python int (a count read from an array is one), anything else as it is, for the checks
    to judge."""
    return int(value) if isinstance(value, np.integer) else value


class NativeVectorEnv(VectorEnv):
    """``num_envs`` CAGE2 Scenario2 blue-defender envs stepped by one compiled kernel.

    Episodes end only by truncation at ``episode_length`` and restart in the same step (``AutoresetMode.SAME_STEP``):
    the returned observation is then the new episode's first one and the last one is in ``info["final_obs"]``.
    ``info["red_access"]`` is the true red access per host, (num_envs, 13) int8, 0 none / 1 user / 2 privileged,
    for the state the returned observation describes (written by the kernel, so it costs nothing extra); after a
    step, ``info["red_action"]`` (num_envs, 3) int8 is red's action of that step: its kind (index into
    ``sim.tables.RED_ACTIONS``), its target (host index; the subnet index for DiscoverRemoteSystems; -1 none) and
    whether it succeeded (for viewers such as ``workflow-rl replay``; the kernel writes it too).

    ``copy=False`` returns the engine's own output buffers, which the next ``step`` overwrites (fastest);
    :meth:`step_tensor` gives torch tensors sharing those buffers, for trainers on the same device.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, num_envs: int, red_agent: int | np.ndarray, episode_length: int = 100,
                 seed: int | None = None, official_bugs: bool = True, copy: bool = True):
        """``red_agent``: a fixed red kind (``sim.tables.RED_*``, or one per env) or mixture weights over the
        kinds (floats, see :func:`red_kind_weights`), from which each env draws one red agent per episode."""
        # checked where every native env is built (``gym.make``, ``NativeEnv``, ``make_vector_env``, by hand), so a
        # negative length, a float or 'no' is refused here rather than stepping forever or meaning True
        self.num_envs = check_int("num_envs", _plain(num_envs), 1)
        self.episode_length = check_episode_length("episode_length", _plain(episode_length))
        self.official_bugs = check_bool("official_bugs", official_bugs)
        self.copy = check_bool("copy", copy)
        self.single_observation_space = gym.spaces.Box(0.0, 1.0, (4 * T.N_HOSTS,), np.float32)
        self.single_action_space = gym.spaces.Discrete(T.N_ACTIONS)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, self.num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, self.num_envs)
        self._red = sim.red_weights_of(red_agent, self.num_envs)
        self.state = sim.allocate_state(self.num_envs)
        self.buffers = sim.allocate_buffers(self.num_envs)
        self._seed = _fresh_seed() if seed is None else reset_seed(seed, self.num_envs)
        self._needs_reset = True
        self._tensors = None

    # ------------------------------------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None):
        """Start new episodes in every env. ``seed`` re-keys every env's random stream (None keeps the stream): one
        seed for the batch, or gymnasium's list of one seed per env (env i then plays what a one-env batch reset with
        seed ``seed[i]`` plays)."""
        if seed is not None:
            self._seed = reset_seed(seed, self.num_envs)
        if seed is not None or self._needs_reset:
            sim.seed_state(self.state, self._seed, self._red)
            self._needs_reset = False
        sim.reset_envs(self.state, self.buffers)
        self.buffers.truncated[:] = False
        return self._out(self.buffers.obs), {"red_access": self._out(self.buffers.access)}

    def step(self, actions):
        actions = self._check_actions(actions)
        self._step(actions)
        b = self.buffers
        infos: dict[str, Any] = {"red_access": self._out(b.access), "red_action": self._out(b.red_action)}
        if b.truncated.any():
            mask = b.truncated.copy()
            infos["final_obs"] = b.final_obs.copy()
            infos["_final_obs"] = mask
            infos["final_info"] = {"red_access": b.final_access.copy(), "_red_access": mask}
            infos["_final_info"] = mask
        terminated = np.zeros(self.num_envs, np.bool_)
        return self._out(b.obs), self._out(b.reward), terminated, self._out(b.truncated), infos

    # ------------------------------------------------------------------------------------------------- fast paths
    def _step(self, actions: np.ndarray) -> None:
        if self._needs_reset:
            raise RuntimeError("call reset() before step()")
        sim.step(self.state, actions, self.buffers, self.episode_length, self.official_bugs)

    def step_tensor(self, actions):
        """Step with a torch int tensor; returns (obs, reward, truncated, red_access) tensors sharing engine buffers.

        No copies and no validation beyond dtype/shape: the caller owns a policy that emits valid actions.
        """
        import torch

        if self._tensors is None:
            b = self.buffers
            self._tensors = tuple(torch.from_numpy(x) for x in (b.obs, b.reward, b.truncated, b.access))
        if actions.device.type != "cpu":
            raise ValueError("the native CPU engine takes CPU tensors; use device='cpu' for the policy")
        a = actions.to(torch.int64).numpy()
        if a.shape != (self.num_envs,):
            raise ValueError(f"actions must have shape ({self.num_envs},), got {tuple(a.shape)}")
        self._step(a)
        return self._tensors

    def _out(self, x: np.ndarray) -> np.ndarray:
        return x.copy() if self.copy else x

    def _check_actions(self, actions) -> np.ndarray:
        a = np.asarray(actions)
        if a.shape != (self.num_envs,):
            raise ValueError(f"actions must have shape ({self.num_envs},), got {a.shape}")
        if not np.issubdtype(a.dtype, np.integer):
            raise ValueError(f"actions must be integers in 0..{T.N_ACTIONS - 1}, got dtype {a.dtype}")
        if a.size and (a.min() < 0 or a.max() >= T.N_ACTIONS):
            raise ValueError(f"actions must be in 0..{T.N_ACTIONS - 1}, got values from {a.min()} to {a.max()}")
        return a.astype(np.int64, copy=False)

    def close_extras(self, **kwargs: Any) -> None:
        self._tensors = None

    def sim_state(self) -> sim.SimState:
        """A numpy copy of the current state (for checkpoints and comparisons)."""
        return sim.SimState(*(x.copy() for x in self.state))

    def load_sim_state(self, state: sim.SimState) -> None:
        """Make a saved state the current one."""
        for dst, src in zip(self.state, state):
            dst[...] = src


class NativeEnv(gym.Env):
    """Single-env view of the native engine (for gymnasium tools such as ``check_env`` and one-env scripts).

    ``render_mode="ansi"``: :meth:`render` returns the hosts by subnet with red's true access and the last step's
    red and blue actions as text (it reads only what ``info`` already carries, so it costs nothing when unused)."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, red_agent: str = "B_lineAgent", episode_length: int = 100, official_bugs: bool = True,
                 render_mode: str | None = None):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {', '.join(self.metadata['render_modes'])}, "
                             f"got {render_mode!r}")
        self.render_mode = render_mode
        self._vec = NativeVectorEnv(1, red_kind_weights(red_agent), episode_length,
                                    official_bugs=official_bugs)
        self.observation_space = self._vec.single_observation_space
        self.action_space = self._vec.single_action_space
        self._last: dict[str, Any] = {}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is None and self._vec._needs_reset:
            seed = int(self.np_random.integers(2**63))
        obs, info = self._vec.reset(seed=seed)
        self._last = {"t": 0, "red_access": info["red_access"][0]}
        return obs[0], {"red_access": info["red_access"][0]}

    def step(self, action):
        if not self.action_space.contains(action):
            raise ValueError(f"action must be an integer in 0..{T.N_ACTIONS - 1}, got {action!r}")
        obs, r, _, trunc, info = self._vec.step(np.array([action], np.int64))
        red_action = info["red_action"][0]
        if trunc[0]:  # the vector env already started the next episode; a single env reports the last obs
            obs, access = info["final_obs"], info["final_info"]["red_access"]
        else:
            access = info["red_access"]
        out = {"red_access": access[0], "red_action": red_action}
        self._last = {"t": self._last.get("t", 0) + 1, "blue": int(action), "reward": float(r[0]), **out}
        return obs[0], float(r[0]), False, bool(trunc[0]), out

    def render(self) -> str | None:
        """The current state as text (``render_mode="ansi"``), None otherwise."""
        if self.render_mode != "ansi":
            return None
        if not self._last:
            return "(call reset() first)\n"
        return render_text(self._last)


def render_text(step: dict) -> str:
    """Hosts by subnet with red's true access (``.`` none, ``u`` user, ``P`` privileged), and the step's actions."""
    marks = ".uP"
    lines = [f"t={step['t']}"]
    if "blue" in step:
        lines.append(f"blue: {T.blue_action_name(step['blue'])}   red: {T.red_action_name(*step['red_action'])}"
                     f"   reward {step['reward']:.1f}")
    for k, subnet in enumerate(T.SUBNETS):
        hosts = [f"{T.HOSTS[h]}:{marks[int(step['red_access'][h])]}" for h in range(T.N_HOSTS) if T.HOST_SUBNET[h] == k]
        lines.append(f"{subnet:<12} " + "  ".join(hosts))
    return "\n".join(lines) + "\n"


class CudaVectorEnv(NativeVectorEnv):
    """The native engine on an NVIDIA GPU (``device="cuda"``): the same rules compiled as a CUDA kernel, one thread
    per env (:mod:`workflow_rl.sim.cuda`), hence the same trajectories as the CPU kernel, bit for bit.

    The state lives on the GPU; the outputs are torch tensors on the device that the kernel writes in place through
    ``numba.cuda.as_cuda_array`` views, on torch's current stream. :meth:`step_tensor` keeps everything on the
    device; ``step`` returns numpy arrays (one host copy per step). Episodes are started (``reset``) on the CPU and
    the state uploaded, which costs one copy per reset, not per step. ``gpu_layout``: the memory order of the 2-D
    arrays on the GPU (``sim.native.GPU_LAYOUTS``: "C" env-major as on the CPU; "F" host-major, coalesced, the default,
    ``sim.native.GPU_LAYOUT``), the same results either way.
    """

    def __init__(self, num_envs: int, red_agent, episode_length: int = 100, seed: int | None = None,
                 official_bugs: bool = True, copy: bool = True, device: str = "cuda",
                 gpu_layout: str = sim.GPU_LAYOUT):
        import torch

        self.gpu_layout = sim.check_gpu_layout(gpu_layout)
        super().__init__(num_envs, red_agent, episode_length, seed, official_bugs, copy)
        self.device = torch.device(device)
        if self.device.type != "cuda":
            raise ValueError(f"CudaVectorEnv runs on an NVIDIA GPU: use device='cuda', not {device!r}")
        if not torch.cuda.is_available():
            raise ValueError("device 'cuda' requested but torch sees no CUDA GPU: use device='cpu'")
        if self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self._engine = cuda_engine()
        self.dstate = None
        self.outputs = None       # StepBuffers of torch tensors on the device
        self.last_final = None    # (final_obs, final_access) of the last step_tensor

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        import torch

        if self.dstate is not None and seed is None:
            self.state = self.sim_state()   # go on from the device's episode counters
        obs, info = super().reset(seed=seed, options=options)
        self.load_sim_state(self.state)
        for dst, src in zip(self.outputs, self.buffers):
            dst.copy_(torch.from_numpy(src))
        return obs, info

    def step_tensor(self, actions):
        """Step with an int tensor; returns (obs, reward, truncated, red_access) tensors on the device, overwritten by
        the next step, plus, in ``self.last_final``, the (final_obs, final_access) of envs that were just truncated.
        No validation beyond the shape: the caller owns a policy that emits valid actions."""
        import torch
        from numba import cuda

        if self.dstate is None:
            raise RuntimeError("call reset() before step()")
        if tuple(actions.shape) != (self.num_envs,):
            raise ValueError(f"actions must have shape ({self.num_envs},), got {tuple(actions.shape)}")
        a = actions.to(device=self.device, dtype=torch.int64)
        with cuda.gpus[self.device.index]:
            stream = cuda.external_stream(torch.cuda.current_stream(self.device).cuda_stream)
            self._engine.step(self.dstate, cuda.as_cuda_array(a), self._views, self.episode_length,
                              self.official_bugs, stream=stream)
        o = self.outputs
        self.last_final = (o.final_obs, o.final_access)
        return o.obs, o.reward, o.truncated, o.access

    def _step(self, actions: np.ndarray) -> None:
        import torch

        self.step_tensor(torch.as_tensor(actions, device=self.device))
        for dst, src in zip(self.buffers, self.outputs):
            dst[...] = src.cpu().numpy()

    def sim_state(self) -> sim.SimState:
        """A numpy copy of the current state (for checkpoints and comparisons)."""
        import torch
        from numba import cuda

        torch.cuda.current_stream(self.device).synchronize()
        with cuda.gpus[self.device.index]:
            return self._engine.to_host(self.dstate)

    def load_sim_state(self, state: sim.SimState) -> None:
        """Make a numpy state the current one (uploaded to the device, into the arrays already there when the
        shapes match: a rollout captured as a CUDA graph keeps stepping the memory it was captured with)."""
        import torch
        from numba import cuda

        torch.cuda.current_stream(self.device).synchronize()
        host = sim.SimState(*(np.asarray(x, order=self.gpu_layout) for x in state))
        with cuda.gpus[self.device.index]:
            if self.dstate is not None and all(d.shape == h.shape and d.dtype == h.dtype
                                               for d, h in zip(self.dstate, host)):
                for d, h in zip(self.dstate, host):
                    d.copy_to_device(h)
            else:
                self.dstate = self._engine.to_device(host, layout=self.gpu_layout)
        if self.outputs is None:   # .to() keeps the strides of the layout (torch's preserve_format)
            self.outputs = sim.StepBuffers(*(torch.from_numpy(np.asarray(x, order=self.gpu_layout)).to(self.device)
                                             for x in self.buffers))
            self._views = sim.StepBuffers(*(cuda.as_cuda_array(t) for t in self.outputs))


def cuda_engine():
    """:mod:`workflow_rl.sim.cuda`, or one ValueError saying what to install."""
    try:
        from workflow_rl.sim import cuda as engine   # first: it guards numba-cuda's import against numpy 2.5
    except Exception as e:  # noqa: BLE001 - any import failure means the same fix
        raise ValueError(f"device='cuda' needs numba-cuda (pip install 'workflow-rl[cuda]'): importing it failed "
                         f"with {type(e).__name__}: {e}") from e
    from numba import cuda

    if not cuda.is_available():
        import torch

        if not torch.cuda.is_available():
            raise ValueError("device='cuda': no CUDA GPU here; use the CPU")
        raise ValueError("device='cuda': numba-cuda sees no usable CUDA GPU or driver (torch does): check that "
                         "numba-cuda matches the driver's CUDA version (pip install 'numba-cuda[cu12]' or '[cu13]')")
    return engine
