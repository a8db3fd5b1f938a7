"""``runs.settings``: a run's settings from where they come besides the user: a recipe, a starting checkpoint, a list.

The rules the ``train`` and ``search`` commands apply to what was typed, as functions of plain settings (a flat
dict, ``TrainConfig.flat()``'s form, and the names the user chose), so a script that builds a run from a recipe or
fine-tunes a shipped agent gets the run the command line would start.
"""
from __future__ import annotations

from workflow_rl.checks import same_form, flag
from workflow_rl.rl.config import DECLARED

INHERITED = {n: d.inherit for n, d in DECLARED.items() if d.inherit is not None}
"""The settings a run starting from ``--init-checkpoint`` keeps from its starting agent unless typed (declared
``inherit``, ``rl.config.setting``), and how the one line that says so names them. The network's shape and memory
(``--hidden``, ``--decoy-memory``, ``--mask-decoys``...): the starting weights fit only that network, so a run from
``pretrained:universal`` need not retype them (a typed one that does not fit is refused, ``starting_weights``). A
violations-trained agent fine-tuned under the ratio form is paid again for diluting a violation with extra fixes,
the habit the violations form trained away (RESULTS.md, issue L); a policy trained after a fixed opening plays
badly after another (RESULTS.md, issue M)."""


def shown_setting(value) -> str:
    """A setting as a line names it: a list's items space-separated as typed, an empty list or None as 'none' (an
    agent trained without an opening has the opening (), which printed as nothing)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (tuple, list)):
        return " ".join(map(str, value)) or "none"
    return "none" if value is None else str(value)


def inherit_settings(typed, spec: str | None, given: dict) -> dict:
    """``given`` (a run's flat settings) with each :data:`INHERITED` setting not in ``typed`` (the settings the
    command line or a recipe chose) taken from the checkpoint ``spec`` the run starts from (said in one line where
    that differs from the default)."""
    if spec is None:
        return given
    from workflow_rl.rl.pretrained import trained_config

    trained = trained_config(spec)   # one read of the checkpoint for every inherited setting
    saved = trained.flat()
    for name, what in INHERITED.items():
        if name in typed or name not in given:   # typed, or no setting of this caller
            continue
        value = saved[name]
        if same_form(value) != same_form(given[name]):
            choose = "" if isinstance(value, bool) else f" ({flag(name)} to choose another)"
            print(f"{flag(name)[2:].replace('-', ' ')}: {shown_setting(value)}, {what} {spec} was trained with{choose}")
            given = {**given, name: value}
    return given


def with_recipe(name: str | None, flat: dict, typed) -> tuple[dict, frozenset[str]]:
    """``flat`` (the run's settings) with recipe ``name``'s settings for the run's device in place of every setting
    not in ``typed``, said in one line as the flags they stand for, and the settings chosen: the typed ones and the
    recipe's, so a starting checkpoint's opening or reward form (:func:`inherit_settings`) does not replace them."""
    from workflow_rl.rl.recipes import as_flags, recipe

    if name is None:
        return flat, frozenset(typed)
    r = recipe(name)
    wanted = r.for_device(flat["device"])
    kept = [k for k in flat if k in typed and k in wanted]
    chosen = {k: v for k, v in wanted.items() if k not in kept}
    run = {k: flat[k] if k in kept else v for k, v in wanted.items()}
    print(f"recipe {r.name} on {flat['device']}: {as_flags(run)}"
          + (f" (typed over the recipe: {', '.join(flag(k) for k in kept)})" if kept else ""))
    return {**flat, **chosen}, frozenset(typed) | set(chosen)


def train_config(flat: dict):
    """The validated ``TrainConfig`` of a run's flat settings as typed: ``workflow`` one workflow (a name, its codes
    or 'none') or a list ('all', 'named', ';'-separated), kept as config.json names it (a list with its held-out
    workflows), and ``red_agent`` by any of its names (meander, mix...)."""
    from workflow_rl.envs.names import parse_red_agent
    from workflow_rl.rl.config import TrainConfig
    from workflow_rl.workflow import WorkflowMix, is_workflow_list, parse_workflow_arg

    if is_workflow_list(flat["workflow"]):   # across workflows: config.json names them and the held-out ones
        mix = WorkflowMix.parse(flat["workflow"], flat["hold_out"])
        named = {"workflow": WorkflowMix.list_text(flat["workflow"]), "hold_out": mix.hold_out_text()}
    else:
        workflow = parse_workflow_arg(flat["workflow"])
        named = {"workflow": workflow.codes if workflow else None}
    cfg = TrainConfig.from_flat({**flat, **named, "red_agent": parse_red_agent(flat["red_agent"])})
    cfg.validate()
    return cfg


def search_workflows(workflows: list[str] | None, exhaustive: bool = False) -> list[str] | None:
    """A search's ``workflows`` as ``SearchConfig`` takes them (their codes): the ones named (';'-separated or
    several items; 'named': the six), or with ``exhaustive`` and none named all 120 (a ground truth; with names, a
    ground truth over that list, as benchmarks/studies/regret.py builds). None: the search picks its own."""
    from workflow_rl.workflow import NAMED, Workflow, all_workflows

    if exhaustive and not workflows:
        return [w.codes for w in all_workflows()]
    if not workflows:
        return None
    items = workflows if len(workflows) > 1 else workflows[0].split(";")
    if items == ["named"]:
        items = list(NAMED)
    return [Workflow.parse(w).codes for w in items]
