"""``TrainConfig``: everything a training run depends on, each default written once (saved as config.json).

The command line is generated from these fields (``workflow_rl.cli.flags``): a field's docstring is its ``--help``
text and its ``choices`` are the flag's. Every setting is declared once, on its field, with :func:`setting`: its
one default (and a search's, where that differs), its range, whether it may differ between the runs of one batch,
whether a resume must match it, whether a search chooses it per workflow and whether a run starting from
``--init-checkpoint`` keeps the checkpoint's. The tables other modules read (``PER_RUN`` here,
``rl.checkpoint.SAME_RUN``, ``search.config.PER_WORKFLOW`` and ``SEARCH_TRAINING_DEFAULTS``,
``runs.settings.INHERITED``, ``ranges.RANGES``' entries of these settings) are derived from those declarations, so
a new setting needs its one field and nothing else (tests/rl/test_settings_declared.py fails for a field that is
not declared). PPO's fields (``rl.ppo.PPOConfig``, which keeps their defaults) are declared in :data:`PPO_DECLARED`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from workflow_rl.checks import (MAX_EPISODE_LENGTH, ValidatedOnce, check_episode_length, check_float,  # noqa: F401
                                check_int, check_seed, check_types, flag)
from workflow_rl import ranges
from workflow_rl.ranges import (ENV_EPISODES, ENVS, LENGTHS, MAX_ENV_EPISODES, N_ACTIONS as ACTIONS, SEEDS, SHARE,
                                TRAINING_EPISODES, WORKERS, Range, check, check_fields)
from workflow_rl.resources import check_memory, check_workers, gib  # noqa: F401
from workflow_rl.envs.factory import engine_bytes_per_env
from workflow_rl import devices
from workflow_rl.envs.names import ENGINES, VECTORIZATIONS, parse_red_agent
from workflow_rl.rl.compliance import ALIGNMENT_REWARDS
from workflow_rl.rl.memory import Memory
from workflow_rl.rl.ppo import N_ACTIONS, PPOConfig, input_dim, network_bytes
from workflow_rl.threads import Work
from workflow_rl.workflow import Workflow, WorkflowMix, is_workflow_list

EPISODE_WORKERS = "episodes"
"""The vectorization that runs whole episodes in worker processes (either engine) instead of stepping envs."""


def rollout_bytes(memory: Memory) -> int:
    """Bytes one transition takes in a rollout: the float32 input, the int64 action and eight float32 per-step
    fields (log-prob, value, reward, bootstrap value, end flag, advantage, return, mask)."""
    return input_dim(memory) * 4 + 8 + 8 * 4


def one_of(default, options, **metadata) -> dataclasses.Field:
    """A setting restricted to ``options``: the command line offers them as choices and ``validate`` checks them."""
    return field(default=default, metadata={"choices": tuple(options), **metadata})


class _NotSet:
    """The sentinel of a declaration without a search default or a legacy value (None is a value a setting holds)."""

    def __repr__(self) -> str:
        return "NOT_SET"


NOT_SET = _NotSet()

SCOPES = ("run", "batch")
"""A setting's scope: one run's own, which it may hold alone inside a batch of runs (its workflow, budget, stop rule,
reward and bookkeeping), or the batch's, shared by every run of a batch (it shapes the batch or its update)."""
RESUMES = ("must_match", "may_differ")
"""Whether a resumed run must have a setting as its checkpoint was written (what it trains against, on what, how
its reward is made: else it would be another run than the one its files name) or may change it (budget, stop rule,
device, bookkeeping)."""


