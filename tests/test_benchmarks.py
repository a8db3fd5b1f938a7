"""The prepared GPU run must not rot between the sessions that have a GPU: dry-run every stage on the CPU."""
import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers import REPO, run_in_process

ROOT = REPO
STUDIES = ROOT / "benchmarks" / "studies"
DEVICE = ROOT / "benchmarks" / "device"


@pytest.mark.slow   # every stage end to end: training and two searches (minutes on a 2-core CPU)
def test_gpu_check_dry_run_completes_every_stage(tmp_path):
    pytest.importorskip("workflow_rl.sim.cuda", reason="the equality stage needs numba-cuda (its CUDA simulator)")
    args = ["--device", "cpu", "--engine-sizes", "4096", "--equality-envs", "12", "--equality-steps", "30",
            "--train-envs", "16", "--search-episodes", "200", "--search-batches", "2", "1", "--batch-slots", "2",
            "--batch-envs", "16", "--search-timeout", "240", "--budget", "1200", "--graph-rows", "100",
            "--planner-rollouts", "2", "--planner-particles", "16", "--planner-steps", "6", "--expert-rounds", "1",
            "--expert-episodes", "2", "--expert-length", "8", "--expert-rollouts", "2", "--expert-particles", "16",
            "--out", str(tmp_path)]
    r = run_in_process(args, script=DEVICE / "gpu_check.py", cwd=ROOT)   # its stages run in processes of their own
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads((tmp_path / "gpu.json").read_text())
    assert res["numba_cuda_import"] == "ok" and res["numpy"]
    assert res["equality"]["equal"] is True, res["equality"]       # the CUDA kernel, simulated, == the CPU kernel
    assert res["rollout"].get("rollouts_equal") is True, res["rollout"]   # same seed, same rollouts
    assert res["rollout"].get("masked_decoy_rollouts_equal") is True, res["rollout"]
    assert res["engine"]["rows"][0]["n_envs"] == 4096 and res["engine"]["rows"][0]["env_steps_per_s"] > 0
    assert [(r["device"], r["rollouts"]) for r in res["planner"]["rows"]] == [("cpu", 2), ("cuda", 2)], res["planner"]
    assert res["planner"]["rows"][-1]["same_actions_as_cpu"] is True   # the simulated CUDA rollouts chose alike
    for stage in (res["batched_training"], res["search_claims"], res["search"][0], res["training"],
                  res["expert_iteration"]):
        assert "wall_s" in stage, stage          # neither failed nor timed out
    assert [r["mode"] for r in res["search_claims"]["rows"]] == ["elastic", "lowered", "whole"]
    assert res["search"][0]["batch_workflows"] == 1
    assert "| batched (BatchedTrainer) | 2 |" in res["batched_training"]["table"]
    assert len(res["training"]["sps_per_update"]) == 3
    assert [r["round"] for r in res["expert_iteration"]["log"]] == ["1"], res["expert_iteration"]


@pytest.mark.slow   # its stages in fresh Pythons (~10 s)
def test_gpu_check_runs_only_the_stages_asked_for(tmp_path):
    """``--stages``: a device run spends its minutes on what is still unmeasured; the others are not run at all."""
    args = ["--device", "cpu", "--stages", "engine", "train", "--engine-sizes", "512", "--train-envs", "16",
            "--budget", "300", "--out", str(tmp_path)]
    r = run_in_process(args, script=DEVICE / "gpu_check.py", cwd=ROOT)   # its stages run in processes of their own
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads((tmp_path / "gpu.json").read_text())
    assert res["engine"]["rows"][0]["n_envs"] == 512 and "wall_s" in res["training"]
    assert not {"equality", "graphs", "rollout", "planner", "registers", "batched_training", "search_claims",
                "search", "expert_iteration"} & set(res)


