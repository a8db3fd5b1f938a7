"""Per-step fidelity: where red sits, host by host, native vs real CybORG.

Returns can agree while the engines disagree about *where* red is (a return sums 100 steps and 13 hosts, so errors
cancel). Here each engine plays the scripted reference defenders against a red agent and records, after every step,
the true red access per host (``info["red_access"]``: CybORG's session table on the real engine). A *panel* is one
(red agent, defender) pair; for each we keep

- the **curve**: per step ``t`` (0-based; the state after the ``t+1``-th step) and host, how many episodes red
  holds it at level ``user`` (any session) or ``privileged`` (a root/SYSTEM session);
- the **late window** (``t`` in 50..99, the last 50 steps): per host, the sum and sum of squares over episodes of the
  number of late steps held, which gives the per-episode late-window share's mean and variance exactly, so two
  engines can be compared by a two-sample z over episodes from counts alone.

The CybORG side is long (≈ 0.2 s per episode per core), so it runs in worker processes over *shards* (a panel's
episodes ``first..first+n-1``), each written atomically to its own file as soon as it is done: a killed run keeps
every finished shard, and a rerun skips them. Shards are scheduled chunk-major across panels, so a run cut short
leaves every panel with about the same number of episodes.
"""
from __future__ import annotations

import csv
import math
import multiprocessing as mp
import os
import re
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from workflow_rl import seeding
from workflow_rl.checks import MAX_EPISODES, check_int
from workflow_rl.interrupt import terminate_as_interrupt
from workflow_rl.multitest import holm
from workflow_rl.policies import POLICIES
from workflow_rl.files import atomic_write, path_kind
from workflow_rl.sim import attackers
from workflow_rl.sim import tables as T

HORIZON = 100
LATE = slice(50, 100)
"""The late window: steps 50..99 (0-based), where red's position has settled under every reference defender."""
LATE_STEPS = LATE.stop - LATE.start
LEVELS = ("user", "privileged")
"""``user``: red holds any session on the host (access >= 1); ``privileged``: a root/SYSTEM session (access == 2)."""
FLAG_POINTS, FLAG_Z = 1.5, 3.0
"""Issue K's bar: a host is flagged when its late-window shares differ by more than 1.5 points at |z| > 3."""
CSV_COLUMNS = ("red", "policy", "level", "row", "episodes") + T.HOSTS


# ------------------------------------------------------------------------------------------------------- counts
@dataclass
class PanelCounts:
    """Everything the comparison needs about one panel's episodes, as integer counts (mergeable, storable)."""

    red: str
    policy: str
    episodes: int
    curve: np.ndarray = field(repr=False)     # (2, HORIZON, 13) episodes holding the host at each level and step
    late_sum: np.ndarray = field(repr=False)  # (2, 13) sum over episodes of late steps held
    late_sq: np.ndarray = field(repr=False)   # (2, 13) sum over episodes of (late steps held)**2

    @classmethod
    def from_access(cls, red: str, policy: str, access: np.ndarray) -> "PanelCounts":
        """Counts of ``access`` (episodes, HORIZON, 13) int8 (0 none, 1 user, 2 privileged)."""
        access = np.asarray(access)
        if access.ndim != 3 or access.shape[1:] != (HORIZON, T.N_HOSTS):
            raise ValueError(f"access must be (episodes, {HORIZON}, {T.N_HOSTS}), got {access.shape}")
        held = np.stack([access >= T.ACCESS_USER, access >= T.ACCESS_PRIVILEGED]).astype(np.int64)  # (2, E, H, 13)
        late = held[:, :, LATE].sum(axis=2)                                                       # (2, E, 13)
        return cls(red, policy, access.shape[0], held.sum(axis=1), late.sum(axis=1), (late ** 2).sum(axis=1))

    def __add__(self, other: "PanelCounts") -> "PanelCounts":
        if (self.red, self.policy) != (other.red, other.policy):
            raise ValueError(f"cannot merge panel {other.red}/{other.policy} into {self.red}/{self.policy}")
        return PanelCounts(self.red, self.policy, self.episodes + other.episodes, self.curve + other.curve,
                           self.late_sum + other.late_sum, self.late_sq + other.late_sq)

    def share(self, level: int) -> np.ndarray:
        """(HORIZON, 13) share of episodes in which red holds each host at ``level`` (index into LEVELS)."""
        return self.curve[level] / self.episodes

    def late(self, level: int) -> tuple[np.ndarray, np.ndarray]:
        """(mean, variance over episodes) of the per-episode late-window share per host, each (13,).

        The share of episode e is x_e = c_e / 50 with c_e the late steps held; mean = Σc / (50 n) and the unbiased
        variance (Σc² − (Σc)²/n) / (50² (n − 1)) — exact from the stored integer sums."""
        n, s, q = self.episodes, self.late_sum[level].astype(float), self.late_sq[level].astype(float)
        mean = s / (LATE_STEPS * n)
        var = (q - s * s / n) / (LATE_STEPS ** 2 * (n - 1)) if n > 1 else np.full(T.N_HOSTS, np.inf)
        return mean, np.maximum(var, 0.0)


