"""Native vs real CybORG: the same scripted defenders on both engines, compared cell by cell.

A cell (red agent, policy, length) is *equivalent* when |mean_native - mean_cyborg| <= max(2% of |mean_cyborg|,
3 standard errors of the difference) — the tolerance of the fidelity tests.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from workflow_rl import seeding
from workflow_rl.envs.factory import make_vector_env, parse_red_agent
from workflow_rl.policies import POLICIES


@dataclass
class Cell:
    red: str
    policy: str
    length: int
    native_mean: float
    native_se: float
    cyborg_mean: float
    cyborg_se: float

    @property
    def diff(self) -> float:
        return self.native_mean - self.cyborg_mean

    @property
    def tolerance(self) -> float:
        return max(0.02 * abs(self.cyborg_mean), 3 * math.hypot(self.native_se, self.cyborg_se))

    @property
    def equivalent(self) -> bool:
        return abs(self.diff) <= self.tolerance


def running_returns(engine: str, red: str, policy: str, episodes: int, seed: int, lengths=(30, 50, 100),
                    n_envs: int | None = None, **engine_options) -> dict[int, np.ndarray]:
    """Blue returns after each of ``lengths`` steps of ``episodes`` episodes of max(lengths) steps, played in rounds
    of ``n_envs`` (default: all at once); round ``k`` resets its envs with the seed ``seed + 100_003 k``
    (``seeding.engine_round_seed``; env ``i``: that plus ``i``). The envs are built once and reset for each round: a
    reset with a seed starts the episode a freshly built env would (real CybORG builds in ~0.13 s an env, a quarter of a
    100-step episode's cost)."""
    horizon = max(lengths)
    pol = POLICIES[policy]
    rng = np.random.default_rng(seed)
    n = n_envs or episodes
    out = {L: [] for L in lengths}
    envs = {}
    try:
        for rnd, done in enumerate(range(0, episodes, n)):
            k = min(n, episodes - done)
            if k not in envs:
                envs[k] = make_vector_env(k, red, engine=engine, episode_length=horizon, **engine_options)
            env = envs[k]
            obs, _ = env.reset(seed=seeding.engine_round_seed(seed, rnd))
            ret = np.zeros(k)
            for t in range(horizon):
                obs, r, *_ = env.step(np.asarray(pol(t, obs, rng), np.int64))
                ret += r
                if t + 1 in out:
                    out[t + 1].append(ret.copy())
    finally:
        for env in envs.values():
            env.close()
    return {L: np.concatenate(v) for L, v in out.items()}


def episode_seeds(seed: int, episodes: int, n_envs: int | None = None) -> list[int]:
    """The reset seed of each episode :func:`running_returns` plays with ``seed`` and ``n_envs``: round ``k``'s env
    ``i`` resets with ``seeding.engine_round_seed(seed, k) + i`` (a vector env gives env ``i`` the seed plus ``i``)."""
    n = n_envs or episodes
    return [seeding.engine_round_seed(seed, e // n) + e % n for e in range(episodes)]


REFERENCE_COLUMNS = ("red", "policy", "episode", "seed", "length", "total_reward")
"""The columns of a reference file of real-CybORG returns (tests/data/cyborg_returns*.csv): one row per episode and
length, the blue return after that many steps of the episode."""


def reference_rows(red: str, policy: str, returns: dict[int, np.ndarray], seeds: list[int]) -> list[tuple]:
    """Rows of :data:`REFERENCE_COLUMNS` for one cell's episodes (``returns``: :func:`running_returns`' result),
    episode by episode, each length in turn. A return is a sum of rewards in tenths: one decimal holds it exactly."""
    lengths = sorted(returns)
    return [(red, policy, e, seed, L, round(float(returns[L][e]), 1)) for e, seed in enumerate(seeds) for L in lengths]


def write_reference_csv(path, rows: list[tuple]) -> None:
    """``rows`` (:func:`reference_rows`) as a reference CSV, atomically (a killed run leaves the last whole file)."""
    import csv

    from workflow_rl.files import atomic_write

    with atomic_write(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(REFERENCE_COLUMNS)
        w.writerows(rows)


def read_reference_csv(path) -> dict[tuple[str, str, int], np.ndarray]:
    """{(red, policy, length): the returns of its episodes, in episode order} of a reference CSV."""
    import csv

    cells: dict = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            cells.setdefault((r["red"], r["policy"], int(r["length"])), []).append(float(r["total_reward"]))
    return {k: np.array(v) for k, v in cells.items()}


def cyborg_reference(reds, policies, episodes: int, seed: int, out, scenario=None, progress=print) -> None:
    """Real CybORG's returns of ``policies`` against each red agent, ``episodes`` per cell, written to ``out`` (a
    reference CSV, rewritten after each cell) -- how tests/data/cyborg_returns_family.csv was played. One process,
    one in-process CybORG env per cell, episode ``e`` reset with seed ``seed + 100_003 e`` (:func:`running_returns`
    in rounds of one env: :func:`episode_seeds`), so two such runs side by side use the two cores without the
    vector env's workers (each spawned worker imports torch and CybORG again, ~30 s on a busy 2-core box). A cell
    already in ``out`` with ``episodes`` episodes is kept, so a killed run resumes where it stopped."""
    import csv
    import os as _os

    rows = []
    if _os.path.exists(out):
        with open(out, newline="") as f:
            rows = [(r["red"], r["policy"], int(r["episode"]), int(r["seed"]), int(r["length"]),
                     float(r["total_reward"])) for r in csv.DictReader(f)]
    done = {(r[0], r[1]) for r in rows if r[2] == episodes - 1}
    rows = [r for r in rows if (r[0], r[1]) in done]
    for red in (parse_red_agent(r) for r in reds):
        for policy in policies:
            if (red, policy) in done:
                continue
            cyb = running_returns("cyborg", red, policy, episodes, seed, n_envs=1, vectorization="sync",
                                  scenario=scenario)
            rows += reference_rows(red, policy, cyb, episode_seeds(seed, episodes, 1))
            write_reference_csv(out, rows)
            if progress:
                progress(f"  {red} / {policy}: " + ", ".join(f"{L}: {cyb[L].mean():.2f} ± {_se(cyb[L]):.2f}"
                                                              for L in sorted(cyb)))


def _se(x: np.ndarray) -> float:
    return float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else float("inf")


def parity(reds, policies, episodes: int, native_episodes: int = 20_000, seed: int = 0,
           vectorization: str = "shared_memory", start_method: str | None = None, scenario=None,
           progress=print, cyborg_csv=None) -> list[Cell]:
    """The cells of ``reds`` x ``policies`` x 30/50/100 steps on both engines. ``cyborg_csv``: also write the
    CybORG episodes' returns there (:data:`REFERENCE_COLUMNS`, rewritten after each cell), the form of the
    fidelity suite's references."""
    cells, rows = [], []
    workers = max(1, min(os.cpu_count() or 1, episodes))
    for red in (parse_red_agent(r) for r in reds):
        for policy in policies:
            if policy not in POLICIES:
                raise ValueError(f"unknown policy {policy!r}: use one of {', '.join(POLICIES)}")
            nat = running_returns("native", red, policy, native_episodes, seed)
            cyb = running_returns("cyborg", red, policy, episodes, seed + 1, n_envs=workers,
                                  vectorization=vectorization, start_method=start_method, scenario=scenario)
            for L in sorted(nat):
                cells.append(Cell(red, policy, L, float(nat[L].mean()), _se(nat[L]), float(cyb[L].mean()),
                                  _se(cyb[L])))
            if cyborg_csv:
                rows += reference_rows(red, policy, cyb, episode_seeds(seed + 1, episodes, workers))
                write_reference_csv(cyborg_csv, rows)
            if progress:
                progress(f"  {red} / {policy}: done")
    return cells


def markdown(cells: list[Cell]) -> str:
    lines = ["| red | policy | length | native | CybORG | diff | tolerance | verdict |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    for c in cells:
        lines.append(f"| {c.red} | {c.policy} | {c.length} | {c.native_mean:.2f} ± {c.native_se:.2f} | "
                     f"{c.cyborg_mean:.2f} ± {c.cyborg_se:.2f} | {c.diff:+.2f} | {c.tolerance:.2f} | "
                     f"{'equivalent' if c.equivalent else 'DIFFERENT'} |")
    ok = sum(c.equivalent for c in cells)
    lines.append(f"\n{ok} of {len(cells)} cells equivalent (|diff| <= max(2% of |CybORG mean|, 3 SE of the diff)).")
    return "\n".join(lines)
