"""GP-UCB search over the 120 workflows with policy inheritance, under an exact training-episode budget.

Each iteration: choose a workflow (initial design, then the UCB argmax over the workflows not yet trained), warm
start its policy from an already-trained workflow (``inherit``), train it until it complies or reaches its
episode cap, evaluate the policy's environment-only return on held-out seeds, refit the GP, log why it was chosen.

Rules (also in the README):

* Budget: ``total_episodes`` counts every *training* episode (evaluation episodes are not counted) and is never
  exceeded: the last workflow's training is cut to what is left. Workflows running at once each claim a full cap
  at dispatch; a new one waits while less than a cap is unclaimed and others still run (they hand back what they
  do not use), so only the search's real last workflow is cut.
* Every trained workflow is recorded with its observed value and status: ``compliant`` (reached the threshold),
  ``not_compliant`` (hit its episode cap) or ``budget_cut`` (the budget ran out first). All observations feed the
  GP (it models how well a workflow's trained policy defends); a workflow is trained once and then leaves the
  candidate set, so nothing is retried. The returned best workflow is the best *compliant* one (if none complied,
  the best overall, flagged).
* Inheritance: ``nearest`` starts from the trained workflow at the smallest Kendall distance (the most recent on
  ties), ``previous`` from the last trained one, ``none`` from scratch. Only the network weights are inherited;
  the Adam state starts fresh, because its moment estimates belong to the parent's objective. When several
  workflows train at once (Ray, batches), only the ``n_init`` initial-design workflows run until two results are
  back: any other pick then would be a far-off design point, spending a full cap that inheriting would save.
* Every policy is kept on disk under ``RUN_DIR/workflows/``; the search state is saved atomically after every
  iteration, and ``resume`` continues exactly (an interrupted training resumes from its own checkpoint).
"""
from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from workflow_rl.envs.factory import parse_red_agent
from workflow_rl.rl.evaluate import EVAL_SEED, across_seeds, agent_act, evaluate_policy
from workflow_rl.rl.ppo import PPOConfig
from workflow_rl.rl.checkpoint import load_checkpoint
from workflow_rl.rl.config import TrainConfig
from workflow_rl.rl.trainer import Trainer
from workflow_rl.search import gp as G
from workflow_rl.workflow import Workflow, all_workflows, kendall

GP_LOG_COLUMNS = ["iteration", "workflow", "reason", "ucb_score", "posterior_mean", "posterior_std", "beta",
                  "parent", "observed_reward", "observed_ci95", "compliance", "episodes_trained", "budget_left",
                  "status", "wall_time"]


