"""``TrainConfig``: everything a training run depends on, each default written once (saved as config.json).

The command line is generated from these fields (``workflow_rl.cli.flags``): a field's docstring is its ``--help``
text and a ``one_of`` field's options are its choices, so a new setting needs one line here and nothing else.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from workflow_rl.checks import (ValidatedOnce, check_episode_length, check_float, check_int,  # noqa: F401
                                check_seed, check_types, flag)
from workflow_rl.ranges import RANGES, check, check_fields
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


def one_of(default, options) -> dataclasses.Field:
    """A setting restricted to ``options``: the command line offers them as choices and ``validate`` checks them."""
    return field(default=default, metadata={"choices": tuple(options)})


def check_choices(config, spell=None) -> None:
    """Every ``one_of`` field of a config dataclass holds one of its options (None is allowed where it is the
    default, meaning "decide for me"); named as ``spell`` spells a field (default: its flag)."""
    for f in dataclasses.fields(config):
        options = f.metadata.get("choices")
        value = getattr(config, f.name)
        if options is not None and value not in options and not (value is None and f.default is None):
            raise ValueError(f"unknown {(spell or flag)(f.name)} {value!r}: use one of {', '.join(map(str, options))}")


MAX_LEARNING_RATE = RANGES["learning_rate"].hi
"""Largest ``--learning-rate``: Adam moves each weight by about the step size per step whatever the gradient, so
above 1 the tanh layers saturate within a few steps and the weights run to inf and NaN (PPO's step sizes are
1e-5 to 1e-3; 1e30 trained to NaN weights and wrote them as the run's checkpoint)."""
MAX_REWARD_SCALE = RANGES["reward_scale"].hi
"""Largest ``--reward-scale``: CAGE2's rewards reach about -13 per step, so at 100 the returns the critic learns
reach 1e5 and its squared error 1e10, still finite in float32 (the scale exists to bring returns near 1: 0.1 for
the shipped agents); 1e30 made the value loss inf, then NaN."""
MAX_ALIGNMENT_LAMBDA = RANGES["alignment_lambda"].hi
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


PER_RUN = ("workflow", "hold_out", "none_share", "num_episodes", "max_episodes", "min_episodes", "compliance_threshold", "min_fixes",
           "post_gate_episodes", "alignment_lambda", "n_workers", "checkpoint_every", "tensorboard")
"""The settings a run may hold on its own inside a batch of runs (its workflow, budget, stop rule, reward and
bookkeeping); every other setting shapes the batch or its update, so all runs of one batch share it."""


@dataclass
class TrainConfig(ValidatedOnce):
    """Everything a training run depends on (saved as config.json)."""

    workflow: str | None = "critical_first"
    """named order, type names or codes D,E,OS,OH,U (e.g. 'D,OS,E,OH,U'), or 'none' for plain PPO; or several, to
    train one network across workflows: 'all' (the 120), 'named' (the six) or a ';'-separated list (e.g.
    'D,OS,E,OH,U;E,OH,D,U,OS'): each env draws its workflow per episode, uniformly, from its own seeded stream, and
    the log adds the worst workflow's compliance (compliance_worst: over each workflow's last 20 episodes); the gate
    then also needs every trained workflow's 20 episodes and the worst workflow's compliance >= the threshold"""
    hold_out: str | None = None
    """with a list of workflows: leave these out of training (';'-separated, e.g. to test generalisation), or N: a
    fixed seeded choice of N of them, half from the orders ranking user before enterprise hosts (the run's
    config.json and summary.json list them)"""
    none_share: float = 0.0
    """with a list of workflows: the share of episodes each env plays with no workflow ('none': a zero workflow
    encoding, no alignment reward, not counted in compliance), so one network also learns unconstrained play and
    reads 'none' as well as the listed orders; 0 (the default): every episode plays a listed workflow"""
    red_agent: str = "B_lineAgent"
    """B_lineAgent, RedMeanderAgent, SleepAgent or an alias; or a mixture, one red agent drawn per env episode: 'mix'
    (B_lineAgent:0.5,RedMeanderAgent:0.5) or weights such as B_lineAgent:0.3,RedMeanderAgent:0.7"""
    engine: str = one_of("native", ENGINES)
    """native (the compiled re-implementation) or cyborg (the real CybORG)"""
    n_envs: int = 200
    """parallel environments"""
    episode_length: int = 100
    """steps per episode"""
    update_every_steps: int = 100
    """steps of all envs per PPO update (100: one full episode, n_envs x 100 transitions)"""
    max_episodes: int = 50
    """per env: stop once every env has finished this many episodes (per workflow, in a search)"""
    min_episodes: int = 5
    """per env: the compliance gate is not checked before every env finished this many"""
    num_episodes: int | None = None
    """total training episodes over all envs (never exceeded; default: (max-episodes + post-gate-episodes) x n-envs)"""
    compliance_threshold: float = 0.95
    """stop once an update's compliance reaches this, in (0, 1]"""
    min_fixes: int = 50
    """counted (compliant or violating) fixes an update needs before its compliance can stop training"""
    post_gate_episodes: int = 0
    """per env: once the compliance gate fires, train exactly this many more episodes before stopping (not capped
    by --max-episodes; compliance stays measured); 0 = stop at the gate"""
    alignment_lambda: float = 30.0
    """weight of the workflow-alignment reward bonus (>= 0)"""
    alignment_reward: str = one_of(ALIGNMENT_REWARDS[0], ALIGNMENT_REWARDS)
    """the alignment reward's form: ratio (lambda x the change in the episode's compliance ratio at each counted
    fix, summing to lambda x final compliance; it also pays for extra compliant fixes after a violation) or
    violations (-lambda/100 per violating fix, nothing for compliant or neutral ones: no reward for fixing more);
    the compliance counts and the gate are the same under both (docs/training.md, "Compliance, exactly")"""
    device: str = "cpu"
    """cpu, cuda, cuda:N or mps"""
    seed: int = 0
    """training seed"""
    vectorization: str = one_of("sync", VECTORIZATIONS + (EPISODE_WORKERS,))
    """cyborg engine: in-process, one process per env over pipes, or shared memory; 'episodes': episode workers
    that play whole episodes with a CPU copy of the policy (either engine)"""
    n_workers: int | None = None
    """episode workers (--vectorization episodes; default: CPU cores, at most --n-envs)"""
    parallel_start_method: str | None = one_of(None, ("spawn", "fork", "forkserver"))
    """cyborg engine worker start method"""
    scenario: str | None = None
    """cyborg engine: folder with Scenario2.yaml and images/"""
    official_bugs: bool = True
    """native engine: reproduce CybORG's OTService-restore and Vsftpd bugs (--no-official-bugs fixes both)"""
    cuda_graphs: bool = True
    """on a CUDA device, replay the PPO minibatch step and each rollout segment as captured CUDA graphs (the same
    kernels, one launch; on an H100 a 25-step segment of 16 x 200 envs 6.3 vs 54.8 ms, an update 23 vs 172 ms, both
    bit-equal to eager: BENCHMARKS.md); no effect off a GPU; --no-cuda-graphs launches op by op"""
    checkpoint_every: int = 10
    """updates between checkpoints (one is always written at the end)"""
    tensorboard: bool = False
    """also write TensorBoard scalars to RUN_DIR/tb"""
    anneal_lr: bool = False
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
