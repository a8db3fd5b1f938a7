"""The README's numbers are the committed result files' numbers: each is recomputed here from its file, so a new
result (or a changed output format) that the README does not follow fails this test instead of going stale. And
every relative link in README.md and docs/ points at a file that exists."""
import csv
import json
import re
from pathlib import Path

import pytest

from workflow_rl.rl.evaluate import CAGE2_WINNER
from workflow_rl.search.outputs import answer_line
from helpers import REPO

ROOT = REPO
README = (ROOT / "README.md").read_text()
SEARCH_DOC = (ROOT / "docs" / "search.md").read_text()
"""Where the README's former prose (the answer line read, the universal agent across workflows) now lives."""
RESULTS = ROOT / "benchmarks" / "results"
MAKERUN = [f"makerun-s{i}" for i in range(4)]   # `make run`: the search from pretrained:universal (issue P's agent)
MAKERUN_DIR = RESULTS / "recipe" / "makerun"
SCRATCH = ["makerun-q1", "makerun-s1-q1", "makerun-s2-q1"]   # `make run RUN_FROM=`: one workflow per batch
GROUND_TRUTH_KEYS = {"ground_truth", "ground_truth_best", "regret", "answer_rank", "answer_in_top_set",
                     "answer_eligible_in_ground_truth"}
"""What a summary holds only when its search was given --ground-truth (the benchmark runs were; make run is not)."""


def _row(label: str) -> str:
    """The README results-table row whose first cell starts with ``label``."""
    rows = [line for line in README.splitlines() if line.startswith(f"| {label}")]
    assert len(rows) == 1, f"no single results row starting with {label!r}"
    return rows[0]


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def _cyborg_greedy(agent: str) -> dict:
    card = _json(ROOT / "workflow_rl" / "pretrained" / f"{agent}.json")
    return {(r["red_agent"], r["length"]): r for r in card["eval_cyborg"] if r["mode"] == "greedy"}


def _cpu_seconds() -> dict[str, float]:
    """The CPU time (user) of each measured search, as /usr/bin/time recorded it: the box was shared, so the
    README quotes CPU, not the summaries' loaded wall times."""
    earlier = RESULTS / "search_from_universal" / "violations_agent" / "times.csv"   # incl. the from-scratch run
    return {r["run"]: float(r["user_s"]) for times in (earlier, MAKERUN_DIR / "times.csv")
            for r in csv.DictReader(times.open())}


def _times(folder: Path) -> dict[str, float]:
    """Each run's user CPU seconds in ``folder/times.csv`` (as the results page shows them)."""
    return {r["run"]: float(r["user_s"]) for r in csv.DictReader((folder / "times.csv").open())}


def test_the_answer_line_is_a_committed_make_run_answer():
    """The quoted last line is what `make run` prints (``answer_line``) for a committed summary of its search."""
    summary = _json(MAKERUN_DIR / "makerun-s0-summary.json")
    assert summary["batch_workflows"] == 1 and summary["total_episodes"] == 3000
    assert summary["universal"]["agent"] == "pretrained:universal"
    shown = {k: v for k, v in summary.items() if k not in GROUND_TRUTH_KEYS}
    line = answer_line({**shown, "best_seeds": 1})   # make run fine-tunes one seed per workflow
    assert f"\n{line}\n" in SEARCH_DOC
    assert f"**`{summary['best_workflow_codes']}`**" in SEARCH_DOC and f"**`{summary['best_reward']:.2f}`**" in SEARCH_DOC
    assert f"**`± {summary['best_ci95']:.2f}`**" in SEARCH_DOC
    assert f"{len(summary['confidence_set'])} of 120 means" in SEARCH_DOC
    assert f"winner's agent scores {CAGE2_WINNER[('B_lineAgent', 100)]:.2f}".replace("-", "−") in SEARCH_DOC