@pytest.mark.slow   # a toy recipe run, its evaluations and the screen of 120 workflows: ~25 s
def test_device_recipe_job_dry_runs_on_the_cpu(tmp_path):
    """Issue P's prepared GPU job (benchmarks/device/device_recipe.sh) at toy scale on the CPU, as its header says
    to dry-run it: it trains, evaluates beside the shipped agent, screens, and returns the slim agent and a summary
    (the files the device tool brings back)."""
    import os

    out = tmp_path / "out"
    env = {**os.environ, "DEVICE": "cpu", "PY": sys.executable, "TRAIN_S": "120", "EVAL_EPISODES": "4",
           "SCREEN_EPISODES": "1", "SCALE": "--n-envs 16 --num-episodes 64", "OUT": str(out),
           "WORK": str(tmp_path / "work")}
    r = subprocess.run(["bash", str(DEVICE / "device_recipe.sh")], capture_output=True, text=True, cwd=ROOT, env=env,
                       timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == ["logs.tgz", "recipe-s0.pt", "summary.md", "train.log"]
    summary = (out / "summary.md").read_text()
    assert "train exit 0" in summary and "## eval-shipped" in summary and "## compare" in summary
    from workflow_rl.rl.pretrained import load

    agent, _ = load(str(out / "recipe-s0.pt"))
    assert agent.memory.dim > 0   # the recipe's agent (decoy memory), not a default network


@pytest.mark.slow   # three toy searches, ~1.5 min
def test_search_claims_benchmark_compares_the_claim_rules_at_tiny_scale(tmp_path):
    r = run_in_process(["--tiny", "--total-episodes", "300", "--batch-workflows", "8", "--out", str(tmp_path)],
                       script=STUDIES / "search_claims.py", cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = {row["mode"]: row for row in json.loads((tmp_path / "claims.json").read_text())["rows"]}
    assert set(rows) == {"elastic", "lowered", "whole"}
    for row in rows.values():
        assert row["episodes_used"] == 300 and row["rounds"] > 0 and row["most_in_flight"] >= 1
    # whole caps of 48: at most 6 fit the 300; lowered ones let more run at once, in no more rounds
    assert rows["whole"]["most_in_flight"] <= 6 < rows["lowered"]["most_in_flight"]
    assert rows["lowered"]["rounds"] <= rows["whole"]["rounds"]


@pytest.mark.slow   # a toy search under cProfile (~6 s)
def test_search_claims_cprofile_writes_where_the_search_spends_its_time(tmp_path):
    r = run_in_process(["--tiny", "--total-episodes", "150", "--batch-workflows", "4", "--modes", "elastic",
                        "--cprofile", "--out", str(tmp_path)], script=STUDIES / "search_claims.py", cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    text = (tmp_path / "profile_elastic.txt").read_text()
    assert "run_round" in text and "cumulative" in text   # the training rounds, by cumulative time
    assert json.loads((tmp_path / "claims.json").read_text())["rows"][0]["episodes_used"] == 150


def test_ship_agent_builds_the_card_from_the_checkpoint_and_the_evaluations(tmp_path):
    """benchmarks/ship_agent.py: the slim weights and a card whose counters come from the checkpoint and whose
    tables are the evaluation folders' rows; a missing evaluation folder is one error line."""
    from workflow_rl.rl import pretrained
    from workflow_rl.rl.checkpoint import load_checkpoint

    ev = tmp_path / "eval"
    ev.mkdir()
    row = {"engine": "native", "mode": "greedy", "red_agent": "B_lineAgent", "length": 100, "episodes": 7,
           "mean": -1.5, "ci95": 0.1, "compliance": None}
    (ev / "evaluation.json").write_text(json.dumps({"results": [row]}))
    # an unconstrained agent (the shipped one, issue P's, is trained across workflows): its file, one workflow none
    ck = load_checkpoint(pretrained.path("universal"))
    ck = {**ck, "config": {**ck["config"], "workflow": None, "none_share": 0.0}}
    torch.save(ck, tmp_path / "plain.pt")
    base = ["x", str(tmp_path / "plain.pt"),
            "--reproduce", "workflow-rl train ...", "--seconds", "12", "--machine", "m", "--kind", "k", "--status",
            "s", "--dir", str(tmp_path)]
    r = _ship_agent([*base, "--native", str(ev)])
    assert r.returncode == 0, r.stderr[-2000:]
    card = json.loads((tmp_path / "x.json").read_text())
    assert card["episodes_trained"] == ck["counters"]["total_episodes"] and card["eval_native"] == [row]
    assert card["eval_cyborg"] == [] and card["training_seconds"] == 12 and card["workflow"] is None
    assert load_checkpoint(tmp_path / "x.pt")["optimizer"] is None
    # a checkpoint that continued earlier runs: the card states the whole training, not the last run's counters
    r = _ship_agent([*base, "--native", str(ev), "--earlier-episodes", "500"])
    card = json.loads((tmp_path / "x.json").read_text())
    assert r.returncode == 0 and card["episodes_trained"] == ck["counters"]["total_episodes"] + 500
    assert card["env_steps"] == card["episodes_trained"] * ck["config"]["episode_length"]
    r = _ship_agent([*base, "--cyborg", str(tmp_path / "nowhere")])
    assert r.returncode != 0 and r.stderr.strip().startswith("error:") and "Traceback" not in r.stderr


@pytest.mark.slow
def test_ship_agent_puts_an_across_workflow_agents_tables_and_held_out_list_on_its_card(tmp_path):
    """An agent trained across workflows: the card takes the rows of ``workflows.csv`` (typed) and the summaries of
    ``workflows.json`` (--workflows), the held-out list from the checkpoint, and names the workflow its CAGE2 cells
    were played under; without --workflows, or with cells of two workflows, one error line."""
    from workflow_rl.rl import pretrained
    from workflow_rl.rl.checkpoint import load_checkpoint
    from workflow_rl.search import feasible

    row = {"engine": "native", "mode": "greedy", "red_agent": "B_lineAgent", "length": 100, "episodes": 7,
           "mean": -1.5, "ci95": 0.1, "compliance": 1.0}
    cells = {}
    for wf in (["defender", "op_server", "enterprise", "op_host", "user"], ["user", "enterprise", "defender",
                                                                              "op_server", "op_host"]):
        cells[wf[0]] = tmp_path / wf[0]
        cells[wf[0]].mkdir()
        (cells[wf[0]] / "evaluation.json").write_text(json.dumps({"workflow": wf, "results": [row]}))
    table = tmp_path / "workflows"
    table.mkdir()
    wrow = {"workflow": "D,E,OS,OH,U", "red_agent": "B_lineAgent", "engine": "native", "mode": "greedy",
            "length": 100, "episodes": 5, "compliance": 0.97, "fixes": 30, "mean": -14.0, "ci95": 0.5, "std": 2.0,
            "eligible": True}
    feasible.write_csv([wrow], table / "workflows.csv")
    (table / "workflows.json").write_text(json.dumps({"ground_truth": ["gt.csv"], "summary": [{"red_agent": "x"}]}))
    agent = str(pretrained.path("universal"))
    base = ["x", agent, "--reproduce", "r",
            "--seconds", "12", "--machine", "m", "--kind", "k", "--status", "s", "--dir", str(tmp_path),
            "--native", str(cells["defender"]), "--cyborg", str(cells["defender"]), str(cells["user"])]
    r = _ship_agent([*base, "--workflows", str(table)])
    assert r.returncode == 0, r.stderr[-2000:]
    card = json.loads((tmp_path / "x.json").read_text())
    ck = load_checkpoint(agent)
    held = ck["config"].get("hold_out")
    assert card["held_out"] == (held.split(";") if held else []) and card["train_workflows"] == "all"
    assert card["eval_workflow"] == ["defender", "op_server", "enterprise", "op_host", "user"]
    assert card["eval_native"] == [{**row, "workflow": "D,OS,E,OH,U"}]
    assert [c["workflow"] for c in card["eval_cyborg"]] == ["D,OS,E,OH,U", "U,E,D,OS,OH"]
    assert card["eval_workflows"] == {"ground_truth": ["gt.csv"], "summary": [{"red_agent": "x"}], "rows": [wrow]}
    for bad in (base, [*base, "--workflows", str(table), "--native", str(cells["defender"]), str(cells["user"])]):
        r = _ship_agent(bad)
        lines = r.stderr.strip().splitlines()
        assert r.returncode != 0 and len(lines) == 1 and lines[0].startswith("error:"), r.stderr


@pytest.mark.slow
def test_engine_check_puts_each_cyborg_cell_beside_the_native_row_of_its_workflow(tmp_path):
    """benchmarks/studies/engine_check.py: per CybORG folder (one workflow each) its 100-step cells beside the native
    table's row of that workflow and red agent; the standard error of the difference in quadrature; a workflow
    the native table lacks is one error line."""
    from workflow_rl.search import feasible

    def cell(red, mean, std, n, comp):
        return {"engine": "cyborg", "mode": "greedy", "red_agent": red, "length": 100, "episodes": n, "mean": mean,
                "std": std, "ci95": 0.0, "compliance": comp}

    folder = tmp_path / "cy"
    folder.mkdir()
    (folder / "evaluation.json").write_text(json.dumps({"workflow": ["user", "enterprise", "defender", "op_server",
                                                                     "op_host"],
                                                        "results": [cell("B_lineAgent", -15.0, 4.0, 100, 0.95),
                                                                    {**cell("B_lineAgent", -5.0, 1, 100, 1.0),
                                                                     "length": 30}]}))
    native = [{"workflow": w, "red_agent": "B_lineAgent", "engine": "native", "mode": "greedy", "length": 100,
               "episodes": 400, "compliance": 0.98, "fixes": 10, "mean": -14.0, "ci95": 0.1, "std": 4.0,
               "eligible": True} for w in ("U,E,D,OS,OH", "D,E,OS,OH,U")]
    feasible.write_csv(native, tmp_path / "workflows.csv")
    cmd = ["--cyborg", str(folder), "--out", str(tmp_path / "out")]
    r = run_in_process([*cmd, "--native", str(tmp_path / "workflows.csv")], script=STUDIES / "engine_check.py",
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    with open(tmp_path / "out" / "engine_check.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1 and (rows[0]["workflow"], rows[0]["folder"]) == ("U,E,D,OS,OH", "cy")
    se = (16 / 100 + 16 / 400) ** 0.5
    assert float(rows[0]["diff_se"]) == pytest.approx(se) and float(rows[0]["diff"]) == -1.0
    assert rows[0]["return_ok"] == str(1.0 <= 3 * se) and rows[0]["compliance_ok"] == "False"   # 0.03 apart
    feasible.write_csv(native[1:], tmp_path / "workflows.csv")
    r = run_in_process([*cmd, "--native", str(tmp_path / "workflows.csv")], script=STUDIES / "engine_check.py",
                       cwd=ROOT)
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and lines[0].startswith("error:") and "U,E,D,OS,OH" in lines[0]


@pytest.mark.cyborg
def test_engine_gap_compares_one_agent_on_both_engines_window_by_window(tmp_path):
    """benchmarks/studies/engine_gap.py at toy size: both engines played, ten 10-step windows whose rewards add up to
    each engine's mean return, action shares that sum to 1, red's late access for every host."""
    r = run_in_process(["pretrained:universal", "--red", "bline", "--episodes", "3", "--workers", "1", "--out",
                        str(tmp_path)], script=STUDIES / "engine_gap.py", cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads((tmp_path / "engine_gap.json").read_text())
    assert len(res["windows"]) == 10 and res["episodes"] == 3
    for eng in ("native", "cyborg"):
        assert sum(w[f"{eng}_reward"] for w in res["windows"]) == pytest.approx(res["return"][eng], abs=1e-4)
        assert all(sum(w[f"{eng}_kinds"].values()) == pytest.approx(1.0) for w in res["windows"])
        assert len(res["access_late"][eng]) == 13 and res["access_late"][eng]["User0"] == 1.0
    assert "| 91-100 |" in (tmp_path / "engine_gap.md").read_text()


def _ship_agent(args):
    """``python benchmarks/ship_agent.py ARGS`` in this process."""
    return run_in_process(args, script=ROOT / "benchmarks" / "ship_agent.py", cwd=ROOT)


def _benchmark_module(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, STUDIES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _price_module():
    return _benchmark_module("price")


def test_planning_gap_refuses_results_of_different_episodes_in_one_line(tmp_path, capsys):
    """benchmarks/studies/planning.py gap: two compare results of different episode seeds are refused the package's way
    (``checks.fail``: one ``error:`` line, exit status 2)."""
    import argparse

    planning = _benchmark_module("planning")
    files = []
    for seed in (1, 2):
        files.append(str(tmp_path / f"compare_{seed}.json"))
        Path(files[-1]).write_text(json.dumps({"red_agent": "B_lineAgent", "episode_seed": seed}))
    with pytest.raises(SystemExit) as e:
        planning.gap(argparse.Namespace(files=files))
    lines = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(lines) == 1
    assert lines[0].startswith("error: the two results are not the same episodes (episode_seed: 1 vs 2)")


def test_planning_truth_plays_every_cell_asked_for_paired_with_greedy():
    """benchmarks/studies/planning.py truth --lengths: the planner given the true state in each cell (issue P's limit),
    each cell paired with the greedy agent on its episodes; the top-level numbers are the longest cell's."""
    import argparse

    planning = _benchmark_module("planning")
    args = argparse.Namespace(agent="pretrained:universal", red="B_lineAgent", episodes=2, episode_seed=5, seed=0,
                              top_k=2, horizon=2, rollouts=1, max_rollouts=0, min_gain=0.0, value_scale=1.0,
                              lengths=[6, 10])
    res = planning.truth(args)
    assert sorted(res["cells"]) == [6, 10] and res["difference"] == res["cells"][10]["difference"]
    for cell in res["cells"].values():
        (g, _), (p, _), (d, _) = cell["greedy"], cell["planned_true_state"], cell["difference"]
        assert d == pytest.approx(p - g) and g <= 0 and p <= 0
    assert res["length_known"] is False and res["agent"] == "pretrained:universal"   # play_true_state: never told
    for L in (6, 10):   # the per-episode returns, to pair with a compare run's
        for key, m in (("greedy", "greedy"), ("planned_true_state", "planned_true_state")):
            x = res["cell_returns"][m][str(L)]
            assert len(x) == 2 and sum(x) / 2 == pytest.approx(res["cells"][L][key][0])


def test_planning_oracle_tells_the_planner_red_access_or_red_files():
    """benchmarks/studies/planning.py oracle --told: the planner's particles are filtered by the truth's red access
    per host, or by its red files (what Analyse shows); the two keep different shares of the belief's weight, each
    run's cells are its per-episode returns' means, keyed by what it was told."""
    import argparse

    planning = _benchmark_module("planning")
    kept = {}
    for told in ("access", "files"):
        args = argparse.Namespace(agent="pretrained:universal", red="RedMeanderAgent", episodes=2, episode_seed=5,
                                  seed=0, particles=16, top_k=2, horizon=2, rollouts=1, fix_candidates=0,
                                  min_gain=0.0, value_scale=0.0, max_rollouts=0, analyse_candidates=0, lengths=[20],
                                  told=told)
        res = planning.oracle(args)
        assert res["told"] == told and res["decisions"] > 0
        x = res["cell_returns"][f"planned_{told}_oracle"]["20"]
        assert len(x) == 2 and sum(x) / 2 == pytest.approx(res["cells"][20][f"planned_{told}_oracle"][0])
        kept[told] = res["belief_weight_kept"]["mean"]
        assert 0 < kept[told] <= 1
    assert kept["access"] != kept["files"]


def test_planning_calibration_bins_every_host_level_of_every_step():
    """benchmarks/studies/planning.py calibration: every (step, env, host, access level) lands in one bin, the
    probability-0 bin first; a bin's truths are at most its count."""
    import argparse

    planning = _benchmark_module("planning")
    args = argparse.Namespace(agent="pretrained:universal", red="RedMeanderAgent", episodes=2, episode_seed=5,
                              seed=0, particles=8)
    res = planning.calibration(args)
    bins = res["bins"]
    assert sum(b["count"] for b in bins) == 100 * 2 * 13 * 2 and bins[0]["from"] == 0.0
    assert all(0 <= b["truth"] <= b["count"] for b in bins)


def test_price_summarises_the_gap_to_cage2_and_pairs_two_agents_by_workflow(tmp_path, capsys):
    """benchmarks/studies/price.py: per red agent, the ground-truth-eligible workflows' gap to the reference (mean,
    largest, how many within 1.0), their gate count with the held-out ones apart, the ineligible ones that reach the
    gate;
    with --base the per-workflow change as a mean with its Student-t interval across workflows; a folder without
    workflows.csv is one error line, exit 2, nothing written."""
    from scipy import stats

    from workflow_rl.search import feasible

    price = _price_module()

    def row(wf, mean, comp, gt_eligible):
        return {"workflow": wf, "red_agent": "B_lineAgent", "engine": "native", "mode": "greedy", "length": 100,
                "episodes": 300, "compliance": comp, "fixes": 100, "mean": mean, "ci95": 0.4, "std": 3.0,
                "eligible": comp >= 0.95, "gt_mean": -18.0, "gt_ci95": 1.0, "gt_eligible": gt_eligible,
                "diff": mean + 18.0, "diff_ci95": 1.1, "agree": (comp >= 0.95) == gt_eligible}

    base = [row("D,E,OS,OH,U", -14.35, 0.99, True), row("E,D,OS,OH,U", -15.35, 0.97, True),
            row("U,E,D,OS,OH", -19.0, 0.96, False)]
    new = [row("D,E,OS,OH,U", -13.85, 0.98, True), row("E,D,OS,OH,U", -14.35, 0.94, True),
           row("U,E,D,OS,OH", -19.0, 0.90, False)]
    for name, rows in (("base", base), ("new", new)):
        (tmp_path / name).mkdir()
        feasible.write_csv(rows, tmp_path / name / "workflows.csv")
    (tmp_path / "config.json").write_text(json.dumps({"hold_out": "E,D,OS,OH,U;U,E,D,OS,OH"}))

    s = price.price_summary(feasible.read_csv(tmp_path / "base" / "workflows.csv"), {"E,D,OS,OH,U"})[0]
    assert (s["eligible"], s["eligible_ok"], s["held_out_eligible"], s["held_out_eligible_ok"]) == (2, 2, 1, 1)
    assert (s["ineligible"], s["ineligible_ok"], s["agree"]) == (1, 1, 2)
    assert s["gap_mean"] == pytest.approx(1.5) and s["gap_max"] == pytest.approx(2.0) and s["within"] == 1
    assert s["pooled_compliance"] == pytest.approx((0.99 + 0.97 + 0.96) / 3) and s["worst_workflow"] == "U,E,D,OS,OH"

    out = tmp_path / "res" / "price.md"
    assert price.main([str(tmp_path / "new"), "--base", str(tmp_path / "base"), "--held-out",
                       str(tmp_path / "config.json"), "--out", str(out)]) == 0
    res = json.loads(out.with_suffix(".json").read_text())
    new_s = res["summaries"]["new"][0]
    assert (new_s["eligible_ok"], new_s["held_out_eligible_ok"], new_s["within"]) == (1, 0, 2)
    p = res["paired"][0]
    half = stats.t.ppf(0.975, 1) * 0.25       # differences +0.5 and +1.0: sample std 0.25 * 2 ** 0.5, n = 2
    assert p["workflows"] == 2 and p["return_diff"] == pytest.approx(0.75) and p["within"] == 2
    assert p["return_diff_ci95"] == pytest.approx(half)
    assert "| B_lineAgent | 2 | +0.75 ±" in out.read_text()
    back = price.paired(feasible.read_csv(tmp_path / "base" / "workflows.csv"),
                        feasible.read_csv(tmp_path / "new" / "workflows.csv"))[0]
    assert back["return_diff"] == pytest.approx(-0.75) and back["within"] == 2   # -0.5 and -1.0: both within 1.0
    typed = feasible.read_csv(tmp_path / "base" / "workflows.csv")
    assert price.paired([{**r, "mean": r["mean"] - 1.2} for r in typed], typed)[0]["within"] == 0
    capsys.readouterr()

    with pytest.raises(SystemExit) as e:
        price.main([str(tmp_path / "missing"), "--out", str(tmp_path / "bad" / "p.md")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(lines) == 1 and lines[0].startswith("error:") and "workflows.csv" in lines[0]
    assert not (tmp_path / "bad").exists()


def test_opening_benchmark_pairs_an_agent_with_a_forced_opening(tmp_path):
    """The shipped agent's own opening (51 116 55, what it was trained with) forced changes nothing, episode by
    episode; another opening forced on it (the first `cage2`'s own greedy first moves, DecoyHarakaSMPT Op_Host1,
    DecoyApache User2) changes its play."""
    import json

    def forced(opening):
        r = run_in_process(["forced", "--agent", "pretrained:universal", "--opening", *opening, "--episodes", "20",
                            "--out", str(tmp_path)], script=STUDIES / "opening.py")
        assert r.returncode == 0, r.stderr
        return json.loads((tmp_path / f"opening_forced_{'_'.join(opening)}.json").read_text())["cells"]

    own = forced(["51", "116", "55"])
    assert len(own) == 6 and all(c["difference"] == 0 and c["better"] == c["worse"] == 0 for c in own)
    assert any(c["worse"] > 0 for c in forced(["59", "38"]))


def test_shared_machine_benchmark_dry_run(tmp_path):
    """benchmarks/studies/shared_machine.py at a trivial size: every cell runs (policy and baseline, alone and beside
    the busy loop, which it stops again) and both CSVs are written; the ratios themselves are measured on a quiet
    machine, not here."""
    r = run_in_process(["--command", f"{sys.executable} -c pass", "--label", "noop", "--out", str(tmp_path)],
                       script=STUDIES / "shared_machine.py", cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    with open(tmp_path / "runs.csv") as f:
        runs = list(csv.DictReader(f))
    assert sorted((x["threads"], x["condition"]) for x in runs) == [
        ("auto", "alone"), ("auto", "beside_busy"), ("off", "alone"), ("off", "beside_busy")]
    with open(tmp_path / "ratios.csv") as f:
        ratios = list(csv.DictReader(f))
    assert [x["threads"] for x in ratios] == ["auto", "off"] and all(float(x["ratio"]) > 0 for x in ratios)


def test_bench_native_table_is_the_readmes_speed_file(tmp_path, capsys):
    """``make bench`` is ``workflow-rl bench --overwrite`` (it replaces the committed tables); its native table (the
    kernel alone, both red agents) has the columns tests/test_readme.py reads from benchmarks/results/native.csv."""
    from helpers import run_main

    rc, out, err = run_main(["bench", "--tables", "native", "--native-sizes", "16", "--native-min-steps", "200",
                             "--repeats", "1", "--cyborg-steps", "1", "--cuda-sizes", "--out", str(tmp_path)], capsys)
    assert rc == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["native.csv", "native.md"]   # no engines table asked for
    with open(tmp_path / "native.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["red"], r["n_envs"]) for r in rows] == [("B_lineAgent", "16"), ("RedMeanderAgent", "16")]
    assert all(float(r["min"]) <= float(r["steps_per_s"]) <= float(r["max"]) for r in rows)
    assert (ROOT / "Makefile").read_text().split("\nbench:")[1].split("\n")[1].strip().endswith("workflow-rl bench --overwrite")


def test_behaviour_study_writes_each_agent_and_attacker_with_its_command(tmp_path):
    """benchmarks/studies/behaviour.py at toy size: one cell per agent and attacker, parts that sum to the return,
    the command that wrote the file."""
    out = tmp_path / "behaviour.json"
    r = run_in_process(["universal=pretrained:universal", "--red-agents", "UserHopper", "bline", "--episodes", "3",
                        "--length", "12", "--out", str(out)], script=STUDIES / "behaviour.py", cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(out.read_text())
    assert res["command"].startswith("python benchmarks/studies/behaviour.py universal=pretrained:universal")
    cells = res["agents"]["universal"]["red_agents"]
    assert list(cells) == ["UserHopper", "bline"] and cells["bline"]["red_agent"] == "B_lineAgent"
    for c in cells.values():
        assert c["episodes"] == 3 and c["length"] == 12
        assert sum(p["mean"] for p in c["parts"].values()) == pytest.approx(c["return"]["mean"], abs=1e-3)
        assert sum(k["mean"] for k in c["kinds"].values()) == pytest.approx(12, abs=1e-3)
