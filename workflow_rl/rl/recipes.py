"""Named training recipes: the whole settings of a run that makes an agent from random weights.

Written once, so ``workflow-rl train --recipe NAME`` replaces a hand-run chain of commands.

A recipe is flat ``TrainConfig`` settings (``TrainConfig.from_flat``) plus a *scale* per device kind: how many envs
and episodes the run takes where it runs (a GPU steps 16,384 envs at once; the 2-core CPU the project is developed
on, 200). Everything that is not scale -- the network, the memories and masks, the opening, the reward, the
workflows and the schedule -- is the same on every device, so the CPU run is the same recipe at a smaller batch.
Flags typed on the command line win over the recipe's settings.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from workflow_rl.checks import flag
from workflow_rl.rl.config import TrainConfig
from workflow_rl.sim import attackers

OPENING = (51, 116, 55)
"""The CAGE2 winner's fixed start: DecoyFemitter and DecoyTomcat on User2, DecoyHarakaSMPT on Enterprise0 (action
indices; read in the winner's published agent). Trained with, never added after (RESULTS.md, issue M)."""


@dataclass(frozen=True)
class Recipe:
    """A named run: ``settings`` (flat TrainConfig settings, device-independent) and ``scale`` (per device kind,
    'cpu' or 'cuda': the settings that size the run there)."""

    name: str
    about: str
    settings: dict
    scale: dict[str, dict] = field(default_factory=dict)

    def for_device(self, device: str) -> dict:
        """The recipe's flat settings on ``device`` (its kind's scale over the common settings)."""
        kind = "cuda" if str(device).startswith("cuda") else "cpu"
        return {**self.settings, **self.scale.get(kind, {})}

    def command(self, device: str) -> str:
        """The ``workflow-rl train`` flags the recipe stands for on ``device``: what a user could type instead."""
        return as_flags(self.for_device(device))


def as_flags(settings: dict) -> str:
    """Flat settings as the ``train`` flags that set them (``--x`` / ``--no-x`` for booleans)."""
    parts = []
    for name, value in settings.items():
        if isinstance(value, bool):
            parts.append(flag(name) if value else f"--no-{flag(name)[2:]}")
        elif isinstance(value, (tuple, list)):
            parts.append(f"{flag(name)} {' '.join(map(str, value))}")
        else:
            parts.append(f"{flag(name)} {value}")
    return " ".join(parts)


_UNIVERSAL = {
    # one network for the 120 orders and for none, against an unknown red agent; half the episodes unconstrained:
    # with a quarter, unconstrained play lagged cage2-opening by 2.45 points on B_line 100, with a half it is level
    # (benchmarks/results/recipe/README.md, one seed each)
    "workflow": "all", "none_share": 0.5, "red_agent": "mix",
    # what makes the shipped agents good (RESULTS.md, issues I, L, M): a wider network, the decoy memory with its
    # masks, the winner's opening, the violations form of the alignment reward (no pay for diluting a violation)
    "hidden": (256, 256), "decoy_memory": True, "mask_decoys": True, "opening": OPENING,
    "alignment_reward": "violations", "alignment_lambda": 10.0,
    # one episode per update, Adam's step annealed to 0 over the budget
    "update_every_steps": 100, "learning_rate": 5e-4, "anneal_lr": True,
    # the budget stops the run: orders ranking users before enterprise cannot be followed (the cliff), so the
    # worst-workflow gate never fires, and were it to fire, training goes on to the budget
    "max_episodes": 1_000_000_000, "post_gate_episodes": 1_000_000_000,
}

_UNIVERSAL_SCALE = {
    # the chain the shipped agents came from spent 150,000 episodes (cage2 90,000 + universal 60,000)
    "cpu": {"n_envs": 200, "num_episodes": 150_000, "num_minibatches": 8},
    # 16,384 envs x 100 steps = 1.6M transitions per update; 600 updates (9.8M episodes, about 7 minutes at the
    # 2.2-2.5M transitions/s one H200 trains at); 32 minibatches of 51,200 keep the gradient steps per update near
    # the CPU recipe's per 20,000 transitions
    "cuda": {"n_envs": 16_384, "num_episodes": 16_384 * 600, "num_minibatches": 32},
}


def training_mix() -> str:
    """The ``robust`` recipe's red agent: the held-out protocol's training set (``sim.attackers.training``), CAGE2's
    two attackers half the episodes between them and the family's training attackers the other half, so B_line and
    Meander -- what CAGE2 is judged on -- keep as much of the budget as all the rest."""
    cage2 = attackers.cage2(attacking=True)
    rest = [n for n in attackers.training() if n not in cage2]
    return ",".join([f"{n}:{len(rest)}" for n in cage2] + [f"{n}:{len(cage2)}" for n in rest])


_ROBUST = {**_UNIVERSAL, "red_agent": training_mix()}

RECIPES = {r.name: r for r in (
    Recipe("universal",
           "one network for any of the 120 workflows and none (half the episodes unconstrained), B_line/Meander mix, "
           "the winner's opening, decoy memory and masks, violations-form alignment reward, annealed step size",
           _UNIVERSAL, scale=_UNIVERSAL_SCALE),
    Recipe("robust",
           "universal against the held-out protocol's training attackers (sim.attackers.training: B_line and Meander "
           "half the episodes, RandomRed, EnterpriseRaider, RestoreChaser and ImpactRush the other half), never the "
           "held-out ones; a specialist is this recipe with --red-agent NAME",
           _ROBUST, scale=_UNIVERSAL_SCALE),
)}
"""Every recipe ``train --recipe`` knows, by name."""


def recipe(name: str) -> Recipe:
    """The recipe called ``name``; a ValueError naming the known ones otherwise."""
    if name not in RECIPES:
        raise ValueError(f"unknown --recipe {name!r}: use one of {', '.join(RECIPES)}")
    return RECIPES[name]


def check_recipes() -> None:
    """Every recipe's settings are TrainConfig settings that validate at each scale (a test runs this)."""
    for r in RECIPES.values():
        for device in ("cpu", "cuda"):
            TrainConfig.from_flat({**TrainConfig().flat(), **r.for_device(device)}).validate_settings()