def test_make_run_rows():
    """make run's search (from the shipped universal agent: answers, CPU, the ground truth's best beside them) and
    the from-scratch search it replaced (RUN_FROM=)."""
    runs = [_json(MAKERUN_DIR / f"{name}-summary.json") for name in MAKERUN]
    cpu = _cpu_seconds()
    row = _row("`make run` answers")
    gt = list(csv.DictReader((RESULTS / "ground_truth" / "ground_truth.csv").open()))
    gt_best = max(float(r["mean"]) for r in gt if r["eligible"] == "True")
    for i, s in enumerate(runs):
        assert s["total_episodes"] == 3000 and s["red_agent"] == "B_lineAgent" and s["best_is_eligible"]
        assert s["post_gate_episodes"] == 10 and s["workflows_evaluated"] == 1
        assert s["universal"]["training_episodes_counted"] == 0 and s["best_reward"] > gt_best
        assert (f"{s['best_workflow_codes']} −{-s['best_reward']:.2f} ({s['workflows_evaluated']}"
                f"{' workflow fine-tuned' if i == 0 else ''}, {cpu[f'makerun-s{i}']:.0f} s") in row
    assert f"best eligible workflow: −{-gt_best:.2f}" in row
    both = _times(MAKERUN_DIR)
    secs = sorted(both.values())
    text = " ".join(SEARCH_DOC.split())
    assert f"each of four runs took {secs[0]:.0f}–{secs[-1]:.0f} s of one core's CPU time" in text
    search = sorted(s["wall_time_s"] for s in runs)
    assert f"(the search itself {search[0]:.0f}–{search[-1]:.0f} s)" in text
    assert all(s["workflows_evaluated"] == 1 for s in runs) and "3,000 episodes fine-tune 1 workflow" in text
    assert f"against {cpu['scratch-s1']:.0f} s for a from-scratch search" in text
    share = sum(cpu[f"makerun-s{i}"] for i in range(len(runs))) / len(runs) / cpu["scratch-s1"]
    assert f"in {len(runs)} of {len(runs)} seeds, at about {share:.1f} times the from-scratch search's CPU" in text
    before = [_json(MAKERUN_DIR.parent / "makerun_9k" / f"{name}-summary.json") for name in MAKERUN]
    assert [s["best_workflow_codes"] for s in before] == [s["best_workflow_codes"] for s in runs]
    assert [s["confidence_set"] for s in before] == [s["confidence_set"] for s in runs]
    old = _times(MAKERUN_DIR.parent / "makerun_9k")
    ratio = (sum(old.values()) / len(old)) / (sum(both.values()) / len(both))
    assert f"gave the same answers and confidence sets at {ratio:.1f} times the CPU" in text
    answers = sorted(s["best_reward"] for s in runs)
    assert f"four seeds gave −{-answers[-1]:.2f} to −{-answers[0]:.2f}" in text
    big = [_json(RESULTS / "search_from_universal" / "violations_agent" / f"u60k-s{i}-summary.json") for i in range(4)
           if (RESULTS / "search_from_universal" / "violations_agent" / f"u60k-s{i}-summary.json").exists()]
    assert big and all(s["workflows_evaluated"] == 7 for s in big) and "RUN_EPISODES=60000`: 7" in text
    small = [cpu[f"u9k-v-s{i}"] for i in range(4)]   # the same agent's 9,000-episode searches (RESULTS.md)
    ratio = sum(cpu[f"u60k-s{i}"] for i in range(4) if f"u60k-s{i}" in cpu) / len(big) / (sum(small) / len(small))
    assert f"about {ratio:.1f} times the CPU" in text

    scratch = [_json(RESULTS / "makerun_scratch" / f"{name}-summary.json") for name in SCRATCH]
    row = _row("`make run RUN_FROM=` answers")
    for s in scratch:
        assert s["total_episodes"] == 60000 and s["red_agent"] == "B_lineAgent" and s["best_is_eligible"]
        assert (f"{s['best_workflow_codes']} −{-s['best_reward']:.2f} ({s['workflows_evaluated']}"
                f"{' workflows' if s is scratch[0] else ''}, {s['wall_time_s']:.0f} s") in row


@pytest.mark.parametrize("label, folder", [("Ground truth, B_line", "ground_truth"),
                                           ("Ground truth, Meander", "ground_truth_meander")])
