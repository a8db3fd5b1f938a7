"""What a run writes and shows: config.json, the training log, the summary, progress and TensorBoard."""
from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np

from workflow_rl.envs.factory import parse_red_agent
from workflow_rl.files import atomic_write
from workflow_rl.rl import reward
from workflow_rl.rl.config import TrainConfig
from workflow_rl.rl.schedule import passed_gate
from workflow_rl.workflow import Workflow

TERM_COLUMNS = [t.column for t in reward.TERMS]
"""Each reward term's mean episode return (``rl.reward.TERMS``: ``env_reward``, ``alignment_bonus``, ...)."""
LOG_COLUMNS = ["workflow_id", "workflow", "update", "episodes", "total_episodes", *TERM_COLUMNS,
               "total_reward", "compliance", "compliance_env_mean", "avg_fixes", "collection_time", "update_time",
               "sps", "global_step", "mean100", "policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac",
               "compliance_worst", "worst_workflow"]
"""``total_reward``: the mean of the episodes' summed reward terms. ``compliance_worst``, ``worst_workflow``: a run
across workflows' least compliant workflow over its last 20 episodes (``compliance.WorkflowWindow``); empty (NaN)
for one workflow."""


def episode_stats(fin: dict) -> dict:
    """Log columns of an update's finished episodes (``fin``: lists per finished episode), plus ``counted``: the
    compliant + violating fixes the batch compliance pools."""
    comp, viol = float(np.sum(fin["compliant"])), float(np.sum(fin["violations"]))
    counted = comp + viol
    per_env = [c / (c + v) for c, v in zip(fin["compliant"], fin["violations"]) if c + v > 0]
    return {
        "episodes": len(fin["env_return"]),
        **{t.column: mean_or_nan(fin[reward.returns_key(t)]) for t in reward.TERMS},
        "total_reward": mean_or_nan(reward.episode_total(fin)),
        "compliance": comp / counted if counted > 0 else float("nan"), "compliance_env_mean": mean_or_nan(per_env),
        "avg_fixes": mean_or_nan([c + v + nt for c, v, nt in zip(fin["compliant"], fin["violations"], fin["neutral"])]),
        "counted": counted,
    }


def write_config(out: Path, cfg: TrainConfig) -> None:
    """``out/config.json``: the run's settings, as ``TrainConfig.from_dict`` reads them back. Written atomically: a
    resume reads it as the run's marker, and a kill mid-write must not leave half of one."""
    out.mkdir(parents=True, exist_ok=True)
    with atomic_write(out / "config.json", "w") as f:
        f.write(json.dumps(cfg.to_dict(), indent=2, default=str))


TB_SCALARS = (*TERM_COLUMNS, "compliance", "sps", "policy_loss", "value_loss", "entropy",
              "approx_kl", "mean100")


class RunLog:
    """A run's ``training_log.csv`` (one row per update; ``prefix`` columns first, e.g. the search iteration) and,
    on request, its TensorBoard scalars. The file is opened at the first row: anew with a header for a run's first
    update (or when missing), else appended to, so a resumed run (its log trimmed to its checkpoint) continues it."""

    def __init__(self, out: Path, prefix: dict | None = None, tensorboard: bool = False):
        self.out, self.prefix = Path(out), dict(prefix or {})
        self._file = self._writer = self._tb = None
        self._tensorboard = tensorboard_writer_class() if tensorboard else None   # missing package: refused now

    def write(self, row: dict) -> None:
        if self._file is None:
            path = self.out / "training_log.csv"
            fresh = row["update"] == 1 or not path.exists()
            self.out.mkdir(parents=True, exist_ok=True)
            columns = list(self.prefix) + LOG_COLUMNS
            if not fresh:   # continue the file's own columns (a log begun by an older version has fewer)
                with open(path, newline="") as f:
                    columns = next(csv.reader(f), None) or columns
            self._file = open(path, "w" if fresh else "a", newline="")
            self._writer = csv.DictWriter(self._file, fieldnames=columns, extrasaction="ignore")
            if fresh:
                self._writer.writeheader()
        self._writer.writerow({**self.prefix, **row})
        self._file.flush()
        if self._tensorboard is not None:
            if self._tb is None:   # opened with the first row, like the CSV: a slot restarted on resume opens one
                self._tb = self._tensorboard(str(self.out / "tb"))
            for k in TB_SCALARS:
                if isinstance(row[k], float) and not math.isnan(row[k]):
                    self._tb.add_scalar(f"train/{k}", row[k], row["global_step"])

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._tb is not None:
            self._tb.close()
            self._tb = None


def run_summary(cfg: TrainConfig, workflow: Workflow | None, episodes: int, updates: int, compliance: float,
                stop_reason: str | None, recent, gate_episodes: int | None = None) -> dict:
    """What a finished (or stopped) training run reports."""
    return {
        "workflow": workflow.names if workflow else None,
        "red_agent": parse_red_agent(cfg.red_agent), "engine": cfg.engine,
        "episodes": episodes, "updates": updates,
        "compliance": None if math.isnan(compliance) else compliance,
        "compliant": passed_gate(stop_reason), "stop_reason": stop_reason,
        "gate_episodes": gate_episodes, "post_gate_episodes": cfg.post_gate_episodes,
        "mean100": mean_or_nan(list(recent)),
    }


def trim_log(path: Path, update: int) -> None:
    """Drop training-log rows written after ``update`` (a resumed run continues the log exactly), and a last row a
    failed write (a full disk) cut short: rows are flushed whole, so one without its line end is incomplete. The
    trimmed log replaces the old one atomically: a kill mid-rewrite must not lose the rows kept."""
    if not path.exists():
        return
    if not path.is_file():   # a FIFO or device under the log's name: reading it would wait for a writer forever
        raise ValueError(f"{path} is not a plain file: move it away to resume with a new log, or start again with "
                         "--overwrite")
    try:
        text = path.read_text()
        rows = list(csv.reader(io.StringIO(text[: text.rfind("\n") + 1])))
        if not rows:   # not even the header was written whole: the run's first row writes it anew
            path.unlink()
            return
        col = rows[0].index("update")
        keep = [rows[0]] + [r for r in rows[1:] if int(r[col]) <= update]
    except (ValueError, IndexError, csv.Error) as e:   # no update column, a word for a number, a short row
        raise ValueError(f"{path} is damaged ({type(e).__name__}: {e}): move it away to resume with a new log, "
                         "or start again with --overwrite") from None
    with atomic_write(path, "w", newline="") as f:
        csv.writer(f).writerows(keep)


def mean_or_nan(x) -> float:
    return float(np.mean(x)) if len(x) else float("nan")


def progress_bar(total: int, initial: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="ep", disable=not enabled, dynamic_ncols=True, leave=False)


def tensorboard_writer_class():
    """TensorBoard's ``SummaryWriter``, or a ValueError naming the package to install."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise ValueError("--tensorboard needs the tensorboard package: pip install 'workflow-rl[tb]'") from None
    return SummaryWriter
