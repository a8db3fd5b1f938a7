"""Training one workflow-conditioned PPO policy: rollouts on many envs, alignment reward, compliance gate,
logs, atomic checkpoints and bit-identical resume.

``Trainer(cfg).run()`` trains until the first of: batch compliance >= threshold (once every env finished
``min_episodes`` episodes and ``min_fixes`` fixes were counted), every env finished ``max_episodes`` episodes, or the
total episode budget ``num_episodes`` is spent. Ctrl-C finishes the current update, saves and exits; ``resume``
continues from the latest checkpoint exactly as if never stopped (native engine).
"""
from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import signal
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from workflow_rl.envs.factory import make_vector_env, parse_red_agent
from workflow_rl.rl.compliance import ComplianceTracker
from workflow_rl.rl.envstep import TorchStepper
from workflow_rl.rl.ppo import Agent, PPOConfig, Rollout, bootstrapped_gae, gae, ppo_update
from workflow_rl.workflow import Workflow

CHECKPOINT_VERSION = 1
LOG_COLUMNS = ["workflow_id", "workflow", "update", "episodes", "total_episodes", "env_reward", "alignment_bonus",
               "total_reward", "compliance", "compliance_env_mean", "avg_fixes", "collection_time", "update_time",
               "sps", "global_step", "mean100", "policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac"]


@dataclass
class TrainConfig:
    """Everything a training run depends on (saved as config.json)."""

    workflow: str | None = "critical_first"
    """workflow order (names, codes D,E,OS,OH,U or a named order); None trains unconditioned PPO."""
    red_agent: str = "B_lineAgent"
    engine: str = "native"
    n_envs: int = 200
    episode_length: int = 100
    update_every_steps: int = 100
    """steps of all envs per PPO update (default: one full episode, n_envs x 100 transitions)."""
    max_episodes: int = 50
    """per env: stop once every env has finished this many episodes."""
    min_episodes: int = 5
    """per env: the compliance gate is not checked before every env finished this many."""
    num_episodes: int | None = None
    """total episode budget over all envs (never exceeded; None = max_episodes * n_envs)."""
    compliance_threshold: float = 0.95
    min_fixes: int = 50
    """counted (compliant or violating) fixes an update needs before its compliance can stop training."""
    alignment_lambda: float = 30.0
    device: str = "cpu"
    seed: int = 0
    vectorization: str = "sync"
    """cyborg engine: sync, pipes, shared_memory; "episodes" (either engine): episode workers (no step barrier)."""
    n_workers: int | None = None
    """episode workers (vectorization="episodes"); default: the number of CPU cores, at most n_envs."""
    parallel_start_method: str | None = None
    scenario: str | None = None
    official_bugs: bool = True
    native_backend: str | None = None
    """native engine: "numba" (CPU kernel) or "torch" (tensor path); None = numba on CPU, torch elsewhere."""
    compile: bool = False
    """native torch tensor path (a GPU): wrap the engine step in torch.compile, which fuses its many small kernels."""
    checkpoint_every: int = 10
    """updates between checkpoints (one is always written at the end)."""
    tensorboard: bool = False
    ppo: PPOConfig = field(default_factory=PPOConfig)

    def validate(self) -> None:
        parse_red_agent(self.red_agent)
        if self.workflow is not None:
            Workflow.parse(self.workflow)
        for name in ("n_envs", "episode_length", "update_every_steps", "max_episodes", "checkpoint_every"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name.replace('_', '-')} must be an integer >= 1, got {v!r}")
        if self.min_episodes < 0 or self.min_fixes < 0:
            raise ValueError("min-episodes and min-fixes must be >= 0")
        if self.num_episodes is not None and self.num_episodes < 1:
            raise ValueError(f"num-episodes must be >= 1, got {self.num_episodes}")
        if self.vectorization not in ("sync", "pipes", "shared_memory", "episodes"):
            raise ValueError(f"unknown vectorization {self.vectorization!r}: use sync, pipes, shared_memory or "
                             "episodes")
        if self.vectorization == "episodes" and self.update_every_steps != self.episode_length:
            raise ValueError("episode workers return whole episodes: use update-every-steps = episode-length")
        if not 0.0 < self.compliance_threshold <= 1.0:
            raise ValueError(f"compliance-threshold must be in (0, 1], got {self.compliance_threshold}")
        if self.alignment_lambda < 0:
            raise ValueError(f"alignment-lambda must be >= 0, got {self.alignment_lambda}")
        if self.compile and (self.engine != "native" or self.backend == "numba"):
            raise ValueError("--compile applies to the native engine's torch tensor path: use it with --device cuda")
        if self.ppo.learning_rate <= 0:
            raise ValueError(f"learning-rate must be > 0, got {self.ppo.learning_rate}")

    @property
    def backend(self) -> str | None:
        """The native engine's backend this run uses (None for the cyborg engine)."""
        if self.engine != "native":
            return None
        return self.native_backend or ("numba" if self.device == "cpu" else "torch")

    def engine_options(self) -> dict:
        """``make_vector_env`` options of this run's engine."""
        if self.engine == "native":
            return {"official_bugs": self.official_bugs, "backend": self.backend,
                    **({"compile": True} if self.compile else {})}
        return {"vectorization": self.vectorization, "start_method": self.parallel_start_method,
                "scenario": self.scenario}

    @property
    def budget(self) -> int:
        cap = self.max_episodes * self.n_envs
        return cap if self.num_episodes is None else min(cap, self.num_episodes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        d = dict(d)
        ppo = PPOConfig(**{**d.pop("ppo", {}), "hidden": tuple(d.get("ppo", {}).get("hidden", (64, 64)))}) \
            if "ppo" in d else PPOConfig()
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known}, ppo=ppo)