def test_ground_truth_rows(label, folder):
    """The cliff (no workflow ranking user hosts before enterprise hosts is ever compliant) and the plateau (the
    eligible ones do not differ beyond the bound), as the exhaustive runs found them."""
    rows = list(csv.DictReader((RESULTS / folder / "ground_truth.csv").open()))
    effect = _json(RESULTS / folder / "summary.json")["eligible_workflow_effect"]
    user_first = [r for r in rows if r["workflow"].split(",").index("U") < r["workflow"].split(",").index("E")]
    others = [r for r in rows if r not in user_first]
    seeds = {int(r["n_seeds"]) for r in rows}
    row = _row(label)
    assert len(rows) == 120 and seeds == {3} and f"(120{' workflows' if folder == 'ground_truth' else ''} × 3" in row
    compliant = sum(r["status"] == "compliant" for r in user_first)
    assert f"{compliant} of the {len(user_first)} user-before-enterprise workflows compliant" in row
    assert f"{sum(r['eligible'] == 'True' for r in others)} of the other {len(others)} eligible" in row
    assert f"≤ {effect['between_sd_upper']:.2f}" in row and f"seed sd {effect['within_sd']:.2f}" in row
    assert f"F {effect['f']:.2f}, p {effect['p']:.2f}" in row
    if folder == "ground_truth":   # the prose quotes the B_line bound
        assert f"spread by at most\n  {effect['between_sd_upper']:.2f} points" in SEARCH_DOC


def test_fidelity_row():
    """Both reference files' cells, defenders, lengths and CybORG episodes per cell, as the row states them."""
    row = _row("Engine fidelity")
    for name, reds in (("cyborg_returns.csv", "B_line/Meander"), ("cyborg_returns_family.csv", None)):
        rows = list(csv.DictReader((ROOT / "tests" / "data" / name).open()))
        counts = {}
        for r in rows:
            counts[(r["red"], r["policy"], r["length"])] = counts.get((r["red"], r["policy"], r["length"]), 0) + 1
        policies = {r["policy"] for r in rows}
        lengths = "/".join(map(str, sorted({int(r["length"]) for r in rows})))
        reds = reds or f"the family's {len({r['red'] for r in rows})} attackers"
        per_cell = "/".join(map(str, sorted(set(counts.values()))))
        assert (f"{len(counts)} cells ({len(policies)} scripted defenders × {reds} × {lengths} steps, "
                f"{per_cell} CybORG episodes each)") in row, name
    assert "36 cells" in row and "108 cells" in row   # 6 x 2 x 3 and 6 x 6 x 3


def test_speed_rows():
    native = {r["red"]: r for r in csv.DictReader((RESULTS / "native.csv").open())}["B_lineAgent"]
    cyborg = {(r["mode"], r["n_envs"]): r for r in csv.DictReader((RESULTS / "engines.csv").open())}
    one = float(cyborg[("cyborg-sequential", "1")]["transitions_per_s"])
    assert (f"{float(native['steps_per_s']):,.0f} env-steps/s (B_line, {int(native['n_envs']):,} envs) vs "
            f"{one:.0f} steps/s for one CybORG process") in _row("Speed, 2-core CPU")
    gpu = _json(RESULTS / "gpu" / "h100-2026-11-27-f-default.json")
    best = max((r for r in gpu["engine"]["rows"] if r["red"] == "bline"), key=lambda r: r["env_steps_per_s"])
    assert "H100" in gpu["gpu"]
    expected = f"{best['env_steps_per_s'] / 1e9:.2f}B env-steps/s (B_line, {best['n_envs']:,} envs"
    assert expected in _row("Speed, one H100")


def _both(row, cell) -> float:
    """The 95% interval of a difference to the winner's agent: ours and its (400 episodes) in quadrature."""
    import math

    from workflow_rl import anchors

    return math.hypot(row["ci95"], anchors.winner()[cell].ci95)


