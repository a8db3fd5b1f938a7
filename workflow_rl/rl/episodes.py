"""Per-episode results of an evaluation, and the paired comparison of two evaluations.

``episodes.csv`` (written by ``workflow-rl evaluate --out``), and ``workflow-rl compare`` of two evaluations of the same
episodes.

Why paired: two evaluations with the same episode seed play the same episodes (the same red-agent and environment
draws, ``rl.evaluate.Episodes``), so the episode-by-episode difference of their returns loses the variance the
episodes share. On CAGE2 that variance is most of it: a paired 95% interval is several times narrower than the two
cells' intervals compared side by side, which on real CybORG (seconds per episode) is the difference between an
answer and none.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np

from workflow_rl.rl.evaluate import ROUND_STRIDE, EvalResult, Episodes, across_seeds
from workflow_rl.files import atomic_write

FILE = "episodes.csv"
COLUMNS = ["engine", "mode", "red_agent", "length", "workflow", "episode_seed", "episode", "round", "slot", "return",
           "compliant", "violating"]
"""One row per episode of a cell. ``episode``: its index in the cell's seeded order, 0.., the key two evaluations
pair on; ``episode_seed``, ``round`` and ``slot``: which episode that is on its engine (``rl.evaluate.Episodes``),
checked equal before a pair is made; ``compliant``/``violating``: its fix counts under the workflow (empty without
one); ``workflow``: the workflow's codes, or ``none``."""
CELL = ("engine", "mode", "red_agent", "length", "workflow")
"""What names a cell (a row of ``evaluation.md`` or ``workflows.csv``)."""
NO_WORKFLOW = "none"
CHUNK = 65_536


@dataclass
class CellEpisodes:
    """One cell's rows of an ``episodes.csv``, in episode order."""
    seed: int
    places: np.ndarray     # (n, 2) int: round and env within it
    returns: np.ndarray    # (n,) float
    compliant: np.ndarray | None = None    # (n,) fix counts under the workflow; None: not counted
    violating: np.ndarray | None = None


