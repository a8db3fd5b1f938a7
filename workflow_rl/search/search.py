"""The workflow search: GP-UCB over the 120 workflows with policy inheritance, under an episode budget.

``strategy="random"`` (the baseline) and ``"gp-cei"`` choose otherwise; the budget counts every training episode and is
never exceeded.

Each iteration: choose a workflow (initial design, then the UCB argmax over the workflows not yet trained), warm
start its policy from an already-trained workflow (``inherit``), train it until it complies or reaches its
episode cap, evaluate the policy's environment-only return on held-out seeds, refit the GP, log why it was chosen.

Rules (also in docs/search.md):

* Budget: ``total_episodes`` counts every *training* episode (evaluation episodes are not counted) and is never
  exceeded: each running workflow holds a *claim* on it and trains within it. Claims (``claims``): 'whole' — a full
  cap at dispatch; a new workflow waits while less than a cap is unclaimed and others still run (they hand back
  what they do not use), so only the search's real last workflow is cut. 'lowered' — the same, and where the
  executor sees a running workflow's counters (batches) its claim drops to what it can still use as soon as its
  gate fires (``_lower``). 'elastic' (batches) — lowered too, and a new workflow needs only the median cost of the
  workflows finished so far unclaimed (a full cap before any finished); it claims what is unclaimed up to a cap,
  and after every wait running workflows are topped up to what they can use, oldest first (``_top_up``); one at its
  claim waits, and when every running workflow waits and none can be topped up the newest is cut where it stands.
  Other executors (serial, Ray) cannot grow a claim, so there 'elastic' behaves as 'lowered'.
* Every trained workflow is recorded with its observed value and status: ``compliant`` (passed the gate and its
  post-gate phase),
  ``not_compliant`` (hit its episode cap) or ``budget_cut`` (the budget ran out first). All observations feed the
  GP (it models how well a workflow's trained policy defends); a workflow is trained once and then leaves the
  candidate set, so nothing is retried. The returned best workflow is the best *eligible* one (compliant, and
  compliant in evaluation too; if none is, the best overall, flagged), with its 95% confidence set (``answer``).
* Inheritance: ``nearest`` starts from the trained workflow at the smallest Kendall distance (the most recent on
  ties), ``previous`` from the last trained one, ``none`` from scratch. Only the network weights are inherited;
  the Adam state starts fresh, because its moment estimates belong to the parent's objective. When several
  workflows train at once (Ray, batches), only the ``n_init`` initial-design workflows run until two results are
  back: any other pick then would be a far-off design point, spending a full cap that inheriting would save.
* From a universal agent (``--init-checkpoint`` of an agent trained across workflows, or ``--universal-fraction``
  to train one first inside the budget): every workflow is first observed at low fidelity (the universal agent's
  evaluation under it), then the budget fine-tunes the GP's picks from the universal weights; see
  ``search.universal`` (phases, calls, the answer) and ``search.multifidelity`` (the GP).
* Every policy is kept on disk under ``RUN_DIR/workflows/``; the search state is saved atomically after every
  iteration, and ``resume`` continues exactly (an interrupted training resumes from its own checkpoint).
"""
from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

import numpy as np

from workflow_rl import seeding
from workflow_rl.rl.checkpoint import load_checkpoint
from workflow_rl.rl.resumable import check_resumable, same_run
from workflow_rl.search.answer import best_record, fit_records
from workflow_rl.search.batched_executor import seed_dir
from workflow_rl.search.config import SearchConfig
from workflow_rl.search.evaluation import SearchInterrupted, evaluate_record, train_and_evaluate
from workflow_rl.search.executors import Executor, SearchJob, SerialExecutor
from workflow_rl.search.gp import (N_CANDIDATES, cei_select, eligibility, features, fit_gp, initial_design, posterior,
                                   seed_noise, srinivas_beta, ucb_select)
from workflow_rl.search.outputs import append_logs, catch_up_logs, finalize, progress_line
from workflow_rl.search.records import Proposal, Record, SearchState
from workflow_rl.workflow import Workflow, all_workflows, kendall


__all__ = ["SearchConfig", "SearchInterrupted", "WorkflowSearch"]   # what callers import from here


