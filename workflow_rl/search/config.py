"""``SearchConfig``: the search's own settings around one embedded :class:`TrainConfig` (how each workflow trains).

Settings live in one flat namespace, the one the command line and ``search_state.json`` use: ``SearchConfig(
n_envs=8, total_episodes=60)`` routes ``n_envs`` to the embedded training config and ``total_episodes`` to the
search. Field names of SearchConfig, TrainConfig and PPOConfig never collide, so the routing is unambiguous, and no
setting is declared twice.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from workflow_rl.checks import ValidatedOnce, check_int, check_play_steps, check_types, flag
from workflow_rl.ranges import check_fields, numeric_fields
from workflow_rl.rl.pretrained import starting_weights
from workflow_rl.rl.config import DECLARED, NOT_SET, TrainConfig, check_choices, one_of
from workflow_rl.rl.schedule import check_first_update
from workflow_rl.workflow import Workflow

SEARCH_TRAINING_DEFAULTS = {n: d.search_default for n, d in DECLARED.items() if d.search_default is not NOT_SET}
"""Where a search trains differently from ``workflow-rl train`` by default (declared on the fields, ``search_default``):
4 PPO updates per episode of every env reach compliance in ~4x fewer episodes than 100 (RESULTS.md); and the
value protocol (docs/search.md, "Search, exactly"): 40 more episodes per env after the compliance gate, so a workflow is
judged after the same further training whatever it inherited, not at the moment its gate fired. Chosen by
measurement (``benchmarks/studies/protocol.py``, RESULTS.md): 5 seeds spread with std 9-22 at the gate, 1.8-8 after 10,
2-3 after 20 (and the worst seed's evaluated compliance 0.89-0.93, below the 0.95 gate), 1.1 after 40 with every
seed >= 0.95 in evaluation. The 200 envs (TrainConfig's default) are part of it: at 50 or 100 envs the same 40
episodes per env leave seed std 5.8-7.7 and evaluated compliance 0.85-0.92. (The learning rate, 5e-4, is
PPOConfig's own default in both.)"""

LEGACY_SETTINGS = {**{n: d.search_legacy for n, d in DECLARED.items() if d.search_legacy is not NOT_SET},
                   "strategy": "gp-ucb", "design_start": "critical_first", "claims": "lowered", "pick_margin": 0.0}
"""What a search saved before these settings existed ran with: a resumed old ``search_state.json`` keeps them
(not today's defaults), so its remaining workflows are measured as its first ones were."""

STRATEGIES = ("gp-ucb", "random", "gp-cei", "random-eligible")
"""How the search picks the next workflow: GP-UCB (initial design, then the UCB argmax), uniformly at random among
the untried ones (the baseline a search strategy must beat), or constrained expected improvement (the initial
design, then EI on the value GP times a GP classifier's probability that the workflow is eligible), or uniformly
among the untried workflows that classifier deems likely eligible; see ``WorkflowSearch.propose``."""

CLAIMS = ("elastic", "lowered", "whole")
"""How workflows training at once share the search budget (``WorkflowSearch``, docs/search.md "Search, exactly"): each
holds a *claim* on it. 'whole': a full cap from dispatch until it finishes; 'lowered': a full cap, lowered to what
it can still use once its gate fires; 'elastic': lowered too, and a new workflow needs only a typical workflow's
cost unclaimed to start, with a claim that grows while it trains (it waits at its claim when none is left; the newest
is cut if nothing frees up). Only a batched search (``--batch-workflows``) has workflows whose claims can change;
others train one at a time (serial) or hold whole claims (Ray)."""

RETIRED = ("compile", "native_backend")
"""Settings older search states hold that no longer exist: the torch tensor path's (the device now picks the
native engine's CPU or CUDA build of one rule source, with the same results)."""
PER_WORKFLOW = tuple(n for n, d in DECLARED.items() if d.per_workflow)
"""TrainConfig fields the search decides for each workflow (declared ``per_workflow``: its order, its budget claim; no
TensorBoard), so they are neither search settings nor flags of ``workflow-rl search``."""


def search_training() -> TrainConfig:
    """The training config a search starts from: TrainConfig's defaults with the search's own."""
    return TrainConfig(**SEARCH_TRAINING_DEFAULTS)


@dataclass(init=False)
class SearchConfig(ValidatedOnce):
    """Settings of a workflow search (saved in the search state)."""

    train: TrainConfig
    """how every workflow is trained (its workflow and budget are set per workflow)."""
    total_episodes: int = 100_000
    """training episodes for the whole search (evaluation not counted); never exceeded"""
    inherit: str = one_of("nearest", ("nearest", "previous", "none"))
    """warm start from the nearest trained workflow (Kendall), the previous one, or none"""
    gp_beta: float | None = None
    """fixed UCB beta (default: Srinivas et al.'s finite-set schedule, delta 0.1)"""
    n_init: int = 3
    """initial design size (farthest-point)"""
    design_start: str = "random"
    """the initial design's first workflow (the rest are the farthest points from it): 'random' (drawn from --seed,
    so searches with different seeds start apart and their answers are independent trials) or a workflow (e.g.
    critical_first, the domain's prior: measured worse, RESULTS.md)"""
    eval_episodes: int = 500
    """held-out evaluation episodes per workflow (its observed value)"""
    eval_length: int = 100
    """steps per held-out evaluation episode"""
    workflows: list[str] | None = None
    """train exactly these workflows (';'-separated or several arguments; 'named' = the six): no GP selection, no
    inheritance"""
    max_iterations: int | None = None
    """stop after this many workflows"""
    init_checkpoint: str | None = None
    """start every workflow without a parent (all, with --exhaustive) from this checkpoint (a file or
    pretrained:NAME), so an exhaustive ground truth and a search can share one starting point"""
    batch_workflows: int = field(default=1, metadata={"metavar": "Q"})
    """train Q workflows at once in this process, in one batch (one engine call and one PPO update serve all Q; the
    way to fill a GPU); 1 = one at a time"""
    claims: str = one_of("elastic", CLAIMS)
    """how workflows training at once share the budget in a batched search: elastic (start with what is unclaimed,
    grow while training; the fewest episode rounds), lowered (a full cap each, lowered at the gate) or whole (a full
    cap until finished: the most results seen before each pick); see docs/search.md ("Search, exactly")"""
    strategy: str = one_of("gp-ucb", STRATEGIES)
    """how the next workflow is chosen: gp-ucb, random (uniform over untried workflows; the baseline), gp-cei
    (expected improvement times the modelled probability of being eligible), or random-eligible (uniform over the
    untried workflows modelled as likely eligible)"""
    ground_truth: str | None = None
    """a ground_truth.csv (from --exhaustive under the same protocol): adds the answer's simple regret and rank to
    the summary and report"""
    universal_fraction: float | None = field(default=None, metadata={"metavar": "F"})
    """first train one universal agent across all 120 workflows on F of --total-episodes (0 < F < 1), evaluate it
    under every workflow (low-fidelity observations), then fine-tune from it the workflows the GP picks (as with
    --init-checkpoint of an agent trained across workflows, whose own training is not counted)"""
    pick_margin: float = field(default=0.02, metadata={"metavar": "M"})
    """(from a universal agent) fine-tune first the workflows whose screened compliance is >= the compliance
    threshold + M (then those above the threshold, then any): the first universal agent's compliance was ~0.996 or
    ~0.951-0.959 at 0.95, and in the measured searches 4 of 6 fine-tuned picks from the lower group failed the
    sampled gate (each costs a full cap), 2 of 7 from the upper group
    (benchmarks/results/search_from_universal/ratio_agent)"""
    seeds_per_workflow: int = field(default=1, metadata={"metavar": "K"})
    """train K independent seeds of each workflow (in the same batch) and observe their mean held-out return:
    averages out seed noise; each seed gets --max-episodes x --n-envs"""

    def __init__(self, train: TrainConfig | None = None, **settings):
        """``train`` whole, or any of its settings (PPO's included) flat among the search's own."""
        own = {f.name for f in dataclasses.fields(self)} - {"train"}
        training = {k: v for k, v in settings.items() if k not in own}
        clash = sorted(set(training) & set(PER_WORKFLOW))
        if clash:
            raise TypeError(f"SearchConfig sets {', '.join(clash)} per workflow: not a search setting")
        base = {k: v for k, v in (train or search_training()).flat().items() if k not in PER_WORKFLOW}
        self.train = TrainConfig.from_flat({**base, **training})
        for f in dataclasses.fields(self):
            if f.name != "train":
                setattr(self, f.name, settings.get(f.name, f.default))

    # ------------------------------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict:
        """The flat form ``search_state.json`` keeps (the keys of every earlier version, plus newer settings), in
        JSON's own types."""
        training = {k: list(v) if isinstance(v, tuple) else v for k, v in self.train.flat().items()
                    if k not in PER_WORKFLOW}
        return {**training, **{f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "train"}}

    @classmethod
    def from_dict(cls, d: dict) -> "SearchConfig":
        """Inverse of :meth:`to_dict`; a state file from before a setting existed gets its default (the old one
        where ``LEGACY_SETTINGS`` names it), and settings that no longer exist (``RETIRED``) are dropped."""
        d = {**LEGACY_SETTINGS, **{k: v for k, v in d.items() if k not in RETIRED}}
        if d.get("hidden") is not None:
            d["hidden"] = tuple(d["hidden"])
        return cls(**d)

    # ------------------------------------------------------------------------------------------------ derived
    @property
    def workflow_cap(self) -> int:
        """Training episodes one workflow may use (all its seeds together, post-gate phase included)."""
        return self.train.budget * self.seeds_per_workflow

    @property
    def uses_universal(self) -> bool:
        """Whether the search starts from a universal agent (``search.universal``): its own
        (``universal_fraction``), or an ``init_checkpoint`` trained across workflows, in a search that picks its
        workflows (not a fixed list)."""
        if self.workflows is not None:
            return False
        if self.universal_fraction is not None:
            return True
        if self.init_checkpoint is None:
            return False
        from workflow_rl.search.universal import trained_across_workflows

        return trained_across_workflows(self.init_checkpoint)

    def train_config(self, wf: Workflow, budget: int) -> TrainConfig:
        """How one workflow is trained: the search's training settings, its workflow and its budget claim. Once the
        search's settings passed :meth:`validate`, which validated them with a workflow and the whole budget, a
        workflow's config is marked validated (``ValidatedOnce``) after the one check its claim needs: any
        workflow's codes pass where one's did, so its trainer does not validate the search's settings again."""
        cfg = dataclasses.replace(self.train, workflow=wf.codes, num_episodes=budget)
        if self.validated:
            check_int(flag("num_episodes"), budget, 1)
            cfg.mark_validated()
        return cfg

    def validate(self) -> None:
        """Every setting usable before the first workflow trains (a bad checkpoint fails now, not an hour in)."""
        check_types(self)
        check_choices(self)
        # every number within its range (workflow_rl/ranges.py; --universal-fraction's by check_universal below,
        # which says what it is a share of); the training's by tcfg.validate() below
        check_fields(self, [n for n in numeric_fields(SearchConfig) if n != "universal_fraction"])
        check_play_steps(f"{flag('eval_episodes')} {self.eval_episodes:,} x {flag('eval_length')} {self.eval_length:,}"
                         + (f" x {flag('seeds_per_workflow')} {self.seeds_per_workflow}"
                            if self.seeds_per_workflow > 1 else "") + " (each workflow's evaluation)",
                         self.eval_episodes * self.eval_length * self.seeds_per_workflow,
                         f"lower {flag('eval_episodes')} or {flag('eval_length')}")
        if self.init_checkpoint is not None:
            starting_weights(self.init_checkpoint, self.train.ppo)
        if self.universal_fraction is not None or self.uses_universal:
            from workflow_rl.search.universal import check_universal

            check_universal(self)
        if self.design_start != "random":
            try:
                Workflow.parse(self.design_start)
            except ValueError as e:
                raise ValueError(f"{flag('design_start')}: {e}; or 'random'") from None
        if self.workflows is not None:
            ws = [Workflow.parse(w) for w in self.workflows]
            if len(set(ws)) != len(ws):
                raise ValueError("the workflow list repeats a workflow")
        tcfg = self.train_config(Workflow.parse("critical_first"), self.total_episodes)
        tcfg.validate()
        check_first_update(tcfg)
        if self.ground_truth is not None:
            from workflow_rl.search.ground_truth import load_ground_truth

            load_ground_truth(self.ground_truth, self)
        if self.batch_workflows > 1 or self.seeds_per_workflow > 1:
            from workflow_rl.rl.trainer import check_batchable

            check_batchable(tcfg)
        tcfg.check_memory(self.batch_slots * self.seeds_per_workflow)
        self.mark_validated()

    def most_at_once(self) -> tuple[int, str]:
        """How many workflows can train at once at most, and why. Every running workflow holds a claim on the
        budget no smaller than what it will cost, and a workflow costs at least its gate (no earlier than
        ``min_episodes`` per env) and its post-gate phase, or its cap; all but the search's last may hold that
        much, so no more than ceil(budget / least cost) run at once. And there are only so many to train."""
        t = self.train
        per_seed = min(t.budget, t.max_episodes * t.n_envs,
                       (max(1, t.min_episodes) + t.post_gate_episodes) * t.n_envs)
        least = per_seed * self.seeds_per_workflow
        bounds = [(-(-self.total_episodes // least),
                   f"a workflow costs at least {least:,} of the {self.total_episodes:,} budget episodes")]
        if self.workflows is not None:
            bounds.append((len(self.workflows), "--workflows lists that many"))
        if self.max_iterations is not None:
            bounds.append((self.max_iterations, "--max-iterations stops after that many"))
        return min(bounds, key=lambda b: b[0])

    def thread_work(self):
        """What the search computes at once, for the thread policy: a batch of its runs (``TrainConfig.thread_work``
        with its slots and seeds)."""
        return self.train.thread_work(self.batch_slots * self.seeds_per_workflow)

    @property
    def batch_slots(self) -> int:
        """The workflows a batched search trains at once: ``batch_workflows``, but no more than
        :meth:`most_at_once`. Every slot of a batch steps its envs every round whether a workflow trains in it or
        not, so a slot that can never be filled would only slow the search (40 slots where 2 can fill ran 15x
        slower)."""
        return min(self.batch_workflows, self.most_at_once()[0])