def write_episodes(path: str | Path, cells: Iterable[tuple[str, str, str | None, EvalResult]]) -> int:
    """Write ``episodes.csv`` at ``path`` from (engine, mode, workflow codes or None, result) of each cell, each
    result carrying the episodes its statistics came from (``EvalResult.played``); returns the row count. Written
    whole or not at all (``files.atomic_write``)."""
    rows = 0
    with atomic_write(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(COLUMNS)
        for engine, mode, workflow, r in cells:
            p = r.played
            if p is None:
                raise ValueError(f"{engine} {mode} {r.red_agent} {r.length}: the result carries no episodes")
            head = [engine, mode, r.red_agent, r.length, workflow or NO_WORKFLOW, p.seed]
            rounds, slots = p.places()
            for lo in range(0, len(p.returns), CHUNK):   # in slices: a huge cell is not one Python list
                part = slice(lo, lo + CHUNK)
                cols = [range(lo, lo + len(p.returns[part])), rounds[part].tolist(), slots[part].tolist(),
                        p.returns[part].tolist()]
                if p.compliant is not None:
                    cols += [p.compliant[part].astype(np.int64).tolist(), p.violating[part].astype(np.int64).tolist()]
                blank = [] if p.compliant is not None else ["", ""]
                out.writerows(head + list(v) + blank for v in zip(*cols))
            rows += len(p.returns)
    return rows


def episodes_file(where: str | Path) -> Path:
    """The ``episodes.csv`` of an evaluation folder (or the file itself), refused in one message when absent."""
    p = Path(where)
    if not p.exists():
        raise ValueError(f"{p} does not exist: give an evaluation folder (`workflow-rl evaluate ... --out DIR`) or "
                         f"its {FILE}")
    f = p / FILE if p.is_dir() else p
    if not f.is_file():
        raise ValueError(f"{p} has no {FILE}: re-run `workflow-rl evaluate ... --out {p}` with a version that writes "
                         "it (the per-episode returns a paired comparison needs)")
    return f


def episodes_file_read(where: str | Path) -> Path | None:
    """The episodes.csv a command reads for its argument ``where`` (``compare A B``, ``evaluate --after DIR``), for
    the check that nothing it writes is its input; None where there is none (reading it then says so)."""
    try:
        return episodes_file(where)
    except ValueError:
        return None


def read_episodes(where: str | Path) -> dict[tuple, CellEpisodes]:
    """{(engine, mode, red agent, length, workflow): its episodes} of an evaluation folder's ``episodes.csv``; a
    file that is not one (columns missing, a value that does not parse, a cell's indices not 0..n-1) is refused."""
    f = episodes_file(where)
    cells: dict[tuple, list] = {}
    with open(f, newline="", encoding="utf-8-sig") as fh:   # a spreadsheet's byte-order mark is no column name
        reader = csv.DictReader(fh)
        # csv.Error: a field over csv's size limit (131,072 characters), a NUL byte; UnicodeDecodeError (a
        # ValueError): a binary file; TypeError: a row short of fields
        try:
            columns = reader.fieldnames or []
        except (ValueError, csv.Error) as e:
            raise ValueError(f"{f} line 1 is damaged ({e}): evaluate again to rewrite it") from None
        missing = [c for c in COLUMNS if c not in columns]
        if missing:
            raise ValueError(f"{f} is not an {FILE} of `workflow-rl evaluate` (no column {', '.join(missing)})")
        try:
            for row in reader:
                key = (row["engine"], row["mode"], row["red_agent"], int(row["length"]), row["workflow"])
                fixes = tuple(int(row[c]) if row[c] != "" else None for c in ("compliant", "violating"))
                cells.setdefault(key, []).append((int(row["episode_seed"]), int(row["episode"]), int(row["round"]),
                                                  int(row["slot"]), float(row["return"]), *fixes))
        except (TypeError, ValueError, csv.Error) as e:
            raise ValueError(f"{f} line {reader.line_num} is damaged ({e}): evaluate again to rewrite it") from None
    out = {}
    for key, rows in cells.items():
        seeds, index, rounds, slots, returns, compliant, violating = zip(*rows)
        counted = {c is not None for c in compliant + violating}
        if list(index) != list(range(len(index))) or len(set(seeds)) != 1 or not all(map(math.isfinite, returns)) \
                or len(counted) != 1:
            raise ValueError(f"{f}: the rows of {_name(key)} are damaged (episodes not 0..{len(index) - 1} in order, "
                             "several episode seeds, a non-finite return or fix counts in some rows only): evaluate "
                             "again to rewrite it")
        _check_cell(f, key, seeds[0], rounds, slots, returns, compliant if counted == {True} else None, violating)
        fixes = ((np.asarray(compliant, np.int64), np.asarray(violating, np.int64)) if counted == {True}
                 else (None, None))
        out[key] = CellEpisodes(seeds[0], np.stack([rounds, slots], 1), np.asarray(returns, float), *fixes)
    return out


def _check_cell(f: Path, key: tuple, seed: int, rounds, slots, returns, compliant, violating) -> None:
    """Every number of one cell's rows within what an evaluation writes, before any of it is used (as numpy's 64-bit
    integers, in a sum or a JSON report): its length an episode length, its seed a seed, rounds and envs within an
    evaluation's (``checks.MAX_EPISODES`` rounds of up to ``ranges.MAX_ENVS`` envs), each return one that
    ``length`` steps can score (each step's reward in ``[sim.native.WORST_REWARD, 0]``: an edited -1e308 would make
    the joined mean -Infinity) and each episode's fix counts at most one a step. One ValueError naming the file,
    the cell and the number otherwise (a 24-digit slot was an OverflowError deep in ``join``)."""
    from workflow_rl.checks import MAX_EPISODE_LENGTH, MAX_EPISODES, MAX_SEED, check_int, check_return
    from workflow_rl.ranges import MAX_ENVS

    length = key[3]
    columns = [("length", (length,), 1, MAX_EPISODE_LENGTH), ("episode_seed", (seed,), 0, MAX_SEED),
               ("round", rounds, 0, MAX_EPISODES - 1), ("slot", slots, 0, MAX_ENVS - 1)]
    if compliant is not None:
        columns += [("compliant", compliant, 0, length), ("violating", violating, 0, length),
                    ("compliant + violating", [a + b for a, b in zip(compliant, violating)], 0, length)]
    try:
        for name, values, low, high in columns:
            for v in (min(values), max(values)):   # the extremes (Python's integers: no overflow) stand for all
                check_int(name, v, low, high)
        for v in (min(returns), max(returns)):
            check_return("return", v, length)
    except ValueError as e:
        raise ValueError(f"{f}: the rows of {_name(key)} are damaged ({e}): evaluate again to rewrite it") from None


def join(parts: list[dict[tuple, CellEpisodes]], labels: list[str] | None = None) -> dict[tuple, Episodes]:
    """The cells of evaluations that played consecutive episodes (:func:`read_episodes` of each, in order), each
    cell as one :class:`~workflow_rl.rl.evaluate.Episodes`: what one evaluation of all their episodes played.

    Part ``k`` continues a cell when it starts at the round the parts before it ended on: its episode seed is the
    first part's plus ``ROUND_STRIDE`` times the rounds before it (``rl.evaluate``: round r is seeded ``seed +
    ROUND_STRIDE r``), its rounds are as large (or it is the last part and one round's first envs), and the parts
    before it played whole rounds (so ``workflow-rl evaluate --after A`` plays the episodes that follow A's). Every
    cell is the first part's; a later part may continue some of them only (a red agent continued by one part, the
    other by another). The joined cell is what one evaluation played in rounds of that size: on real CybORG (rounds
    of ``--workers``) one long run's episodes; on the native engine, whose round holds every episode of a run (up to
    4,096), parts of 500 are rounds of 500, not the episodes of one run of 1,000 (``compare`` tells them apart).
    Why join rather than run once: real CybORG plays seconds per episode, so a protocol of 1,000 episodes is hours
    that one machine, one session or one kill should not have to hold.

    Refused (ValueError, naming the part and the cell): a cell not in the first part, a cell whose part does not
    continue it (another episode seed, round size or an unfinished round before it), fix counts in some parts only,
    or a part whose cells were not dealt in rounds (an evaluation across workflows)."""
    labels = labels or [f"part {k + 1}" for k in range(len(parts))]
    out: dict[tuple, Episodes] = {}
    kept: dict[tuple, list[tuple[str, CellEpisodes]]] = {}
    for label, cells in zip(labels, parts):
        for key, c in cells.items():
            if key not in parts[0]:
                raise ValueError(f"{label}: {_name(key)} is not in {labels[0]}: a part continues cells of the first "
                                 "(`evaluate --after` plays only those), and a cell of its own is no continuation")
            kept.setdefault(key, []).append((label, c))
    for key, held in kept.items():
        first = held[0][1]
        size = round_size(first, held[0][0], key)
        rounds = 0
        for i, (label, c) in enumerate(held):
            got = round_size(c, label, key)
            last_round = i + 1 == len(held) and got == len(c.returns) < size   # the first envs of one round
            if got != size and not last_round:
                raise ValueError(f"{label}: {_name(key)} was played in rounds of {got} envs, {held[0][0]} in rounds "
                                 f"of {size}: {_same_rounds(key[0], size)}")
            if c.seed != first.seed + ROUND_STRIDE * rounds:
                raise ValueError(f"{label}: {_name(key)} does not continue {held[i - 1][0] if i else label}: its "
                                 f"episode seed is {c.seed}, the episodes that follow are seeded "
                                 f"{first.seed + ROUND_STRIDE * rounds} (give the parts in order, the first first, "
                                 "each evaluated with --after the part before)")
            if (c.compliant is None) != (first.compliant is None):
                raise ValueError(f"{label}: {_name(key)} has fix counts in some parts only: join evaluations under "
                                 "the same workflow")
            if i + 1 < len(held) and len(c.returns) % size:
                raise ValueError(f"{label}: {_name(key)} ends inside a round ({len(c.returns)} episodes in rounds of "
                                 f"{size}): only the last part may; join it last or evaluate whole rounds")
            rounds += -(-len(c.returns) // size)
        cat = (lambda f: None if first.compliant is None else np.concatenate([getattr(c, f) for _, c in held]))
        out[key] = Episodes(first.seed, size, np.concatenate([c.returns for _, c in held]), cat("compliant"),
                            cat("violating"))
    return out


def next_seed(cells: dict[tuple, CellEpisodes], keys: list[tuple], size: int, label: str,
              one_round: bool = False) -> int:
    """The episode seed of the episodes that follow the cells ``keys`` of ``cells`` (:func:`read_episodes` of an
    evaluation ``label``), for a part played in rounds of ``size`` envs: their seed plus ``ROUND_STRIDE`` times the
    rounds they played, which :func:`join` then accepts as their continuation. ``one_round``: the part is one round
    of ``size`` envs, so it may be smaller than the earlier rounds (their first envs: the rest of an evaluation
    that lacks less than a round). Refused (ValueError): a cell the evaluation does not hold, cells that do not end
    on one whole round of one seed (a ``--time-limit`` cut them at different rounds), or rounds of another size."""
    missing = [k for k in keys if k not in cells]
    if missing:
        raise ValueError(f"--after {label}: it has no {_name(missing[0])} cell to continue: continue the cells it "
                         f"holds ({'; '.join(sorted(map(_name, cells)))}), or evaluate that cell on its own")
    ends = set()
    for key in keys:
        c = cells[key]
        got = round_size(c, label, key, "--after")
        if got != size and not (one_round and size < got):
            raise ValueError(f"--after {label}: its {_name(key)} episodes were played in rounds of {got} envs and "
                             f"these would be in rounds of {size}: {_same_rounds(key[0], got)}")
        if len(c.returns) % got:
            raise ValueError(f"--after {label}: {_name(key)} ends inside a round ({len(c.returns)} episodes in rounds "
                             f"of {got}): nothing can continue it; evaluate it again in whole rounds")
        ends.add((c.seed, len(c.returns) // got))
    if len(ends) != 1:
        raise ValueError(f"--after {label}: the cells to continue end at different rounds or seeds "
                         f"({', '.join(f'seed {a}, {b} rounds' for a, b in sorted(ends))}; a --time-limit cut them): "
                         "continue them in separate evaluations (--red-agents, --mode)")
    seed, rounds = ends.pop()
    return seed + ROUND_STRIDE * rounds


def _same_rounds(engine: str, size: int) -> str:
    """How to play a part in rounds of ``size`` envs, as the part before (``rl.evaluate.round_size``)."""
    return (f"evaluate it with --workers {size} and at least {size} --episodes" if engine == "cyborg" else
            f"evaluate it with --episodes {size} (a native round holds all of an evaluation's episodes, up to 4,096)")


def round_size(c: CellEpisodes, label: str, key: tuple, flag: str = "") -> int:
    """The envs per round ``c``'s episodes were played in (``rl.evaluate.Episodes``, stride 1): its largest slot
    plus one; a cell whose places are not consecutive rounds of that size is refused."""
    size = int(c.places[:, 1].max()) + 1
    i = np.arange(len(c.returns))
    if not (np.array_equal(c.places[:, 0], i // size) and np.array_equal(c.places[:, 1], i % size)):
        raise ValueError(f"{flag + ' ' if flag else ''}{label}: {_name(key)}'s episodes were not played in "
                         "consecutive rounds (an evaluation across workflows): only the cells `workflow-rl evaluate` "
                         "plays under one workflow (or none) continue and join")
    return size


def _name(key: tuple) -> str:
    engine, mode, red, length, workflow = key
    return f"{engine} {mode} {red} {length}" + ("" if workflow in (None, NO_WORKFLOW) else f" under {workflow}")


def compare(a: dict[tuple, CellEpisodes], b: dict[tuple, CellEpisodes], modes: tuple[str, str] | None = None,
            any_workflow: bool = False, common: bool = False) -> list[dict]:
    """Pair the cells of two evaluations (:func:`read_episodes`) episode by episode: per cell both hold (same
    engine, mode, red agent, length and workflow), the paired episodes ``n``, the two mean returns and the mean of
    B - A with its Student-t 95% half-width (``rl.evaluate.across_seeds``, the episodes the samples).

    ``modes`` (MODE_A, MODE_B): pair A's cells of MODE_A with B's of MODE_B (greedy against planned, from one folder
    or two). ``any_workflow``: pair regardless of the workflow (an agent under a workflow against an unconstrained
    one: the price of compliance on the same episodes); each file must then hold one workflow per cell.

    Refused (ValueError): no cell pairs (the message says which of engine, mode, red agent, length and workflow
    differ); a pair from different episode seeds; a pair whose episode counts differ, unless ``common``, which pairs
    the episodes both played (the first ones: an evaluation cut short by ``--time-limit``); or an index that is a
    different episode in the two (rounds of different sizes: ``--workers`` on real CybORG, a different workflow
    list)."""
    ka, kb = _project(a, modes[0] if modes else None, any_workflow, "A"), \
        _project(b, modes[1] if modes else None, any_workflow, "B")
    shared = [k for k in ka if k in kb]
    if not shared:
        raise ValueError(_no_pairs(list(ka.values()), list(kb.values()), modes, any_workflow))
    out = []
    for k in shared:
        (key_a, ca), (key_b, cb) = ka[k], kb[k]
        name = _name(key_a)
        if ca.seed != cb.seed:
            raise ValueError(f"{name}: A's episodes come from episode seed {ca.seed}, B's from {cb.seed}: they are "
                             "different episodes; evaluate both with the same --episode-seed")
        n = min(len(ca.returns), len(cb.returns))
        if len(ca.returns) != len(cb.returns) and not common:
            raise ValueError(f"{name}: A has {len(ca.returns)} episodes and B {len(cb.returns)}: give --common to "
                             f"pair the first {n} (the episodes both played), or evaluate both with the same "
                             "--episodes")
        moved = np.flatnonzero((ca.places[:n] != cb.places[:n]).any(1))
        if len(moved):
            i = int(moved[0])
            raise ValueError(f"{name}: episode {i} is not the same episode in A (round {ca.places[i, 0]}, env "
                             f"{ca.places[i, 1]}) and B (round {cb.places[i, 0]}, env {cb.places[i, 1]}): the "
                             "evaluations played rounds of different sizes (--workers on real CybORG, a different "
                             "workflow list or --episodes across workflows); evaluate both with the same settings")
        diff = across_seeds((cb.returns[:n] - ca.returns[:n]).tolist())
        out.append({"engine": key_a[0], "red_agent": key_a[2], "length": key_a[3], "mode_a": key_a[1],
                    "mode_b": key_b[1], "workflow_a": key_a[4], "workflow_b": key_b[4], "n": n,
                    "mean_a": float(ca.returns[:n].mean()), "mean_b": float(cb.returns[:n].mean()),
                    "diff": diff["mean"], "ci95": diff["ci95"]})
    return out


def _project(cells: dict[tuple, CellEpisodes], mode: str | None, any_workflow: bool,
             label: str) -> dict[tuple, tuple[tuple, CellEpisodes]]:
    """{the key a cell pairs on: (its full key, its episodes)}: without the mode when ``mode`` picks one, without
    the workflow with ``any_workflow``."""
    out = {}
    for key, c in cells.items():
        if mode is not None and key[1] != mode:
            continue
        k = (key[0], None if mode else key[1], key[2], key[3], None if any_workflow else key[4])
        if k in out:
            raise ValueError(f"--any-workflow pairs files of one workflow per cell, and {label} holds {out[k][0][4]} "
                             f"and {key[4]} for {_name(key[:4] + (None,))}: compare workflows one at a time without "
                             "it")
        out[k] = (key, c)
    return out


def _no_pairs(a: list[tuple], b: list[tuple], modes, any_workflow: bool) -> str:
    """What keeps two files' cells apart, field by field."""
    fields = [(0, "engines"), (1, "modes"), (2, "red agents"), (3, "lengths"), (4, "workflows")]
    skip = {1} if modes else set()
    skip |= {4} if any_workflow else set()
    differ = []
    for i, what in fields:
        if i in skip:
            continue
        va, vb = sorted({str(k[i]) for k, _ in a}), sorted({str(k[i]) for k, _ in b})
        if not set(va) & set(vb):
            differ.append(f"{what} {', '.join(va) or '-'} in A, {', '.join(vb) or '-'} in B")
    if modes:
        for label, cells, mode in (("A", a, modes[0]), ("B", b, modes[1])):
            if not cells:
                differ.insert(0, f"{label} has no cell of mode {mode}")
    why = "; ".join(differ) or "no (engine, mode, red agent, length, workflow) is in both"
    hints = (["pair two modes with --modes MODE_A MODE_B"] if "modes" in why and not modes else []) + \
        (["pair different workflows with --any-workflow"] if "workflows" in why else [])
    return f"no cell of A pairs with one of B ({why}): compare evaluations of the same cells" + \
        "".join(f", or {h}" for h in hints)


def markdown(rows: list[dict], label_a: str, label_b: str) -> str:
    """The paired comparison as a Markdown table, one row per cell pair."""
    lines = ["# Paired comparison: B - A, episode by episode", "", f"A: {label_a}  ", f"B: {label_b}", "",
             "Each cell's episodes are the same episodes in A and B (same episode seed, index and place); the 95% "
             "interval is Student's t over the per-episode differences.", "",
             "| engine | red agent | length | mode | workflow | n | A | B | B - A | 95% CI |",
             "|---|---|---:|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        mode = r["mode_a"] if r["mode_a"] == r["mode_b"] else f"{r['mode_a']} / {r['mode_b']}"
        wf = r["workflow_a"] if r["workflow_a"] == r["workflow_b"] else f"{r['workflow_a']} / {r['workflow_b']}"
        ci = "n/a" if math.isnan(r["ci95"]) else f"± {r['ci95']:.2f}"
        lines.append(f"| {r['engine']} | {r['red_agent']} | {r['length']} | {mode} | {wf} | {r['n']} | "
                     f"{r['mean_a']:.2f} | {r['mean_b']:.2f} | {r['diff']:+.2f} | {ci} |")
    return "\n".join(lines) + "\n"
