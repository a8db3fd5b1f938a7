"""An evaluation's Markdown report (``evaluate --out DIR``'s evaluation.md and the printed table)."""
from __future__ import annotations


def evaluation_markdown(label: str, workflow, results: list[dict]) -> str:
    """Two tables: every cell (engine, mode, red agent, length) with its episodes, mean, 95% CI and compliance; and
    the CAGE2 cells side by side per engine and mode, with the leaderboard winner's row."""
    from workflow_rl.rl.evaluate import CAGE2_WINNER

    lines = [f"# Evaluation of {label}", "", f"workflow {workflow.codes if workflow else 'none'}; fixed evaluation "
             "seeds; each length's return is the running return of the same episodes (see evaluate_cells)", "",
             "| engine | mode | red agent | length | episodes | mean | 95% CI | compliance |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in results:
        comp = "n/a" if r["compliance"] is None else f"{r['compliance']:.3f}"
        lines.append(f"| {r['engine']} | {r['mode']} | {r['red_agent']} | {r['length']} | {r['episodes']} | "
                     f"{r['mean']:.2f} | ± {r['ci95']:.2f} | {comp} |")
    cells = [c for c in CAGE2_WINNER if any((r["red_agent"], r["length"]) == c for r in results)]
    if cells:
        short = {"B_lineAgent": "B_line", "RedMeanderAgent": "Meander"}
        lines += ["", "| engine | mode | " + " | ".join(f"{short[red]} {n}" for red, n in cells) + " | sum |",
                  "|---|---|" + "---:|" * (len(cells) + 1)]
        for engine, mode in dict.fromkeys((r["engine"], r["mode"]) for r in results):
            row = {(r["red_agent"], r["length"]): r for r in results if (r["engine"], r["mode"]) == (engine, mode)}
            vals = [row.get(c) for c in cells]
            total = sum(v["mean"] for v in vals) if all(vals) else float("nan")
            lines.append(f"| {engine} | {mode} | " + " | ".join(
                f"{v['mean']:.2f} ± {v['ci95']:.2f} (n={v['episodes']})" if v else "" for v in vals)
                + f" | {total:.2f} |")
        lines.append("| CAGE2 winner | | " + " | ".join(f"{CAGE2_WINNER[c]:.2f}" for c in cells)
                     + f" | {sum(CAGE2_WINNER[c] for c in cells):.2f} |")
    return "\n".join(lines) + "\n"
