"""Episode workers: processes that each own one env and run *whole episodes* with a CPU copy of the policy.

Per-step vectorisation makes every worker wait for the slowest one at every step, and ships observations and actions
across processes 100 times per episode. Here the parent broadcasts the policy weights once per update and hands
out episode jobs through a queue; each worker plays its episodes to the end (sampling its own actions, computing the
alignment reward from the true red access locally) and returns the finished trajectory. Nobody waits at a step
barrier, and each job carries its own env seed and sampling seed, so the result does not depend on which worker ran
which episode.
"""
from __future__ import annotations

import multiprocessing as mp
import queue
import signal
import traceback
from dataclasses import dataclass

import numpy as np
import torch

from workflow_rl.envs.cyborg_vector import EngineWorkerError, stop_processes
from workflow_rl.interrupt import children_ignore_sigint
from workflow_rl.rl.actor import Actor
from workflow_rl.rl.compliance import ALIGNMENT_REWARDS, ComplianceTracker, fix_hosts
from workflow_rl.rl.memory import Memory
from workflow_rl.rl.ppo import Agent, PPOConfig, Rollout, gae
from workflow_rl.rl import reward
from workflow_rl.rl.schedule import episode_seed


@dataclass
class Trajectory:
    """One finished episode, as the trainer needs it."""

    index: int
    x: np.ndarray          # (T, 77 + memory) policy inputs (``rl.memory``)
    actions: np.ndarray    # (T,)
    logp: np.ndarray       # (T,)
    values: np.ndarray     # (T,)
    rewards: dict          # reward term name -> (T,) float32: the terms the run sums (``rl.reward.active``)
    final_value: float     # V(last observation): bootstraps the time-limit end
    compliant: float
    violations: float
    neutral: float


def _make_single_env(engine: str, red: str, length: int, scenario):
    if engine == "cyborg":
        from workflow_rl.envs.cyborg import CybORGEnv

        return CybORGEnv(red, length, scenario)
    from workflow_rl.envs.native_env import NativeEnv

    return NativeEnv(red, length)


def _play(env, agent, enc, rank, lam, env_seed, sample_seed, index, form: str = ALIGNMENT_REWARDS[0],
          weights: dict | None = None) -> Trajectory:
    """One whole episode; ``weights``: each reward term the run sums beyond the built-ins, its weight."""
    terms = tuple(t for t in reward.TERMS if t.always or t.name in (weights or {}))
    w = {name: torch.tensor([v], dtype=torch.float32) for name, v in (weights or {}).items()}
    gen = torch.Generator().manual_seed(int(sample_seed))
    obs, info = env.reset(seed=int(env_seed))
    access = torch.as_tensor(info["red_access"]).unsqueeze(0)
    tracker = ComplianceTracker(1, form=form)
    actor = Actor.of(agent, encodings=enc)   # the inputs and memory every acting path builds (``rl.actor``)
    mem = actor.reset(1)

    def x_of(o) -> torch.Tensor:
        return actor.inputs(torch.as_tensor(o, dtype=torch.float32).unsqueeze(0), mem)

    xs, acts, logps, vals = [], [], [], []
    rewards = {t.name: [] for t in terms}
    truncated = False
    while not truncated:   # no opening to play: --opening is refused with episode workers (``rl.config``)
        x = x_of(obs)
        with torch.inference_mode():
            a, lp, v = actor.sample(x, gen)
        actor.took(mem, a)
        obs, r, _term, truncated, info = env.step(int(a.item()))
        al = 0.0
        if rank is not None and bool(fix_hosts(a)[0]):
            al = float(tracker.step(a, access, rank, lam)[0].item())   # counts only change on fixes
        step = reward.Step(torch.tensor([r], dtype=torch.float32), torch.tensor([al], dtype=torch.float32),
                           a.reshape(1), access)
        parts = reward.step_rewards(terms, step, w)
        access = torch.as_tensor(info["red_access"]).unsqueeze(0)
        xs.append(x[0].numpy())
        acts.append(int(a.item()))
        logps.append(float(lp.item()))
        vals.append(float(v.item()))
        for name, part in parts.items():
            rewards[name].append(float(part[0]))
    with torch.no_grad():
        fv = float(actor.value(x_of(obs)).item())
    return Trajectory(index, np.stack(xs), np.array(acts), np.array(logps, np.float32), np.array(vals, np.float32),
                      {k: np.array(v, np.float32) for k, v in rewards.items()}, fv,
                      float(tracker.compliant.item()), float(tracker.violations.item()), float(tracker.neutral.item()))


