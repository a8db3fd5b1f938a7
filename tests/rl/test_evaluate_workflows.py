"""Evaluation across workflows (``evaluate AGENT --workflow all``): one batched env, each env under its own
workflow; the table, the figure and the comparison with a ground truth."""
import csv
import json
import re

import pytest
import torch
from helpers import run_main, train_cfg

from workflow_rl.rl.evaluate import evaluate_cells, evaluate_workflows, scripted_act
from workflow_rl.rl.planning.planner import make_act
from workflow_rl.rl.ppo import Agent
from workflow_rl.search import feasible
from workflow_rl.workflow import Workflow, parse_workflow_list

A, B = Workflow.parse("D,OS,E,OH,U"), Workflow.parse("U,OH,OS,E,D")


def _by_workflow(results):
    return [(w, r.red_agent, r.length, r.mean, r.compliance, r.fixes) for w, r in results]


def test_one_workflow_equals_the_single_workflow_evaluation():
    torch.manual_seed(0)
    agent = Agent((32,))
    got = evaluate_workflows(lambda enc: make_act(agent, encodings=enc), [A], ["B_lineAgent"],
                             [30, 50], episodes=12, batch=5)
    want = evaluate_cells(make_act(agent, workflow=A), ["B_lineAgent"], [30, 50], 12, workflow=A, batch=5)
    assert [(r.mean, r.std, r.compliance, r.fixes, r.episodes) for _, r in got] == \
        [(r.mean, r.std, r.compliance, r.fixes, r.episodes) for r in want]


def test_each_env_carries_and_is_counted_under_its_own_workflow():
    """A policy blind to the workflow plays the same episodes whatever the workflows; the envs dealt B in [A, B]
    are then counted exactly as in [B, B], not as in [A, A]; and the policy is handed each env's encoding."""
    seen = []

    def act_for(enc):
        seen.append(enc.clone())
        return scripted_act("restore_compromised")

    ab, aa, bb = (evaluate_workflows(act_for, ws, ["B_lineAgent"], [100], episodes=4, batch=8)
                  for ws in ([A, B], [A, A], [B, B]))
    assert [r.mean for _, r in ab] == [r.mean for _, r in aa] == [r.mean for _, r in bb]
    assert _by_workflow(ab)[1][4:] == _by_workflow(bb)[1][4:] != _by_workflow(aa)[1][4:]
    assert _by_workflow(ab)[0][4:] == _by_workflow(aa)[0][4:]
    enc = seen[0]
    assert enc.shape == (8, 25)
    assert all(torch.equal(enc[i], torch.as_tensor((A, B)[i % 2].encode())) for i in range(8))


