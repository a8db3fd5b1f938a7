"""``runs.reports``: the jobs that compare two things in a Markdown table (``parity``, ``compare``), from Python.

:func:`parity_report` plays scripted defenders on the native and the real CybORG engine, cell by cell;
:func:`compare_report` pairs two evaluations of the same episodes. Each checks ``out`` before it runs and writes it
whole, marked as its command's (``files.write_report``), so the command line only prints what they return.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workflow_rl.files import check_out_file, write_report
from workflow_rl.sim import attackers


@dataclass
class Report:
    """A report job's table (as its file holds it, after the mark), the ``out`` it was written to (None without
    one) and whether every cell passed (``parity``: every cell equivalent)."""

    text: str
    written: str | Path | None = None
    passed: bool = True

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1


def parity_report(red_agents=attackers.cage2(attacking=True), policies=None, episodes: int = 200,
                  native_episodes: int = 20_000, seed: int = 0, vectorization: str = "shared_memory",
                  start_method: str | None = None, scenario=None, out: str | Path | None = None,
                  progress=print, cyborg_csv: str | Path | None = None) -> Report:
    """``workflow-rl parity``: the scripted ``policies`` (default: all six reference policies) against each red
    agent on both engines (``workflow_rl.parity``), ``episodes`` CybORG and ``native_episodes`` native episodes per
    cell; passed where every cell is equivalent. ``progress`` (None: silent) is told what runs. ``cyborg_csv``: also
    write the CybORG episodes' returns there, as a fidelity reference (tests/data/cyborg_returns*.csv)."""
    from workflow_rl.parity import markdown, parity
    from workflow_rl.policies import POLICIES

    policies = list(policies or POLICIES)
    unknown = sorted(set(policies) - set(POLICIES))
    if unknown:
        raise ValueError(f"unknown --policies {', '.join(unknown)}: use some of {', '.join(POLICIES)}")
    if out:
        check_out_file("--out", out, [scenario], mine="parity")
    if cyborg_csv:
        check_out_file("--cyborg-csv", cyborg_csv, [scenario, out])
    if progress:
        progress(f"parity: {len(policies)} policies x {len(red_agents)} red agents, {episodes} CybORG episodes "
                 f"and {native_episodes} native episodes per cell")
    cells = parity(red_agents, policies, episodes, native_episodes, seed, vectorization, start_method, scenario,
                   progress, cyborg_csv)
    text = markdown(cells) + "\n"
    if out:
        write_report(out, text, "parity")
    return Report(text, out or None, all(c.equivalent for c in cells))


def compare_report(a: str | Path, b: str | Path, modes: tuple[str, str] | None = None, any_workflow: bool = False,
                   common: bool = False, out: str | Path | None = None) -> Report:
    """``workflow-rl compare``: two evaluations of the same episodes (each an ``evaluate --out`` folder or its
    episodes.csv), paired episode by episode (``rl.episodes.compare``): B - A per cell with its 95% interval."""
    from workflow_rl.rl.episodes import compare, episodes_file_read, markdown, read_episodes

    if out:
        check_out_file("--out", out, [episodes_file_read(a), episodes_file_read(b)], mine="compare")
    rows = compare(read_episodes(a), read_episodes(b), tuple(modes) if modes else None, any_workflow, common)
    text = markdown(rows, a, b)
    if out:
        write_report(out, text, "compare")
    return Report(text, out or None)
