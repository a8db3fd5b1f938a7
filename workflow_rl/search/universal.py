"""A search that uses a universal agent (one network trained across workflows, ``train --workflow all``).

Phases (``SearchState.phase``, saved, so a killed search resumes in the phase it was in):

1. ``universal`` (only with ``--universal-fraction F``): the search trains its own universal agent across all 120
   workflows on F of its budget, through the one trainer (``RUN_DIR/universal``; resumed from its own checkpoint).
   Its gate does not stop it: it trains its whole share. Those episodes count in the budget.
2. ``screen``: the universal agent is evaluated under every workflow at once (``rl.evaluate.evaluate_workflows``:
   ``--eval-episodes`` greedy held-out episodes per workflow, the same evaluation seed a trained workflow gets), so
   all 120 cost evaluation only. Each is a *low-fidelity* observation (``records.Screened``); its compliance is the
   universal agent's eligibility call for that workflow.
3. ``fine-tune``: the budget fine-tunes the workflows the GP picks, each from the universal weights (not from
   another fine-tuned workflow: every high observation then measures the same thing, the universal start plus the
   same further training), and each is a *high-fidelity* observation (``records.Record``, as in an ordinary
   search). The GP is ``search.multifidelity``'s (a learned offset and noise level for the high observations). Picks are
   the UCB argmax (or, ``--strategy random``, a uniform draw) among the untried workflows the universal agent's
   evaluation calls eligible: fine-tuning spends the budget on workflows that can be the answer.

The search's eligibility call for a workflow is its fine-tuned record's (``Record.eligible``) where it has one, the
universal agent's otherwise; the answer is the best eligible fine-tuned workflow, and its 95% confidence set is
tested over every workflow not called ineligible. With ``--init-checkpoint`` the starting agent's own training is
not counted in the budget (the summary says so); with ``--universal-fraction`` it is.
"""
from __future__ import annotations

import math
from pathlib import Path

from workflow_rl.rl.checkpoint import load_checkpoint
from workflow_rl.rl.evaluate import EVAL_SEED, evaluate_workflows
from workflow_rl.rl.planning.planner import make_act
from workflow_rl.rl.pretrained import PREFIX, load_agent, read_spec, spec_file, starting_weights
from workflow_rl.search.multifidelity import Observations, fit, posterior_high
from workflow_rl.search.gp import seed_noise
from workflow_rl.search.records import Record, Screened, SearchInterrupted
from workflow_rl.workflow import Workflow, all_workflows, is_workflow_list

UNIVERSAL_DIR = "universal"
"""Where a search trains its own universal agent, relative to RUN_DIR."""
UNIVERSAL_CHECKPOINT = f"{UNIVERSAL_DIR}/checkpoints/latest.pt"
STRATEGIES = ("gp-ucb", "random")
"""The strategies that apply once every workflow has a low-fidelity observation (nothing is left for an initial
design or an eligibility classifier to learn)."""


def trained_across_workflows(spec: str) -> bool:
    """Whether the checkpoint ``spec`` (a file or pretrained:NAME) was trained across workflows (its config's
    ``workflow`` is a list: 'all', 'named' or several)."""
    return is_workflow_list(read_spec(spec)["config"].get("workflow"))


def universal_episodes(cfg) -> int:
    """The training episodes a search's own universal agent gets: F of the budget."""
    return int(cfg.total_episodes * cfg.universal_fraction)


def check_universal(cfg) -> None:
    """Settings of a search that uses a universal agent, usable before anything trains."""
    from workflow_rl.checks import flag
    from workflow_rl.ranges import RANGES

    if cfg.universal_fraction is not None:
        f = cfg.universal_fraction
        r = RANGES["universal_fraction"]
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not r.contains(f):
            raise ValueError(f"{flag('universal_fraction')} must be a number in {r.text()} ({r.why}), got {f!r}")
        if cfg.init_checkpoint is not None:
            raise ValueError(f"{flag('universal_fraction')} trains the search's own universal agent, "
                             f"{flag('init_checkpoint')} gives one: drop one of them")
        if cfg.workflows is not None:
            raise ValueError(f"{flag('universal_fraction')} serves a search that picks workflows: drop it, or "
                             "drop --workflows/--exhaustive")
        n, left = universal_episodes(cfg), cfg.total_episodes - universal_episodes(cfg)
        if n < cfg.train.n_envs or left < cfg.train.n_envs:
            raise ValueError(f"{flag('universal_fraction')} {f:g} of {flag('total_episodes')} "
                             f"{cfg.total_episodes:,} gives {n:,} episodes to the universal agent and leaves "
                             f"{left:,} to fine-tune: each needs at least one round of {flag('n_envs')} "
                             f"({cfg.train.n_envs}); raise {flag('total_episodes')} or change the fraction")
        universal_config(cfg).validate()
    elif cfg.init_checkpoint is not None and not trained_across_workflows(cfg.init_checkpoint):
        return   # an ordinary warm start (every workflow from that checkpoint)
    if cfg.strategy not in STRATEGIES:
        raise ValueError(f"--strategy {cfg.strategy}: a search from a universal agent observes every workflow "
                         f"before it picks, so it picks with {' or '.join(STRATEGIES)}")