@dataclass
class SearchConfig:
    """Settings of a workflow search (saved in the search state)."""

    red_agent: str = "B_lineAgent"
    engine: str = "native"
    total_episodes: int = 100_000
    """training episodes over the whole search (evaluation not counted); never exceeded."""
    n_envs: int = 200
    max_episodes: int = 50
    """per env and workflow (the workflow's cap is max_episodes * n_envs training episodes)."""
    min_episodes: int = 5
    compliance_threshold: float = 0.95
    min_fixes: int = 50
    alignment_lambda: float = 30.0
    update_every_steps: int = 25
    """4 PPO updates per episode of every env: reaches compliance in ~4x fewer episodes than 100 (RESULTS.md)."""
    learning_rate: float = 5e-4
    inherit: str = "nearest"
    gp_beta: float | None = None
    """fixed UCB beta; None = Srinivas et al.'s schedule for a finite set (delta = 0.1)."""
    n_init: int = 3
    eval_episodes: int = 500
    eval_length: int = 100
    seed: int = 0
    device: str = "cpu"
    workflows: list[str] | None = None
    """exhaustive mode: train exactly these workflows (in order), no GP selection, no inheritance."""
    max_iterations: int | None = None
    init_checkpoint: str | None = None
    """a trained checkpoint every workflow without a parent starts from (all of them in exhaustive mode), so an
    exhaustive ground truth and a search can share one starting point."""
    vectorization: str = "sync"
    compile: bool = False
    """native torch tensor path (a GPU): torch.compile the engine step."""
    batch_workflows: int = 1
    """workflows trained at once in this process, in one batch (one env of batch_workflows x n_envs envs, stacked
    policies, one update for all); 1 trains one at a time."""
    seeds_per_workflow: int = 1
    """independent seeds trained per workflow (together, in the batch): the observation is their mean held-out
    return, so seed noise averages out; the workflow's policy (for inheritance and best_policy.pt) is its best
    seed's. Each seed gets max_episodes * n_envs episodes at most."""
    n_workers: int | None = None
    parallel_start_method: str | None = None
    scenario: str | None = None

    def validate(self) -> None:
        parse_red_agent(self.red_agent)
        if not isinstance(self.total_episodes, int) or self.total_episodes < 1:
            raise ValueError(f"total-episodes must be an integer >= 1, got {self.total_episodes!r}")
        if self.inherit not in ("nearest", "previous", "none"):
            raise ValueError(f"unknown --inherit {self.inherit!r}: use nearest, previous or none")
        if self.gp_beta is not None and self.gp_beta < 0:
            raise ValueError(f"gp-beta must be >= 0, got {self.gp_beta}")
        if self.n_init < 1:
            raise ValueError("n-init must be >= 1")
        if self.eval_episodes < 1:
            raise ValueError("eval-episodes must be >= 1 (the search objective is the evaluated return)")
        if self.init_checkpoint is not None:
            load_checkpoint(Path(self.init_checkpoint))   # fail now, with the fix, not after the first workflow
        if self.workflows is not None:
            ws = [Workflow.parse(w) for w in self.workflows]
            if len(set(ws)) != len(ws):
                raise ValueError("the workflow list repeats a workflow")
        tcfg = self.train_config(Workflow.parse("critical_first"), self.total_episodes)
        tcfg.validate()
        for name in ("batch_workflows", "seeds_per_workflow"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name.replace('_', '-')} must be an integer >= 1, got {v!r}")
        if self.batch_workflows > 1 or self.seeds_per_workflow > 1:
            from workflow_rl.rl.trainer import check_batchable

            check_batchable(tcfg)

    @property
    def workflow_cap(self) -> int:
        """Training episodes one workflow may use (all its seeds together)."""
        return self.max_episodes * self.n_envs * self.seeds_per_workflow

    def train_config(self, wf: Workflow, budget: int) -> TrainConfig:
        """How one workflow is trained: every setting the two configs share by name, plus the workflow, its budget
        claim and the learning rate."""
        shared = {f.name: getattr(self, f.name) for f in dataclasses.fields(TrainConfig) if hasattr(self, f.name)}
        return TrainConfig(**shared, workflow=wf.codes, num_episodes=budget, checkpoint_every=10,
                           ppo=PPOConfig(learning_rate=self.learning_rate))


@dataclass
class SearchState:
    config: dict
    iterations: list[dict] = field(default_factory=list)
    """finished workflows, in order of completion."""
    episodes_used: int = 0
    pending: list[dict] = field(default_factory=list)
    """dispatched, not yet finished proposals (each holds its budget claim)."""
    dispatched: int = 0
    finished: bool = False


class SearchInterrupted(Exception):
    pass


def _atomic_json(obj, path: Path) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2, default=_json_default)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _json_default(x):
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    raise TypeError(type(x))


def initial_weights(cfg: SearchConfig, out: Path, p: dict) -> dict | None:
    """The weights a proposed workflow starts from: its parent's, else the search's init checkpoint, else None."""
    if p.get("parent_checkpoint"):
        return load_checkpoint(out / p["parent_checkpoint"], cfg.device)["agent"]
    if cfg.init_checkpoint:
        return load_checkpoint(Path(cfg.init_checkpoint), cfg.device)["agent"]
    return None