@dataclass(frozen=True)
class Declared:
    """What a setting is, besides its type, default and help (:func:`setting`): each question a new setting must
    answer, so none is left to a list elsewhere that nothing asks about."""

    range: Range | None
    """its bounds (``ranges.RANGES``' entry), or None: not a number"""
    scope: str
    """one of :data:`SCOPES`"""
    resume: str
    """one of :data:`RESUMES`"""
    per_workflow: bool = False
    """a search chooses it for each workflow (so it is no flag of ``workflow-rl search``)"""
    inherit: str | None = None
    """a run starting from ``--init-checkpoint`` takes the checkpoint's value unless one is typed; how the line that
    says so names it (e.g. "the form"). None: the run's own value stands"""
    search_default: object = NOT_SET
    """a search's default where it differs from ``train``'s"""
    search_legacy: object = NOT_SET
    """what a search saved before the setting existed ran with (``search.config.LEGACY_SETTINGS``)"""

    def __post_init__(self):
        if self.scope not in SCOPES or self.resume not in RESUMES:
            raise ValueError(f"scope {self.scope!r} / resume {self.resume!r}: use one of {SCOPES} / {RESUMES}")


def setting(default=dataclasses.MISSING, *, range: Range | None, scope: str, resume: str,  # noqa: A002
            per_workflow: bool = False, inherit: str | None = None, search_default=NOT_SET,
            search_legacy=NOT_SET, choices=None, default_factory=dataclasses.MISSING,
            **metadata) -> dataclasses.Field:
    """A ``TrainConfig`` field declared once: its default (and ``search_default``, a search's where it differs;
    ``search_legacy``, what an older search state without it ran with), its ``range`` (None: not numeric), its
    ``scope`` (:data:`SCOPES`), whether a resume must match it (``resume``, :data:`RESUMES`), whether a search sets it
    ``per_workflow``, and whether ``--init-checkpoint`` inherits it (``inherit``: how a line names it); ``choices``
    as :func:`one_of`. The range, scope and resume rule have no default: a new setting must choose them."""
    spec = Declared(range, scope, resume, per_workflow, inherit, search_default, search_legacy)
    meta = {"setting": spec, **({"choices": tuple(choices)} if choices is not None else {}), **metadata}
    return field(default=default, default_factory=default_factory, metadata=meta)


def _ppo(range: Range | None = None, inherit: str | None = None) -> Declared:  # noqa: A002
    """A PPO setting: every one is the batch's (one update serves the batch) and must match on resume."""
    return Declared(range, "batch", "must_match", inherit=inherit)


PPO_DECLARED: dict[str, Declared] = {
    "learning_rate": _ppo(Range(0.0, 1.0, "above 1 Adam drives the weights to inf and NaN "
                                "(rl.config.MAX_LEARNING_RATE)", float, lo_open=True)),
    "gamma": _ppo(Range(0.0, 1.0, "a discount", float)),
    "gae_lambda": _ppo(Range(0.0, 1.0, "GAE's lambda", float)),
    "num_minibatches": _ppo(Range(1, 10**9, "at most one per transition of an update (checked too)")),
    "update_epochs": _ppo(Range(1, 1000, "passes over a rollout: CleanRL uses 4 to 10; 1000 is minutes per update")),
    "clip_coef": _ppo(Range(0.0, 1000.0, "a ratio clip of 1 already lets the ratio reach 0; the value clip is in "
                            "scaled returns, which stay below 1000", float, lo_open=True)),
    "clip_vloss": _ppo(),
    "ent_coef": _ppo(Range(0.0, 100.0, "the entropy of 145 actions is at most 5; 100 already drowns every other "
                           "term", float)),
    "vf_coef": _ppo(Range(0.0, 100.0, "a loss weight: PPO uses 0.5; more only rescales the step size", float)),
    "max_grad_norm": _ppo(Range(0.0, 1e6, "a gradient norm; 1e6 clips nothing", float, lo_open=True)),
    "norm_adv": _ppo(),
    "reward_scale": _ppo(Range(0.0, 100.0, "at 100 the squared value error still fits float32 "
                               "(rl.config.MAX_REWARD_SCALE)", float, lo_open=True)),
    "hidden": _ppo(Range(1, 2**20, "two layers of 2**20 are 4 TiB of weights", grouped=False),
                   inherit="the hidden layers"),
    "decoy_memory": _ppo(inherit="the decoy memory"),
    "red_memory": _ppo(inherit="the red memory"),
    "mask_decoys": _ppo(inherit="the decoy masks"),
    "clock_memory": _ppo(inherit="the clock"),
    "opening": _ppo(Range(0, ACTIONS - 1, "CAGE2's blue action indices"), inherit="the opening"),
}
"""PPOConfig's settings declared (``rl.ppo``, which holds their defaults and help, imports nothing of the training
side): what :func:`setting` says of a TrainConfig field. The network's shape and episode memory (hidden layers,
memory blocks) and the opening are inherited from a starting checkpoint: its weights fit only that network, and its
policy was trained after that opening."""


