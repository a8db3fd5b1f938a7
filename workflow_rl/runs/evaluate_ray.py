"""``evaluate --ray``: an evaluation's rounds of episodes as Ray tasks, the files those of one machine's run.

On this machine or a cluster, the files written are those of the same evaluation played on one machine.

An evaluation of one workflow (or none) plays, per engine and mode, rounds of episodes, each red agent's part of a
round (``rl.evaluate.RoundPart``) seeded by its round alone. Here a pool of Ray actors plays the parts: each actor
builds the acting functions itself from the evaluation's settings (``runs.evaluate.acts_for``: a shipped agent or
a baseline by name, an agent class by ``module:Class``, a checkpoint or ``file.py`` from the bytes the driver sends,
so no shared filesystem is needed) and keeps its envs from part to part. What an acting function carries from
episode to episode (a sampled mode's generator, the planner's episode count, the random baseline's generator) an
actor brings to where the parts before it left it, played elsewhere, without playing them
(``rl.evaluate.skip_part``); an agent class keeps what it keeps, so its parts play in order on one actor. The
driver gathers the parts in the order one machine plays them (``rl.evaluate.gather_cells``): the same cells.

Ctrl-C (the driver's ``GracefulInterrupt``) starts no new round: the rounds begun finish, and the evaluation keeps
every round played, as on one machine; a second Ctrl-C aborts, stopping the actors. ``--time-limit`` starts no new
real-CybORG round once that many seconds have passed since the evaluation began (the modes play at once here, so
each has the whole limit, not a share).
"""
from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from workflow_rl.rl.evaluate import RoundPart, can_skip, gather_cells, play_part, round_parts, round_size, skip_part

WAIT_S = 0.5
"""How long the driver waits for a part at a time: a Ctrl-C is seen within it."""


class EvaluateWorkerError(RuntimeError):
    """A Ray worker failed playing a part; the message carries the remote traceback."""


@dataclasses.dataclass
class _Stream:
    """One (engine, mode) of the evaluation: its parts, how far they are dispatched, and what came back."""

    engine: str
    mode: str
    seed: int
    n: int
    parts: list[RoundPart]
    sent: int = 0
    """parts dispatched (a prefix)"""
    cut: bool = False
    """no more parts: a Ctrl-C or the time limit stopped it before the next round"""
    back: dict = dataclasses.field(default_factory=dict)
    """part index: (per-length columns, seconds)"""

    @property
    def open(self) -> bool:
        return not self.cut and self.sent < len(self.parts)

    @property
    def finished(self) -> bool:
        return not self.open and len(self.back) == self.sent


class RoundPlayer:
    """A Ray actor's body: the evaluation's acting functions built here (``build(cfg)``: ``runs.evaluate.acts_for``)
    and the envs its parts play in, kept from part to part (one set per engine, red agent, round size and seed, as
    one machine keeps one per red agent). ``agent_file``: (its path on the driver's machine, its bytes), used where
    this machine holds the same file (an agent's ``file.py`` then finds its sibling files), else written to a
    scratch folder; ``paths``: for a ``module:Class``, the driver's ``sys.path``, whose folders this machine also
    has are appended to its own (a module the driver imported from a folder of its own, not installed)."""

    def __init__(self, build: Callable, cfg, agent_file: tuple[str, bytes] | None, paths: list[str],
                 lengths: list[int], cores: int):
        from workflow_rl import threads

        threads.configure(threads.Work(), cores=max(1, cores))   # the actor's CPUs, not the machine's
        sys.path += [p for p in paths if p not in sys.path and Path(p).is_dir()]
        self.scratch = tempfile.TemporaryDirectory(prefix="workflow-rl-evaluate-")
        if agent_file is not None:
            where, data = agent_file
            here = Path(where)
            if not (here.is_file() and here.read_bytes() == data):
                here = Path(self.scratch.name) / Path(where).name
                here.write_bytes(data)
            cfg = dataclasses.replace(cfg, agent=str(here) + cfg.agent[len(where):])
        self.build, self.cfg, self.lengths = build, cfg, lengths
        self.acts, self.workflow, self.envs = None, None, {}

    def play(self, mode: str, skipped: list[int], engine: str, seed: int, n: int, part: RoundPart):
        """Part ``part`` (of a round of ``n`` envs on ``engine``, episode seed ``seed``) played by ``mode``'s acting
        function, after skipping the parts of that mode played elsewhere since its last one here (``skipped``: their
        round sizes). Returns (per-length columns, seconds)."""
        from workflow_rl import devices
        from workflow_rl.envs.factory import make_vector_env
        from workflow_rl.runs.engines import engine_opts

        t0 = time.monotonic()
        if self.acts is None:
            self.acts, _, self.workflow = self.build(self.cfg)
        act = self.acts[mode]
        for k in skipped:
            skip_part(act, k, self.lengths)
        key = (engine, part.red_agent, n, seed)
        if key not in self.envs:
            c = self.cfg
            self.envs[key] = make_vector_env(n, part.red_agent, engine=engine, episode_length=max(self.lengths),
                                             device=devices.engine_device(engine, c.device), seed=seed,
                                             **engine_opts(c.vectorization, c.parallel_start_method, c.scenario,
                                                           engine))
        cols = play_part(self.envs[key], act, seed, part, self.lengths, self.workflow,
                         devices.engine_device(engine, self.cfg.device))
        return cols, time.monotonic() - t0

    def close(self) -> None:
        for env in self.envs.values():
            env.close()
        self.envs.clear()
        self.scratch.cleanup()