def check_run_files(out: Path, cfg: SearchConfig, state: SearchState) -> None:
    """Every checkpoint a resumed search reads, loaded and checked before it writes anything: each recorded
    workflow's kept policy (a parent to inherit from, the answer's policy), each pending workflow's own
    checkpoints (all they hold must continue under ``cfg``: a changed ``n_envs`` is refused here, not after
    training on) or, where it has none yet, its parent's; and a batched search's batch state."""
    device, k = cfg.train.device, cfg.seeds_per_workflow
    batched = cfg.batch_workflows > 1 or k > 1
    for r in state.iterations:
        path = out / r.checkpoint
        if not path.is_file():
            raise ValueError(f"the policy of iteration {r.iteration} ({path}) is missing: put it back, or start a "
                             "new search in another folder")
        same_run(load_checkpoint(path, device), cfg.train_config(Workflow.parse(r.workflow), cfg.train.budget), path)
    for p in state.pending:
        wf = Workflow.parse(p.workflow)
        paths = [out / seed_dir(p.run_dir, seed, k) / "checkpoints" / "latest.pt" for seed in range(k)]
        for path in paths:
            if path.exists():
                check_resumable(load_checkpoint(path, device), cfg.train_config(wf, p.budget), path,
                                None if batched else cfg.train.n_envs)
        if p.parent_checkpoint and not any(path.exists() for path in paths):
            path = out / p.parent_checkpoint
            same_run(load_checkpoint(path, device), cfg.train_config(Workflow.parse(p.parent), cfg.train.budget),
                     path)
    if batched:
        from workflow_rl.search.batched_executor import check_batch_state

        check_batch_state(out, cfg, state)


