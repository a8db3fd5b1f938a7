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
import traceback
from dataclasses import dataclass

import numpy as np
import torch

from workflow_rl.envs.cyborg_vector import EngineWorkerError
from workflow_rl.sim import tables as T


@dataclass
class Trajectory:
    """One finished episode, as the trainer needs it."""

    index: int
    x: np.ndarray          # (T, 77) policy inputs
    actions: np.ndarray    # (T,)
    logp: np.ndarray       # (T,)
    values: np.ndarray     # (T,)
    env_r: np.ndarray      # (T,)
    align_r: np.ndarray    # (T,)
    final_value: float     # V(last observation): bootstraps the time-limit end
    compliant: float
    violations: float
    neutral: float


def _make_single_env(engine: str, red: str, length: int, scenario):
    if engine == "cyborg":
        from workflow_rl.envs.cyborg import CybORGEnv

        return CybORGEnv(red, length, scenario)
    from workflow_rl.envs.native import NativeEnv

    return NativeEnv(red, length)


def _play(env, agent, enc, rank, lam, env_seed, sample_seed, index) -> Trajectory:
    from workflow_rl.rl.compliance import ComplianceTracker

    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(int(sample_seed))
    obs, info = env.reset(seed=int(env_seed))
    access = torch.as_tensor(info["red_access"]).unsqueeze(0)
    tracker = ComplianceTracker(1)
    xs, acts, logps, vals, env_r, align_r = [], [], [], [], [], []
    truncated = False
    while not truncated:
        x = torch.cat([torch.as_tensor(obs, dtype=torch.float32), enc]).unsqueeze(0)
        with torch.inference_mode():
            a, lp, v = agent.act(x, gen)
        obs, r, _term, truncated, info = env.step(int(a.item()))
        al = 0.0
        ai = int(a.item())
        if rank is not None and (T.A_REMOVE <= ai < T.A_REMOVE + T.N_HOSTS or ai >= T.A_RESTORE):
            al = float(tracker.step(a, access, rank, lam)[0].item())   # counts only change on fixes
        access = torch.as_tensor(info["red_access"]).unsqueeze(0)
        xs.append(x[0].numpy())
        acts.append(int(a.item()))
        logps.append(float(lp.item()))
        vals.append(float(v.item()))
        env_r.append(float(r))
        align_r.append(al)
    with torch.no_grad():
        fv = float(agent.value(torch.cat([torch.as_tensor(obs, dtype=torch.float32), enc]).unsqueeze(0)).item())
    return Trajectory(index, np.stack(xs), np.array(acts), np.array(logps, np.float32), np.array(vals, np.float32),
                      np.array(env_r, np.float32), np.array(align_r, np.float32), fv,
                      float(tracker.compliant.item()), float(tracker.violations.item()), float(tracker.neutral.item()))


def _worker(wid, conn, tasks, results, engine, red, length, scenario, hidden):
    from workflow_rl.rl.ppo import Agent

    try:
        env = _make_single_env(engine, red, length, scenario)
        agent = Agent(hidden)
        conn.send(("ready", wid))
        while True:
            msg = conn.recv()
            if msg[0] == "close":
                break
            _, weights, enc, rank, lam = msg
            agent.load_state_dict(weights)
            enc_t = torch.as_tensor(enc)
            rank_t = None if rank is None else torch.as_tensor(rank)
            while True:
                job = tasks.get()
                if job is None:
                    break
                results.put(("ok", _play(env, agent, enc_t, rank_t, lam, *job)))
    except (KeyboardInterrupt, EOFError):
        pass
    except Exception:  # noqa: BLE001 - report everything to the parent with the traceback
        results.put(("error", wid, traceback.format_exc()))


class EpisodeWorkerPool:
    """``n_workers`` processes playing whole episodes of ``engine`` against ``red`` with the latest policy."""

    def __init__(self, n_workers: int, red: str, episode_length: int = 100, engine: str = "cyborg",
                 scenario=None, start_method: str | None = None, hidden=(64, 64), timeout: float = 300.0):
        if engine == "cyborg":
            from workflow_rl.envs.cyborg import install_scenario

            install_scenario(scenario)
        # spawn by default: forking a parent whose torch/numba thread pools are running can deadlock the child
        ctx = mp.get_context(start_method or "spawn")
        self.timeout = timeout
        self.tasks, self.results = ctx.Queue(), ctx.Queue()
        self.conns, self.procs = [], []
        for w in range(n_workers):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_worker, args=(w, child, self.tasks, self.results, engine, red, episode_length,
                                                  scenario, tuple(hidden)), daemon=True)
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
                jobs: list[tuple[int, int, int]]) -> list[Trajectory]:
        """Play ``jobs`` = [(env_seed, sample_seed, index), ...]; returns their trajectories sorted by index."""
        w = {k: v.detach().cpu() for k, v in weights.items()}
        for c in self.conns:
            c.send(("round", w, enc, rank, lam))
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
        for p in self.procs:
            p.join(timeout=2)
            if p.is_alive():
                p.terminate()
                p.join(timeout=2)
        for q in (self.tasks, self.results):
            q.close()
            q.cancel_join_thread()

    def __del__(self):
        self.close()
