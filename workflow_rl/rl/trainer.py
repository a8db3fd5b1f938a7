"""The trainer: workflow-conditioned PPO runs stepped and updated together in one batch.

PureJaxRL-style: one engine call steps every run's envs, one batched matmul runs every run's policy, one backward pass
updates them all.

There is one trainer. ``BatchedTrainer`` holds Q *slots*; slot k owns envs [k*n, (k+1)*n) of one vector env and
member k of an :class:`~workflow_rl.rl.stack.AgentStack`, and has its own workflow (encoding and type ranks),
alignment lambda, compliance counts, episode budget, stop rule, training log and checkpoint. The policy is
conditioned on the workflow, so nothing else differs between slots: the workflows of a search, or the seeds of one
configuration, train side by side. The members' weights are rows of one parameter and one ``StackedAdam`` keeps
moments and a step count per member, so each member's optimiser state is its own (cleared when a new workflow enters
the slot) while the update costs the same number of kernels for one slot or 64.

``Trainer`` is a single run: a one-slot batch driven update by update, plus what only a single run has: any update
size (``plan_update``), mid-episode checkpoints with an engine snapshot (so ``--resume`` continues bit-identically on
the native engine), episode workers (``vectorization="episodes"``) and a progress line per update. It trains until
the first of: batch compliance >= threshold (once every env finished ``min_episodes`` episodes and ``min_fixes``
fixes were counted; the *gate*), every env finished ``max_episodes`` episodes, or the episode budget ``num_episodes``
is spent; after the gate it trains ``post_gate_episodes`` more episodes per env (``rl.schedule.stop_rule``).
Ctrl-C finishes the current update, saves and exits.

A run across workflows (``--workflow all``, 'named' or a ';' list, ``--hold-out``; ``workflow.WorkflowMix``) is a
slot whose envs each play their own workflow: at every episode end each env draws its next one from its own
counter-based stream (seed, env, episode), its encoding goes into its policy input and its type ranks into its
compliance counts and alignment reward. Batch compliance pools every finished episode; the log adds the least
compliant workflow over its last 20 episodes (``compliance.WorkflowWindow``), and the gate also needs that to reach
the threshold once every workflow has 20 episodes (``schedule.gate_fires``). The draws need no state of their own:
a resumed run recomputes them from its step counter.

With several slots, slots change only between episodes: envs start together and episodes have one fixed length,
and every stop rule is decided on finished episodes, so a slot always stops at an episode boundary, where its envs
have just started fresh episodes for the next workflow. Slot checkpoints are taken there and need no engine state:
a resumed slot continues with fresh episodes. Every checkpoint has the same format, so ``evaluate``, inheritance
and ``train --resume`` read a slot's like any other.
"""
from __future__ import annotations

import dataclasses
import math
import os
import time
from pathlib import Path

import numpy as np
import torch

from workflow_rl.envs.factory import make_vector_env, parse_red_agent
from workflow_rl.rl.actor import Actor
from workflow_rl.interrupt import GracefulInterrupt
from workflow_rl.rl.checkpoint import CheckpointError, RunState, atomic_save, load_checkpoint
from workflow_rl.rl.compliance import ComplianceTracker, WorkflowWindow
from workflow_rl.rl.config import EPISODE_WORKERS, PER_RUN, TrainConfig, divergence_message
from workflow_rl.rl.envstep import TorchStepper
from workflow_rl.rl.graphs import GraphCache
from workflow_rl.rl.memory import Memory
from workflow_rl.rl.ppo import WORKFLOW_DIM, Agent, Rollout, bootstrapped_gae, input_dim
from workflow_rl.rl import reward
from workflow_rl.rl.resumable import check_resumable
from workflow_rl.rl.runlog import RunLog, episode_stats, mean_or_nan, progress_bar, trim_log, write_config
from workflow_rl.rl.schedule import gate_fires, learning_rate, plan_update
from workflow_rl.rl.slot import Slot
from workflow_rl.rl.stack import AgentStack, StackedAdam, StackedUpdate
from workflow_rl.workflow import Workflow

_SHARED = tuple(f.name for f in dataclasses.fields(TrainConfig) if f.name not in PER_RUN)
"""TrainConfig fields every slot of one batch must share (they shape the batch or the update)."""


class TrainingDiverged(ValueError):
    """Training went non-finite (NaN or inf losses or weights): a setting drives it there, so it is refused like
    bad input (one error line, exit status 2), and nothing of the diverged update is saved."""


ENDED = ("compliant", "violations", "neutral", *reward.RETURNS, "ended", "workflow_id")
"""What a rollout records per env at each episode end, read on the host after the rollout (``_hand_over``): the fix
counts, each reward term's episode return (``rl.reward.TERMS``), whether the episode ended and its workflow."""


def _empty_finished() -> dict:
    return {**{k: [] for k in reward.RETURNS}, "compliant": [], "violations": [], "neutral": [], "workflow_id": []}


STAGED = "next.pt"
"""A checkpoint written but not yet committed as ``latest.pt`` (``BatchedTrainer.stage_saves``)."""


