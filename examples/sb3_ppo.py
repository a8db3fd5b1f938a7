"""Stable-Baselines3's PPO on the registered single env ``workflow_rl/CAGE2-v0`` (the native engine behind
gymnasium's ``Env`` API), then scored with the project's CAGE2 evaluation on fresh, held-out episodes.

    pip install stable-baselines3
    python examples/sb3_ppo.py --timesteps 200000          # ~minutes on a laptop CPU; --timesteps 2048 to try it

Any gymnasium-compatible library works the same way: ``gym.make("workflow_rl/CAGE2-v0", red_agent=...,
episode_length=...)`` after ``import workflow_rl.envs``. The single env steps one episode at a time; for speed use
the vector env (``examples/torch_vector.py``, ``workflow_rl.make_vector_env``).
"""
from __future__ import annotations

import argparse

import gymnasium as gym
import torch
from stable_baselines3 import PPO

import workflow_rl.envs  # noqa: F401  (registers workflow_rl/CAGE2-v0)
from workflow_rl.rl.evaluate import evaluate_policy


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--timesteps", type=int, default=200_000, help="environment steps of training")
    p.add_argument("--n-steps", type=int, default=2048, help="PPO rollout length (steps per update)")
    p.add_argument("--red-agent", default="B_lineAgent")
    p.add_argument("--eval-episodes", type=int, default=200, help="held-out 100-step episodes to score it on")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    env = gym.make("workflow_rl/CAGE2-v0", red_agent=args.red_agent, episode_length=100)
    model = PPO("MlpPolicy", env, n_steps=args.n_steps, batch_size=min(64, args.n_steps), seed=args.seed,
                device="cpu", verbose=0)
    model.learn(total_timesteps=args.timesteps)

    def act(obs: torch.Tensor, t: int) -> torch.Tensor:   # the project's acting-function form: (N, 52) -> (N,)
        actions, _ = model.predict(obs.numpy(), deterministic=True)
        return torch.as_tensor(actions, dtype=torch.int64)

    result = evaluate_policy(act, args.red_agent, length=100, episodes=args.eval_episodes)
    print(f"SB3 PPO, {args.timesteps} steps against {args.red_agent}: {result.mean:.2f} ± {result.ci95:.2f} "
          f"per 100-step episode over {result.episodes} held-out episodes")
    return {"model": model, "result": result}


if __name__ == "__main__":
    main()