def test_rows_summary_and_ground_truth_comparison(tmp_path):
    results = evaluate_workflows(lambda enc: scripted_act("restore_compromised"), [A, B], ["B_lineAgent"], [100],
                                 episodes=3)
    rows = feasible.workflow_rows(results, "native", "greedy")
    gt = tmp_path / "gt.csv"
    cols = ["workflow", "mean", "ci95", "std", "n_seeds", "seed_values", "compliance", "eval_compliance",
            "episodes", "gate_episodes", "status", "eligible", "rank", "p_value", "distinguishable_from_best",
            "red_agent", "n_envs", "episode_length", "post_gate_episodes", "compliance_threshold", "eval_length"]
    with open(gt, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for wf, mean, ok in ((A, -20.0, True), (B, -30.0, False)):
            w.writerow({**{c: "" for c in cols}, "workflow": wf.codes, "mean": mean, "ci95": 1.0, "eligible": ok,
                        "n_seeds": 2, "seed_values": f"{mean - 1};{mean + 1}",
                        "red_agent": "B_lineAgent", "eval_length": 100, "compliance_threshold": 0.0})
    feasible.compare(rows, feasible.ground_truths([gt]))
    assert rows[0]["diff"] == pytest.approx(rows[0]["mean"] + 20.0) and rows[1]["gt_eligible"] is False
    assert rows[0]["diff_ci95"] == pytest.approx((rows[0]["ci95"] ** 2 + 1.0) ** 0.5)
    assert all(r["eligible"] for r in rows)           # at the ground truth's threshold (0 here) every one is
    s = feasible.summarise(rows)[0]
    assert (s["compared"], s["agree"], s["gt_eligible"], s["eligible"]) == (2, 1, 1, 2)
    fixes = rows[0]["fixes"] + rows[1]["fixes"]
    assert s["pooled_compliance"] == pytest.approx(
        (rows[0]["compliance"] * rows[0]["fixes"] + rows[1]["compliance"] * rows[1]["fixes"]) / fixes)
    assert s["worst_compliance"] == min(r["compliance"] for r in rows)
    with pytest.raises(ValueError, match="two files"):
        feasible.ground_truths([gt, gt])


def test_the_table_reads_back_as_written(tmp_path):
    """``read_csv`` (what a shipped agent's card is built from) gives back the rows ``write_csv`` wrote, typed: a
    row the ground truth covers with its columns, one it does not without them, a compliance with no fix None."""
    results = evaluate_workflows(lambda enc: scripted_act("restore_compromised"), [A, B], ["B_lineAgent"], [30, 100],
                                 episodes=3)
    rows = feasible.workflow_rows(results, "native", "greedy")
    rows[0].update(gt_mean=-20.0, gt_ci95=1.5, gt_eligible=False, diff=rows[0]["mean"] + 20.0, diff_ci95=2.0,
                   agree=True)
    rows[1]["compliance"] = None
    feasible.write_csv(rows, tmp_path / "workflows.csv")
    back = feasible.read_csv(tmp_path / "workflows.csv")
    assert back == rows and "gt_mean" not in back[1]
    assert feasible.summarise(back) == feasible.summarise(rows)


def test_cli_across_workflows_writes_table_figure_and_comparison(tmp_path, capsys):
    gt = "benchmarks/results/ground_truth/ground_truth.csv"
    rc, out, err = run_main(["evaluate", "pretrained:universal", "--workflow", "named", "--episodes", "3",
                         "--red-agents", "bline", "--ground-truth", gt, "--out", str(tmp_path)], capsys)
    assert rc == 0, err
    with open(tmp_path / "workflows.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["workflow"] for r in rows] == [w.codes for w in parse_workflow_list("named")]
    assert {r["red_agent"] for r in rows} == {"B_lineAgent"} and {r["length"] for r in rows} == {"100"}
    assert all(r["mode"] == "greedy" and r["episodes"] == "3" and r["gt_mean"] for r in rows)
    assert (tmp_path / "workflows.png").stat().st_size > 10_000
    summary = json.loads((tmp_path / "workflows.json").read_text())["summary"][0]
    assert summary["compared"] == 6 and f"eligibility agrees on {summary['agree']}" in out


@pytest.mark.parametrize("args,match", [
    (["pretrained:universal", "--workflow", "all;D,E,OS,OH,U"], "unknown unit type 'all'"),
    (["pretrained:universal", "--workflow", ";"], "lists no workflow"),
    (["pretrained:universal", "--workflow", "named", "--engine", "cyborg"], "native engine"),
    (["greedy_workflow", "--workflow", "named"], "one workflow at a time"),
    (["pretrained:universal", "--workflow", "all", "--time-limit", "5"], "drop --time-limit"),
    (["pretrained:universal", "--ground-truth", "x.csv"], "give --workflow a list"),
    (["pretrained:universal", "--workflow", "named", "--ground-truth", "/nonexistent.csv"], "no such file"),
])
def test_cli_bad_input_is_one_error_line(args, match, tmp_path, capsys):
    rc, _, err = run_main(["evaluate", *args, "--out", str(tmp_path / "ev")], capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error:") and re.search(match, lines[0]), err
    assert not (tmp_path / "ev").exists()


def test_an_agent_trained_across_workflows_needs_the_workflow_named(tmp_path, capsys):
    from workflow_rl.rl.trainer import Trainer

    t = Trainer(train_cfg(workflow="named", n_envs=4, episode_length=10, update_every_steps=10, max_episodes=1),
                tmp_path / "run", progress=False)
    t.run()
    ckpt = str(tmp_path / "run" / "checkpoints" / "latest.pt")
    rc, _, err = run_main(["evaluate", ckpt, "--episodes", "2", "--lengths", "10"], capsys)
    assert rc == 2 and "trained across workflows" in err
    rc, out, err = run_main(["evaluate", ckpt, "--workflow", "named", "--episodes", "2", "--lengths", "10"], capsys)
    assert rc == 0 and "6 workflows" in out, err