def test_shipped_agent_rows():
    """The one shipped agent on real CybORG against the winner, unconstrained greedy and planned."""
    cells = sorted(CAGE2_WINNER)   # (red, length), B_line first
    one = _cyborg_greedy("universal")
    row = _row("`pretrained:universal` unconstrained")
    assert all(one[c]["workflow"] is None for c in cells)
    assert {one[c]["episodes"] for c in cells} == {1000} and "1,000 episodes per cell" in row
    for red, name in (("B_lineAgent", "B_line 30/50/100: "), ("RedMeanderAgent", "Meander: ")):
        ours = " / ".join(f"−{-one[(red, n)]['mean']:.2f}" for n in (30, 50, 100))
        theirs = " / ".join(f"−{-CAGE2_WINNER[(red, n)]:.2f}" for n in (30, 50, 100))
        assert f"{name}{ours} (winner {theirs})" in row
    total = sum(one[c]["mean"] for c in cells)
    assert f"six-cell sum −{-total:.2f} vs −{-sum(CAGE2_WINNER.values()):.2f}" in row
    ahead = [c for c in cells if one[c]["mean"] - _both(one[c], c) > CAGE2_WINNER[c]]
    behind = [c for c in cells if one[c]["mean"] + _both(one[c], c) < CAGE2_WINNER[c]]
    assert f"ahead beyond noise in {len(ahead)} cells" in row and f"behind beyond noise in {len(behind)}" in row
    unknown = _json(RESULTS / "planning" / "cyborg-length-unknown" / "evaluation.json")["results"]
    told = [r for run in ("cyborg-planned-3050", "cyborg-planned-100")
            for r in _json(RESULTS / "recipe" / "cpu-ns50-s1" / run / "evaluation.json")["results"]]
    for rows, label in ((unknown, "`pretrained:universal` planned vs the CAGE2 winner's agent"),
                        (told, "`pretrained:universal` planned, told each cell's length")):
        planned = {(r["red_agent"], r["length"]): r for r in rows
                   if r["mode"] in ("planned", "planned_told_length") and r["engine"] == "cyborg"}
        row = _row(label)
        n = sorted({planned[c]["episodes"] for c in cells})
        assert f"{'/'.join(f'{k:,}' for k in n)} episodes per cell" in row
        for red, name in (("B_lineAgent", "B_line 30/50/100: "), ("RedMeanderAgent", "Meander: ")):
            assert name + " / ".join(f"−{-planned[(red, n)]['mean']:.2f}" for n in (30, 50, 100)) in row
        ahead = [c for c in cells if planned[c]["mean"] - _both(planned[c], c) > CAGE2_WINNER[c]]
        behind = [c for c in cells if planned[c]["mean"] + _both(planned[c], c) < CAGE2_WINNER[c]]
        assert f"six-cell sum −{-sum(planned[c]['mean'] for c in cells):.2f} vs" in row
        assert f"ahead beyond noise in {len(ahead)} cells" in row and f"behind beyond noise in {len(behind)}" in row
    assert "not told the episode's length" in _row("`pretrained:universal` planned vs the CAGE2 winner's agent")


def test_universal_row_and_section():
    """The one agent's row across the workflows, its training cost, and the price quoted in "One network, any
    workflow" (against its own unconstrained play), from its card."""
    card = _json(ROOT / "workflow_rl" / "pretrained" / "universal.json")
    assert card["eval_workflow"] == "none"
    none = {r["red_agent"]: r["mean"] for r in card["eval_native"]
            if r["mode"] == "greedy" and r["length"] == 100 and r["workflow"] is None}
    rows, row = card["eval_workflows"]["rows"], _row("`pretrained:universal` under the workflows")
    text = " ".join(SEARCH_DOC.split())
    assert {r["episodes"] for r in rows} == {500} and "500 episodes per workflow and red agent" in row
    for red, name in (("B_lineAgent", "B_line"), ("RedMeanderAgent", "Meander")):
        mine = [r for r in rows if r["red_agent"] == red]
        assert len(mine) == 120
        follows = sum(r["compliance"] >= 0.95 for r in mine)
        assert f"{follows} of 120" in row and all(r["compliance"] >= 0.95 for r in mine if r["gt_eligible"])
        mean = sum(r["mean"] for r in mine) / 120
        assert f"−{-mean:.2f} {name}" in row and f"−{-none[red]:.2f}" in row
        eligible = [r["mean"] for r in mine if r["gt_eligible"]]
        price = none[red] - sum(eligible) / len(eligible)
        if name == "B_line":
            assert price > 0 and f"about {price:.1f} points against B_line" in text
        else:
            assert price < 0 and f"nothing against Meander, where it scores {-price:.1f} above it" in text
    b_line = [r for r in rows if r["red_agent"] == "B_lineAgent"]
    assert f"(worst {min(r['compliance'] for r in b_line):.3f})" in row
    # the user-first orders: violations per B_line episode on the ground truth's ineligible workflows
    broken = [r["fixes"] * (1 - r["compliance"]) / r["episodes"] for r in b_line if not r["gt_eligible"]]
    assert f"~{sum(broken) / len(broken):.0f} times per B_line episode" in text
    cost = _row("`train --recipe universal` from random weights")
    assert card["reproduce"].startswith("workflow-rl train --recipe universal")
    assert f"{card['training_seconds'] / 60:.0f} min wall" in cost and f"{card['episodes_trained']:,} episodes" in cost
    cpu = sum(float(line.split(":")[1]) for line in (RESULTS / "recipe" / "cpu-ns50-s1" / "time.txt").read_text()
              .splitlines() if "User time" in line or "System time" in line)   # /usr/bin/time -v
    assert f"{cpu:,.0f} s of one core" in cost