def write_counts_csv(panels: list[PanelCounts], path: str | os.PathLike) -> None:
    """Panels as CSV, atomically: per (panel, level) 100 curve rows (row = step), then ``late_sum``, ``late_sumsq``."""
    with atomic_write(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for p in panels:
            for li, level in enumerate(LEVELS):
                for t in range(HORIZON):
                    w.writerow([p.red, p.policy, level, t, p.episodes, *p.curve[li, t].tolist()])
                w.writerow([p.red, p.policy, level, "late_sum", p.episodes, *p.late_sum[li].tolist()])
                w.writerow([p.red, p.policy, level, "late_sumsq", p.episodes, *p.late_sq[li].tolist()])


def read_counts_csv(path: str | os.PathLike) -> dict[tuple[str, str], PanelCounts]:
    """The panels of a file written by :func:`write_counts_csv`, keyed by (red, policy)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no curve counts at {path}: run `workflow-rl curves` to make them")
    raw: dict = {}
    columns = ()
    with open(path, newline="", encoding="utf-8-sig") as f:   # a BOM is no column name
        reader = csv.DictReader(f)
        try:
            columns = tuple(reader.fieldnames or ())
            for r in reader if columns == CSV_COLUMNS else ():
                _read_counts_row(r, raw)
        except (KeyError, ValueError, TypeError, IndexError, csv.Error) as e:
            # a short row (None cells), a word where a count belongs, an unknown level or step, a field past csv's
            # size limit, bytes that are not text: the file was cut or edited; it is made again, not repaired
            raise ValueError(f"{path} is damaged near line {max(1, reader.line_num)} ({type(e).__name__}: {e}): make "
                             "it again with `workflow-rl curves`") from None
    if columns != CSV_COLUMNS:
        raise ValueError(f"{path} is not a curve-counts file (columns {', '.join(CSV_COLUMNS)})")
    for key, d in raw.items():   # a file cut at a line end reads cleanly: its missing rows would count as zeros
        if len(d.pop("rows")) != len(LEVELS) * (HORIZON + 2):
            raise ValueError(f"{path} is damaged: the panel {key[0]}/{key[1]} lacks rows (each level has {HORIZON} "
                             "steps, late_sum and late_sumsq): make it again with `workflow-rl curves`")
    return {k: PanelCounts(k[0], k[1], **v) for k, v in raw.items()}


def _read_counts_row(r: dict, raw: dict) -> None:
    """Add one row of a curve-counts file to ``raw`` (per (red, policy): episodes and the three count arrays)."""
    key = (r["red"], r["policy"])
    episodes = check_int("episodes", int(r["episodes"]), 1, MAX_EPISODES)
    d = raw.setdefault(key, {"episodes": episodes, "curve": np.zeros((2, HORIZON, T.N_HOSTS), np.int64),
                             "late_sum": np.zeros((2, T.N_HOSTS), np.int64),
                             "late_sq": np.zeros((2, T.N_HOSTS), np.int64), "rows": set()})
    if episodes != d["episodes"]:
        raise ValueError(f"the panel {key[0]}/{key[1]} says {d['episodes']} episodes and here {episodes}")
    li = LEVELS.index(r["level"])
    # what n episodes can count (a step held in 0..n episodes; late steps held 0..50 an episode), checked as Python
    # integers: a 24-digit count was an OverflowError in numpy, -5 or more than n a share outside 0..1
    most_of = {"late_sum": episodes * LATE_STEPS, "late_sumsq": episodes * LATE_STEPS ** 2}
    most = most_of.get(r["row"], episodes)
    what = r["row"] if r["row"] in most_of else f"step {r['row']}"
    vals = np.array([check_int(f"the {what} count of {h}", int(r[h]), 0, most) for h in T.HOSTS], np.int64)
    if r["row"] == "late_sum":
        d["late_sum"][li] = vals
    elif r["row"] == "late_sumsq":
        d["late_sq"][li] = vals
    else:
        t = int(r["row"])
        if not 0 <= t < HORIZON:
            raise ValueError(f"step {t} is outside 0..{HORIZON - 1}")
        d["curve"][li, t] = vals
    d["rows"].add((li, r["row"]))


# ------------------------------------------------------------------------------------------------------ engines
def native_counts(red: str, policy: str, episodes: int, seed: int, batch: int = 8192) -> PanelCounts:
    """``episodes`` native episodes of ``policy`` vs ``red``, in rounds of at most ``batch`` envs."""
    from workflow_rl.sim import native as N

    total = None
    done, rnd = 0, 0
    while done < episodes:
        k = min(batch, episodes - done)
        s, b = N.allocate_state(k), N.allocate_buffers(k)
        N.seed_state(s, seeding.engine_round_seed(seed, rnd), attackers.kind_of(red))
        N.reset_envs(s, b)
        rng = np.random.default_rng([seed, rnd])
        obs = b.obs.copy()
        access = np.zeros((k, HORIZON, T.N_HOSTS), np.int8)
        for t in range(HORIZON):
            N.step(s, np.asarray(POLICIES[policy](t, obs, rng), np.int64), b, HORIZON, True)
            obs = b.obs.copy()
            access[:, t] = np.where(b.truncated[:, None], b.final_access, b.access)
        part = PanelCounts.from_access(red, policy, access)
        total = part if total is None else total + part
        done += k
        rnd += 1
    return total


def episode_seeds(seed: int, episode: int) -> tuple[int, np.random.Generator]:
    """CybORG env seed and the defender's sampling stream of a panel's episode ``episode``: a function of (seed,
    episode) only, so a shard's result does not depend on which worker ran it or in which order."""
    ss = np.random.SeedSequence([seed, episode])
    return int(ss.generate_state(1, np.uint32)[0]), np.random.default_rng(ss.spawn(1)[0])


_WORKER_ENVS: dict = {}


def cyborg_access(red: str, policy: str, seed: int, first: int, n: int, scenario=None) -> np.ndarray:
    """(n, HORIZON, 13) true red access of CybORG episodes ``first..first+n-1`` of a panel (one env per process,
    kept between calls)."""
    from workflow_rl.envs.cyborg import CybORGEnv

    env = _WORKER_ENVS.get(red)
    if env is None:
        env = _WORKER_ENVS[red] = CybORGEnv(red, HORIZON + 1, scenario)
    out = np.zeros((n, HORIZON, T.N_HOSTS), np.int8)
    for j in range(n):
        env_seed, rng = episode_seeds(seed, first + j)
        obs, _ = env.reset(seed=env_seed)
        for t in range(HORIZON):
            obs, _r, _term, _trunc, info = env.step(int(POLICIES[policy](t, obs[None], rng)[0]))
            out[j, t] = info["red_access"]
    return out


def _run_shard(job: tuple) -> tuple[tuple, np.ndarray, float]:
    t0 = time.perf_counter()
    red, policy, seed, first, n, scenario = job
    return job, cyborg_access(red, policy, seed, first, n, scenario), time.perf_counter() - t0


def _init_worker() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the parent handles Ctrl-C and stops the pool


# ------------------------------------------------------------------------------------------------------- shards
_SHARD = re.compile(r"^(?P<red>\w+)__(?P<policy>\w+)__(?P<first>\d+)_(?P<n>\d+)\.npz$")


def shard_path(folder: Path, red: str, policy: str, first: int, n: int) -> Path:
    return folder / f"{red}__{policy}__{first:06d}_{n}.npz"


def write_shard(path: Path, access: np.ndarray, seed: int) -> None:
    """One shard, atomically (a temporary file renamed into place): a kill never leaves half a shard."""
    with atomic_write(path, "wb") as f:
        np.savez_compressed(f, access=access, seed=np.int64(seed))


def load_shards(folder: str | os.PathLike, seed: int | None = None) -> dict[tuple[str, str], PanelCounts]:
    """Every finished shard in ``folder`` merged per panel; ValueError if a shard was made with another seed."""
    out: dict = {}
    spans: dict = {}
    for p in sorted(Path(folder).glob("*.npz")):
        m = _SHARD.match(p.name)
        if not m:
            continue
        key, first, n = (m["red"], m["policy"]), int(m["first"]), int(m["n"])
        try:   # what a name --episodes can give (one of 10**12 episodes was a set of 10**12 numbers: a hang)
            check_int("its first episode", first, 0, MAX_EPISODES - 1)
            check_int("its episodes", n, 1, MAX_EPISODES - first)
        except ValueError as e:
            raise ValueError(f"shard {p} is no shard of `workflow-rl curves` ({e}): remove it") from None
        spans.setdefault(key, []).append((first, first + n, p))
    for key, held in spans.items():   # episode ranges, sorted: each must end before the next starts
        held.sort(key=lambda s: s[:2])
        for (_, end, _), (first, _, p) in zip(held, held[1:]):
            if first < end:
                raise ValueError(f"shard {p.name} overlaps another shard of {key[0]}/{key[1]} in {folder} (made "
                                 "with another --shard-episodes?): keep one --shard-episodes per --out folder")
    for key, held in spans.items():
        for first, end, p in sorted(held, key=lambda s: s[2]):
            made, access = _read_shard(p, end - first)
            if seed is not None and made != seed:
                raise ValueError(f"shard {p} was made with --seed {made}, not {seed}: use that seed or another --out")
            part = PanelCounts.from_access(key[0], key[1], access)
            out[key] = part if key not in out else out[key] + part
    return out


def _read_shard(path: Path, episodes: int) -> tuple[int, np.ndarray]:
    """(seed, access) of one shard file, which must hold the ``episodes`` episodes its name says; a truncated,
    empty or foreign file is one ValueError naming the fix (shards are written atomically, so only a hand or
    another program makes one)."""
    if not path.is_file():   # a FIFO or device named like a shard: opening it would wait for a writer forever
        raise ValueError(f"shard {path} is {path_kind(path)}, not a shard: remove it and run again without "
                         "--report-only to collect it anew")
    try:
        with np.load(path, allow_pickle=False) as z:
            seed, access = int(z["seed"]), np.asarray(z["access"])
    except Exception as e:  # noqa: BLE001 - zip, npz and array errors alike mean the file is damaged
        raise ValueError(f"shard {path} is damaged ({type(e).__name__}: {e}): delete it and run again without "
                         "--report-only to collect it anew") from None
    if access.shape != (episodes, HORIZON, T.N_HOSTS) or not np.isin(access, (0, 1, 2)).all():
        raise ValueError(f"shard {path} is damaged (access of shape {access.shape}, not ({episodes}, {HORIZON}, "
                         f"{T.N_HOSTS}) levels 0-2): delete it and run again without --report-only to collect it anew")
    return seed, access


MAX_SHARDS = 100_000
"""The most shard files one run plans: the plan is a list (and a folder) of them, so ``--episodes 10**12`` would
hang building it before the first episode ran; at 0.2 s per CybORG episode, 100,000 shards of 50 is a year of
one core."""


def plan_shards(reds, policies, episodes: int, shard_episodes: int, seed: int, scenario=None) -> list[tuple]:
    """Shard jobs (red, policy, seed, first, n, scenario), chunk-major: every panel's first chunk, then every
    panel's second, ... so a run cut short leaves the panels balanced."""
    n = -(-episodes // shard_episodes) * len(reds) * len(policies)
    if n > MAX_SHARDS:
        raise ValueError(f"--episodes {episodes:,} in shards of {shard_episodes:,} for {len(reds) * len(policies)} "
                         f"panel(s) is {n:,} shard files, more than {MAX_SHARDS:,}: lower --episodes or raise "
                         "--shard-episodes")
    return [(red, policy, seed, first, min(shard_episodes, episodes - first), scenario)
            for first in range(0, episodes, shard_episodes) for red in reds for policy in policies]


def _say(message: str) -> None:
    print(message, flush=True)   # a log file of a long run shows each shard as it lands


def collect_cyborg(reds, policies, episodes: int, out: str | os.PathLike, workers: int = 1, seed: int = 0,
                   shard_episodes: int = 50, scenario=None, progress=_say) -> int:
    """Run the CybORG shards missing from ``out/shards``; returns how many ran. ``workers`` processes (spawned:
    forking a parent with numba/torch thread pools can deadlock), or in-process with ``workers == 1``."""
    folder = Path(out) / "shards"
    plan = plan_shards(reds, policies, episodes, shard_episodes, seed, scenario)
    folder.mkdir(parents=True, exist_ok=True)
    load_shards(folder, seed)  # refuses a folder made with another seed before any work
    jobs = [j for j in plan if not shard_path(folder, j[0], j[1], j[3], j[4]).exists()]
    total = len(plan)
    if progress:
        progress(f"CybORG: {total - len(jobs)} of {total} shards already done, {len(jobs)} to run on {workers} "
                 f"worker(s)")
    if not jobs:
        return 0
    if scenario is not None or workers > 1:
        from workflow_rl.envs.cyborg import install_scenario

        install_scenario(scenario)   # once, in the parent: workers then find the data in place
    t0 = time.perf_counter()

    def done(i, job, access, secs):
        write_shard(shard_path(folder, job[0], job[1], job[3], job[4]), access, seed)
        if progress:
            elapsed = time.perf_counter() - t0
            progress(f"  shard {i + 1}/{len(jobs)}: {job[0]}/{job[1]} episodes {job[3]}-{job[3] + job[4] - 1} "
                     f"({secs:.1f} s; {elapsed:.0f} s elapsed, ~{elapsed / (i + 1) * (len(jobs) - i - 1):.0f} s to go)")

    if workers == 1:
        for i, job in enumerate(jobs):
            done(i, *_run_shard(job))
        return len(jobs)
    pool = mp.get_context("spawn").Pool(workers, initializer=_init_worker)
    try:
        with terminate_as_interrupt():   # a `timeout` kill stops the workers too; finished shards are kept
            for i, (job, access, secs) in enumerate(pool.imap_unordered(_run_shard, jobs, chunksize=1)):
                done(i, job, access, secs)
    finally:
        pool.terminate()
        pool.join()
    return len(jobs)


# --------------------------------------------------------------------------------------------------- comparison
@dataclass
class HostRow:
    """One host of one panel at one level: late-window shares of both engines and their two-sample z."""

    red: str
    policy: str
    level: str
    host: str
    native_n: int
    native: float
    cyborg_n: int
    cyborg: float
    se: float          # standard error of the difference
    z: float           # (native - cyborg) / se; nan where both engines hold one constant share
    p: float           # two-sided normal p-value
    holm: bool = False  # rejected by Holm's step-down at the family level ALPHA

    @property
    def points(self) -> float:
        return 100.0 * (self.native - self.cyborg)

    @property
    def flagged(self) -> bool:
        return abs(self.points) > FLAG_POINTS and abs(self.z) > FLAG_Z


ALPHA = 0.05


def two_sample_z(s1: float, q1: float, n1: int, s2: float, q2: float, n2: int) -> tuple[float, float, float]:
    """(se, z, p) of mean1 - mean2 from each sample's sum ``s``, sum of squares ``q`` and size ``n``.

    The variance is the pooled one of both samples together (what it is under the null of one distribution), not
    Welch's separate ones: a host one engine never saw held in a small sample has variance 0 there, and Welch's z
    would then be huge for a trivial difference. With n in the thousands the two agree."""
    n = n1 + n2
    s, q = s1 + s2, q1 + q2
    var = max((q - s * s / n) / (n - 1), 0.0)
    m1, m2 = s1 / n1, s2 / n2
    se = math.sqrt(var * (1.0 / n1 + 1.0 / n2))
    if se == 0.0:   # both samples one constant: no test
        return 0.0, math.nan, math.nan
    z = (m1 - m2) / se
    return se, z, math.erfc(abs(z) / math.sqrt(2.0))


def compare(native: dict, cyborg: dict, alpha: float = ALPHA) -> list[HostRow]:
    """Every host x level of every panel present in both, Holm-corrected over all of them (hosts both engines
    hold at one constant share, e.g. User0 always or Defender never, are no test)."""
    rows = []
    for key in [k for k in cyborg if k in native]:
        nat, cyb = native[key], cyborg[key]
        for li, level in enumerate(LEVELS):
            mn, mc = nat.late(li)[0], cyb.late(li)[0]
            for h, host in enumerate(T.HOSTS):
                sn, qn = nat.late_sum[li, h] / LATE_STEPS, nat.late_sq[li, h] / LATE_STEPS ** 2
                sc, qc = cyb.late_sum[li, h] / LATE_STEPS, cyb.late_sq[li, h] / LATE_STEPS ** 2
                se, z, p = two_sample_z(sn, qn, nat.episodes, sc, qc, cyb.episodes)
                rows.append(HostRow(key[0], key[1], level, host, nat.episodes, float(mn[h]), cyb.episodes,
                                    float(mc[h]), se, z, p))
    # a host neither engine could test (NaN) is no test: it leaves the family
    for r, rej in zip(rows, holm([r.p for r in rows], alpha, count_untested=False)):
        r.holm = rej
    return rows


def markdown(rows: list[HostRow]) -> str:
    """Per panel: the host with the largest |z| and the counts of Holm rejections and flags; then every host row
    with |z| >= 2 or a Holm rejection."""
    lines = ["| red | policy | CybORG episodes | native episodes | largest \\|z\\| (level, host: native − CybORG) "
             "| Holm-significant | flagged (>1.5 pt at \\|z\\|>3) |", "|---|---|---:|---:|---|---:|---:|"]
    panels: dict = {}
    for r in rows:
        panels.setdefault((r.red, r.policy), []).append(r)
    for (red, policy), rs in panels.items():
        tested = [r for r in rs if not math.isnan(r.z)]
        worst = max(tested, key=lambda r: abs(r.z)) if tested else None
        w = (f"{worst.level}, {worst.host}: {worst.points:+.1f} pt (z {worst.z:+.1f})" if worst else "–")
        lines.append(f"| {red} | {policy} | {rs[0].cyborg_n:,} | {rs[0].native_n:,} | {w} | "
                     f"{sum(r.holm for r in rs)} | {sum(r.flagged for r in rs)} |")
    m = sum(not math.isnan(r.p) for r in rows)
    lines.append(f"\nLate window = steps {LATE.start}–{LATE.stop - 1}; share = fraction of those steps red holds the "
                 f"host, per episode; z = two-sample over episodes (pooled variance); Holm over all {m} host × level × panel "
                 f"tests at family α = {ALPHA}.")
    notable = [r for r in rows if r.holm or (not math.isnan(r.z) and abs(r.z) >= 2)]
    if notable:
        lines += ["", "| red | policy | level | host | native | CybORG | diff (points) | z | Holm |",
                  "|---|---|---|---|---:|---:|---:|---:|---|"]
        for r in sorted(notable, key=lambda r: -abs(r.z)):
            lines.append(f"| {r.red} | {r.policy} | {r.level} | {r.host} | {r.native:.3f} | {r.cyborg:.3f} | "
                         f"{r.points:+.1f} | {r.z:+.1f} | {'reject' if r.holm else '–'} |")
    flagged = sum(r.flagged for r in rows)
    lines.append(f"\n{flagged} host row(s) differ by more than {FLAG_POINTS} points at |z| > {FLAG_Z} (issue K's bar).")
    return "\n".join(lines)


def plot_panel(nat: PanelCounts, cyb: PanelCounts, path: str | os.PathLike) -> None:
    """One figure per panel: per host, the share of episodes red holds it (any session: solid; privileged: dashed)
    per step, native and CybORG, with 95% normal bands."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(4, 4, figsize=(16, 12), sharex=True, sharey=True)
    steps = np.arange(HORIZON)
    for h, ax in zip(range(T.N_HOSTS), axes.flat):
        for counts, name, color in ((nat, "native", "C0"), (cyb, "CybORG", "C1")):
            for li, style in ((0, "-"), (1, "--")):
                p = counts.share(li)[:, h]
                band = 1.96 * np.sqrt(p * (1 - p) / counts.episodes)
                ax.plot(steps, p, style, color=color, lw=1.2,
                        label=f"{name} {LEVELS[li]} (n={counts.episodes:,})")
                ax.fill_between(steps, p - band, p + band, color=color, alpha=0.2 if li == 0 else 0.1, lw=0)
        ax.axvspan(LATE.start, LATE.stop - 1, color="0.9", zorder=-1)
        ax.set_title(T.HOSTS[h], fontsize=10)
        ax.set_ylim(-0.02, 1.02)
    for ax in list(axes.flat)[T.N_HOSTS:]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    axes.flat[T.N_HOSTS].legend(handles, labels, loc="center", fontsize=9)
    fig.suptitle(f"{nat.red} vs {nat.policy}: share of episodes red holds each host after step t "
                 f"(late window shaded, 95% bands)")
    fig.supxlabel("step t")
    fig.tight_layout()
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format="png", dpi=80)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------------ command
@dataclass
class CurvesConfig:
    """The settings of one curves run (``workflow-rl curves`` makes its flags from these fields); numbers are
    checked in :func:`run`, so bad values are refused with one line naming the flag."""

    red_agents: list[str] = field(default_factory=lambda: list(attackers.cage2(attacking=True)))
    """red agents, one panel each with every policy"""
    policies: list[str] | None = None
    """reference policies (default: all six)"""
    episodes: int = 2000
    """CybORG episodes per panel"""
    shard_episodes: int = 50
    """CybORG episodes per shard file (the most a killed run can lose per worker)"""
    workers: int = 1
    """CybORG worker processes"""
    native_episodes: int = 8192
    """native episodes per panel"""
    seed: int = 0
    """seed of both engines' episodes"""
    scenario: str | None = None
    """folder with Scenario2.yaml and images/"""
    out: str = "runs/curves"
    """folder: shards/, cyborg_curves.csv, curves.md, plots/"""
    collect_only: bool = False
    """run the CybORG shards and write the counts; no native run, no plots (for a machine without matplotlib)"""
    report_only: bool = False
    """use the shards already in OUT/shards; run no CybORG"""
    cyborg_csv: str | None = None
    """compare against this counts file (e.g. tests/data/cyborg_curves.csv) instead of shards"""


def _out_files(cfg: CurvesConfig, reds: list[str], policies: list[str]) -> list[str]:
    """The files :func:`run` writes into ``--out`` (besides its shards): the counts file unless ``--cyborg-csv``
    gives them, the report, its host rows and a plot per panel unless ``--collect-only``."""
    counts = [] if cfg.cyborg_csv else ["cyborg_curves.csv"]
    if cfg.collect_only:
        return counts
    return [*counts, "curves.md", "host_rows.csv", *(f"plots/{r}__{p}.png" for r in reds for p in policies)]


def run(cfg: CurvesConfig) -> int:
    """Per-step, per-host red access, native vs real CybORG: collect CybORG shards (resumable), then compare the
    late-window shares (Holm over hosts x levels x panels), plot each panel, and write the counts file the fidelity
    test reads (``tests/data/cyborg_curves.csv`` is a copy of ``OUT/cyborg_curves.csv``)."""
    from workflow_rl.ranges import check_fields
    from workflow_rl.files import check_out_files
    from workflow_rl.resources import check_workers
    from workflow_rl.envs.names import parse_red_agent

    check_workers("--workers", cfg.workers)   # within its range (workflow_rl/ranges.py) and the cores
    check_fields(cfg)   # every number within its range
    policies = cfg.policies or list(POLICIES)
    unknown = sorted(set(policies) - set(POLICIES))
    if unknown:
        raise ValueError(f"unknown --policies {', '.join(unknown)}: use some of {', '.join(POLICIES)}")
    reds = [parse_red_agent(r) for r in cfg.red_agents]
    if "SleepAgent" in reds:
        raise ValueError("--red-agents SleepAgent: red never moves, there is no curve to compare; use B_line and/or "
                         "Meander")
    if cfg.collect_only and (cfg.report_only or cfg.cyborg_csv):
        raise ValueError("--collect-only runs CybORG only; --report-only/--cyborg-csv skip it: choose one")
    out = check_out_files("--out", cfg.out, _out_files(cfg, reds, policies), [cfg.cyborg_csv, cfg.scenario],
                          replace=True)   # a resumable run: its shards continue, its report is redone
    if cfg.cyborg_csv:
        cyborg = {k: v for k, v in read_counts_csv(cfg.cyborg_csv).items() if k[0] in reds and k[1] in policies}
        if not cyborg:
            raise ValueError(f"{cfg.cyborg_csv} holds none of these panels")
    else:
        if not cfg.report_only:
            collect_cyborg(reds, policies, cfg.episodes, out, cfg.workers, cfg.seed, cfg.shard_episodes,
                           cfg.scenario)
        cyborg = load_shards(out / "shards", cfg.seed) if (out / "shards").is_dir() else {}
        cyborg = {k: v for k, v in cyborg.items() if k[0] in reds and k[1] in policies}
        if not cyborg:
            raise ValueError(f"no CybORG shards in {out / 'shards'} for these panels: run without --report-only")
        order = [(r, p) for r in reds for p in policies if (r, p) in cyborg]
        cyborg = {k: cyborg[k] for k in order}   # tables and the counts file in --red-agents x --policies order
        write_counts_csv([cyborg[k] for k in order], out / "cyborg_curves.csv")
        print(f"wrote {out / 'cyborg_curves.csv'} ({', '.join(f'{r}/{p}: {cyborg[(r, p)].episodes}' for r, p in order)}"
              " episodes)")
    if cfg.collect_only:
        return 0
    native = {k: native_counts(k[0], k[1], cfg.native_episodes, cfg.seed) for k in cyborg}
    rows = compare(native, cyborg)
    md = markdown(rows)
    print(md)
    out.mkdir(parents=True, exist_ok=True)
    (out / "curves.md").write_text(md + "\n")
    plots = out / "plots"
    plots.mkdir(exist_ok=True)
    for key in cyborg:
        plot_panel(native[key], cyborg[key], plots / f"{key[0]}__{key[1]}.png")
    with open(out / "host_rows.csv", "w") as f:
        f.write("red,policy,level,host,native_n,native,cyborg_n,cyborg,points,z,p,holm,flagged\n")
        for r in rows:
            f.write(f"{r.red},{r.policy},{r.level},{r.host},{r.native_n},{r.native:.6f},{r.cyborg_n},{r.cyborg:.6f},"
                    f"{r.points:.3f},{r.z:.3f},{r.p:.3g},{int(r.holm)},{int(r.flagged)}\n")
    print(f"wrote {out / 'curves.md'}, {out / 'host_rows.csv'} and {len(cyborg)} plots in {plots}")
    return 1 if any(r.flagged for r in rows) else 0