def check_choices(config, spell=None) -> None:
    """Every ``one_of`` field of a config dataclass holds one of its options (None is allowed where it is the
    default, meaning "decide for me"); named as ``spell`` spells a field (default: its flag)."""
    for f in dataclasses.fields(config):
        options = f.metadata.get("choices")
        value = getattr(config, f.name)
        if options is not None and value not in options and not (value is None and f.default is None):
            raise ValueError(f"unknown {(spell or flag)(f.name)} {value!r}: use one of {', '.join(map(str, options))}")


MAX_LEARNING_RATE = PPO_DECLARED["learning_rate"].range.hi
"""Largest ``--learning-rate``: Adam moves each weight by about the step size per step whatever the gradient, so
above 1 the tanh layers saturate within a few steps and the weights run to inf and NaN (PPO's step sizes are
1e-5 to 1e-3; 1e30 trained to NaN weights and wrote them as the run's checkpoint)."""
MAX_REWARD_SCALE = PPO_DECLARED["reward_scale"].range.hi
"""Largest ``--reward-scale``: CAGE2's rewards reach about -13 per step, so at 100 the returns the critic learns
reach 1e5 and its squared error 1e10, still finite in float32 (the scale exists to bring returns near 1: 0.1 for
the shipped agents); 1e30 made the value loss inf, then NaN."""
_ALIGNMENT_LAMBDAS = Range(0.0, 10_000.0, "10,000 outweighs the worst CAGE2 return several times over "
                           "(rl.config.MAX_ALIGNMENT_LAMBDA)", float)
MAX_ALIGNMENT_LAMBDA = _ALIGNMENT_LAMBDAS.hi
"""Largest ``--alignment-lambda``: the bonus sums to lambda x the episode's compliance, so 10,000 already
outweighs the worst CAGE2 return (about -1,300 over 100 steps) several times over (the shipped agents use 10 to
30); 1e30 made the value loss NaN."""
DIVERGENCE_SETTINGS = (("learning_rate", MAX_LEARNING_RATE), ("reward_scale", MAX_REWARD_SCALE),
                       ("alignment_lambda", MAX_ALIGNMENT_LAMBDA))
"""The settings that can drive training to non-finite losses or weights, each with its upper bound."""


def divergence_message(cfg: "TrainConfig", where: str) -> str:
    """What to say when training went non-finite (``where``: what, e.g. "update 7's value loss"): the settings
    that drive it, the one furthest above its default first (by ratio), with their values, so the line names
    the setting to lower."""
    defaults = TrainConfig().flat()
    values = cfg.flat()
    ranked = sorted(DIVERGENCE_SETTINGS, key=lambda nb: -(values[nb[0]] / defaults[nb[0]] if defaults[nb[0]] else 0))
    names = [f"{flag(n)} (now {values[n]:g}, default {defaults[n]:g})" for n, _ in ranked
             if not (n == "alignment_lambda" and cfg.workflow is None)]
    return (f"training diverged: {where} is not finite (NaN or inf); the run stopped without saving it, so its last "
            f"checkpoint is the last good one: lower {', or '.join(names)} and run again")