def test_the_ratio_form_agent_shipped_before():
    """The README's price of the agent shipped before (the ratio-form alignment reward) is its committed
    evaluation's (benchmarks/results/retired_agents/universal_ratio), and it followed every workflow at 0.95 against
    B_line."""
    cage2 = {r["red_agent"]: r["mean"] for r in _json(RESULTS / "retired_agents" / "cage2.json")["eval_native"]
             if r["mode"] == "greedy" and r["length"] == 100}
    ratio = RESULTS / "retired_agents" / "universal_ratio"
    rows = [r for r in csv.DictReader((ratio / "workflows" / "workflows.csv").open())
            if r["red_agent"] == "B_lineAgent"]
    assert len(rows) == 120 and all(float(r["compliance"]) >= 0.95 for r in rows)
    eligible = [float(r["mean"]) for r in rows if r["gt_eligible"] == "True"]
    price = cage2["B_lineAgent"] - sum(eligible) / len(eligible)
    assert f'followed every order "at 0.95" that way, at {price:.1f} points' in " ".join(SEARCH_DOC.split())


def test_relative_links_resolve():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, "broken links: " + ", ".join(broken)


def _expand(path: str) -> list[str]:
    """``a{,-s1}b`` -> ``ab``, ``a-s1b`` (the brace form the docs use for a family of files)."""
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    return [p for alt in m.group(1).split(",") for p in _expand(path[:m.start()] + alt + path[m.end():])]


def test_quoted_results_paths_exist():
    """Every results path the README, docs and benchmarks/README.md quote is in the tree, or the text names the git
    tag that has it (results folders were renamed and superseded ones removed in issue S: a stale path fails here)."""
    pages = [(ROOT / "README.md", ROOT, "benchmarks/results/"),
             (ROOT / "benchmarks" / "README.md", ROOT / "benchmarks", "results/"),   # its paths are relative
             *((page, ROOT, "benchmarks/results/") for page in sorted((ROOT / "docs").glob("*.md")))]
    missing = []
    for page, base, prefix in pages:
        text = page.read_text()
        for m in re.finditer(r"`(" + prefix + r"[^`\s]+)`", text):
            if re.search(r"git tag|commit [0-9a-f]{7}", text[m.end():m.end() + 30]):
                continue
            for path in _expand(m.group(1)):
                if not any(base.glob(path.rstrip("/"))):
                    missing.append(f"{page.relative_to(ROOT)}: {path}")
    assert not missing, "quoted results paths not in the tree: " + ", ".join(missing)


def test_readme_is_short():
    """A newcomer reads it in five minutes: at most 120 lines."""
    assert len(README.splitlines()) <= 120


def test_readme_python_example_runs(capsys):
    """The README's Python block runs as written (the shipped agent, one 100-step episode) and prints a return."""
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert len(blocks) == 1 and len(blocks[0].splitlines()) <= 12
    exec(compile(blocks[0], "README.md", "exec"), {})
    out = capsys.readouterr().out
    value = float(re.search(r"return over 100 steps against B_line: (-?[0-9.]+)", out).group(1))
    assert -1000 < value <= 0