def _worker(wid, conn, tasks, results, engine, red, length, scenario, hidden, memory):
    from workflow_rl import threads

    signal.signal(signal.SIGINT, signal.SIG_IGN)   # a terminal's Ctrl-C reaches the group: the parent's to handle
    threads.configure(cores=1)   # one env at a time, beside the other workers: a thread each, not one per core
    try:
        env = _make_single_env(engine, red, length, scenario)
        agent = Agent(hidden, memory)
        conn.send(("ready", wid))
        while True:
            msg = conn.recv()
            if msg[0] == "close":
                break
            _, weights, enc, rank, lam, form, term_weights = msg
            agent.load_state_dict(weights)
            enc_t = torch.as_tensor(enc)
            rank_t = None if rank is None else torch.as_tensor(rank)
            while True:
                job = tasks.get()
                if job is None:
                    break
                results.put(("ok", _play(env, agent, enc_t, rank_t, lam, *job, form=form, weights=term_weights)))
    except (KeyboardInterrupt, EOFError):
        pass
    except Exception:  # noqa: BLE001 - report everything to the parent with the traceback
        results.put(("error", wid, traceback.format_exc()))


class EpisodeWorkerPool:
    """``n_workers`` processes playing whole episodes of ``engine`` against ``red`` with the latest policy."""

    def __init__(self, n_workers: int, red: str, episode_length: int = 100, engine: str = "cyborg",
                 scenario=None, start_method: str | None = None, hidden=(64, 64), memory: Memory = Memory(),
                 timeout: float = 300.0):
        if engine == "cyborg":
            from workflow_rl.envs.cyborg import install_scenario

            install_scenario(scenario)
        # spawn by default: forking a parent whose torch/numba thread pools are running can deadlock the child
        ctx = mp.get_context(start_method or "spawn")
        self.timeout = timeout
        self.tasks, self.results = ctx.Queue(), ctx.Queue()
        self.conns, self.procs = [], []
        with children_ignore_sigint():   # the workers are born deaf to Ctrl-C, as ``_worker`` keeps them
            for w in range(n_workers):
                parent, child = ctx.Pipe()
                p = ctx.Process(target=_worker, args=(w, child, self.tasks, self.results, engine, red,
                                                      episode_length, scenario, tuple(hidden), memory), daemon=True)
                p.start()
                child.close()
                self.conns.append(parent)
                self.procs.append(p)
        for c, p in zip(self.conns, self.procs):
            if not c.poll(timeout):
                self.close()
                raise EngineWorkerError(f"an episode worker did not start within {timeout:g} s")
            try:
                c.recv()
            except EOFError:
                err = self._drain_error()
                self.close()
                raise EngineWorkerError(f"an episode worker failed to start: {err or p.exitcode}") from None
        self.closed = False

    def _drain_error(self) -> str | None:
        try:
            item = self.results.get(timeout=1.0)
        except queue.Empty:
            return None
        return item[2] if item[0] == "error" else None

    def collect(self, weights: dict, enc: np.ndarray, rank: np.ndarray | None, lam: float,
                jobs: list[tuple[int, int, int]], form: str = ALIGNMENT_REWARDS[0],
                term_weights: dict | None = None) -> list[Trajectory]:
        """Play ``jobs`` = [(env_seed, sample_seed, index), ...]; returns their trajectories sorted by index.
        ``lam`` and ``form``: the alignment reward's weight and form (``rl.compliance``); ``term_weights``: each
        other reward term the run sums, its weight (``rl.reward``)."""
        w = {k: v.detach().cpu() for k, v in weights.items()}
        for c in self.conns:
            c.send(("round", w, enc, rank, lam, form, dict(term_weights or {})))
        for j in jobs:
            self.tasks.put(j)
        for _ in self.procs:
            self.tasks.put(None)
        out = []
        while len(out) < len(jobs):
            try:
                item = self.results.get(timeout=self.timeout)
            except queue.Empty:
                dead = [p.exitcode for p in self.procs if not p.is_alive()]
                why = f"workers died with exit codes {dead}" if dead else "a worker hangs"
                self.close()
                raise EngineWorkerError(f"no episode finished within {self.timeout:g} s ({why}); all workers were "
                                        "stopped") from None
            if item[0] == "error":
                self.close()
                raise EngineWorkerError(f"episode worker {item[1]} raised:\n{item[2]}")
            out.append(item[1])
        return sorted(out, key=lambda t: t.index)

    def close(self) -> None:
        if getattr(self, "closed", False):
            return
        self.closed = True
        for c in self.conns:
            try:
                c.send(("close",))
            except (BrokenPipeError, OSError):
                pass
        stop_processes(self.procs, wait_first=2.0)   # whoever did not exit: SIGTERM, then SIGKILL after a grace
        for q in (self.tasks, self.results):
            q.close()
            q.cancel_join_thread()

    def __del__(self):
        self.close()


