"""``TrainConfig``: everything a training run depends on, each default written once (saved as config.json)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from workflow_rl.envs.factory import parse_red_agent
from workflow_rl.rl.ppo import PPOConfig
from workflow_rl.workflow import Workflow


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