class WorkflowSearch:
    """The search loop; ``run()`` returns the summary and writes every artefact into ``out``."""

    def __init__(self, cfg: SearchConfig, out: str | Path, progress: bool = True):
        cfg.validate_once()   # settings the caller validated are not validated again (``ValidatedOnce``)
        self.cfg = cfg
        self.out = Path(out)
        self.progress = progress
        self.state_path = self.out / "search_state.json"
        self.state = SearchState(config=cfg.to_dict())
        self._session_start = time.perf_counter()
        self._wall_before = 0.0
        self._grows = False
        """claims are elastic and the executor can grow them (set when ``explore`` opens it)"""

    # ---------------------------------------------------------------------------------------------------- state
    @classmethod
    def resume(cls, out: str | Path, progress: bool = True, **overrides) -> "WorkflowSearch":
        """The search saved in ``out``, ready to ``run()`` on (``overrides``: settings to change, by name)."""
        out = Path(out)
        state = SearchState.load(out / "search_state.json")
        try:
            cfg = SearchConfig.from_dict({**state.config, **overrides})
            s = cls(cfg, out, progress)
        except TypeError as e:
            raise ValueError(f"{out / 'search_state.json'} is damaged ({e}); start a new search in another "
                             "folder") from None
        except ValueError as e:   # a setting edited into a bad value, or one this machine cannot run
            raise ValueError(f"{out / 'search_state.json'}: {e}") from None
        if state.episodes_used > cfg.total_episodes:
            raise ValueError(f"{out / 'search_state.json'} is damaged (episodes_used {state.episodes_used} exceeds "
                             f"total_episodes {cfg.total_episodes}); start a new search in another folder")
        saved = SearchConfig.from_dict(state.config) if overrides else cfg   # what the state was written under
        try:
            state.check_against(saved, out, N_CANDIDATES if saved.workflows is None else len(saved.workflows))
        except ValueError as e:
            raise ValueError(f"{out / 'search_state.json'} is damaged ({e}); start a new search in another "
                             "folder") from None
        check_run_files(out, cfg, state)
        state.config = cfg.to_dict()
        s.state = state
        s._wall_before = state.wall_seconds   # the wall time of its earlier sessions, up to their last save
        return s

    def _wall(self) -> float:
        """The search's wall time so far: its earlier sessions' (saved) and this one's."""
        return self._wall_before + time.perf_counter() - self._session_start

    def _save(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.state.wall_seconds = self._wall()
        self.state.save(self.state_path)

    @property
    def budget_left(self) -> int:
        return self.cfg.total_episodes - self.state.episodes_used

    @property
    def budget_unclaimed(self) -> int:
        """Budget neither used nor claimed by a running workflow."""
        return self.budget_left - sum(p.budget for p in self.state.pending)

    def _trained(self) -> list[Workflow]:
        return [Workflow.parse(r.workflow) for r in self.state.iterations]

    # --------------------------------------------------------------------------------------------------- choose
    def propose(self) -> Proposal | None:
        """The next workflow to train, with why; None when nothing is left to try.

        Workflows still training (``pending``) are excluded, and with a GP they are *hallucinated*: added as
        observations at their current posterior mean with the fitted hyperparameters held fixed (GP-BUCB's
        variance update), so q parallel picks spread out instead of repeating the same argmax.
        """
        it = self.state.dispatched
        busy = {Workflow.parse(p.workflow).index for p in self.state.pending}
        tried = {w.index for w in self._trained()} | busy
        if self.cfg.workflows is not None:
            if it >= len(self.cfg.workflows):
                return None
            return Proposal(workflow=Workflow.parse(self.cfg.workflows[it]).codes, reason="listed (exhaustive)")
        if len(tried) >= N_CANDIDATES:
            return None
        if self.state.phase is not None:
            return self._universal_pick(it, tried, busy)
        return self._strategies()[self.cfg.strategy](it, tried, busy)

    def _universal_pick(self, it: int, tried: set[int], busy: set[int]) -> Proposal:
        """(from a universal agent) The UCB argmax of the two-fidelity GP, or a uniform draw with 'random', among
        the untried workflows of ``universal.pick_pool`` (those the universal agent's evaluation calls eligible
        with ``--pick-margin`` to spare, else without, else all)."""
        from workflow_rl.search import universal

        among, label = universal.pick_pool(self.state.screen, tried, self.cfg.train.compliance_threshold,
                                           self.cfg.pick_margin)
        if self.cfg.strategy == "random":
            p = self._draw(it, among, f"random among {len(among)} {label}")
            return dataclasses.replace(p, reason=p.reason + "; fine-tuned from the universal agent")
        (mu, cov), _ = universal.posterior(self.state.iterations, self.state.screen,
                                           [all_workflows()[k] for k in sorted(busy)])
        sd = np.sqrt(np.maximum(np.diag(cov), 0.0))
        beta = self.cfg.gp_beta if self.cfg.gp_beta is not None else srinivas_beta(len(self.state.iterations) + 1)
        k = ucb_select(mu, sd, beta, set(range(N_CANDIDATES)) - set(among))
        why = f"two-fidelity UCB argmax over {len(among)} {label} (beta {beta:.2f}"
        why += (f", {len(busy)} pending hallucinated)" if busy else ")") + "; fine-tuned from the universal agent"
        return Proposal(workflow=all_workflows()[k].codes, ucb=float(mu[k] + math.sqrt(beta) * sd[k]),
                        mean=float(mu[k]), std=float(sd[k]), beta=beta, reason=why)

    def _strategies(self) -> dict:
        """Strategy name -> its pick(iteration, tried, busy): the one place a new strategy is added (its name goes
        to ``config.STRATEGIES``)."""
        return {"gp-ucb": self._gp_ucb, "random": self._random, "gp-cei": self._gp_cei,
                "random-eligible": self._random_eligible}

    def _random(self, it: int, tried: set[int], busy: set[int]) -> Proposal:
        """Uniform over the untried workflows."""
        untried = [k for k in range(N_CANDIDATES) if k not in tried]
        return self._draw(it, untried, f"random among {len(untried)} untried")

    def _random_eligible(self, it: int, tried: set[int], busy: set[int]) -> Proposal:
        """Uniform over the untried workflows the eligibility model (``gp.eligibility``) gives P(eligible) >= 0.5;
        over all untried ones while fewer than one eligible and one ineligible workflow have been seen (nothing
        separates them yet) or when none passes. Random search's breadth, without spending the budget beyond the
        eligibility cliff (ground truth: a user-before-enterprise order never complies)."""
        elig = self._eligible()
        if any(elig) and not all(elig):
            p = self._p_eligible()
            likely = [k for k in range(N_CANDIDATES) if k not in tried and p[k] >= 0.5]
            if likely:
                return self._draw(it, likely, f"random among {len(likely)} untried with P(eligible) >= 0.5")
        return self._random(it, tried, busy)

    def _draw(self, it: int, among: list[int], why: str) -> Proposal:
        """One of ``among`` uniformly; the draw depends only on the seed and the iteration, so a resumed search draws
        what the uninterrupted one would."""
        rng = np.random.default_rng([self.cfg.train.seed, it])
        return Proposal(workflow=all_workflows()[among[int(rng.integers(len(among)))]].codes, reason=why)

    def _eligible(self) -> list[bool]:
        """Per recorded workflow, whether it may be the answer (``Record.eligible``)."""
        return [r.eligible(self.cfg.train.compliance_threshold) for r in self.state.iterations]

    def _p_eligible(self) -> np.ndarray:
        """P(eligible) of all 120 workflows from the classifier fitted to the recorded ones (``gp.eligibility``)."""
        return eligibility(self._trained(), self._eligible(), self.cfg.train.seed)

    def _gp_ucb(self, it: int, tried: set[int], busy: set[int]) -> Proposal:
        """The initial design first, then the UCB argmax over the untried workflows."""
        if it < self.cfg.n_init or len(self.state.iterations) < 2:
            return self._design_point(it, tried)
        mu, sd = self._posterior(busy)
        beta = self.cfg.gp_beta if self.cfg.gp_beta is not None else srinivas_beta(len(self.state.iterations) + 1)
        k = ucb_select(mu, sd, beta, tried)
        why = f"UCB argmax over {N_CANDIDATES - len(tried)} untried (beta {beta:.2f}"
        why += f", {len(busy)} pending hallucinated)" if busy else ")"
        return Proposal(workflow=all_workflows()[k].codes, ucb=float(mu[k] + math.sqrt(beta) * sd[k]),
                        mean=float(mu[k]), std=float(sd[k]), beta=beta, reason=why)

    def _gp_cei(self, it: int, tried: set[int], busy: set[int]) -> Proposal:
        """The initial design first, then the argmax of expected improvement over the best eligible value so far
        times P(eligible) (``gp.eligibility``); GP-UCB's pick until some workflow is eligible (no incumbent)."""
        its = self.state.iterations
        ok = [r.observed_reward for r, e in zip(its, self._eligible()) if e]
        if it < self.cfg.n_init or len(its) < 2 or not ok:
            return self._gp_ucb(it, tried, busy)
        mu, sd = self._posterior(busy)
        p = self._p_eligible()
        k = cei_select(mu, sd, max(ok), p, tried)
        why = (f"constrained EI argmax over {N_CANDIDATES - len(tried)} untried (P(eligible) {p[k]:.2f}, best "
               f"eligible {max(ok):.2f}" + (f", {len(busy)} pending hallucinated)" if busy else ")"))
        return Proposal(workflow=all_workflows()[k].codes, mean=float(mu[k]), std=float(sd[k]), reason=why)

    def _design_point(self, it: int, tried: set[int]) -> Proposal:
        """The next farthest-point design workflow not yet tried; past ``n_init`` (the design is in flight but
        fewer than 2 results are back) the design is extended."""
        first = self._design_start()
        design = initial_design(self.cfg.n_init, first)
        wf = next((w for w in design if w.index not in tried), None)
        n = len(design)
        while wf is None:
            n += 1
            cand = initial_design(n, first)[-1]
            wf = cand if cand.index not in tried else None
        start = "drawn from the seed" if self.cfg.design_start == "random" else "given"
        why = (f"initial design 1/{len(design)} (start {start})" if it == 0 and wf == first else
               f"initial design {it + 1}/{len(design)} (farthest point)" if it < len(design) else
               f"initial design extended to {it + 1} (farthest point; fewer than 2 results back yet)")
        return Proposal(workflow=wf.codes, reason=why)

    def _design_start(self) -> Workflow:
        """The initial design's first workflow (``design_start``); 'random' draws it from the seed alone, so a resumed
        search starts where the uninterrupted one did."""
        if self.cfg.design_start != "random":
            return Workflow.parse(self.cfg.design_start)
        rng = seeding.design_rng(self.cfg.train.seed)
        return all_workflows()[int(rng.integers(N_CANDIDATES))]

    def _posterior(self, busy: set[int] = frozenset()):
        its = self.state.iterations
        model = fit_records(its, self.cfg.train.seed)
        if busy:
            ws = self._trained()
            extra = [all_workflows()[k] for k in sorted(busy)]
            y_fake = model.predict(features(extra))
            noise = seed_noise([r.seed_rewards for r in its])
            if noise is not None:   # a hallucinated point is as precise as a typical observation
                noise = np.concatenate([noise, np.full(len(extra), np.median(noise))])
            y = np.array([r.observed_reward for r in its])
            model = fit_gp(ws + extra, np.concatenate([y, y_fake]), kernel=model.kernel_, noise_var=noise)
        return posterior(model)

    def _parent(self, wf: Workflow) -> Record | None:
        if (self.cfg.workflows is not None or self.cfg.inherit == "none" or not self.state.iterations
                or self.state.phase is not None):   # from a universal agent, every workflow starts from it
            return None
        if self.cfg.inherit == "previous":
            return self.state.iterations[-1]
        return min(reversed(self.state.iterations), key=lambda r: kendall(wf, Workflow.parse(r.workflow)))

    # ------------------------------------------------------------------------------------------------------ run
    def run(self, executor: Executor | None = None) -> dict:
        """Dispatch workflows while the executor has free slots and budget is unclaimed; record them as they
        finish. The default executor trains one workflow at a time in this process (several in one batch with
        ``batch_workflows`` or ``seeds_per_workflow`` above 1)."""
        self._session_start = time.perf_counter()
        self.explore(executor or self._default_executor())
        self._save()   # the summary's wall time is the saved one, so a later resume never reports less
        return finalize(self, self.state.wall_seconds)

    def explore(self, executor: Executor) -> None:
        """The loop of :meth:`run` without the end-of-search artefacts (the replay of a ground truth,
        ``search.ground_truth_replay``, runs thousands of these)."""
        executor.open(SearchJob(self.cfg, self.out, self.progress, train_and_evaluate, evaluate_record,
                                lambda: self.state.episodes_used))
        self._grows = executor.needs() is not None   # elastic claims, and an executor that can grow them
        self._save()
        catch_up_logs(self.out, self.state.iterations)   # resumed: rows a kill kept from the logs
        self._universal_phases()
        for p in self.state.pending:          # resumed: restart what was running (from its own checkpoint)
            executor.submit(p)
        if getattr(executor, "review_owed", False):   # saved as a wait returned, before the search's review of it
            self._review(executor)
        try:
            while not self.state.finished:
                while executor.free() > 0 and self._may_dispatch():
                    prop = self.propose()
                    if prop is None:
                        break
                    self._dispatch(prop, executor)
                if executor.running() == 0:
                    break
                done = executor.wait_one()
                self._review(executor)
                if done is not None:
                    self._complete(*done)
        finally:
            executor.shutdown()
        self.state.finished = True
        self._save()

    def _universal_phases(self) -> None:
        """(from a universal agent) Train the search's own universal agent and evaluate it under every workflow,
        whichever of those is not done yet (``search.universal``); the phase is saved after each."""
        from workflow_rl.search import universal

        st = self.state
        if st.phase is None and not st.dispatched and self.cfg.uses_universal:
            st.phase = "universal" if self.cfg.universal_fraction is not None else "screen"
            self._save()
        if st.phase == "universal":
            t0 = time.perf_counter()
            st.universal_episodes = universal.train_universal(self.cfg, self.out, self.progress)
            st.episodes_used += st.universal_episodes
            st.phase = "screen"
            self._save()
            print(f"universal agent: {st.universal_episodes:,} training episodes across all 120 workflows "
                  f"({time.perf_counter() - t0:.0f} s), budget {st.episodes_used}/{self.cfg.total_episodes}",
                  flush=True)
        if st.phase == "screen":
            t0 = time.perf_counter()
            st.screen, st.screen_source = universal.screen(self.cfg, self.out)
            st.screen_seconds = time.perf_counter() - t0
            st.phase = "fine-tune"
            self._save()
            ok = sum(s.eligible(self.cfg.train.compliance_threshold) for s in st.screen)
            how = {"computed": "evaluated", "cache": "evaluation read from the cache",
                   "shipped": "evaluation as shipped with it"}[st.screen_source]
            print(f"universal agent {how} under all {len(st.screen)} workflows ({self.cfg.eval_episodes} episodes "
                  f"each, {st.screen_seconds:.0f} s): {ok} called eligible", flush=True)

    def _default_executor(self) -> Executor:
        if self.cfg.batch_workflows > 1 or self.cfg.seeds_per_workflow > 1:
            from workflow_rl.search.batched_executor import BatchedExecutor

            return BatchedExecutor(self.cfg.batch_slots, self.cfg.seeds_per_workflow)
        return SerialExecutor()

    def _may_dispatch(self) -> bool:
        if self.budget_unclaimed <= 0:
            return False
        m = self.cfg.max_iterations
        if m is not None and self.state.dispatched >= m:
            return False
        its, pending = self.state.iterations, self.state.pending
        if pending and self.budget_unclaimed < self._reserve():
            # a smaller claim would cut this workflow short although running ones will hand back what they do
            # not use: wait for them; only the search's real last workflow gets what is left
            return False
        # several at once (Ray, batches): until two results are back the GP cannot be fitted and a new pick could
        # only be a far-off design point, trained from scratch or from a distant parent, spending a full cap that
        # inheriting from a near, finished workflow saves; so only the initial design runs until then
        inherits = self.cfg.inherit != "none" and self.cfg.workflows is None and self.state.phase is None
        return not (inherits and len(its) < 2 and pending and len(pending) + len(its) >= max(2, self.cfg.n_init))

    def _reserve(self) -> int:
        """Unclaimed budget a new workflow waits for while others run: a full cap, so it is never cut short; with
        elastic claims the median training cost of the workflows finished so far (cut ones aside), since its claim
        grows as running ones hand back what they do not use."""
        done = sorted(r.episodes_trained for r in self.state.iterations if r.status != "budget_cut")
        if not (self._grows and done):
            return self.cfg.workflow_cap
        return min(done[len(done) // 2], self.cfg.workflow_cap)

    def _dispatch(self, prop: Proposal, executor: Executor) -> None:
        it = self.state.dispatched + 1
        prop = prop.dispatched(it, self._parent(Workflow.parse(prop.workflow)),
                               min(self.budget_unclaimed, self.cfg.workflow_cap))
        self.state.pending.append(prop)
        self.state.dispatched = it
        self._save()
        executor.submit(prop)

    def _review(self, executor: Executor) -> None:
        """After every wait: lower running workflows' claims ('lowered', 'elastic'), then top them up ('elastic',
        where the executor can grow them); saved, so a resumed search keeps them."""
        if self.cfg.claims == "whole":
            return
        changed = self._lower(executor.claims())
        if self._grows:
            changed |= self._top_up(executor)
        if changed:
            self._save()

    def _lower(self, claims: dict[int, list[int]]) -> bool:
        """Lower running workflows' claims to what they can still use (``Executor.claims``): once a workflow's gate
        fires its post-gate phase is fixed, and the rest of its cap goes to new workflows now instead of when it
        finishes. The budget is never exceeded: each seed trains within its claim (a resumed seed gets it as its
        claim)."""
        changed = False
        for i, p in enumerate(self.state.pending):
            bound = claims.get(p.iteration)
            if bound is not None and sum(bound) < p.budget:
                self.state.pending[i] = dataclasses.replace(p, budget=sum(bound), seed_budgets=list(bound))
                changed = True
        return changed

    def _top_up(self, executor: Executor) -> bool:
        """Raise running workflows' claims towards what they can use (``Executor.needs``), oldest first, from the
        unclaimed budget: the workflow that has trained longest is nearest its result."""
        needs, changed = executor.needs(), False
        for i, p in sorted(enumerate(self.state.pending), key=lambda x: x[1].iteration):
            if p.iteration not in needs or self.budget_unclaimed <= 0:
                continue
            shares = p.shares(self.cfg.seeds_per_workflow)
            for k, need in enumerate(needs[p.iteration]):
                shares[k] += min(max(0, need - shares[k]), self.budget_unclaimed - (sum(shares) - p.budget))
            if sum(shares) > p.budget:
                self.state.pending[i] = dataclasses.replace(p, budget=sum(shares), seed_budgets=shares)
                executor.extend(p.iteration, shares)
                changed = True
        return changed

    def _complete(self, prop: Proposal, record: Record) -> None:
        self.state.pending = [p for p in self.state.pending if p.iteration != prop.iteration]
        self.state.episodes_used += record.episodes_trained
        record.budget_left = self.budget_left
        self.state.iterations.append(record)
        self._save()
        append_logs(self.out, record)
        print(progress_line(record, self.best(), self.state.episodes_used, self.cfg.total_episodes), flush=True)

    def best(self) -> Record | None:
        """The answer so far: the best eligible workflow (compliant in training and evaluation; the best overall,
        if none is)."""
        return best_record(self.state.iterations, self.cfg.train.compliance_threshold)
