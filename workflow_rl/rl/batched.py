"""Several workflows trained at once in one batch (PureJaxRL-style): one engine call steps every workflow's envs, one
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
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from workflow_rl.envs.factory import make_vector_env
from workflow_rl.rl.compliance import ComplianceTracker
from workflow_rl.rl.envstep import TorchStepper
from workflow_rl.rl.ppo import (Agent, PPOConfig, Rollout, bootstrapped_gae, clipped_losses, logp_entropy,
                                sample_actions)
from workflow_rl.rl.train import (CHECKPOINT_VERSION, GracefulInterrupt, TrainConfig, _mean, _progress, atomic_save,
                                  check_same_run, episode_stats, load_checkpoint, open_run_files, plan_update,
                                  run_summary, stop_rule, trim_log)
from workflow_rl.workflow import Workflow

_SHARED = ("red_agent", "engine", "n_envs", "episode_length", "update_every_steps", "device", "seed",
           "official_bugs", "native_backend", "compile", "scenario", "vectorization", "parallel_start_method", "ppo")
"""TrainConfig fields every slot of one batch must share (they shape the batch or the update)."""


# ------------------------------------------------------------------------------------------------------ networks
class AgentStack(nn.Module):
    """``n`` independent :class:`Agent` members run as one: inputs (n, B, 77) give outputs (n, B, ...).

    Each member is an ordinary ``Agent`` (its ``state_dict`` is a single-workflow checkpoint's), and the forward
    pass stacks their layers into batched matmuls (``baddbmm``), so gradients flow back to each member's own
    parameters.
    """

    def __init__(self, n: int, hidden: tuple[int, ...] = (64, 64)):
        super().__init__()
        self.members = nn.ModuleList(Agent(hidden) for _ in range(n))

    def stacked(self, members: list[int] | None = None) -> dict[str, list[tuple[torch.Tensor, torch.Tensor]]]:
        """Per network ("actor", "critic"): the (weight (n, out, in), bias (n, out)) of each linear layer, over
        all members or the listed ones."""
        agents = list(self.members) if members is None else [self.members[k] for k in members]
        out = {}
        for net in ("actor", "critic"):
            idx = [i for i, m in enumerate(getattr(agents[0], net)) if isinstance(m, nn.Linear)]
            out[net] = [(torch.stack([getattr(a, net)[i].weight for a in agents]),
                         torch.stack([getattr(a, net)[i].bias for a in agents])) for i in idx]
        return out

    def act(self, x: torch.Tensor, generator: torch.Generator | None, params: dict | None = None):
        """(action, log_prob, value), each (n, B), sampling with ``generator``."""
        p = params or self.stacked()
        return (*sample_actions(_mlp(p["actor"], x), generator), _mlp(p["critic"], x).squeeze(-1))

    def value(self, x: torch.Tensor, params: dict | None = None) -> torch.Tensor:
        return _mlp((params or self.stacked())["critic"], x).squeeze(-1)

    def evaluate(self, x: torch.Tensor, action: torch.Tensor, members: list[int] | None = None):
        """(log_prob, entropy, value) of given actions, each (n, B) (or (len(members), B))."""
        p = self.stacked(members)
        return (*logp_entropy(_mlp(p["actor"], x), action), _mlp(p["critic"], x).squeeze(-1))


def _mlp(layers: list[tuple[torch.Tensor, torch.Tensor]], x: torch.Tensor) -> torch.Tensor:
    """Agent's MLP (tanh between linear layers) for every member at once."""
    for j, (w, b) in enumerate(layers):
        x = torch.baddbmm(b.unsqueeze(1), x, w.transpose(1, 2))
        if j < len(layers) - 1:
            x = torch.tanh(x)
    return x


# ----------------------------------------------------------------------------------------------------- update
def _masked_mean(x: torch.Tensor, m: torch.Tensor, cnt: torch.Tensor) -> torch.Tensor:
    return (x * m).sum(1) / cnt.clamp(min=1)


def stacked_ppo_update(agents: AgentStack, optimizer: torch.optim.Optimizer, batch: Rollout, mask: torch.Tensor,
                       cfg: PPOConfig, generator: torch.Generator, members: list[int] | None = None
                       ) -> list[dict[str, float] | None]:
    """:func:`~workflow_rl.rl.ppo.ppo_update` for several members at once (all, or the listed ones).

    ``batch`` fields are (n_members, N, ...); ``mask`` (n_members, N) marks the rows a member trains on (a member
    whose budget covers fewer envs has rows masked out). Losses are means over each member's own rows of a
    minibatch; gradients are clipped per member; a member with no rows in a minibatch is not stepped (its Adam state
    stays as it was). Returns each member's loss statistics of the last epoch (None for a member with no rows).
    """
    members = list(range(len(agents.members))) if members is None else list(members)
    params = [list(agents.members[k].parameters()) for k in members]
    q, n = mask.shape
    mb = max(1, n // cfg.num_minibatches)
    m_all = mask.float()
    live = mask.any(1).tolist()
    sums = torch.zeros((5, q), device=mask.device)
    steps_last = torch.zeros(q, device=mask.device)
    for epoch in range(cfg.update_epochs):
        perm = torch.randperm(n, generator=generator, device=generator.device).to(mask.device)
        counts = torch.stack([m_all[:, perm[s:s + mb]].sum(1) for s in range(0, n, mb)]).tolist()  # one sync
        for j, start in enumerate(range(0, n, mb)):
            idx = perm[start:start + mb]
            m = m_all[:, idx]
            cnt = m.sum(1)
            newlogp, entropy, newv = agents.evaluate(batch.x[:, idx], batch.actions[:, idx], members)
            adv = batch.advantages[:, idx]
            if cfg.norm_adv:
                mean = _masked_mean(adv, m, cnt).unsqueeze(1)
                var = (((adv - mean) ** 2) * m).sum(1) / (cnt - 1).clamp(min=1)
                adv = (adv - mean) / (var.sqrt().unsqueeze(1) + 1e-8)
            pg_loss, v_loss, ent, logratio, ratio = clipped_losses(
                newlogp, entropy, newv, batch.logprobs[:, idx], adv, batch.returns[:, idx], batch.values[:, idx], cfg,
                lambda x: _masked_mean(x, m, cnt))
            loss = (pg_loss - cfg.ent_coef * ent + cfg.vf_coef * v_loss).sum()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            stepped = [k for k in range(q) if live[k] and counts[j][k] > 0]
            for k in range(q):
                if k not in stepped:
                    for p in params[k]:
                        p.grad = None
            if stepped:
                clip_per_member([params[k] for k in stepped], cfg.max_grad_norm)
            optimizer.step()
            if epoch == cfg.update_epochs - 1:
                with torch.no_grad():
                    used = (cnt > 0).float()
                    sums += used * torch.stack([pg_loss, v_loss, ent, _masked_mean((ratio - 1) - logratio, m, cnt),
                                                _masked_mean(((ratio - 1.0).abs() > cfg.clip_coef).float(), m, cnt)])
                    steps_last += used
    means = (sums / steps_last.clamp(min=1)).T.tolist()
    names = ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac")
    return [dict(zip(names, means[k])) if live[k] else None for k in range(q)]


def clip_per_member(param_lists: list[list[torch.Tensor]], max_norm: float) -> None:
    """``clip_grad_norm_`` applied to each member's parameters on their own, in a few fused calls for all members
    (a loop of clip_grad_norm_ costs 2.5x more on the CPU and many more kernel launches on a GPU)."""
    grads = [p.grad for ps in param_lists for p in ps]
    norms = torch.stack(torch._foreach_norm(grads)).view(len(param_lists), -1).norm(dim=1)
    coef = (max_norm / (norms + 1e-6)).clamp(max=1.0)
    for ps, c in zip(param_lists, coef):
        torch._foreach_mul_([p.grad for p in ps], c)


def member_optimizer_state(optimizer: torch.optim.Optimizer, member: nn.Module) -> dict:
    """One member's Adam state as the ``state_dict`` of an Adam over ``member.parameters()`` alone."""
    group = {k: v for k, v in optimizer.param_groups[0].items() if k != "params"}
    params = list(member.parameters())
    state = {i: {k: v.clone() for k, v in optimizer.state[p].items()} for i, p in enumerate(params)
             if p in optimizer.state}
    return {"state": state, "param_groups": [{**group, "params": list(range(len(params)))}]}


def load_member_optimizer_state(optimizer: torch.optim.Optimizer, member: nn.Module, sd: dict | None) -> None:
    """Give ``member`` the Adam state ``sd`` (a single-agent Adam ``state_dict``), or a fresh one (None)."""
    for i, p in enumerate(member.parameters()):
        optimizer.state.pop(p, None)
        if sd is not None and i in sd["state"]:
            optimizer.state[p] = {k: (v.clone() if k == "step" else v.to(p.device).clone())
                                  for k, v in sd["state"][i].items()}


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
                   "sps": sps, "global_step": s.global_step, "mean100": _mean(list(s.recent)), **stats[k]}
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
        bar = _progress(cfg.budget * n_seeds, sum(s.total_episodes for s in bt.slots), progress)
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
                line = " | ".join(f"seed {k}: {s.total_episodes} eps, mean100 {_mean(list(s.recent)):.2f}"
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