def universal_config(cfg):
    """How a search trains its own universal agent: its training settings across all 120 workflows, on its share
    of the budget, with no stop before that share is spent (the per-env cap and the post-gate phase both cover
    it: a universal agent's gate is not the search's concern, its value under each workflow is)."""
    import dataclasses

    n = universal_episodes(cfg)
    per_env = math.ceil(n / cfg.train.n_envs)
    u = dataclasses.replace(cfg.train, workflow="all", hold_out=None, num_episodes=n, max_episodes=per_env,
                            post_gate_episodes=per_env)
    if cfg.validated:   # the search's validation validated exactly this config (``check_universal``)
        u.mark_validated()
    return u


def train_universal(cfg, out: Path, progress: bool) -> int:
    """Train (or resume) the search's own universal agent; returns the training episodes it used."""
    from workflow_rl.rl.trainer import Trainer

    run_dir = out / UNIVERSAL_DIR
    trainer = Trainer(universal_config(cfg), run_dir, progress=progress, log_prefix={"iteration": 0})
    ck = out / UNIVERSAL_CHECKPOINT
    if ck.is_file():
        trainer.restore(load_checkpoint(ck, cfg.train.device))
    summary = trainer.run()
    if summary["stop_reason"] == "interrupted":
        raise SearchInterrupted(str(ck))
    return int(summary["episodes"])


def screen_settings(cfg):
    """What besides the weights determines a search's screen (``screen_cache``'s key): ``--eval-episodes`` greedy
    episodes of ``--eval-length`` steps per workflow against the search's red agent, native engine, the fixed
    evaluation seed. Not the device: a search on CUDA reads the screen computed on the CPU (shipped or cached) and
    the reverse (``screen_cache.ScreenSettings`` says why that is the same screen)."""
    from workflow_rl.envs.names import parse_red_agent
    from workflow_rl.search.screen_cache import ScreenSettings

    return ScreenSettings(episodes=cfg.eval_episodes, length=cfg.eval_length,
                          red_agent=parse_red_agent(cfg.train.red_agent), engine="native", seed=EVAL_SEED,
                          mode="greedy")


def compute_screen(checkpoint: Path, settings, device: str) -> list[Screened]:
    """The universal agent's held-out evaluation under every workflow (the low-fidelity observations), agent and
    engine on ``device`` (the search's)."""
    agent, _ = load_agent(checkpoint, device)
    greedy = settings.mode == "greedy"
    results = evaluate_workflows(lambda enc: make_act(agent, greedy=greedy, encodings=enc),
                                 list(all_workflows()), [settings.red_agent], [settings.length], settings.episodes,
                                 engine=settings.engine, seed=settings.seed, device=device)
    return [Screened(workflow=w, observed_reward=r.mean, observed_ci95=r.ci95, eval_compliance=r.compliance,
                     fixes=r.fixes) for w, r in results]


def screen(cfg, out: Path) -> tuple[list[Screened], str]:
    """The screen of the search's universal agent and where it came from: shipped beside a ``pretrained:`` agent,
    found in the cache, or computed (``search.screen_cache``; the numbers are the same either way)."""
    from workflow_rl.search.screen_cache import screen_of

    spec = cfg.init_checkpoint if cfg.universal_fraction is None else str(out / UNIVERSAL_CHECKPOINT)
    file, settings = spec_file(spec), screen_settings(cfg)
    return screen_of(file, settings, lambda: compute_screen(file, settings, cfg.train.device),
                     shipped=spec.startswith(PREFIX))


def initial_state(cfg, out: Path) -> dict | None:
    """The weights every fine-tuned workflow starts from: the universal agent's."""
    if cfg.universal_fraction is not None:
        return load_checkpoint(out / UNIVERSAL_CHECKPOINT, cfg.train.device)["agent"]
    return starting_weights(cfg.init_checkpoint, cfg.train.ppo, cfg.train.device)


