"""One torch-facing step interface over every engine.

Trainers and evaluators never copy per step when the engine lives on their device.

``TorchStepper.step(actions) -> StepOut`` with tensors on the trainer's device. The native CPU kernel is read through
tensors that share its output buffers; the CUDA kernel's outputs stay on the GPU; any other gymnasium vector env (real
CybORG) goes through numpy.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from workflow_rl.envs.native_env import CudaVectorEnv, NativeVectorEnv


@dataclass
class StepOut:
    obs: torch.Tensor            # (N, 52) float32, first obs of the next episode where truncated
    reward: torch.Tensor         # (N,) float32
    truncated: torch.Tensor      # (N,) bool
    access: torch.Tensor         # (N, 13) int8, true red access for ``obs``
    final_obs: torch.Tensor | None  # (N, 52) last obs of the finished episode (rows where truncated)


class TorchStepper:
    def __init__(self, env, device: torch.device | str = "cpu"):
        self.env = env
        self.device = torch.device(device)
        self.num_envs = env.num_envs
        self._kind = "tensor" if isinstance(env, CudaVectorEnv) else (
            "native" if isinstance(env, NativeVectorEnv) else "gym")
        if self._kind == "native":
            if self.device.type != "cpu":
                raise ValueError("the native CPU kernel feeds a CPU policy: use device='cpu' (or a device='cuda' env)")
            env.copy = False
            b = env.buffers
            self._views = {k: torch.from_numpy(getattr(b, k)) for k in ("obs", "reward", "truncated", "access",
                                                                        "final_obs")}

    def reset(self, seed: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        obs, info = self.env.reset(seed=seed)
        return self._t(obs, torch.float32).clone(), self._t(info["red_access"], torch.int8).clone()

    def step(self, actions: torch.Tensor) -> StepOut:
        if self._kind == "native":
            self.env._step(actions.to(torch.int64).numpy())
            v = self._views
            return StepOut(v["obs"], v["reward"], v["truncated"], v["access"], v["final_obs"])
        if self._kind == "tensor":
            obs, rew, trunc, access = self.env.step_tensor(actions)
            return StepOut(obs, rew, trunc, access, self.env.last_final[0])
        obs, rew, _term, trunc, info = self.env.step(actions.cpu().numpy())
        final = None
        if "final_obs" in info:
            mask = np.asarray(info["_final_obs"])
            fo = np.zeros_like(np.asarray(obs, np.float32))
            fo[mask] = np.stack([np.asarray(o, np.float32) for o in np.asarray(info["final_obs"])[mask]])
            final = self._t(fo, torch.float32)
        return StepOut(self._t(obs, torch.float32), self._t(rew, torch.float32), self._t(trunc, torch.bool),
                       self._t(info["red_access"], torch.int8), final)

    def _t(self, x, dtype) -> torch.Tensor:
        return torch.as_tensor(np.asarray(x), device=self.device).to(dtype)

    @property
    def device_only(self) -> bool:
        """Whether a step is device work only, on fixed output buffers, with no host read (the CUDA engine): then
        a rollout of steps can be captured as a CUDA graph."""
        return self._kind == "tensor"

    @property
    def snapshots(self) -> bool:
        """Whether the engine's state can be saved and restored (the native engines; not real CybORG)."""
        return self._kind != "gym"

    def get_state(self):
        """Engine state for a checkpoint (native engines only; None for engines that cannot be snapshotted)."""
        if self._kind == "gym":
            return None
        s = self.env.sim_state()
        return dict(zip(s._fields, s))

    def set_state(self, d) -> bool:
        if d is None or self._kind == "gym":
            return False
        from workflow_rl.sim.native import SimState

        # a field the snapshot predates (a checkpoint of an older version) keeps this engine's value, which the run's
        # own settings gave it at construction (e.g. red_cdf, the red-agent mixture, added after snapshots existed)
        current = self.env.sim_state()
        self.env.load_sim_state(SimState(*(d[k] if k in d else getattr(current, k) for k in SimState._fields)))
        return True
