"""The trainers: one workflow-conditioned PPO run (``Trainer``), and several runs stepped and updated together in
one batch (``BatchedTrainer``: workflows of a search, or seeds of one configuration).

``Trainer(cfg).run()`` trains until the first of: batch compliance >= threshold (once every env finished
``min_episodes`` episodes and ``min_fixes`` fixes were counted), every env finished ``max_episodes`` episodes, or the
total episode budget ``num_episodes`` is spent. Ctrl-C finishes the current update, saves and exits; ``resume``
continues from the latest checkpoint exactly as if never stopped (native engine).

Batched training (``BatchedTrainer``):
Several workflows trained at once in one batch (PureJaxRL-style): one engine call steps every workflow's envs, one
batched matmul runs every workflow's policy, one backward pass updates every workflow's PPO.

Slot k owns envs [k*n, (k+1)*n) of one vector env and member k of an :class:`AgentStack`; it has its own workflow
(encoding and type ranks), compliance counts, episode budget, stop rule, training log and checkpoint. Since the
policy is conditioned on the workflow, nothing else differs between slots. All members share one torch Adam, which
keeps its moments and step count per parameter tensor, so each member's optimiser state is its own; it is cleared
when a new workflow enters the slot, as the serial search starts Adam fresh for every workflow.

Slots change only between episodes. Envs start together and episodes have one fixed length, and every stop rule
(compliance, per-env cap, budget) is decided on finished episodes, so a slot always stops at an episode boundary,
where its envs have just started fresh episodes for the next workflow. Checkpoints are taken there too, so they need
no engine state: a resumed slot continues with fresh episodes (the same statistics, not the same random draws as an
uninterrupted run). A slot's checkpoint has the single-workflow format, so ``evaluate``, inheritance and ``train
--resume`` read it like any other.
"""
from __future__ import annotations

import dataclasses
import math
import os
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from workflow_rl.envs.factory import make_vector_env, parse_red_agent
from workflow_rl.rl.checkpoint import (CHECKPOINT_VERSION, CheckpointError, atomic_save, check_same_run,
                                       load_checkpoint)
from workflow_rl.rl.compliance import ComplianceTracker
from workflow_rl.rl.config import TrainConfig
from workflow_rl.rl.envstep import TorchStepper
from workflow_rl.rl.interrupt import GracefulInterrupt
from workflow_rl.rl.ppo import Agent, Rollout, bootstrapped_gae, gae, ppo_update
from workflow_rl.rl.runlog import (episode_stats, mean_or_nan, open_run_files, progress_bar, run_summary,
                                   tensorboard_writer, trim_log)
from workflow_rl.rl.schedule import episode_seed, plan_update, stop_rule
from workflow_rl.rl.stack import AgentStack, load_member_optimizer_state, member_optimizer_state, stacked_ppo_update
from workflow_rl.workflow import Workflow

_SHARED = ("red_agent", "engine", "n_envs", "episode_length", "update_every_steps", "device", "seed",
           "official_bugs", "native_backend", "compile", "scenario", "vectorization", "parallel_start_method", "ppo")