def collect_episodes(pool: EpisodeWorkerPool, agent: Agent, enc: np.ndarray, rank: np.ndarray | None, lam: float,
                     seed: int, first_episode: int, n_episodes: int, ppo: PPOConfig, device: torch.device,
                     form: str = ALIGNMENT_REWARDS[0], term_weights: dict | None = None) -> tuple[Rollout, dict]:
    """``n_episodes`` whole episodes played by the pool with ``agent``: the rollout (T x n_episodes rows, GAE with
    each episode's time-limit end bootstrapped by the value of its last observation) and the finished-episode
    lists the trainer logs. Episode k's env and sampling seeds come from (seed, first_episode + k), so the result
    does not depend on the number of workers. ``term_weights``: the reward terms summed beyond the built-ins, each
    its weight (``rl.reward``)."""
    jobs = [(episode_seed(seed, first_episode + k, 0), episode_seed(seed, first_episode + k, 1), k)
            for k in range(n_episodes)]
    trajs = pool.collect(agent.state_dict(), enc, rank, lam, jobs, form, term_weights)

    def stack(name):
        return torch.as_tensor(np.stack([getattr(t, name) for t in trajs], 1), device=device)

    x, acts, logp, vals = stack("x"), stack("actions"), stack("logp"), stack("values")
    parts = {k: torch.as_tensor(np.stack([t.rewards[k] for t in trajs], 1), device=device) for k in trajs[0].rewards}
    rews = reward.compose(parts, ppo.reward_scale)
    final_v = torch.as_tensor([t.final_value for t in trajs], device=device, dtype=torch.float32)
    next_vals = torch.cat([vals[1:], final_v.unsqueeze(0)], 0)
    ends = torch.zeros_like(vals)
    ends[-1] = 1.0
    adv, ret = gae(rews, vals, next_vals, torch.zeros_like(ends), ends, ppo.gamma, ppo.gae_lambda)
    batch = Rollout(x.reshape(-1, x.shape[-1]), acts.reshape(-1), logp.reshape(-1), adv.reshape(-1),
                    ret.reshape(-1), vals.reshape(-1))
    finished = {reward.returns_key(t): parts[t.name].sum(0).tolist() if t.name in parts else [0.0] * len(trajs)
                for t in reward.TERMS}
    finished.update({"compliant": [t.compliant for t in trajs], "violations": [t.violations for t in trajs],
                     "neutral": [t.neutral for t in trajs]})
    return batch, finished