def train_and_evaluate(cfg: SearchConfig, out: str | Path, p: dict, progress: bool = False) -> dict:
    """Train the proposed workflow (warm-started from its parent, resumed from its own checkpoint if one exists)
    and evaluate it on the held-out seeds; returns its record. Runs in the driver or in a Ray worker."""
    out = Path(out)
    wf = Workflow.parse(p["workflow"])
    run_dir = out / p["run_dir"]
    t0, started = time.perf_counter(), time.time()
    trainer = Trainer(cfg.train_config(wf, p["budget"]), run_dir, init_agent_state=initial_weights(cfg, out, p),
                      progress=progress, log_prefix={"iteration": p["iteration"]})
    ck = run_dir / "checkpoints" / "latest.pt"
    if ck.is_file():
        trainer.restore(load_checkpoint(ck, cfg.device))
    summary = trainer.run()
    if summary["stop_reason"] == "interrupted":
        raise SearchInterrupted(str(ck))
    return evaluate_record(cfg, p, [trainer.agent], [summary], t0, started)


def _seed_status(cfg: SearchConfig, p: dict, stop_reason: str | None) -> str:
    if stop_reason == "compliant":
        return "compliant"
    if stop_reason == "budget" and p["budget"] < cfg.workflow_cap:
        return "budget_cut"   # the search budget, not the workflow's own cap, ended it
    return "not_compliant"


def _mean_or_none(values) -> float | None:
    v = [x for x in values if x is not None]
    return float(np.mean(v)) if v else None


def evaluate_record(cfg: SearchConfig, p: dict, agents: list, summaries: list[dict], t0: float, started: float,
                    checkpoints: list[str] | None = None) -> dict:
    """Evaluate a trained workflow's policies (one per seed) on the held-out seeds and build its search record
    (``t0``: the ``perf_counter`` at which its training started; ``started``: the same moment as a timestamp).

    One seed: its evaluation. Several: the observation is the mean over seeds with a Student-t interval across
    them; the status is compliant only if every seed complied; the kept checkpoint is the best compliant seed's
    (the best seed's if none complied)."""
    wf = Workflow.parse(p["workflow"])
    evs = [evaluate_policy(agent_act(a, wf, greedy=True), cfg.red_agent, cfg.eval_length, cfg.eval_episodes,
                           engine="native", seed=EVAL_SEED, workflow=wf, device=cfg.device) for a in agents]
    statuses = [_seed_status(cfg, p, s["stop_reason"]) for s in summaries]
    status = ("compliant" if all(x == "compliant" for x in statuses) else
              "budget_cut" if "budget_cut" in statuses else "not_compliant")
    checkpoints = checkpoints or [str(Path(p["run_dir"]) / "checkpoints" / "latest.pt")]
    pool = [i for i, x in enumerate(statuses) if x == "compliant"] or list(range(len(evs)))
    keep = max(pool, key=lambda i: evs[i].mean)
    if len(evs) == 1:
        reward, ci = evs[0].mean, evs[0].ci95
    else:
        spread = across_seeds([e.mean for e in evs])
        reward, ci = spread["mean"], spread["ci95"]
    return {
        "iteration": p["iteration"], "workflow": wf.codes, "reason": p["reason"], "ucb_score": p["ucb"],
        "posterior_mean": p["mean"], "posterior_std": p["std"], "beta": p["beta"], "parent": p["parent"],
        "observed_reward": reward, "observed_ci95": ci,
        "compliance": _mean_or_none(s["compliance"] for s in summaries),
        "eval_compliance": _mean_or_none(e.compliance for e in evs),
        "episodes_trained": sum(s["episodes"] for s in summaries), "budget_left": None,
        "status": status, "wall_time": time.perf_counter() - t0, "started_at": started, "finished_at": time.time(),
        "run_dir": p["run_dir"], "checkpoint": checkpoints[keep],
        "seed_rewards": [e.mean for e in evs], "seed_status": statuses,
    }