# ------------------------------------------------------------------------------------------------ calls and GP
def calls(records: list[Record], screened: list[Screened], threshold: float) -> dict[str, tuple[bool, str]]:
    """Per workflow (codes), the search's eligibility call and its source: 'fine-tuned' (the record's) where it
    was fine-tuned, 'universal' (the universal agent's evaluation) otherwise."""
    out = {s.workflow: (s.eligible(threshold), "universal") for s in screened}
    out.update({r.workflow: (r.eligible(threshold), "fine-tuned") for r in records})
    return out


def _z(ci95: float) -> float:
    return (ci95 / 1.96) ** 2


def observations(records: list[Record], screened: list[Screened],
                 hallucinated: list[tuple[Workflow, float]] = ()) -> Observations:
    """Both fidelities' observations with their known noise: a screen's evaluation standard error; a record's
    seeds' standard error where every record has >= 2 seeds (else 0: the fitted tau^2 holds it); hallucinated
    pending workflows (value, no noise) as high observations."""
    seeds = seed_noise([r.seed_rewards for r in records])
    high = [(Workflow.parse(r.workflow), r.observed_reward, 0.0 if seeds is None else float(seeds[i]))
            for i, r in enumerate(records)]
    high += [(w, y, 0.0) for w, y in hallucinated]
    low = [(Workflow.parse(s.workflow), s.observed_reward, _z(s.observed_ci95)) for s in screened]
    return Observations.of(low, high)


def posterior(records: list[Record], screened: list[Screened], busy: list[Workflow] = ()):
    """Posterior mean and covariance of every workflow's fine-tuned value (all 120, in index order); workflows
    still training (``busy``) are hallucinated at their posterior mean with the hyperparameters held (GP-BUCB)."""
    model = fit(observations(records, screened))
    if busy:
        mu, _ = posterior_high(model, list(busy))
        model = fit(observations(records, screened, list(zip(busy, mu))), theta=model.theta)
    return posterior_high(model, list(all_workflows())), model


def pick_pool(screened: list[Screened], tried: set[int], threshold: float, margin: float) -> tuple[list[int], str]:
    """The untried workflows (indices) a search from a universal agent fine-tunes next, and how they were chosen:
    those whose screened compliance is >= ``threshold + margin``; if none is left, those >= ``threshold`` (the
    universal agent's eligibility call); if none, every untried one. Why a margin: a pick that only just complies
    greedily tends to fail the sampled training gate and spend a full cap for an ineligible record
    (``SearchConfig.pick_margin``)."""
    untried = [w.index for w in all_workflows() if w.index not in tried]
    for level, label in ((threshold + margin, f"untried the universal agent's evaluation calls eligible with "
                                              f"margin {margin:g} (compliance >= {threshold + margin:g})"),
                         (threshold, "untried the universal agent's evaluation calls eligible")):
        ok = {s.workflow for s in screened if s.eligible(level)}
        among = [k for k in untried if all_workflows()[k].codes in ok]
        if among:
            return among, label
    return untried, "untried (none called eligible left)"


def candidates(records: list[Record], screened: list[Screened], threshold: float) -> list[int]:
    """Indices of the workflows the search does not call ineligible (the confidence set's candidates)."""
    return [Workflow.parse(w).index for w, (ok, _) in calls(records, screened, threshold).items() if ok]


def screen_rows(records: list[Record], screened: list[Screened], threshold: float, kept: list[str]) -> list[dict]:
    """One row per workflow for ``screen.csv``: the universal agent's value and compliance, the fine-tuned value
    where there is one, the search's call and whether the 95% confidence set keeps it."""
    tuned = {r.workflow: r for r in records}
    call = calls(records, screened, threshold)
    rows = []
    for s in screened:
        r = tuned.get(s.workflow)
        rows.append({"workflow": s.workflow, "universal_mean": s.observed_reward, "universal_ci95": s.observed_ci95,
                     "universal_compliance": s.eval_compliance, "universal_eligible": s.eligible(threshold),
                     "fine_tuned_mean": r.observed_reward if r else None,
                     "fine_tuned_compliance": r.eval_compliance if r else None,
                     "eligible": call[s.workflow][0], "call_from": call[s.workflow][1],
                     "in_confidence_set": s.workflow in kept})
    return rows