@dataclass
class TrainConfig(ValidatedOnce):
    """Everything a training run depends on (saved as config.json)."""

    workflow: str | None = setting("critical_first", range=None, scope="run", resume="must_match", per_workflow=True)
    """named order, type names or codes D,E,OS,OH,U (e.g. 'D,OS,E,OH,U'), or 'none' for plain PPO; or several, to
    train one network across workflows: 'all' (the 120), 'named' (the six) or a ';'-separated list (e.g.
    'D,OS,E,OH,U;E,OH,D,U,OS'): each env draws its workflow per episode, uniformly, from its own seeded stream, and
    the log adds the worst workflow's compliance (compliance_worst: over each workflow's last 20 episodes); the gate
    then also needs every trained workflow's 20 episodes and the worst workflow's compliance >= the threshold"""
    hold_out: str | None = setting(None, range=None, scope="run", resume="must_match", per_workflow=True)
    """with a list of workflows: leave these out of training (';'-separated, e.g. to test generalisation), or N: a
    fixed seeded choice of N of them, half from the orders ranking user before enterprise hosts (the run's
    config.json and summary.json list them)"""
    none_share: float = setting(0.0, range=SHARE, scope="run", resume="may_differ", per_workflow=True)
    """with a list of workflows: the share of episodes each env plays with no workflow ('none': a zero workflow
    encoding, no alignment reward, not counted in compliance), so one network also learns unconstrained play and
    reads 'none' as well as the listed orders; 0 (the default): every episode plays a listed workflow"""
    red_agent: str = setting("B_lineAgent", range=None, scope="batch", resume="must_match")
    """B_lineAgent, RedMeanderAgent, SleepAgent or an alias; or a mixture, one red agent drawn per env episode: 'mix'
    (B_lineAgent:0.5,RedMeanderAgent:0.5) or weights such as B_lineAgent:0.3,RedMeanderAgent:0.7"""
    engine: str = setting("native", choices=ENGINES, range=None, scope="batch", resume="must_match")
    """native (the compiled re-implementation) or cyborg (the real CybORG)"""
    n_envs: int = setting(200, range=ENVS, scope="batch", resume="must_match")
    """parallel environments"""
    episode_length: int = setting(100, range=LENGTHS, scope="batch", resume="must_match")
    """steps per episode"""
    update_every_steps: int = setting(100, search_default=25, scope="batch", resume="must_match", range=Range(
        1, MAX_EPISODE_LENGTH, "counted like an episode's steps; the memory check bounds n-envs x this", grouped=False))
    """steps of all envs per PPO update (100: one full episode, n_envs x 100 transitions)"""
    max_episodes: int = setting(50, range=Range(1, MAX_ENV_EPISODES, ENV_EPISODES.why), scope="run",
                                resume="may_differ")
    """per env: stop once every env has finished this many episodes (per workflow, in a search)"""
    min_episodes: int = setting(5, range=ENV_EPISODES, scope="run", resume="may_differ")
    """per env: the compliance gate is not checked before every env finished this many"""
    num_episodes: int | None = setting(None, range=TRAINING_EPISODES, scope="run", resume="may_differ",
                                       per_workflow=True)
    """total training episodes over all envs (never exceeded; default: (max-episodes + post-gate-episodes) x n-envs)"""
    compliance_threshold: float = setting(0.95, range=Range(0.0, 1.0, "a compliance ratio", float, lo_open=True),
                                          scope="run", resume="may_differ")
    """stop once an update's compliance reaches this, in (0, 1]"""
    min_fixes: int = setting(50, range=Range(0, 10**9, "more than one update of 4M envs x 100 steps can count"),
                             scope="run", resume="may_differ")
    """counted (compliant or violating) fixes an update needs before its compliance can stop training"""
    post_gate_episodes: int = setting(0, search_default=40, search_legacy=0, range=ENV_EPISODES, scope="run",
                                      resume="may_differ")
    """per env: once the compliance gate fires, train exactly this many more episodes before stopping (not capped
    by --max-episodes; compliance stays measured); 0 = stop at the gate"""
    alignment_lambda: float = setting(30.0, range=_ALIGNMENT_LAMBDAS, scope="run", resume="must_match")
    """weight of the workflow-alignment reward bonus (>= 0)"""
    alignment_reward: str = setting(ALIGNMENT_REWARDS[0], choices=ALIGNMENT_REWARDS, range=None, scope="batch",
                                    resume="must_match", inherit="the form")
    """the alignment reward's form: ratio (lambda x the change in the episode's compliance ratio at each counted
    fix, summing to lambda x final compliance; it also pays for extra compliant fixes after a violation) or
    violations (-lambda/100 per violating fix, nothing for compliant or neutral ones: no reward for fixing more);
    the compliance counts and the gate are the same under both (docs/training.md, "Compliance, exactly")"""
    device: str = setting("cpu", range=None, scope="batch", resume="may_differ")
    """cpu, cuda, cuda:N or mps"""
    seed: int = setting(0, range=SEEDS, scope="batch", resume="must_match")
    """training seed"""
    vectorization: str = setting("sync", choices=VECTORIZATIONS + (EPISODE_WORKERS,), range=None, scope="batch",
                                 resume="may_differ")
    """cyborg engine: in-process, one process per env over pipes, or shared memory; 'episodes': episode workers
    that play whole episodes with a CPU copy of the policy (either engine)"""
    n_workers: int | None = setting(None, range=WORKERS, scope="run", resume="may_differ")
    """episode workers (--vectorization episodes; default: CPU cores, at most --n-envs)"""
    parallel_start_method: str | None = setting(None, choices=("spawn", "fork", "forkserver"), range=None,
                                                 scope="batch", resume="may_differ")
    """cyborg engine worker start method"""
    scenario: str | None = setting(None, range=None, scope="batch", resume="may_differ")
    """cyborg engine: folder with Scenario2.yaml and images/"""
    official_bugs: bool = setting(True, range=None, scope="batch", resume="must_match")
    """native engine: reproduce CybORG's OTService-restore and Vsftpd bugs (--no-official-bugs fixes both)"""
    cuda_graphs: bool = setting(True, range=None, scope="batch", resume="may_differ")
    """on a CUDA device, replay the PPO minibatch step and each rollout segment as captured CUDA graphs (the same
    kernels, one launch; on an H100 a 25-step segment of 16 x 200 envs 6.3 vs 54.8 ms, an update 23 vs 172 ms, both
    bit-equal to eager: BENCHMARKS.md); no effect off a GPU; --no-cuda-graphs launches op by op"""
    checkpoint_every: int = setting(10, scope="run", resume="may_differ", range=Range(
        1, 10**6, "updates; past that only the final checkpoint would be written"))
    """updates between checkpoints (one is always written at the end)"""
    tensorboard: bool = setting(False, range=None, scope="run", resume="may_differ", per_workflow=True)
    """also write TensorBoard scalars to RUN_DIR/tb"""
    anneal_lr: bool = setting(False, range=None, scope="batch", resume="must_match")
    """decay Adam's step size linearly from --learning-rate to 0 over the run's episode budget (CleanRL's anneal_lr;
    in a batch of runs, over the live runs' mean fraction of their budgets spent)"""
    ppo: PPOConfig = field(default_factory=PPOConfig)

    def validate(self) -> None:
        """Every setting usable, the device present, the backend decided and the batch's memory available, before
        a run allocates or writes anything; each refusal names its flag and the fix."""
        self.validate_settings()
        if self.n_workers is not None:   # machine-dependent: at most a few worker processes per usable core
            check_workers(flag("n_workers"), self.n_workers)
        devices.check_device_available(self.device)
        devices.check_engine_device(self.engine, self.device)
        self.check_memory(1)
        self.mark_validated()

    def validate_settings(self) -> None:
        """The checks of ``validate`` that do not depend on this machine (no device or memory checks): what a
        checkpoint's saved config must pass wherever it is read, even on a machine without the device it was
        trained on."""
        check_types(self)
        check_types(self.ppo)
        check_fields(self)   # every number within its range (workflow_rl/ranges.py), PPO's too
        check_fields(self.ppo)
        parse_red_agent(self.red_agent)
        self.mixture()
        check_choices(self)
        if self.n_workers is not None and self.n_workers > self.n_envs:
            raise ValueError(f"--n-workers {self.n_workers} exceeds --n-envs {self.n_envs}: a worker plays one env's "
                             "episodes at a time, so the others would only sit idle; use at most --n-envs workers")
        if self.vectorization == EPISODE_WORKERS and self.update_every_steps != self.episode_length:
            raise ValueError("episode workers return whole episodes: use update-every-steps = episode-length")
        self._validate_ppo()

    MAX_LAYERS = 16
    """The most hidden layers: the project trains two."""

    def _validate_ppo(self) -> None:
        """PPO's settings beyond their ranges (checked by ``validate_settings``): no more layers than
        :data:`MAX_LAYERS`, an opening shorter than an episode, no more minibatches than one update has transitions."""
        p = self.ppo
        if len(p.hidden) > self.MAX_LAYERS:
            raise ValueError(f"--hidden lists {len(p.hidden)} layers, more than {self.MAX_LAYERS}: give fewer")
        if p.mask_decoys and not p.decoy_memory:
            raise ValueError("--mask-decoys reads the decoy memory: add --decoy-memory")
        if len(p.opening) >= self.episode_length:
            raise ValueError(f"--opening has {len(p.opening)} actions, an episode {self.episode_length} steps: the "
                             "policy would never act; give fewer")
        if p.opening and self.vectorization == EPISODE_WORKERS:
            raise ValueError("--opening is played by the vector-env rollout: use --vectorization sync (or pipes, "
                             "shared_memory), not episodes")
        batch = self.n_envs * self.update_every_steps
        if p.num_minibatches > batch:
            raise ValueError(f"--num-minibatches {p.num_minibatches} exceeds the {batch} transitions of one update "
                             "(n-envs x update-every-steps): use at most that many")

    def mixture(self) -> WorkflowMix | None:
        """The workflows of a run across workflows (``--workflow`` a list), None for one workflow or plain PPO;
        checks ``--workflow`` and ``--hold-out``."""
        if not is_workflow_list(self.workflow):
            if self.workflow is not None:
                Workflow.parse(self.workflow)
            if self.hold_out is not None:
                raise ValueError("--hold-out leaves workflows out of a list: give --workflow a list (e.g. all), or "
                                 "drop --hold-out")
            if self.none_share:
                raise ValueError("--none-share mixes unconstrained episodes into a list of workflows: give --workflow "
                                 "a list (e.g. all), or drop --none-share (--workflow none trains only unconstrained)")
            return None
        if self.vectorization == EPISODE_WORKERS:
            raise ValueError("training across workflows steps one vector env: use --vectorization sync (or pipes, "
                             "shared_memory), not episodes")
        check("none_share", self.none_share)
        if self.none_share >= 1.0:
            raise ValueError("--none-share 1 plays no workflow at all: use --workflow none, or a share below 1")
        return WorkflowMix.parse(self.workflow, self.hold_out, self.none_share)

    def check_memory(self, slots: int) -> None:
        """Refuse a batch of ``slots`` runs whose engine state, rollout and networks would not fit in memory (the
        GPU's on a CUDA device, else this machine's), before anything is allocated or written. Estimate: engine
        bytes per env plus the transitions of one update, held about three times over, plus each run's network
        (``ppo.network_bytes``: weights, gradient, Adam moments and a minibatch's activations)."""
        memory = Memory.of(self.ppo)
        envs = slots * self.n_envs
        rollout = envs * (engine_bytes_per_env() + 3 * rollout_bytes(memory) * self.update_every_steps)
        minibatch = -(-self.n_envs * self.update_every_steps // self.ppo.num_minibatches)
        network = slots * network_bytes(self.ppo.hidden, memory, minibatch)
        runs = f" in each of {slots} runs" if slots > 1 else ""
        what = (f"--n-envs {self.n_envs}{runs} with --update-every-steps {self.update_every_steps} and --hidden "
                f"{' '.join(map(str, self.ppo.hidden))} (networks {gib(network)}, envs and rollouts {gib(rollout)})")
        fix = ("use smaller --hidden layers" if network > rollout else
               "use fewer envs (or fewer steps per update)") + ("; or fewer runs at once" if slots > 1 else "")
        check_memory(what, rollout + network, fix, *devices.device_memory(self.device))

    def thread_work(self, slots: int = 1) -> Work:
        """What a batch of ``slots`` runs computes at once, for the thread policy (``workflow_rl.threads``): a
        minibatch of every run through the widest layer (the update's largest matrix product) and every run's
        envs stepped together."""
        sizes = [input_dim(Memory.of(self.ppo)), *self.ppo.hidden, N_ACTIONS]
        minibatch = -(-self.n_envs * self.update_every_steps // self.ppo.num_minibatches)
        return Work(macs=slots * minibatch * max(i * o for i, o in zip(sizes, sizes[1:])), envs=slots * self.n_envs)

    def engine_options(self) -> dict:
        """``make_vector_env`` options of this run's engine."""
        if self.engine == "native":
            return {"official_bugs": self.official_bugs}
        return {"vectorization": self.vectorization, "start_method": self.parallel_start_method,
                "scenario": self.scenario}

    @property
    def budget(self) -> int:
        """Training episodes this run may use: up to the gate at ``max_episodes`` per env, plus the post-gate
        phase, unless ``num_episodes`` is smaller."""
        cap = (self.max_episodes + self.post_gate_episodes) * self.n_envs
        return cap if self.num_episodes is None else min(cap, self.num_episodes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        """A config from its config.json form (``ppo`` nested); unknown keys, from older or newer versions, are
        ignored so an old run directory still loads."""
        d = dict(d)
        ppo = ppo_from_dict(d.pop("ppo", {}))
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known}, ppo=ppo)

    @classmethod
    def from_flat(cls, settings: dict) -> "TrainConfig":
        """A config from one flat namespace of settings (the command line's): PPO's own fields go to ``ppo``. The
        two dataclasses share no field name, so the flat form is unambiguous."""
        ppo_names = {f.name for f in dataclasses.fields(PPOConfig)}
        ppo = ppo_from_dict({k: v for k, v in settings.items() if k in ppo_names})
        return cls(**{k: v for k, v in settings.items() if k not in ppo_names}, ppo=ppo)

    def flat(self) -> dict:
        """The inverse of :meth:`from_flat`: every setting, PPO's included, at one level."""
        d = self.to_dict()
        ppo = d.pop("ppo")
        return {**d, **ppo}


def ppo_from_dict(d: dict) -> PPOConfig:
    """PPO settings from JSON, where the hidden sizes come back as a list."""
    d = dict(d)
    for key in ("hidden", "opening"):
        if key in d:
            d[key] = tuple(d[key])
    return PPOConfig(**d)


def declared_settings() -> dict[str, Declared]:
    """Every setting of ``TrainConfig`` and its ``PPOConfig`` by its flat name (``TrainConfig.flat()``'s), with its
    declaration (:func:`setting`, :data:`PPO_DECLARED`), in field order; the nested ``ppo`` field is no setting."""
    own = {f.name: f.metadata["setting"] for f in dataclasses.fields(TrainConfig) if "setting" in f.metadata}
    return {**own, **{f.name: PPO_DECLARED[f.name] for f in dataclasses.fields(PPOConfig) if f.name in PPO_DECLARED}}


DECLARED = declared_settings()
"""Every training setting's declaration, by flat name: what the tables below and in other modules derive from."""

PER_RUN = tuple(n for n, d in DECLARED.items() if d.scope == "run")
"""The settings a run may hold on its own inside a batch of runs (scope "run": its workflow, budget, stop rule,
reward and bookkeeping); every other setting shapes the batch or its update, so all runs of one batch share it."""

ranges.declare({n: d.range for n, d in DECLARED.items() if d.range is not None})