class RayPlay:
    """An evaluation's (engine, mode)s played on Ray: ``cfg`` (its settings: ``runs.evaluate.EvaluateConfig``),
    ``build`` (``runs.evaluate.acts_for``), ``agent_file`` (the file the agent is built from, sent to the actors),
    the acting functions built here (``acts``: which modes' can skip parts), the red agents, lengths and engines,
    each (engine, mode)'s episode seed, each engine's episodes per red agent,
    and the workflow the acting functions play under. :meth:`run` returns what one machine's loop returns."""

    def __init__(self, cfg, build: Callable, acts: dict, agent_file: Path | None, reds: list[str],
                 lengths: list[int], engines: list[str], seeds: dict[tuple, int], episodes: dict[str, int], workflow):
        self.cfg, self.build, self.reds, self.lengths, self.workflow = cfg, build, reds, lengths, workflow
        self.agent_file = agent_file
        self.skippable = {m: can_skip(a) for m, a in acts.items()}   # else: one actor plays all of that mode's parts
        modes = list(acts)
        self.streams = []
        for e in engines:
            n = round_size(e, episodes[e], cfg.workers)
            self.streams += [_Stream(e, m, seeds[(e, m)], n, round_parts(reds, episodes[e], n)) for m in modes]
        self.modes = modes

    def run(self, stop) -> list[tuple]:
        """Play until every part is back, or a Ctrl-C (``stop.requested``) or the time limit leaves the rounds not
        begun unplayed: (engine, mode, cells, seconds) of each (engine, mode) that played, in one machine's order
        (seconds: its parts' own times, summed; they ran side by side)."""
        from workflow_rl.search.ray_executor import connect_ray

        ray, started = connect_ray(self.cfg.ray)
        actors, done = [], False
        try:
            actors = self._actors(ray)
            self._play(ray, actors, stop)
            done = True
        finally:
            _stop_actors(ray, actors, 30.0 if done else 2.0)
            if started:
                ray.shutdown()
        out = []
        for s in self.streams:
            if s.sent:
                played = [(s.parts[i], s.back[i][0]) for i in range(s.sent)]
                out.append((s.engine, s.mode, gather_cells(self.reds, self.lengths, s.seed, s.n, played,
                                                           self.workflow is not None),
                            sum(t for _, t in s.back.values())))
        return out

    def _actors(self, ray) -> list:
        """The actors: as many as the cluster's CPUs hold (and parts need), each with one CPU, or on real CybORG
        one per env of a round (its env processes step side by side), at most one node's."""
        from workflow_rl.rl.interface import is_interface_agent

        nodes = [n.get("Resources", {}).get("CPU", 0) for n in ray.nodes() if n.get("Alive")]
        total = ray.cluster_resources().get("CPU", 0)
        if not total or not nodes:
            raise ValueError(f"the Ray cluster at {self.cfg.ray!r} has no CPUs to play on: start its workers "
                             "(`ray start --address HEAD:6379`), or give --ray no address (Ray on this machine)")
        cyborg = [s.n for s in self.streams if s.engine == "cyborg"]
        cores = max(1, min(max(cyborg), int(max(nodes)))) if cyborg else 1
        count = max(1, min(int(total // cores), sum(len(s.parts) for s in self.streams)))
        cfg = dataclasses.replace(self.cfg, agent=self._agent_here(), out=None, after=None)
        shipped = None if self.agent_file is None else (str(self.agent_file.resolve()), self.agent_file.read_bytes())
        cls = ray.remote(num_cpus=cores, max_restarts=0, max_task_retries=0)(RoundPlayer)
        paths = list(sys.path) if is_interface_agent(self.cfg.agent) and self.agent_file is None else []
        actors = [cls.remote(self.build, cfg, shipped, paths, self.lengths, cores) for _ in range(count)]
        print(f"Ray: {count} actor(s) of {cores} CPU(s) play the rounds ({self.cfg.ray})", flush=True)
        return actors

    def _agent_here(self) -> str:
        """The agent, its file (if any) named by its absolute path: an actor's working folder is not this one."""
        if self.agent_file is None:
            return self.cfg.agent
        where = str(self.agent_file)
        return str(self.agent_file.resolve()) + self.cfg.agent[len(where):]

    def _play(self, ray, actors: list, stop) -> None:
        pinned = {m: i % len(actors) for i, m in enumerate(m for m in self.modes if not self.skippable[m])}
        sent: dict[str, list[int]] = {m: [] for m in self.modes}   # per mode: the round sizes of its parts sent
        seen = [dict.fromkeys(self.modes, 0) for _ in actors]      # per actor and mode: how many of those it saw
        busy: dict = {}   # ref: (actor index, stream, part index)
        deadline = (time.monotonic() + self.cfg.time_limit) if self.cfg.time_limit else None
        while True:
            for i, actor in enumerate(actors):
                if any(a == i for a, _, _ in busy.values()):
                    continue
                job = self._next(i, pinned, sent, stop, deadline)
                if job is None:
                    continue
                s, k = job
                skipped = sent[s.mode][seen[i][s.mode]:]
                if skipped and not self.skippable[s.mode]:
                    raise RuntimeError(f"{s.mode} is played by one actor only, yet actor {i} would skip parts")
                sent[s.mode].append(s.n)
                seen[i][s.mode] = len(sent[s.mode])
                s.sent += 1
                busy[actor.play.remote(s.mode, skipped, s.engine, s.seed, s.n, s.parts[k])] = (i, s, k)
            if not busy:
                return
            ready, _ = ray.wait(list(busy), num_returns=1, timeout=WAIT_S)
            for ref in ready:
                i, s, k = busy.pop(ref)
                s.back[k] = self._get(ray, ref, s, s.parts[k])
                if s.finished:
                    print(f"{s.engine} {s.mode}: {len(self.reds) * len(self.lengths)} cells, "
                          f"{sum(t for _, t in s.back.values()):.1f} s of rounds on Ray", flush=True)

    def _next(self, i: int, pinned: dict, sent: dict, stop, deadline: float | None) -> tuple | None:
        """The (stream, part index) idle actor ``i`` plays next, if any: a part of the mode it alone plays first,
        then one of the mode least far on. A mode's parts go out in one machine's order: its streams (engines) in
        turn, each stream's parts in order. A part that would begin a new round is not sent after a Ctrl-C (nor one
        of a stream not begun), nor past the time limit on real CybORG (a stream's first round always is): its
        stream is cut there."""
        mine = [m for m, a in pinned.items() if a == i]
        others = sorted((m for m in self.modes if m not in pinned), key=lambda m: len(sent[m]))
        for mode in mine + others:
            for s in (s for s in self.streams if s.mode == mode and s.open):
                part = s.parts[s.sent]
                begun = s.sent > 0 and s.parts[s.sent - 1].round == part.round
                late = (s.engine == "cyborg" and deadline is not None and part.round > 0
                        and time.monotonic() > deadline)
                if not begun and (stop.requested or late):
                    s.cut = True
                    continue   # the mode's next stream, if any
                return s, s.sent
        return None

    def _get(self, ray, ref, s: _Stream, part: RoundPart):
        """A part's result; a worker's failure re-raised: a ValueError (bad input the agent met) as itself, so it is
        one error line as on one machine, anything else with the remote traceback."""
        try:
            return ray.get(ref)
        except ray.exceptions.RayError as e:
            cause = getattr(e, "cause", None)
            if isinstance(cause, ValueError):
                raise ValueError(str(cause)) from None
            raise EvaluateWorkerError(f"{s.engine} {s.mode} round {part.round} against {part.red_agent} failed on a "
                                      f"Ray worker:\n{e}") from None


def _stop_actors(ray, actors: list, wait_s: float) -> None:
    """Close the actors' envs (real CybORG's processes), waiting up to ``wait_s`` (an actor still playing closes
    after its part), then end them."""
    try:
        closing = [a.close.remote() for a in actors]
        if closing:
            ray.wait(closing, num_returns=len(closing), timeout=wait_s)
    except Exception:  # noqa: BLE001 - an actor already gone has nothing to close
        pass
    for a in actors:
        try:
            ray.kill(a, no_restart=True)
        except Exception:  # noqa: BLE001 - nor anything to end
            pass


__all__ = ["RayPlay", "RoundPlayer", "EvaluateWorkerError"]