def reconcile_staged(root: Path, committed: dict[Path, int]) -> None:
    """(resume) Finish the commit a kill cut short, or undo it, for every staged checkpoint under ``root``: one at
    the update the saved batch state names for its folder (``committed``: checkpoint folder -> update) becomes
    ``latest.pt`` (the state was saved, the rename not yet done); any other is newer than every saved state and is
    removed (its run resumes from ``latest.pt``, the one the state was saved with). Either way checkpoints and batch
    state agree, so the run resumes as if never stopped."""
    wanted = {Path(d).resolve(): u for d, u in committed.items()}
    for staged in sorted(Path(root).rglob(f"checkpoints/{STAGED}")):
        d = staged.parent.resolve()
        if wanted.get(d) == load_checkpoint(staged)["counters"]["update"]:
            os.replace(staged, d / "latest.pt")
        else:
            staged.unlink()


class BatchedTrainer:
    """``n_slots`` runs stepped and updated together; ``start`` a run in a free slot between episodes, ``update``
    trains the listed slots for one PPO update, ``run_round`` trains every occupied slot up to the next episode
    boundary."""

    def __init__(self, cfg: TrainConfig, n_slots: int):
        """A batch of ``n_slots`` slots shaped by ``cfg``. Settings a command validated at its boundary are not
        validated again (``cfg.validate_once()``: they carry the mark of ``TrainConfig.validate``); a config built
        by hand is validated here, so a library user gets every check and its one-line refusal either way. The
        memory of ``n_slots`` runs is checked here whatever the mark: only the trainer knows its batch."""
        cfg.validate_once()
        cfg.check_memory(n_slots)
        if n_slots > 1:
            check_batchable(cfg)
        self.cfg, self.q, self.n = cfg, int(n_slots), cfg.n_envs
        self.device = torch.device(cfg.device)
        self.gen = torch.Generator(device=self.device).manual_seed(cfg.seed)
        self.memory = Memory.of(cfg.ppo)
        self.agents = AgentStack(self.q, cfg.ppo.hidden, self.memory).to(self.device)
        self.opt = StackedAdam(self.agents.flat, lr=cfg.ppo.learning_rate)
        self.updater = StackedUpdate(self.agents, self.opt, cfg.ppo, graphs=cfg.cuda_graphs)
        total = self.q * self.n
        self.pool = self.env = self.stepper = None
        self.obs = self.access = None
        if cfg.vectorization == EPISODE_WORKERS:
            from workflow_rl.rl.episode_workers import EpisodeWorkerPool

            self.pool = EpisodeWorkerPool(cfg.n_workers or max(1, min(cfg.n_envs, os.cpu_count() or 1)),
                                          parse_red_agent(cfg.red_agent), cfg.episode_length, cfg.engine,
                                          cfg.scenario, cfg.parallel_start_method, cfg.ppo.hidden,
                                          self.memory)
        else:
            self.env = make_vector_env(total, cfg.red_agent, engine=cfg.engine, episode_length=cfg.episode_length,
                                       seed=cfg.seed, device=cfg.device, **cfg.engine_options())
            self.stepper = TorchStepper(self.env, self.device)
            self.obs, self.access = self.stepper.reset(seed=cfg.seed)
        self.snapshots = self.stepper is not None and self.stepper.snapshots
        """whether the engine's state can be checkpointed mid-episode (the native engines, not real CybORG)."""
        self.actor = Actor.of(self.agents, encodings=torch.zeros((self.q, self.n, WORKFLOW_DIM), device=self.device),
                              opening=cfg.ppo.opening)
        """how every env acts: the stack's members, each env's workflow encoding (``wf_enc``) and the run's
        opening; its inputs, memory and opening steps are those of every other acting path (``rl.actor``)."""
        self.rank = torch.arange(5, device=self.device).repeat(total, 1)
        self.wf_id = torch.full((total,), -1, dtype=torch.int64, device=self.device)
        """per env, the index (``Workflow.index``) of the workflow its episode plays, -1 for plain PPO: with
        ``wf_enc`` and ``rank``, switched at episode ends to each env's next draw in a run across workflows."""
        self.tracker = ComplianceTracker(total, self.device, cfg.alignment_reward)
        self.lam = torch.zeros(total, dtype=torch.float64, device=self.device)   # alignment lambda per env
        self.weights = {t.name: torch.zeros(total, device=self.device) for t in reward.weighed()}
        """per reward term the composition weighs (``reward.weighed``), each env's weight: its slot's setting."""
        self.ep_ret = {t.name: torch.zeros(total, dtype=torch.float64, device=self.device) for t in reward.TERMS}
        """per reward term, each env's return in its current episode."""
        self.mem = self.actor.reset(total)
        """per env, its episode memory (``--decoy-memory``, ``--red-memory``; ``rl.memory``), or None."""
        self.global_step = 0
        self.slots: list[Slot | None] = [None] * self.q
        self.staged: list[Path] | None = None
        """With staging on (``stage_saves``): the checkpoint folders whose ``next.pt`` awaits ``commit_saves``."""
        self._rollout_buffers: dict[tuple[int, int], dict] = {}
        self.segments = GraphCache(cfg.cuda_graphs and self.stepper is not None and self.stepper.device_only,
                                   generators=(self.gen,))
        """runs ``_segment``: replayed as one CUDA graph per shape with ``--cuda-graphs`` on the CUDA engine."""

    # ------------------------------------------------------------------------------------------------ slots
    @property
    def wf_enc(self) -> torch.Tensor:
        """(Q, n, 25): each env's workflow encoding, the actor's (written in place when an env's workflow
        changes)."""
        return self.actor.encoding

    def free_slots(self) -> list[int]:
        return [k for k, s in enumerate(self.slots) if s is None]

    def start(self, k: int, cfg: TrainConfig, out_dir: str | Path, init_agent_state: dict | None = None,
              checkpoint: dict | None = None, log_prefix: dict | None = None, init_seed: int | None = None,
              checkpoint_dir: str | Path | None = None, claim: int | None = None, pauses: bool = False) -> Slot:
        """Put a training run into free slot ``k``: weights from ``checkpoint`` (continuing its counters and Adam
        state), else ``init_agent_state``, else the fresh initialisation a run with seed ``init_seed`` (default:
        the config's) gets. ``cfg.workflow`` None trains unconditioned PPO in this slot. ``claim`` and ``pauses``:
        see :class:`Slot`."""
        if self.slots[k] is not None:
            raise RuntimeError(f"slot {k} is busy")
        if self.global_step % self.cfg.episode_length:
            raise RuntimeError("runs enter a batch only between episodes")
        cfg.validate_once()   # the batch's own config, or one its caller validated, passes at once
        for name in _SHARED:
            if getattr(cfg, name) != getattr(self.cfg, name):
                raise ValueError(f"a batch shares {name}: {getattr(cfg, name)!r} differs from "
                                 f"{getattr(self.cfg, name)!r}")
        mix = cfg.mixture()
        wf = Workflow.parse(cfg.workflow) if cfg.workflow is not None and mix is None else None
        if checkpoint is not None:
            state = checkpoint["agent"]
        elif init_agent_state is not None:
            state = init_agent_state
        else:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(cfg.seed if init_seed is None else init_seed)
                state = Agent(cfg.ppo.hidden, self.memory).state_dict()
        self.agents.load_member(k, state)
        self.opt.load_member_state(self.agents, k, checkpoint["optimizer"] if checkpoint else None)
        run = RunState.from_checkpoint(checkpoint, self.n) if checkpoint is not None else RunState(self.n)
        out = Path(out_dir)
        slot = Slot(**{f.name: getattr(run, f.name) for f in dataclasses.fields(RunState)}, cfg=cfg, workflow=wf,
                    out=out, ckpt_dir=Path(checkpoint_dir) if checkpoint_dir else out / "checkpoints",
                    log=RunLog(out, log_prefix, cfg.tensorboard), saved_update=run.update, claim=claim,
                    pauses=pauses, mix=mix)
        rows = slice(k * self.n, (k + 1) * self.n)
        if mix is not None:
            slot.window = WorkflowWindow(mix.ids(), run.window)
            enc, rank, ids = self._draw_workflows(k, slot, slot.global_step // self.cfg.episode_length)
        else:
            enc = torch.as_tensor(wf.encode() if wf else np.zeros(WORKFLOW_DIM, np.float32))
            rank, ids = torch.as_tensor(wf.rank if wf else np.arange(5)), wf.index if wf else -1
        self.wf_enc[k] = enc.to(self.device)
        self.rank[rows] = rank.to(self.device)
        self.wf_id[rows] = ids if isinstance(ids, int) else ids.to(self.device)
        self.lam[rows] = cfg.alignment_lambda if slot.conditioned else 0.0
        for t in reward.weighed():
            self.weights[t.name][rows] = t.weight_in(cfg)
        if checkpoint is not None:
            trim_log(out / "training_log.csv", slot.update)
            # a checkpoint written as the run stopped (a kill before its caller recorded the stop) stops again at
            # once under the same limits: no further update, which would train on with no episode left to play
            slot.apply_stop_rule()
        write_config(out, cfg)
        self.slots[k] = slot
        return slot

    def _draw_workflows(self, k: int, slot: Slot, episode: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Encodings (n, 25), type ranks (n, 5) and workflow indices (n,) that slot ``k``'s envs (a run across
        workflows) play in the run's episode ``episode``: each env's own draw (``WorkflowMix.draw``; env numbers
        are the batch's, so the seeds of ``train --seeds`` draw apart)."""
        i = slot.mix.draw(slot.cfg.seed, range(k * self.n, (k + 1) * self.n), episode)
        enc, rank, ids = slot.mix.table()   # i = -1 (--none-share): its last row, no workflow
        return torch.as_tensor(enc[i]), torch.as_tensor(rank[i]), torch.as_tensor(ids[i])

    def release(self, k: int) -> Slot:
        """Empty slot ``k`` (its envs keep stepping, masked out of every update, until a run takes it)."""
        slot = self.slots[k]
        self.slots[k] = None
        slot.log.close()
        return slot

    def member(self, k: int) -> Agent:
        """A stand-alone copy of slot ``k``'s current policy (with the run's opening)."""
        agent = self.agents.member(k)
        agent.opening = self.cfg.ppo.opening
        return agent

    # -------------------------------------------------------------------------------------------------- train
    def plan(self, k: int) -> tuple[int, int] | None:
        """(steps, active envs) of slot ``k``'s next update under its episode budget, or None when it is spent."""
        s = self.slots[k]
        c = s.cfg
        left = s.allowance - s.total_episodes
        if self.pool is not None:   # episode workers play whole episodes
            return (c.episode_length, min(c.n_envs, left)) if left > 0 else None
        plan = plan_update(c, s.global_step, left, s.round_active)
        if plan is None:
            return None
        s.round_active = plan[2]
        return plan[0], plan[1]

    def run_round(self) -> list[int]:
        """Train every occupied slot up to the next episode boundary; returns the slots whose training stopped in
        this round (each with its final checkpoint written). Stopped slots stay idle until released."""
        c = self.cfg
        check_batchable(c)
        if all(s is None for s in self.slots):
            raise RuntimeError("run_round with every slot empty: start a workflow first")
        stopped = []
        for _ in range(max(1, c.episode_length // c.update_every_steps)):
            active = np.zeros(self.q, np.int64)
            for k, s in enumerate(self.slots):
                if s is None or s.stop_reason is not None or s.waiting:
                    continue
                plan = self.plan(k)
                if plan is None:
                    s.at_claim()
                    if s.stop_reason is not None:
                        stopped.append(k)
                else:
                    active[k] = plan[1]
            if not active.any():
                break
            self.update(c.update_every_steps, active)
            stopped += [k for k in np.flatnonzero(active) if self.slots[k].stop_reason is not None]
        for k, s in enumerate(self.slots):
            if s is not None and (k in stopped or self._checkpoint_due(s)):
                self.save(k)
        return sorted(stopped)

    def update(self, steps: int, active: np.ndarray) -> dict[int, dict]:
        """One PPO update of the slots with ``active[k] > 0`` envs (slot k trains on its first ``active[k]`` envs),
        after ``steps`` steps of every env; logs a row per slot, applies each slot's stop rule and returns the rows."""
        t0 = time.perf_counter()
        batch, mask, finished = self._collect_from_workers(active) if self.pool is not None else self._collect(
            steps, active)
        t1 = time.perf_counter()
        live = [int(k) for k in np.flatnonzero(active)]
        if self.cfg.anneal_lr:
            slots = {k: self.slots[k] for k in live}
            self.opt.set_lr({k: learning_rate(s.cfg, s.total_episodes / s.cfg.budget) for k, s in slots.items()})
        stats = dict(zip(live, self.updater.run(batch, mask, self.gen, live)))
        self._check_finite(live, stats)
        t2 = time.perf_counter()
        self.global_step += steps
        sps = steps * int(active.sum()) / (t2 - t0)
        return {k: self._record(k, steps, finished[k], stats[k], t1 - t0, t2 - t1, sps) for k in live}

    def _check_finite(self, live: list[int], stats: dict[int, dict | None]) -> None:
        """Stop training the moment an update's losses or a member's weights are not finite: from then on every
        update is NaN, and a checkpoint written now would replace the last good one with weights ``evaluate``
        refuses. Raised before the update is counted, logged or saved (``TrainingDiverged``: one error line naming
        the settings to lower). Costs one host read per update, beside the one the statistics already take."""
        finite = torch.isfinite(self.agents.flat[live]).all(1).tolist()
        for k, ok in zip(live, finite):
            bad = [name for name, v in (stats.get(k) or {}).items() if not math.isfinite(v)]
            if bad or not ok:
                s = self.slots[k]
                what = f"update {s.update + 1}'s {' and '.join(bad) if bad else 'weights'}"
                if self.q > 1 and s.workflow is not None:
                    what += f" (workflow {s.workflow})"
                raise TrainingDiverged(divergence_message(s.cfg, what))

    def _record(self, k: int, steps: int, fin: dict, stats: dict, t_collect: float, t_update: float,
                sps: float) -> dict:
        """Count slot ``k``'s update, write its log row and decide whether it stops."""
        s = self.slots[k]
        ep = episode_stats(fin)
        counted = ep.pop("counted")
        s.finish_update(steps, fin["env_return"], ep["compliance"], counted)
        if s.mix is not None:
            s.window.add(fin["workflow_id"], fin["compliant"], fin["violations"])
        worst, c_worst = s.worst()
        label = str(s.workflow) if s.workflow else (f"mix of {len(s.mix.train)}" if s.mix else "none")
        row = {"workflow_id": s.workflow.index if s.workflow else -1, "workflow": label, "update": s.update,
               "total_episodes": s.total_episodes, **ep, "collection_time": t_collect, "update_time": t_update,
               "sps": sps, "global_step": s.global_step, "mean100": mean_or_nan(list(s.recent)), **stats,
               "compliance_worst": c_worst, "worst_workflow": worst}
        s.log.write(row)
        done = int(s.episodes_per_env.min())
        # a run across workflows: the worst workflow's compliance over full windows must pass the gate too
        worst_ok = 1.0 if s.mix is None else (c_worst if s.window.full() else float("nan"))
        if s.gate_at is None and gate_fires(s.cfg, s.conditioned, done, counted, s.last_compliance, worst_ok):
            s.gate_at, s.gate_episodes = done, s.total_episodes
        s.apply_stop_rule()
        if s.stop_reason is None and s.total_episodes >= s.allowance:
            s.at_claim()
        return row

    def extend(self, k: int, claim: int) -> None:
        """Raise slot ``k``'s claim (an elastic search's top-up); a waiting run trains on from the next round."""
        self.slots[k].grow(claim)

    def cut(self, k: int) -> None:
        """Make slot ``k``'s claim final where it stands: the run stops "budget" and writes its last checkpoint."""
        s = self.slots[k]
        s.claim, s.waiting, s.stop_reason = s.total_episodes, False, "budget"
        self.save(k)

    def _collect(self, steps: int, active: np.ndarray):
        """``steps`` steps of every env: the rollout (each field (Q, steps * n, ...)), the mask of each slot's
        training rows (its first ``active[k]`` envs) and each slot's finished episodes."""
        q, n, dev, c = self.q, self.n, self.device, self.cfg
        # envs start together and episodes have one fixed length, so the steps that end episodes are known on the
        # host without reading the device
        ends = tuple(t for t in range(steps) if (self.global_step + t + 1) % c.episode_length == 0)
        # likewise the steps the opening plays (--opening): each env's step of its episode is known on the host
        forced = tuple(self.actor.forced((self.global_step + t) % c.episode_length) for t in range(steps))
        b = self._buffers(steps, len(ends))
        self._next_workflows(b, ends)
        terms = reward.active(s.cfg for s in self.slots if s is not None)
        self.segments.run((steps, ends, forced, tuple(t.name for t in terms)), self._segment, b, ends, forced, terms)
        finished = [_empty_finished() for _ in range(q)]
        for e in range(len(ends)):      # the one host read of the rollout: the episodes that ended in it
            self._hand_over(b["ended"][e], active, finished)
        adv, ret = bootstrapped_gae(b["reward"], b["value"], b["last_value"], b["final_value"], b["ends"], c.ppo)

        def per_member(z: torch.Tensor) -> torch.Tensor:   # (T, q, n, ...) -> (q, T*n, ...), always a copy:
            # the buffers are rewritten by the next rollout (reshape alone would return a view when q or T is 1)
            return z.transpose(0, 1).clone(memory_format=torch.contiguous_format).view(q, steps * n, *z.shape[3:])

        env_active = torch.arange(n, device=dev).unsqueeze(0) < torch.as_tensor(active, device=dev).unsqueeze(1)
        # the opening's steps train nothing: the policy did not choose them
        policy_steps = torch.as_tensor([a is None for a in forced], device=dev)
        mask = (env_active.unsqueeze(1) & policy_steps.view(1, steps, 1)).reshape(q, steps * n)
        batch = Rollout(per_member(b["x"]), per_member(b["actions"]), per_member(b["logprob"]), per_member(adv),
                        per_member(ret), per_member(b["value"]))
        return batch, mask, finished

    def _next_workflows(self, b: dict, ends: tuple[int, ...]) -> None:
        """Fill ``b``'s next-workflow buffers: what every env plays after each episode end of the coming segment
        (a run across workflows: each env's next draw; otherwise its workflow as now). Written on the host before
        the segment, so the segment itself only copies them in (capturable)."""
        for e, t in enumerate(ends):
            b["next_enc"][e].copy_(self.wf_enc)
            b["next_rank"][e].copy_(self.rank)
            b["next_id"][e].copy_(self.wf_id)
            for k, s in enumerate(self.slots):
                if s is not None and s.mix is not None:
                    enc, rank, ids = self._draw_workflows(k, s, (s.global_step + t + 1) // self.cfg.episode_length)
                    rows = slice(k * self.n, (k + 1) * self.n)
                    b["next_enc"][e, k] = enc.to(self.device)
                    b["next_rank"][e, rows] = rank.to(self.device)
                    b["next_id"][e, rows] = ids.to(self.device)

    def _buffers(self, steps: int, n_ends: int) -> dict:
        """The fixed buffers a rollout of ``steps`` steps with ``n_ends`` episode ends is written into, allocated once
        per shape (a segment replayed as a CUDA graph writes into the same memory every time)."""
        key = (steps, n_ends)
        if key not in self._rollout_buffers:
            q, n, dev = self.q, self.n, self.device
            shape = (steps, q, n)
            self._rollout_buffers[key] = {
                "x": torch.zeros((*shape, input_dim(self.memory)), device=dev),
                "actions": torch.zeros(shape, dtype=torch.int64, device=dev),
                **{k: torch.zeros(shape, device=dev) for k in ("logprob", "value", "reward", "final_value", "ends")},
                "last_value": torch.zeros((q, n), device=dev),
                # per episode end: what ``ENDED`` names (fix counts, each reward term's return, ended, workflow)
                "ended": torch.zeros((n_ends, len(ENDED), q * n), dtype=torch.float64, device=dev),
                # per episode end: each env's workflow from then on (``_next_workflows``)
                "next_enc": torch.zeros((n_ends, q, n, WORKFLOW_DIM), device=dev),
                "next_rank": torch.zeros((n_ends, q * n, 5), dtype=torch.int64, device=dev),
                "next_id": torch.zeros((n_ends, q * n), dtype=torch.int64, device=dev)}
        return self._rollout_buffers[key]

    def _segment(self, b: dict, ends: tuple[int, ...], forced: tuple[int | None, ...],
                 terms: tuple[reward.RewardTerm, ...]) -> None:
        """Step every env ``len(b['x'])`` times, writing the rollout into ``b``; ``ends``: the steps after which
        episodes end; ``forced``: per step, the opening's action every env plays (None: the policy's); ``terms``:
        the reward terms the batch sums (``reward.active``). At a forced
        step the buffers keep the policy's own sample, finite for the loss that masks the step out. Device work
        only -- no host read, nothing the next step needs outside the fixed buffers and the batch's state tensors,
        which are updated in place -- so on a GPU it is captured once per shape and replayed as one CUDA graph
        (``rl.segments``)."""
        q, n, c, tr = self.q, self.n, self.cfg, self.tracker
        total = q * n
        b["final_value"].zero_()
        b["ends"].zero_()
        with torch.no_grad():
            params, actor = self.agents.params(), self.actor
            # the memory has seen self.obs (the last step's, or a reset's without red activity): seeing it again is a
            # no-op
            x = actor.inputs(self.obs, self.mem)
            for t in range(b["x"].shape[0]):
                a, logp, v = actor.sample(x, self.gen, params)
                played = actor.play(a, forced[t])
                out = self.stepper.step(played.reshape(total))
                # an episode with no workflow (plain PPO, a mixture's --none-share) earns no alignment reward
                lam = torch.where(self.wf_id >= 0, self.lam, 0.0)
                align, _ = tr.step(played.reshape(total), self.access, self.rank, lam)
                step = reward.Step(out.reward.to(self.device), align, played.reshape(total), self.access)
                parts = reward.step_rewards(terms, step, self.weights)
                b["x"][t], b["actions"][t], b["logprob"][t], b["value"][t] = x, a, logp, v
                b["reward"][t] = reward.compose(parts, c.ppo.reward_scale).view(q, n)
                for name, r in parts.items():
                    self.ep_ret[name] += r
                actor.took(self.mem, played.reshape(total))
                obs = out.obs.to(self.device)
                if t in ends:
                    trunc = out.truncated.to(self.device)
                    final_obs = torch.where(trunc.unsqueeze(1), out.final_obs.to(self.device), obs)
                    # bootstrap the time-limit end with the value of the episode's last observation
                    b["final_value"][t] = actor.value(actor.inputs(final_obs, self.mem), params)
                    b["ends"][t] = trunc.view(q, n)
                    e = ends.index(t)
                    rec = b["ended"][e]
                    for i, src in enumerate((tr.compliant, tr.violations, tr.neutral, *self.ep_ret.values(),
                                             trunc, self.wf_id)):
                        rec[i].copy_(src)
                    tr.clear(trunc)
                    for ret in self.ep_ret.values():
                        ret.masked_fill_(trunc, 0)
                    actor.forget(self.mem, trunc)
                    # the new episodes' workflows (every env's episode ends here: fixed length, common start)
                    self.wf_enc.copy_(b["next_enc"][e])
                    self.rank.copy_(b["next_rank"][e])
                    self.wf_id.copy_(b["next_id"][e])
                x = actor.inputs(obs, self.mem)   # the next step's input: after a new episode's memory reset
                self.obs.copy_(out.obs)
                self.access.copy_(out.access)
            b["last_value"].copy_(actor.value(x, params))

    def _hand_over(self, ended: torch.Tensor, active: np.ndarray, finished: list[dict]) -> None:
        """Hand the episodes recorded in ``ended`` (one episode end of a rollout) to their slots (active envs only)."""
        q, n = self.q, self.n
        rec = {k: v.view(q, n).cpu().numpy() for k, v in zip(ENDED, ended)}
        done = rec["ended"] > 0
        for k in np.flatnonzero(active):
            sel = np.flatnonzero(done[k, :active[k]])
            fin = finished[k]
            for key in reward.RETURNS:
                fin[key] += rec[key][k, sel].tolist()
            # episodes with no workflow (plain PPO, a mixture's --none-share) have nothing to comply with
            counted = self.slots[k].conditioned * (rec["workflow_id"][k, sel] >= 0)
            for key in ("compliant", "violations", "neutral"):
                fin[key] += (rec[key][k, sel] * counted).tolist()
            fin["workflow_id"] += rec["workflow_id"][k, sel].astype(np.int64).tolist()
            self.slots[k].episodes_per_env[sel] += 1

    def _collect_from_workers(self, active: np.ndarray):
        """Episode-worker mode (one slot): ``active[0]`` whole episodes played by the worker pool."""
        from workflow_rl.rl.episode_workers import collect_episodes

        s, k = self.slots[0], int(active[0])
        rank = self.rank[0].cpu().numpy() if s.workflow is not None else None
        lam = s.cfg.alignment_lambda if s.workflow is not None else 0.0
        weights = {t.name: t.weight_in(s.cfg) for t in reward.weighed() if t.weight_in(s.cfg) != 0}
        flat, fin = collect_episodes(self.pool, self.member(0), self.wf_enc[0, 0].cpu().numpy(), rank, lam,
                                     s.cfg.seed, s.total_episodes, k, self.cfg.ppo, self.device,
                                     s.cfg.alignment_reward, weights)
        s.episodes_per_env[:k] += 1
        batch = Rollout(*(getattr(flat, f.name).unsqueeze(0) for f in dataclasses.fields(Rollout)))
        return batch, torch.ones(batch.actions.shape, dtype=torch.bool, device=self.device), [fin]

    # ------------------------------------------------------------------------------------------- checkpoints
    def engine_snapshot(self) -> dict:
        """The batch's own state (RNG, engine, current observations, compliance counts, episode sums): with it a
        one-slot run resumes mid-episode exactly as if never stopped. Engine fields are None where the engine
        cannot be snapshotted (real CybORG, episode workers)."""
        snap = {"rng": {"generator": self.gen.get_state(), "torch": torch.get_rng_state()}}
        if self.stepper is not None:
            snap.update(env_state=self.stepper.get_state(), obs=self.obs.clone(), access=self.access.clone(),
                        tracker={k: v.clone() for k, v in self.tracker.state_dict().items()},
                        episode_running={name: r.clone() for name, r in self.ep_ret.items()},
                        memory=None if self.mem is None else self.mem.clone())
        return snap

    def restore_engine(self, ck: dict) -> bool:
        """Continue from a one-slot checkpoint's engine snapshot; returns whether the engine state was restored
        (False: the envs start fresh episodes)."""
        if ck.get("rng") is not None:   # torch's RNG setters take CPU byte tensors only, for a CUDA generator too,
            # while a checkpoint loaded for a CUDA run has every tensor on the GPU (map_location)
            self.gen.set_state(ck["rng"]["generator"].cpu())
            torch.set_rng_state(ck["rng"]["torch"].cpu())
        if self.stepper is None or not self.stepper.set_state(ck.get("env_state")):
            return False
        self.obs.copy_(ck["obs"])
        self.access.copy_(ck["access"])
        self.tracker.load_state_dict(ck["tracker"])
        for name, r in self.ep_ret.items():
            saved = ck["episode_running"].get(name)
            if saved is None:   # a term added since the checkpoint was written, at weight 0 (rl.resumable)
                r.zero_()
            else:
                r.copy_(saved)
        if self.mem is not None:
            saved = ck.get("memory", ck.get("decoys_placed"))   # decoys_placed: the name before --red-memory
            if saved is None or tuple(saved.shape) != tuple(self.mem.shape):
                raise CheckpointError(f"checkpoint has no episode memory of this run's kind ({self.memory}): it was "
                                      "written with other --decoy-memory/--red-memory settings; resume with the "
                                      "original settings")
            self.mem.copy_(saved)
        return True

    def checkpoint(self, k: int, engine: bool = False) -> dict:
        """Slot ``k``'s checkpoint; ``engine`` adds the batch's engine snapshot (one-slot runs)."""
        s = self.slots[k]
        return s.to_checkpoint(s.cfg, s.workflow, self.agents.member_state(k), self.opt.member_state(self.agents, k),
                               self.engine_snapshot() if engine else None)

    def save(self, k: int, engine: bool = False) -> Path:
        """Slot ``k``'s checkpoint: ``latest.pt``, or with staging on ``next.pt`` until :meth:`commit_saves`."""
        s = self.slots[k]
        path = s.ckpt_dir / (STAGED if self.staged is not None else "latest.pt")
        atomic_save(self.checkpoint(k, engine), path)
        s.saved_update = s.update
        if self.staged is not None and s.ckpt_dir not in self.staged:
            self.staged.append(s.ckpt_dir)
        return path

    def stage_saves(self) -> None:
        """From now on checkpoints are written as ``next.pt`` and become ``latest.pt`` only at
        :meth:`commit_saves`: a caller that saves state of its own beside them (a batched search's batch state)
        commits both together, so a kill between the two never leaves checkpoints newer than that state
        (:func:`reconcile_staged` finishes or undoes a commit a kill cut short)."""
        self.staged = []

    def commit_saves(self) -> None:
        """Every staged checkpoint becomes its folder's ``latest.pt`` (each an atomic rename)."""
        for d in self.staged or ():
            if (d / STAGED).exists():
                os.replace(d / STAGED, d / "latest.pt")
        if self.staged:
            self.staged.clear()

    def _checkpoint_due(self, s: Slot) -> bool:
        return s.update // s.cfg.checkpoint_every > s.saved_update // s.cfg.checkpoint_every

    def close(self) -> None:
        for s in self.slots:
            if s is not None:
                s.log.close()
        if self.pool is not None:
            self.pool.close()
        if self.env is not None and self.cfg.engine == "cyborg":
            self.env.close()


class Trainer:
    """One training run: a one-slot :class:`BatchedTrainer` driven update by update. ``run()`` trains."""

    def __init__(self, cfg: TrainConfig, out_dir: str | Path, checkpoint_dir: str | Path | None = None,
                 init_agent_state: dict | None = None, progress: bool = True, log_prefix: dict | None = None):
        self.batch = BatchedTrainer(cfg, 1)
        self.cfg, self.progress = cfg, progress
        self._start = {"out_dir": out_dir, "checkpoint_dir": checkpoint_dir, "log_prefix": log_prefix}
        self.slot = self.batch.start(0, cfg, init_agent_state=init_agent_state, **self._start)
        self.workflow = self.slot.workflow
        self._interrupt = GracefulInterrupt("this update")

    @property
    def agent(self) -> Agent:
        return self.batch.member(0)

    @property
    def total_episodes(self) -> int:
        return self.slot.total_episodes

    @property
    def update(self) -> int:
        return self.slot.update

    def restore(self, ck: dict) -> None:
        """Continue from a checkpoint of the same configuration (budget and stop limits may differ); every field
        it reads is checked first."""
        check_resumable(ck, self.cfg, self.slot.ckpt_dir / "latest.pt", self.cfg.n_envs)
        self.batch.release(0)
        self.slot = self.batch.start(0, self.cfg, checkpoint=ck, **self._start)
        self.batch.global_step = self.slot.global_step
        if not self.batch.restore_engine(ck) and self.slot.global_step % self.cfg.episode_length:
            raise CheckpointError("checkpoint holds no engine state and was taken mid-episode: it cannot be "
                                  "resumed; retrain")
        # without engine state a checkpoint taken between episodes continues with the fresh episodes of reset()

    def run(self) -> dict:
        """Train until a stop rule fires; returns a summary of training (no evaluation)."""
        s, c = self.slot, self.cfg
        bar = progress_bar(c.budget, s.total_episodes, self.progress)
        try:
            with self._interrupt:
                while s.stop_reason is None:
                    plan = self.batch.plan(0)
                    if plan is None:
                        s.stop_reason = "budget"
                        break
                    row = self.batch.update(plan[0], np.array([plan[1]]))[0]
                    bar.update(row["episodes"])
                    if row["episodes"]:   # updates that finish no episode (several per episode) have nothing to show
                        bar.set_postfix_str(self._line(row), refresh=False)
                        if not self.progress:
                            print(self._line(row), flush=True)
                    # an engine without snapshots (real CybORG) is checkpointed only between episodes: resuming
                    # starts fresh episodes, so a checkpoint taken mid-episode could not continue that episode
                    resumable = self.batch.snapshots or self.batch.global_step % c.episode_length == 0
                    if self._interrupt.requested and s.stop_reason is None and resumable:
                        s.stop_reason = "interrupted"
                    if s.stop_reason is not None or (resumable and self.batch._checkpoint_due(s)):
                        self.save()
        except BaseException:   # a second Ctrl-C or a failure: stop the workers now, so the process can end
            self.close()
            raise
        finally:
            bar.close()
        self.save()
        self.close()
        return s.summary()

    def checkpoint(self) -> dict:
        return self.batch.checkpoint(0, engine=True)

    def save(self) -> Path:
        return self.batch.save(0, engine=True)

    def close(self) -> None:
        """Close the log and stop worker processes (episode workers, or the cyborg engine's vector env)."""
        self.batch.close()

    def summary(self) -> dict:
        return self.slot.summary()

    def _line(self, row: dict) -> str:
        comp = "  n/a " if math.isnan(row["compliance"]) else f"{row['compliance']:.3f}"
        if self.slot.mix is not None:   # across workflows: pooled, then the worst workflow's (last 20 episodes)
            worst = "n/a" if math.isnan(row["compliance_worst"]) else f"{row['compliance_worst']:.3f}"
            comp += f" (worst {worst} {row['worst_workflow']})"
        return (f"Reward: {row['env_reward']:8.2f} | Length: {self.cfg.episode_length} | "
                f"Mean(100): {row['mean100']:8.2f} | Compliance: {comp} | n_completed_episodes: "
                f"{row['episodes']} | n_envs: {self.cfg.n_envs} | SPS: {row['sps']:,.0f}")


def check_batchable(cfg: TrainConfig) -> None:
    """Batched training needs every slot change on an episode boundary, and one env for all slots."""
    steps, length = cfg.update_every_steps, cfg.episode_length
    if length % steps and steps % length:
        raise ValueError(f"batched training needs update-every-steps ({steps}) to divide or be a multiple of "
                         f"episode-length ({length})")
    if cfg.vectorization == EPISODE_WORKERS:
        raise ValueError("batched training steps one vector env: use vectorization sync, pipes or shared_memory")