class CheckpointError(ValueError):
    """A checkpoint that cannot be used (corrupt, wrong version, or from a different configuration)."""


def atomic_save(obj, path: Path) -> None:
    """torch.save to a temporary file in the same folder, fsync, then rename over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_checkpoint(path: Path, device: str = "cpu") -> dict:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}: pass a file written by `workflow-rl train`")
    try:
        ck = torch.load(path, map_location=device, weights_only=False)
    except Exception as e:  # noqa: BLE001 - any unpickling failure means the file is unusable
        raise CheckpointError(f"checkpoint {path} is corrupt or not a workflow-rl checkpoint ({type(e).__name__}); "
                              "use another checkpoint or retrain") from None
    if not isinstance(ck, dict) or ck.get("format") != "workflow-rl" or "agent" not in ck:
        raise CheckpointError(f"{path} is not a workflow-rl checkpoint: use a file written by `workflow-rl train`")
    if ck.get("version") != CHECKPOINT_VERSION:
        raise CheckpointError(f"checkpoint {path} has version {ck.get('version')}, this workflow-rl reads "
                              f"{CHECKPOINT_VERSION}: retrain, or use the workflow-rl release that wrote it")
    return ck


def check_same_run(ck: dict, cfg: TrainConfig) -> None:
    """Refuse to continue a checkpoint under settings that would make it a different run (budget and stop limits
    may differ)."""
    saved = TrainConfig.from_dict(ck["config"])
    for name in ("workflow", "red_agent", "engine", "n_envs", "episode_length", "update_every_steps", "seed"):
        if getattr(saved, name) != getattr(cfg, name):
            raise CheckpointError(f"checkpoint was written with {name}={getattr(saved, name)!r}, this run has "
                                  f"{getattr(cfg, name)!r}: resume with the original settings")


def agent_from_checkpoint(ck: dict, device: str = "cpu") -> Agent:
    hidden = tuple(ck["config"]["ppo"]["hidden"])
    agent = Agent(hidden).to(device)
    try:
        agent.load_state_dict(ck["agent"])
    except RuntimeError as e:
        raise CheckpointError(f"checkpoint weights do not fit the network ({e.__class__.__name__}): the file is "
                              "damaged or was edited; retrain") from None
    return agent


class Trainer:
    """Owns the env, the agent, the optimiser and every counter; ``run()`` trains."""

    def __init__(self, cfg: TrainConfig, out_dir: str | Path, checkpoint_dir: str | Path | None = None,
                 init_agent_state: dict | None = None, init_optimizer_state: dict | None = None,
                 progress: bool = True, log_prefix: dict | None = None):
        cfg.validate()
        self.cfg = cfg
        self.out = Path(out_dir)
        self.ckpt_dir = Path(checkpoint_dir) if checkpoint_dir else self.out / "checkpoints"
        self.progress = progress
        self.log_prefix = log_prefix or {}
        self.device = torch.device(cfg.device)
        self.workflow = Workflow.parse(cfg.workflow) if cfg.workflow is not None else None
        torch.manual_seed(cfg.seed)
        self.gen = torch.Generator(device=self.device).manual_seed(cfg.seed)
        self.agent = Agent(cfg.ppo.hidden).to(self.device)
        if init_agent_state is not None:
            self.agent.load_state_dict(init_agent_state)
        self.opt = torch.optim.Adam(self.agent.parameters(), lr=cfg.ppo.learning_rate, eps=1e-5)
        if init_optimizer_state is not None:
            self.opt.load_state_dict(init_optimizer_state)
            for g in self.opt.param_groups:
                g["lr"] = cfg.ppo.learning_rate
        self.pool = self.env = self.stepper = None
        if cfg.vectorization == "episodes":
            from workflow_rl.envs.episode_workers import EpisodeWorkerPool

            self.pool = EpisodeWorkerPool(cfg.n_workers or max(1, min(cfg.n_envs, os.cpu_count() or 1)),
                                          parse_red_agent(cfg.red_agent), cfg.episode_length, cfg.engine,
                                          cfg.scenario, cfg.parallel_start_method, cfg.ppo.hidden)
        else:
            self.env = self._make_env()
            self.stepper = TorchStepper(self.env, self.device)
        self._snapshots = self.stepper is None or self.stepper.snapshots
        n = cfg.n_envs
        enc = self.workflow.encode() if self.workflow else np.zeros(25, np.float32)
        self.wf_enc = torch.as_tensor(enc, device=self.device).expand(n, 25)
        self.rank = torch.as_tensor(self.workflow.rank if self.workflow else np.arange(5), device=self.device)
        self.tracker = ComplianceTracker(n, self.device)
        # counters
        self.update = 0
        self.global_step = 0
        self.total_episodes = 0
        self.episodes_per_env = np.zeros(n, np.int64)
        self.ep_env_ret = torch.zeros(n, dtype=torch.float64, device=self.device)
        self.ep_align_ret = torch.zeros(n, dtype=torch.float64, device=self.device)
        self.ep_len = torch.zeros(n, dtype=torch.int64, device=self.device)
        self.recent = deque(maxlen=100)
        self.stop_reason: str | None = None
        self.round_active = cfg.n_envs
        self.last_compliance = float("nan")
        self.obs = self.access = None
        if self.stepper is not None:
            self.obs, self.access = self.stepper.reset(seed=cfg.seed)
        self._interrupt = GracefulInterrupt("this update")
        self._tb = None

    # ----------------------------------------------------------------------------------------------------- setup
    def _make_env(self):
        c = self.cfg
        return make_vector_env(c.n_envs, c.red_agent, engine=c.engine, episode_length=c.episode_length,
                               seed=c.seed, device=c.device, **c.engine_options())

    def x(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.cat([obs, self.wf_enc[: obs.shape[0]]], 1)

    # --------------------------------------------------------------------------------------------------- rollout
    def _collect(self, steps: int, active: int):
        """Run ``steps`` steps of all envs; returns the rollout (restricted to the first ``active`` envs) and the
        episodes finished by those envs."""
        n, dev = self.cfg.n_envs, self.device
        xs = torch.zeros((steps, n, 77), device=dev)
        acts = torch.zeros((steps, n), dtype=torch.int64, device=dev)
        logps, vals, rews, final_v = (torch.zeros((steps, n), device=dev) for _ in range(4))
        ends = torch.zeros((steps, n), device=dev)
        finished = {"env_return": [], "align_return": [], "length": [], "compliant": [], "violations": [],
                    "neutral": []}
        lam = self.cfg.alignment_lambda if self.workflow is not None else 0.0
        scale = self.cfg.ppo.reward_scale
        x = self.x(self.obs)
        for t in range(steps):
            with torch.no_grad():
                a, logp, v = self.agent.act(x, self.gen)
            access_before = self.access
            out = self.stepper.step(a)
            align, _ = self.tracker.step(a, access_before, self.rank, lam) if self.workflow is not None else (
                torch.zeros(n, device=dev), None)
            r_env = out.reward.to(dev)
            xs[t], acts[t], logps[t], vals[t] = x, a, logp, v
            rews[t] = (r_env + align) * scale
            self.ep_env_ret += r_env
            self.ep_align_ret += align
            self.ep_len += 1
            trunc = out.truncated.to(dev)
            x_next = self.x(out.obs)
            # envs start together and episodes have a fixed length, so whether this step ends episodes is known on
            # the host without reading the device (no per-step synchronisation on a GPU)
            ends_now = (self.global_step + t + 1) % self.cfg.episode_length == 0
            if ends_now:   # bootstrap a time-limit end with the value of the episode's last observation
                with torch.no_grad():
                    final_v[t] = self.agent.value(self.x(out.final_obs.to(dev)))
            ends[t] = trunc.float()
            if ends_now:
                idx = trunc.nonzero().squeeze(1)
                keep = idx[idx < active]
                counts = self.tracker.finish(trunc)
                sel = (idx < active).cpu().numpy()
                finished["env_return"] += self.ep_env_ret[keep].tolist()
                finished["align_return"] += self.ep_align_ret[keep].tolist()
                finished["length"] += self.ep_len[keep].tolist()
                finished["compliant"] += counts.compliant.cpu().numpy()[sel].tolist()
                finished["violations"] += counts.violations.cpu().numpy()[sel].tolist()
                finished["neutral"] += counts.neutral.cpu().numpy()[sel].tolist()
                self.episodes_per_env[keep.cpu().numpy()] += 1
                for z in (self.ep_env_ret, self.ep_align_ret, self.ep_len):
                    z[trunc] = 0
            x = x_next
            self.obs, self.access = out.obs.clone(), out.access.clone()
        with torch.no_grad():
            last_v = self.agent.value(x)
        adv, ret = bootstrapped_gae(rews[:, :active], vals[:, :active], last_v[:active], final_v[:, :active],
                                    ends[:, :active], self.cfg.ppo)
        batch = Rollout(xs[:, :active].reshape(-1, 77), acts[:, :active].reshape(-1),
                        logps[:, :active].reshape(-1), adv.reshape(-1), ret.reshape(-1), vals[:, :active].reshape(-1))
        return batch, finished

    def _collect_episodes(self, active: int):
        """Episode-worker mode: ``active`` whole episodes, each with seeds fixed by its global episode index."""
        c, dev = self.cfg, self.device
        jobs = [(_seed(c.seed, self.total_episodes + k, 0), _seed(c.seed, self.total_episodes + k, 1), k)
                for k in range(active)]
        lam = c.alignment_lambda if self.workflow is not None else 0.0
        trajs = self.pool.collect(self.agent.state_dict(), self.wf_enc[0].cpu().numpy(),
                                  self.rank.cpu().numpy() if self.workflow is not None else None, lam, jobs)

        def stack(name):
            return torch.as_tensor(np.stack([getattr(t, name) for t in trajs], 1), device=dev)

        x, acts, logp, vals = stack("x"), stack("actions"), stack("logp"), stack("values")
        env_r, align_r = stack("env_r"), stack("align_r")
        rews = (env_r + align_r) * c.ppo.reward_scale
        final_v = torch.as_tensor([t.final_value for t in trajs], device=dev, dtype=torch.float32)
        next_vals = torch.cat([vals[1:], final_v.unsqueeze(0)], 0)
        ends = torch.zeros_like(vals)
        ends[-1] = 1.0
        adv, ret = gae(rews, vals, next_vals, torch.zeros_like(ends), ends, c.ppo.gamma, c.ppo.gae_lambda)
        batch = Rollout(x.reshape(-1, 77), acts.reshape(-1), logp.reshape(-1), adv.reshape(-1), ret.reshape(-1),
                        vals.reshape(-1))
        self.episodes_per_env[:active] += 1
        finished = {"env_return": env_r.sum(0).tolist(), "align_return": align_r.sum(0).tolist(),
                    "length": [len(t.actions) for t in trajs], "compliant": [t.compliant for t in trajs],
                    "violations": [t.violations for t in trajs], "neutral": [t.neutral for t in trajs]}
        return batch, finished

    def _plan(self) -> tuple[int, int] | None:
        """(steps, active envs) of the next update under the episode budget, or None when it is spent."""
        c = self.cfg
        left = c.budget - self.total_episodes
        if self.pool is not None:
            return (c.episode_length, min(c.n_envs, left)) if left > 0 else None
        plan = plan_update(c, self.global_step, left, self.round_active)
        if plan is None:
            return None
        self.round_active = plan[2]
        return plan[0], plan[1]

    # ------------------------------------------------------------------------------------------------------- run
    def run(self) -> dict:
        """Train until a stop rule fires; returns a summary of training (no evaluation)."""
        log_f, writer = open_run_files(self.out, self.cfg, self.log_prefix,
                                       fresh=self.update == 0 or not (self.out / "training_log.csv").exists())
        if self.cfg.tensorboard:
            self._tb = _tensorboard_writer(self.out / "tb")
        bar = _progress(self.cfg.budget, self.total_episodes, self.progress)
        try:
            with self._interrupt:
                while self.stop_reason is None:
                    plan = self._plan()
                    if plan is None:
                        self.stop_reason = "budget"
                        break
                    row = self._one_update(*plan)
                    writer.writerow({**self.log_prefix, **row})
                    log_f.flush()
                    bar.update(row["episodes"])
                    if row["episodes"]:   # updates that finish no episode (several per episode) have nothing to show
                        bar.set_postfix_str(self._line(row), refresh=False)
                        if not self.progress:
                            print(self._line(row), flush=True)
                    self._check_stop(row)
                    # an engine without snapshots (real CybORG) is checkpointed only between episodes: resuming starts
                    # fresh episodes, so a checkpoint taken mid-episode could not continue that episode
                    resumable = self._snapshots or self.global_step % self.cfg.episode_length == 0
                    if self._interrupt.requested and self.stop_reason is None and resumable:
                        self.stop_reason = "interrupted"
                    if self.stop_reason is not None or (resumable and self.update % self.cfg.checkpoint_every == 0):
                        self.save()
        finally:
            bar.close()
            log_f.close()
            if self._tb is not None:
                self._tb.close()
        self.save()
        self.close()
        return self.summary()

    def close(self) -> None:
        """Stop worker processes (episode workers, or the cyborg engine's vector env)."""
        if self.pool is not None:
            self.pool.close()
        if self.env is not None and self.cfg.engine == "cyborg":
            self.env.close()

    def _one_update(self, steps: int, active: int) -> dict:
        t0 = time.perf_counter()
        batch, fin = self._collect_episodes(active) if self.pool is not None else self._collect(steps, active)
        t1 = time.perf_counter()
        stats = ppo_update(self.agent, self.opt, batch, self.cfg.ppo, self.gen)
        t2 = time.perf_counter()
        self.update += 1
        self.global_step += steps
        ep = episode_stats(fin)
        self.total_episodes += ep["episodes"]
        self.recent.extend(fin["env_return"])
        self.last_compliance, self._last_counted = ep["compliance"], ep.pop("counted")
        row = {
            "workflow_id": self.workflow.index if self.workflow else -1,
            "workflow": str(self.workflow) if self.workflow else "none",
            "update": self.update, "total_episodes": self.total_episodes, **ep,
            "collection_time": t1 - t0, "update_time": t2 - t1, "sps": steps * active / (t2 - t0),
            "global_step": self.global_step, "mean100": _mean(list(self.recent)),
            "length": _mean(fin["length"]), **stats,
        }
        if self._tb is not None:
            for k in ("env_reward", "alignment_bonus", "compliance", "sps", "policy_loss", "value_loss", "entropy",
                      "approx_kl", "mean100"):
                if isinstance(row[k], float) and not math.isnan(row[k]):
                    self._tb.add_scalar(f"train/{k}", row[k], self.global_step)
        row.pop("length")
        self._last_row = row
        return row

    def _line(self, row: dict) -> str:
        comp = "  n/a " if math.isnan(row["compliance"]) else f"{row['compliance']:.3f}"
        return (f"Reward: {row['env_reward']:8.2f} | Length: {self.cfg.episode_length} | "
                f"Mean(100): {row['mean100']:8.2f} | Compliance: {comp} | n_completed_episodes: "
                f"{row['episodes']} | n_envs: {self.cfg.n_envs} | SPS: {row['sps']:,.0f}")

    def _check_stop(self, row: dict) -> None:
        self.stop_reason = stop_rule(self.cfg, self.workflow is not None, int(self.episodes_per_env.min()),
                                     self._last_counted, self.last_compliance, self.total_episodes)

    # --------------------------------------------------------------------------------------------- checkpoints
    def checkpoint(self) -> dict:
        return {
            "format": "workflow-rl", "version": CHECKPOINT_VERSION, "config": self.cfg.to_dict(),
            "workflow": self.workflow.names if self.workflow else None,
            "agent": self.agent.state_dict(), "optimizer": self.opt.state_dict(),
            "counters": {"update": self.update, "global_step": self.global_step,
                         "total_episodes": self.total_episodes, "episodes_per_env": self.episodes_per_env.copy(),
                         "stop_reason": self.stop_reason, "last_compliance": self.last_compliance,
                         "round_active": self.round_active},
            "rng": {"generator": self.gen.get_state(), "torch": torch.get_rng_state()},
            "env_state": self.stepper.get_state() if self.stepper is not None else None,
            "obs": self.obs, "access": self.access, "tracker": self.tracker.state_dict(),
            "episode_running": {"env": self.ep_env_ret, "align": self.ep_align_ret, "len": self.ep_len},
            "recent": list(self.recent),
        }

    def save(self) -> Path:
        path = self.ckpt_dir / "latest.pt"
        atomic_save(self.checkpoint(), path)
        return path

    def restore(self, ck: dict) -> None:
        """Continue from a checkpoint of the same configuration (budget and stop limits may differ)."""
        check_same_run(ck, self.cfg)
        self.agent.load_state_dict(ck["agent"])
        self.opt.load_state_dict(ck["optimizer"])
        c = ck["counters"]
        self.update, self.global_step = c["update"], c["global_step"]
        self.total_episodes = c["total_episodes"]
        self.episodes_per_env = np.asarray(c["episodes_per_env"]).copy()
        self.last_compliance = c["last_compliance"]
        self.round_active = c.get("round_active", self.cfg.n_envs)
        if ck.get("rng") is not None:
            self.gen.set_state(ck["rng"]["generator"])
            torch.set_rng_state(ck["rng"]["torch"])
        self.recent = deque(ck["recent"], maxlen=100)
        if self.stepper is not None and self.stepper.set_state(ck.get("env_state")):
            self.obs, self.access = ck["obs"].to(self.device), ck["access"].to(self.device)
            self.tracker.load_state_dict(ck["tracker"])
            er = ck["episode_running"]
            self.ep_env_ret.copy_(er["env"])
            self.ep_align_ret.copy_(er["align"])
            self.ep_len.copy_(er["len"])
        elif self.global_step % self.cfg.episode_length != 0:
            raise CheckpointError("checkpoint holds no engine state and was taken mid-episode: it cannot be "
                                  "resumed; retrain")
        # else: taken between episodes without engine state; training goes on with the fresh episodes of reset()
        trim_log(self.out / "training_log.csv", self.update)

    def summary(self) -> dict:
        return run_summary(self.cfg, self.workflow, self.total_episodes, self.update, self.last_compliance,
                           self.stop_reason, self.recent)


# ---------------------------------------------------------------------------------------------------- helpers
def plan_update(cfg: TrainConfig, global_step: int, left: int, round_active: int) -> tuple[int, int, int] | None:
    """(steps, active envs, round_active) of the next update of a run at ``global_step`` with ``left`` episodes of
    budget, or None when the budget is spent.

    Envs are synchronised (they start together and episodes have a fixed length), so the budget can be cut
    exactly by training on the first ``active`` envs only: decided per rollout when a rollout holds whole
    episodes (update_every_steps a multiple of episode_length), or once per episode round (``round_active``) when an
    episode spans several rollouts (episode_length a multiple of update_every_steps). Otherwise training stops at
    the last update that fits.
    """
    steps, length = cfg.update_every_steps, cfg.episode_length
    phase = global_step % length
    if length % steps == 0 and steps < length:
        if phase == 0:
            if left <= 0:
                return None
            round_active = min(cfg.n_envs, left)
        return steps, round_active, round_active
    if left <= 0:
        return None
    ends_per_env = (phase + steps) // length
    if ends_per_env * cfg.n_envs <= left:
        return steps, cfg.n_envs, round_active
    if phase == 0 and steps % length == 0 and left // ends_per_env >= 1:
        return steps, left // ends_per_env, round_active
    return None


def stop_rule(cfg: TrainConfig, conditioned: bool, min_episodes_done: int, counted: float, compliance: float,
              total_episodes: int) -> str | None:
    """Why training stops after an update (None: go on). The compliance gate needs a workflow, every env past
    ``min_episodes`` and at least ``min_fixes`` counted fixes in the update's finished episodes."""
    if (conditioned and min_episodes_done >= cfg.min_episodes and counted >= max(1, cfg.min_fixes)
            and compliance >= cfg.compliance_threshold):
        return "compliant"
    if min_episodes_done >= cfg.max_episodes:
        return "max_episodes"
    if total_episodes >= cfg.budget:
        return "budget"
    return None


def episode_stats(fin: dict) -> dict:
    """Log columns of an update's finished episodes (``fin``: lists per finished episode), plus ``counted``: the
    compliant + violating fixes the batch compliance pools."""
    comp, viol = float(np.sum(fin["compliant"])), float(np.sum(fin["violations"]))
    counted = comp + viol
    per_env = [c / (c + v) for c, v in zip(fin["compliant"], fin["violations"]) if c + v > 0]
    return {
        "episodes": len(fin["env_return"]),
        "env_reward": _mean(fin["env_return"]), "alignment_bonus": _mean(fin["align_return"]),
        "total_reward": _mean([a + b for a, b in zip(fin["env_return"], fin["align_return"])]),
        "compliance": comp / counted if counted > 0 else float("nan"), "compliance_env_mean": _mean(per_env),
        "avg_fixes": _mean([c + v + nt for c, v, nt in zip(fin["compliant"], fin["violations"], fin["neutral"])]),
        "counted": counted,
    }


def open_run_files(out: Path, cfg: TrainConfig, log_prefix: dict, fresh: bool):
    """Write ``out/config.json`` and open ``out/training_log.csv`` (new with a header when ``fresh``, else appended
    to); returns (file, csv.DictWriter)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg.to_dict(), indent=2, default=str))
    f = open(out / "training_log.csv", "w" if fresh else "a", newline="")
    writer = csv.DictWriter(f, fieldnames=list(log_prefix) + LOG_COLUMNS)
    if fresh:
        writer.writeheader()
    return f, writer


def run_summary(cfg: TrainConfig, workflow: Workflow | None, episodes: int, updates: int, compliance: float,
                stop_reason: str | None, recent) -> dict:
    """What a finished (or stopped) training run reports."""
    return {
        "workflow": workflow.names if workflow else None,
        "red_agent": parse_red_agent(cfg.red_agent), "engine": cfg.engine,
        "episodes": episodes, "updates": updates,
        "compliance": None if math.isnan(compliance) else compliance,
        "compliant": stop_reason == "compliant", "stop_reason": stop_reason,
        "mean100": _mean(list(recent)),
    }


def trim_log(path: Path, update: int) -> None:
    """Drop training-log rows written after ``update`` (a resumed run continues the log exactly)."""
    if not path.exists():
        return
    with open(path) as f:
        rows = list(csv.reader(f))
    if rows:
        col = rows[0].index("update")
        keep = [rows[0]] + [r for r in rows[1:] if int(r[col]) <= update]
        with open(path, "w", newline="") as f:
            csv.writer(f).writerows(keep)


def _seed(seed: int, index: int, stream: int) -> int:
    """A 63-bit seed for episode ``index`` of a run (stream 0: the env, 1: action sampling)."""
    return int(np.random.SeedSequence([seed, index, stream]).generate_state(1, np.uint64)[0] >> np.uint64(1))


def _mean(x) -> float:
    return float(np.mean(x)) if len(x) else float("nan")


class GracefulInterrupt:
    """Ctrl-C as a request to stop cleanly: the first one sets ``requested`` (the loop finishes its unit of work,
    saves and stops); a second one raises KeyboardInterrupt (abort without saving). A context manager that installs
    the handler only in the main thread (signals cannot be handled elsewhere)."""

    def __init__(self, unit: str):
        self.unit = unit
        self.requested = False
        self._old = None

    def __enter__(self) -> "GracefulInterrupt":
        if threading_is_main():
            self._old = signal.getsignal(signal.SIGINT)
            signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print(f"\ninterrupt: finishing {self.unit}, then saving (Ctrl-C again to abort without saving)")

    def __exit__(self, *exc) -> bool:
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
            self._old = None
        return False


def threading_is_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _progress(total: int, initial: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="ep", disable=not enabled, dynamic_ncols=True, leave=False)


def _tensorboard_writer(path: Path):
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise ValueError("--tensorboard needs the tensorboard package: pip install 'workflow-rl[tb]'") from None
    return SummaryWriter(str(path))
