"""A plain torch training loop on the native vector env: ``make_vector_env`` gives N CAGE2 envs stepped by one
compiled kernel behind gymnasium's ``VectorEnv`` API, so a policy-gradient loop is a few lines (here REINFORCE
with a mean baseline; the project's own trainer is PPO, ``workflow-rl train``).

    python examples/torch_vector.py --iterations 200 --num-envs 256
"""
from __future__ import annotations

import argparse

import torch

from workflow_rl import make_vector_env


def main(argv: list[str] | None = None) -> list[float]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--iterations", type=int, default=200, help="updates (each: one episode in every env)")
    p.add_argument("--num-envs", type=int, default=256)
    p.add_argument("--length", type=int, default=100, help="steps per episode")
    p.add_argument("--red-agent", default="B_lineAgent")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    torch.manual_seed(args.seed)
    env = make_vector_env(args.num_envs, args.red_agent, episode_length=args.length, seed=args.seed)
    n_obs, n_act = env.single_observation_space.shape[0], env.single_action_space.n
    policy = torch.nn.Sequential(torch.nn.Linear(n_obs, 64), torch.nn.Tanh(), torch.nn.Linear(64, n_act))
    opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
    returns = []
    obs, _ = env.reset()
    for it in range(args.iterations):
        logps, rewards = [], []
        for _ in range(args.length):   # one whole episode per env (they end together, by truncation)
            dist = torch.distributions.Categorical(logits=policy(torch.as_tensor(obs)))
            a = dist.sample()
            obs, r, _, _, _ = env.step(a.numpy())
            logps.append(dist.log_prob(a))
            rewards.append(torch.as_tensor(r))
        rew = torch.stack(rewards)                                   # (T, N)
        to_go = rew.flip(0).cumsum(0).flip(0)                         # undiscounted return from each step on
        advantage = to_go - to_go.mean(1, keepdim=True)
        loss = -(torch.stack(logps) * advantage).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        returns.append(float(rew.sum(0).mean()))
        if it % 10 == 0 or it == args.iterations - 1:
            print(f"iteration {it}: mean episode return {returns[-1]:.2f}")
    env.close()
    return returns


if __name__ == "__main__":
    main()