class SerialExecutor:
    """Trains one workflow at a time, in this process (Ctrl-C saves and stops cleanly)."""

    def __init__(self):
        self.queue: list[tuple[dict, WorkflowSearch]] = []

    def free(self) -> int:
        return 1 - len(self.queue)

    def running(self) -> int:
        return len(self.queue)

    def submit(self, prop: dict, search: "WorkflowSearch") -> None:
        self.queue.append((prop, search))

    def wait_one(self) -> tuple[dict, dict]:
        prop, search = self.queue.pop(0)
        return prop, train_and_evaluate(search.cfg, search.out, prop, search.progress)

    def shutdown(self) -> None:
        self.queue.clear()


class WorkflowSearch:
    """The search loop; ``run()`` returns the summary and writes every artefact into ``out``."""

    def __init__(self, cfg: SearchConfig, out: str | Path, progress: bool = True):
        cfg.validate()
        self.cfg = cfg
        self.out = Path(out)
        self.progress = progress
        self.state_path = self.out / "search_state.json"
        self.state = SearchState(config=dataclasses.asdict(cfg))

    # ---------------------------------------------------------------------------------------------------- state
    @classmethod
    def resume(cls, out: str | Path, progress: bool = True, **overrides) -> "WorkflowSearch":
        out = Path(out)
        path = out / "search_state.json"
        if not path.is_file():
            raise ValueError(f"no search to resume in {out} (missing search_state.json): start one with "
                             f"`workflow-rl search --out {out}`")
        try:
            d = json.loads(path.read_text())
            cfg = SearchConfig(**{**d["config"], **overrides})
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ValueError(f"{path} is damaged ({type(e).__name__}); start a new search in another folder") \
                from None
        s = cls(cfg, out, progress)
        s.state = SearchState(config=dataclasses.asdict(cfg), iterations=d["iterations"],
                              episodes_used=d["episodes_used"], pending=d["pending"],
                              dispatched=d["dispatched"], finished=d.get("finished", False))
        return s

    def _save(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        _atomic_json(dataclasses.asdict(self.state), self.state_path)

    @property
    def budget_left(self) -> int:
        return self.cfg.total_episodes - self.state.episodes_used

    @property
    def budget_unclaimed(self) -> int:
        """Budget neither used nor claimed by a running workflow."""
        return self.budget_left - sum(p["budget"] for p in self.state.pending)

    def _trained(self) -> list[Workflow]:
        return [Workflow.parse(r["workflow"]) for r in self.state.iterations]

    # --------------------------------------------------------------------------------------------------- choose
    def propose(self) -> dict | None:
        """The next workflow to train, with why; None when nothing is left to try.

        Workflows still training (``pending``) are excluded, and with a GP they are *hallucinated*: added as
        observations at their current posterior mean with the fitted hyperparameters held fixed (GP-BUCB's
        variance update), so q parallel picks spread out instead of repeating the same argmax.
        """
        it = self.state.dispatched
        busy = {Workflow.parse(p["workflow"]).index for p in self.state.pending}
        tried = {w.index for w in self._trained()} | busy
        if self.cfg.workflows is not None:
            if it >= len(self.cfg.workflows):
                return None
            wf = Workflow.parse(self.cfg.workflows[it])
            return {"workflow": wf.codes, "reason": "listed (exhaustive)", "ucb": None, "mean": None, "std": None,
                    "beta": None}
        if len(tried) >= G.N_CANDIDATES:
            return None
        design = G.initial_design(self.cfg.n_init)
        if it < len(design) or len(self.state.iterations) < 2:
            wf = next((w for w in design if w.index not in tried), None)
            n = len(design)
            while wf is None:   # the design is in flight but fewer than 2 results are back: spread further
                n += 1
                cand = G.initial_design(n)[-1]
                wf = cand if cand.index not in tried else None
            why = (f"initial design {it + 1}/{len(design)} (farthest point)" if it < len(design) else
                   f"initial design extended to {it + 1} (farthest point; fewer than 2 results back yet)")
            return {"workflow": wf.codes, "reason": why, "ucb": None, "mean": None, "std": None, "beta": None}
        mu, sd = self._posterior(busy)
        beta = self.cfg.gp_beta if self.cfg.gp_beta is not None else G.srinivas_beta(len(self.state.iterations) + 1)
        k = G.ucb_select(mu, sd, beta, tried)
        why = f"UCB argmax over {G.N_CANDIDATES - len(tried)} untried (beta {beta:.2f}"
        why += f", {len(busy)} pending hallucinated)" if busy else ")"
        return {"workflow": all_workflows()[k].codes, "ucb": float(mu[k] + math.sqrt(beta) * sd[k]),
                "mean": float(mu[k]), "std": float(sd[k]), "beta": beta, "reason": why}

    def _posterior(self, busy: set[int] = frozenset()):
        ws = self._trained()
        y = np.array([r["observed_reward"] for r in self.state.iterations])
        gp = G.fit_gp(ws, y, seed=self.cfg.seed)
        if busy:
            extra = [all_workflows()[k] for k in sorted(busy)]
            y_fake = gp.predict(G.features(extra))
            gp = G.fit_gp(ws + extra, np.concatenate([y, y_fake]), kernel=gp.kernel_)
        self._gp = gp
        return G.posterior(gp)

    def _parent(self, wf: Workflow) -> dict | None:
        if self.cfg.workflows is not None or self.cfg.inherit == "none" or not self.state.iterations:
            return None
        if self.cfg.inherit == "previous":
            return self.state.iterations[-1]
        best = min(reversed(self.state.iterations), key=lambda r: kendall(wf, Workflow.parse(r["workflow"])))
        return best

    # ------------------------------------------------------------------------------------------------------ run
    def run(self, executor=None) -> dict:
        """Dispatch workflows while the executor has free slots and budget is unclaimed; record them as they
        finish. The default executor trains one workflow at a time in this process."""
        if executor is None and (self.cfg.batch_workflows > 1 or self.cfg.seeds_per_workflow > 1):
            from workflow_rl.search.batched_executor import BatchedExecutor

            executor = BatchedExecutor(self.cfg.batch_workflows, self.cfg.seeds_per_workflow)
        executor = executor or SerialExecutor()
        self.out.mkdir(parents=True, exist_ok=True)
        self._save()
        t_start = time.perf_counter()
        for p in self.state.pending:          # resumed: restart what was running (from its own checkpoint)
            executor.submit(p, self)
        try:
            while not self.state.finished:
                while executor.free() > 0 and self._may_dispatch():
                    prop = self.propose()
                    if prop is None:
                        break
                    self._dispatch(prop, executor)
                if executor.running() == 0:
                    break
                prop, record = executor.wait_one()
                self._complete(prop, record)
        finally:
            executor.shutdown()
        self.state.finished = True
        self._save()
        return self._finalize(time.perf_counter() - t_start)

    def _may_dispatch(self) -> bool:
        if self.budget_unclaimed <= 0:
            return False
        m = self.cfg.max_iterations
        if m is not None and self.state.dispatched >= m:
            return False
        # several at once (Ray, batches): until two results are back the GP cannot be fitted and a new pick could
        # only be a far-off design point, trained from scratch or from a distant parent, spending a full cap that
        # inheriting from a near, finished workflow saves; so only the initial design runs until then
        its, pending = self.state.iterations, self.state.pending
        if pending and self.budget_unclaimed < self.cfg.workflow_cap:
            # a smaller claim would cut this workflow short although running ones will hand back what they do
            # not use: wait for them; only the search's real last workflow gets what is left
            return False
        inherits = self.cfg.inherit != "none" and self.cfg.workflows is None
        return not (inherits and len(its) < 2 and pending and len(pending) + len(its) >= max(2, self.cfg.n_init))

    def _dispatch(self, prop: dict, executor) -> None:
        it = self.state.dispatched + 1
        wf = Workflow.parse(prop["workflow"])
        parent = self._parent(wf)
        prop.update(iteration=it, run_dir=f"workflows/{it:03d}_{wf.codes.replace(',', '-')}",
                    parent=parent["workflow"] if parent else None,
                    parent_checkpoint=parent["checkpoint"] if parent else None,
                    budget=min(self.budget_unclaimed, self.cfg.workflow_cap))
        self.state.pending.append(prop)
        self.state.dispatched = it
        self._save()
        executor.submit(prop, self)

    def _complete(self, prop: dict, record: dict) -> None:
        self.state.pending = [p for p in self.state.pending if p["iteration"] != prop["iteration"]]
        self.state.episodes_used += record["episodes_trained"]
        record["budget_left"] = self.budget_left
        self.state.iterations.append(record)
        self._save()
        self._append_logs(record)
        self._print(record)

    # ------------------------------------------------------------------------------------------------- outputs
    def _append_logs(self, r: dict) -> None:
        path = self.out / "gp_sampling_log.csv"
        new = not path.exists()
        with open(path, "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=GP_LOG_COLUMNS, extrasaction="ignore")
            if new:
                w.writeheader()
            w.writerow(r)
        run = self.out / r["run_dir"]
        dst = self.out / "training_log.csv"
        sources = [run / "training_log.csv"] if (run / "training_log.csv").exists() else sorted(
            run.glob("seed_*/training_log.csv"), key=lambda f: int(f.parent.name.split("_")[1]))
        for src in sources:
            rows = src.read_text().splitlines()
            with open(dst, "a") as f:
                f.write("\n".join(rows if not dst.exists() or dst.stat().st_size == 0 else rows[1:]) + "\n")

    def _print(self, r: dict) -> None:
        best = self.best()
        comp = "n/a" if r["compliance"] is None else f"{r['compliance']:.3f}"
        print(f"[{r['iteration']:3d}] {r['workflow']:14s} {r['status']:13s} compliance {comp} | eval "
              f"{r['observed_reward']:8.2f} ± {r['observed_ci95']:.2f} | episodes {r['episodes_trained']:6d} | "
              f"budget {self.state.episodes_used}/{self.cfg.total_episodes} | best {best['workflow']} "
              f"{best['observed_reward']:.2f} | {r['reason']}", flush=True)

    def best(self) -> dict | None:
        its = self.state.iterations
        if not its:
            return None
        compliant = [r for r in its if r["status"] == "compliant"]
        return max(compliant or its, key=lambda r: r["observed_reward"])

    def _finalize(self, wall: float) -> dict:
        best = self.best()
        summary = {
            "red_agent": parse_red_agent(self.cfg.red_agent), "engine": self.cfg.engine,
            "best_workflow": Workflow.parse(best["workflow"]).names if best else None,
            "best_workflow_codes": best["workflow"] if best else None,
            "best_reward": best["observed_reward"] if best else None,
            "best_ci95": best["observed_ci95"] if best else None,
            "best_is_compliant": bool(best and best["status"] == "compliant"),
            "episodes_used": self.state.episodes_used, "total_episodes": self.cfg.total_episodes,
            "workflows_evaluated": len(self.state.iterations),
            "n_compliant": sum(r["status"] == "compliant" for r in self.state.iterations),
            "batch_workflows": self.cfg.batch_workflows,
            "wall_time_s": wall,
        }
        if best:
            shutil.copyfile(self.out / best["checkpoint"], self.out / "best_policy.pt")
            _atomic_json({**{k: best[k] for k in ("workflow", "observed_reward", "observed_ci95", "compliance",
                                                   "status", "iteration", "episodes_trained")},
                          "names": Workflow.parse(best["workflow"]).names, "checkpoint": "best_policy.pt"},
                         self.out / "best_workflow.json")
        _atomic_json(summary, self.out / "summary.json")
        try:
            from workflow_rl.search.report import write_report

            write_report(self)
        except Exception as e:  # noqa: BLE001 - a plotting failure must not lose the search results
            print(f"warning: report not written ({type(e).__name__}: {e})")
        return summary