"""TrainConfig fields every slot of one batch must share (they shape the batch or the update)."""



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
            from workflow_rl.rl.episode_workers import EpisodeWorkerPool

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
        jobs = [(episode_seed(c.seed, self.total_episodes + k, 0), episode_seed(c.seed, self.total_episodes + k, 1), k)
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
            self._tb = tensorboard_writer(self.out / "tb")
        bar = progress_bar(self.cfg.budget, self.total_episodes, self.progress)
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
            "global_step": self.global_step, "mean100": mean_or_nan(list(self.recent)),
            "length": mean_or_nan(fin["length"]), **stats,
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


# ------------------------------------------------------------------------------------------------------- slots
@dataclass
class Slot:
    """One workflow's training inside the batch: its settings, counters and log."""

    cfg: TrainConfig
    workflow: Workflow | None
    out: Path
    log_prefix: dict
    episodes_per_env: np.ndarray
    update: int = 0
    global_step: int = 0
    total_episodes: int = 0
    round_active: int = 0
    last_compliance: float = float("nan")
    last_counted: float = 0.0
    stop_reason: str | None = None
    recent: deque = field(default_factory=lambda: deque(maxlen=100))

    def summary(self) -> dict:
        return run_summary(self.cfg, self.workflow, self.total_episodes, self.update, self.last_compliance,
                           self.stop_reason, self.recent)


class BatchedTrainer:
    """``n_slots`` workflow trainings stepped and updated together; ``start`` a workflow in a free slot between
    rounds, ``run_round`` trains every occupied slot up to the next episode boundary."""

    def __init__(self, cfg: TrainConfig, n_slots: int):
        cfg.validate()
        check_batchable(cfg)
        self.cfg, self.q, self.n = cfg, int(n_slots), cfg.n_envs
        self.device = torch.device(cfg.device)
        self.gen = torch.Generator(device=self.device).manual_seed(cfg.seed)
        self.agents = AgentStack(self.q, cfg.ppo.hidden).to(self.device)
        self.opt = torch.optim.Adam(self.agents.parameters(), lr=cfg.ppo.learning_rate, eps=1e-5, foreach=True)
        self.env = make_vector_env(self.q * self.n, cfg.red_agent, engine=cfg.engine,
                                   episode_length=cfg.episode_length, seed=cfg.seed, device=cfg.device,
                                   **cfg.engine_options())
        self.stepper = TorchStepper(self.env, self.device)
        self.obs, self.access = self.stepper.reset(seed=cfg.seed)
        total = self.q * self.n
        self.wf_enc = torch.zeros((self.q, self.n, 25), device=self.device)
        self.rank = torch.arange(5, device=self.device).repeat(total, 1)
        self.tracker = ComplianceTracker(total, self.device)
        self.lam = torch.zeros(total, dtype=torch.float64, device=self.device)   # alignment lambda per env
        self.ep_env_ret = torch.zeros(total, dtype=torch.float64, device=self.device)
        self.ep_align_ret = torch.zeros(total, dtype=torch.float64, device=self.device)
        self.global_step = 0
        self.slots: list[Slot | None] = [None] * self.q
        self._logs: dict[int, tuple] = {}

    # ------------------------------------------------------------------------------------------------ slots
    def free_slots(self) -> list[int]:
        return [k for k, s in enumerate(self.slots) if s is None]

    def start(self, k: int, cfg: TrainConfig, out_dir: str | Path, init_agent_state: dict | None = None,
              checkpoint: dict | None = None, log_prefix: dict | None = None, init_seed: int | None = None) -> Slot:
        """Put a training run into free slot ``k``: weights from ``checkpoint`` (continuing its counters and Adam
        state), else ``init_agent_state``, else the fresh initialisation a single run with seed ``init_seed``
        (default: the config's) gets. ``cfg.workflow`` None trains unconditioned PPO in this slot."""
        if self.slots[k] is not None:
            raise RuntimeError(f"slot {k} is busy")
        if self.global_step % self.cfg.episode_length:
            raise RuntimeError("workflows enter a batch only between episodes")
        cfg.validate()
        for name in _SHARED:
            if getattr(cfg, name) != getattr(self.cfg, name):
                raise ValueError(f"a batch shares {name}: {getattr(cfg, name)!r} differs from "
                                 f"{getattr(self.cfg, name)!r}")
        wf = Workflow.parse(cfg.workflow) if cfg.workflow is not None else None
        member = self.agents.members[k]
        if checkpoint is not None:
            state = checkpoint["agent"]
        elif init_agent_state is not None:
            state = init_agent_state
        else:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(cfg.seed if init_seed is None else init_seed)
                state = Agent(cfg.ppo.hidden).state_dict()
        member.load_state_dict(state)
        load_member_optimizer_state(self.opt, member, checkpoint["optimizer"] if checkpoint else None)
        slot = Slot(cfg, wf, Path(out_dir), dict(log_prefix or {}), np.zeros(self.n, np.int64), round_active=self.n)
        if checkpoint is not None:
            c = checkpoint["counters"]
            slot.update, slot.global_step, slot.total_episodes = c["update"], c["global_step"], c["total_episodes"]
            slot.episodes_per_env = np.asarray(c["episodes_per_env"]).copy()
            slot.last_compliance = c["last_compliance"]
            slot.round_active = c.get("round_active", self.n)
            slot.recent.extend(checkpoint["recent"])
        rows = slice(k * self.n, (k + 1) * self.n)
        self.wf_enc[k] = torch.as_tensor(wf.encode() if wf else np.zeros(25, np.float32), device=self.device)
        self.rank[rows] = torch.as_tensor(wf.rank if wf else np.arange(5), device=self.device)
        self.lam[rows] = cfg.alignment_lambda if wf else 0.0
        if checkpoint is not None:
            trim_log(slot.out / "training_log.csv", slot.update)
        self._logs[k] = open_run_files(slot.out, cfg, slot.log_prefix,
                                       fresh=checkpoint is None or not (slot.out / "training_log.csv").exists())
        self.slots[k] = slot
        return slot

    def release(self, k: int) -> Slot:
        """Empty slot ``k`` (its envs keep stepping, masked out of every update, until a workflow takes it)."""
        slot = self.slots[k]
        self.slots[k] = None
        f, _ = self._logs.pop(k)
        f.close()
        return slot

    def member(self, k: int) -> Agent:
        return self.agents.members[k]

    # -------------------------------------------------------------------------------------------------- train
    def run_round(self) -> list[int]:
        """Train every occupied slot up to the next episode boundary; returns the slots whose training stopped in
        this round (each with its final checkpoint written). Stopped slots stay idle until released."""
        c = self.cfg
        if all(s is None for s in self.slots):
            raise RuntimeError("run_round with every slot empty: start a workflow first")
        updates = max(1, c.episode_length // c.update_every_steps)
        done_before = {k for k, s in enumerate(self.slots) if s is not None and s.stop_reason is not None}
        stopped = []
        for _ in range(updates):
            active = np.zeros(self.q, np.int64)
            for k, s in enumerate(self.slots):
                if s is None or s.stop_reason is not None:
                    continue
                plan = plan_update(s.cfg, s.global_step, s.cfg.budget - s.total_episodes, s.round_active)
                if plan is None:
                    s.stop_reason = "budget"
                    stopped.append(k)
                else:
                    active[k], s.round_active = plan[1], plan[2]
            if not active.any():
                break
            self._one_update(c.update_every_steps, active)
        for k, s in enumerate(self.slots):
            if s is None or k in stopped or k in done_before:
                continue
            s.stop_reason = stop_rule(s.cfg, s.workflow is not None, int(s.episodes_per_env.min()), s.last_counted,
                                      s.last_compliance, s.total_episodes)
            if s.stop_reason is not None:
                stopped.append(k)
            elif s.update // s.cfg.checkpoint_every > (s.update - updates) // s.cfg.checkpoint_every:
                self.save(k)
        for k in stopped:
            self.save(k)
        return sorted(stopped)

    def _x(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.cat([obs.view(self.q, self.n, -1), self.wf_enc], 2)

    def _one_update(self, steps: int, active: np.ndarray) -> None:
        t0 = time.perf_counter()
        batch, mask, finished = self._collect(steps, active)
        t1 = time.perf_counter()
        live = [int(k) for k in np.flatnonzero(active)]   # empty slots cost nothing in the update
        sub = Rollout(*(getattr(batch, f.name)[live] for f in dataclasses.fields(Rollout)))
        stats = dict(zip(live, stacked_ppo_update(self.agents, self.opt, sub, mask[live], self.cfg.ppo, self.gen,
                                                  live)))
        t2 = time.perf_counter()
        self.global_step += steps
        sps = steps * int(active.sum()) / (t2 - t0)
        for k, s in enumerate(self.slots):
            if s is None or not active[k]:
                continue
            fin = finished[k]
            ep = episode_stats(fin)
            s.update += 1
            s.global_step += steps
            s.total_episodes += ep["episodes"]
            s.recent.extend(fin["env_return"])
            s.last_compliance, s.last_counted = ep["compliance"], ep.pop("counted")
            row = {"workflow_id": s.workflow.index if s.workflow else -1,
                   "workflow": str(s.workflow) if s.workflow else "none", "update": s.update,
                   "total_episodes": s.total_episodes, **ep, "collection_time": t1 - t0, "update_time": t2 - t1,
                   "sps": sps, "global_step": s.global_step, "mean100": mean_or_nan(list(s.recent)), **stats[k]}
            f, writer = self._logs[k]
            writer.writerow({**s.log_prefix, **row})
            f.flush()

    def _collect(self, steps: int, active: np.ndarray):
        q, n, dev, c = self.q, self.n, self.device, self.cfg
        total = q * n
        xs = torch.zeros((steps, q, n, 77), device=dev)
        acts = torch.zeros((steps, q, n), dtype=torch.int64, device=dev)
        logps, vals, rews, final_v, ends = (torch.zeros((steps, q, n), device=dev) for _ in range(5))
        finished = [{"env_return": [], "align_return": [], "length": [], "compliant": [], "violations": [],
                     "neutral": []} for _ in range(q)]
        params = {k: [(w.detach(), b.detach()) for w, b in v] for k, v in self.agents.stacked().items()}
        x = self._x(self.obs)
        for t in range(steps):
            with torch.no_grad():
                a, logp, v = self.agents.act(x, self.gen, params)
            access_before = self.access
            out = self.stepper.step(a.reshape(total))
            align, _ = self.tracker.step(a.reshape(total), access_before, self.rank, self.lam)
            r_env = out.reward.to(dev)
            xs[t], acts[t], logps[t], vals[t] = x, a, logp, v
            rews[t] = ((r_env + align) * c.ppo.reward_scale).view(q, n)
            self.ep_env_ret += r_env
            self.ep_align_ret += align
            x = self._x(out.obs)
            if (self.global_step + t + 1) % c.episode_length == 0:   # known on the host: no device sync per step
                trunc = out.truncated.to(dev)
                with torch.no_grad():
                    final_v[t] = self.agents.value(self._x(out.final_obs.to(dev)), params)
                ends[t] = trunc.view(q, n).float()
                self._finish_episodes(trunc, active, finished)
            self.obs, self.access = out.obs.clone(), out.access.clone()
        with torch.no_grad():
            last_v = self.agents.value(x, params)
        adv, ret = bootstrapped_gae(rews, vals, last_v, final_v, ends, c.ppo)

        def per_member(z: torch.Tensor) -> torch.Tensor:   # (T, q, n, ...) -> (q, T*n, ...)
            return z.transpose(0, 1).reshape(q, steps * n, *z.shape[3:])

        env_active = torch.arange(n, device=dev).unsqueeze(0) < torch.as_tensor(active, device=dev).unsqueeze(1)
        mask = env_active.unsqueeze(1).expand(q, steps, n).reshape(q, steps * n)
        batch = Rollout(per_member(xs), per_member(acts), per_member(logps), per_member(adv), per_member(ret),
                        per_member(vals))
        return batch, mask, finished

    def _finish_episodes(self, trunc: torch.Tensor, active: np.ndarray, finished: list[dict]) -> None:
        """Hand the episodes that just ended to their slots (active envs only) and restart their counters."""
        q, n = self.q, self.n
        tr = self.tracker
        comp, viol, neut, env_r, align_r = (x.view(q, n).cpu().numpy().copy() for x in (
            tr.compliant, tr.violations, tr.neutral, self.ep_env_ret, self.ep_align_ret))
        done = trunc.view(q, n).cpu().numpy()
        tr.finish(trunc)
        for k in np.flatnonzero(active):
            sel = np.flatnonzero(done[k, :active[k]])
            fin = finished[k]
            fin["env_return"] += env_r[k, sel].tolist()
            fin["align_return"] += align_r[k, sel].tolist()
            fin["length"] += [self.cfg.episode_length] * len(sel)
            counted = self.slots[k].workflow is not None   # unconditioned runs have no workflow to comply with
            fin["compliant"] += (comp[k, sel] * counted).tolist()
            fin["violations"] += (viol[k, sel] * counted).tolist()
            fin["neutral"] += (neut[k, sel] * counted).tolist()
            self.slots[k].episodes_per_env[sel] += 1
        self.ep_env_ret[trunc] = 0
        self.ep_align_ret[trunc] = 0

    # ------------------------------------------------------------------------------------------- checkpoints
    def checkpoint(self, k: int) -> dict:
        """Slot ``k`` as a single-workflow checkpoint taken between episodes (no engine state needed)."""
        s, member = self.slots[k], self.agents.members[k]
        return {
            "format": "workflow-rl", "version": CHECKPOINT_VERSION, "config": s.cfg.to_dict(),
            "workflow": s.workflow.names if s.workflow else None, "agent": member.state_dict(),
            "optimizer": member_optimizer_state(self.opt, member),
            "counters": {"update": s.update, "global_step": s.global_step, "total_episodes": s.total_episodes,
                         "episodes_per_env": s.episodes_per_env.copy(), "stop_reason": s.stop_reason,
                         "last_compliance": s.last_compliance, "round_active": s.round_active},
            "rng": None, "env_state": None, "obs": None, "access": None, "tracker": None, "episode_running": None,
            "recent": list(s.recent), "batched": True,
        }

    def save(self, k: int) -> Path:
        path = self.slots[k].out / "checkpoints" / "latest.pt"
        atomic_save(self.checkpoint(k), path)
        return path

    def close(self) -> None:
        for k in list(self._logs):
            self._logs.pop(k)[0].close()
        if self.cfg.engine == "cyborg":
            self.env.close()


def train_seeds(cfg: TrainConfig, n_seeds: int, out: str | Path, resume: bool = False, progress: bool = True
                ) -> tuple[list[dict], list[Agent], bool]:
    """``n_seeds`` independent runs of one configuration, trained together in one batch.

    Run i starts from the weights seed ``cfg.seed + i`` initialises, plays its own block of the env streams, stops by
    its own rules and writes ``out/seed_i`` (config, training log, checkpoint). Ctrl-C finishes the episode round and
    saves every unfinished run; ``resume`` continues them. Returns (each run's summary, its agent, whether Ctrl-C
    stopped training).
    """
    out = Path(out)
    bt = BatchedTrainer(cfg, n_seeds)
    try:
        for i in range(n_seeds):
            ck = None
            if resume:
                ck = load_checkpoint(out / f"seed_{i}" / "checkpoints" / "latest.pt", cfg.device)
                check_same_run(ck, cfg)
            slot = bt.start(i, cfg, out / f"seed_{i}", checkpoint=ck, init_seed=cfg.seed + i)
            if ck is not None:
                slot.stop_reason = ck["counters"].get("stop_reason")
        bar = progress_bar(cfg.budget * n_seeds, sum(s.total_episodes for s in bt.slots), progress)
        interrupted = False
        with GracefulInterrupt("this episode round") as stop:
            while any(s.stop_reason is None for s in bt.slots):
                if stop.requested:
                    for k, s in enumerate(bt.slots):
                        if s.stop_reason is None:
                            bt.save(k)
                    interrupted = True
                    break
                bt.run_round()
                bar.n = sum(s.total_episodes for s in bt.slots)
                line = " | ".join(f"seed {k}: {s.total_episodes} eps, mean100 {mean_or_nan(list(s.recent)):.2f}"
                                  + ("" if math.isnan(s.last_compliance) else f", compliance {s.last_compliance:.3f}")
                                  for k, s in enumerate(bt.slots))
                bar.set_postfix_str(line, refresh=True)
                if not progress:
                    print(line, flush=True)
        bar.close()
    finally:
        bt.close()
    return [s.summary() for s in bt.slots], [bt.member(k) for k in range(n_seeds)], interrupted


def check_batchable(cfg: TrainConfig) -> None:
    """Batched training needs every slot change on an episode boundary, and one env for all slots."""
    steps, length = cfg.update_every_steps, cfg.episode_length
    if length % steps and steps % length:
        raise ValueError(f"batched training needs update-every-steps ({steps}) to divide or be a multiple of "
                         f"episode-length ({length})")
    if cfg.vectorization == "episodes":
        raise ValueError("batched training steps one vector env: use vectorization sync, pipes or shared_memory")
