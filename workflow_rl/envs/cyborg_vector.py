"""Real CybORG envs behind gymnasium's vector classes.

In-process, one process per env over pipes, or processes writing observations into shared memory (gymnasium
``SyncVectorEnv`` / ``AsyncVectorEnv``).
"""
from __future__ import annotations

import multiprocessing as mp
import signal
import time

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from workflow_rl.envs.cyborg import CybORGEnv, install_scenario
from workflow_rl.envs.names import START_METHODS, VECTORIZATIONS
from workflow_rl.interrupt import children_ignore_sigint, threading_is_main


class _EnvFn:
    """Picklable env constructor (spawned workers rebuild the env from it). In a worker process it first makes the
    worker ignore SIGINT: a terminal's Ctrl-C reaches the whole process group, and a worker that died of it would
    abort the parent's clean stop (finish the round or update, save) with a worker error."""

    def __init__(self, red: str, episode_length: int, scenario, seed):
        self.red, self.episode_length, self.scenario, self.seed = red, episode_length, scenario, seed

    def __call__(self):
        if mp.parent_process() is not None and threading_is_main():   # a worker: Ctrl-C is its parent's
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        return CybORGEnv(self.red, self.episode_length, self.scenario, self.seed)


class EngineWorkerError(RuntimeError):
    """A worker process raised, died or stopped answering; the vector env has been closed."""


STOP_GRACE_S = 2.0
"""Seconds a worker gets to exit after SIGTERM before it is killed (SIGKILL also ends a stopped process)."""


def stop_processes(procs, grace: float = STOP_GRACE_S, wait_first: float = 0.0) -> None:
    """Wait up to ``wait_first`` seconds for ``procs`` to exit by themselves, terminate the rest, wait at most
    ``grace`` seconds, then kill and reap whoever is left: an abort path that always ends, even when a worker is
    stopped (SIGSTOP) or ignores SIGTERM."""
    for signal_them in (None, "terminate", "kill"):
        alive = [p for p in procs if p.is_alive()]
        for p in alive:
            if signal_them:
                getattr(p, signal_them)()
        wait = {None: wait_first, "terminate": grace, "kill": None}[signal_them]
        deadline = None if wait is None else time.monotonic() + wait
        for p in alive:
            p.join(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))


class GuardedAsyncVectorEnv(gym.vector.AsyncVectorEnv):
    """gymnasium's AsyncVectorEnv with a step timeout, and worker failures turned into one clear error.

    A worker that raises has its traceback printed by gymnasium and the exception re-raised here as
    :class:`EngineWorkerError`; a worker that dies or does not answer within ``timeout`` seconds makes every worker
    terminate (shared memory is released with them) before the error is raised, so nothing hangs.
    """

    def __init__(self, env_fns, timeout: float | None = 120.0, **kwargs):
        self.timeout = timeout
        # The workers are born ignoring SIGINT (``_EnvFn`` keeps it so): a terminal's Ctrl-C reaches the whole
        # process group, and a worker that died of it would abort the parent's clean stop. The parent ignores it
        # only while it starts them, until :meth:`_check_spaces` (which waits while they build their envs).
        self._ignoring = children_ignore_sigint()
        self._ignoring.__enter__()
        try:
            super().__init__(env_fns, **kwargs)
        except BaseException:
            self._abort_start()
            raise
        finally:
            self._heed_sigint()

    def _heed_sigint(self) -> None:
        if self._ignoring is not None:
            self._ignoring, ignoring = None, self._ignoring
            ignoring.__exit__(None, None, None)

    def _check_spaces(self):
        self._heed_sigint()   # every worker started: a Ctrl-C is the parent's again while they build their envs
        return super()._check_spaces()

    def _abort_start(self) -> None:
        """An interrupt (Ctrl-C, SIGTERM) or a failed space check while the workers start: stop the ones started
        before their pipes close. Left to garbage collection, a worker still building its env would later read the
        closed pipe and print a traceback (EOFError, then BrokenPipeError) over the parent's one-line report."""
        stop_processes(getattr(self, "processes", []))
        for pipe in getattr(self, "parent_pipes", []):
            pipe.close()
        self.closed = True

    def _abort(self) -> None:
        """Kill every worker without waiting for the pending call (gymnasium's close would wait on it), and
        without waiting on a worker that ignores SIGTERM (a stopped one): it is killed after a short grace."""
        from gymnasium.vector.async_vector_env import AsyncState

        self._state = AsyncState.DEFAULT
        stop_processes(self.processes)
        self.close(terminate=True)

    def _guard(self, fn, what: str):
        try:
            return fn()
        except mp.TimeoutError:
            self._abort()
            raise EngineWorkerError(f"a CybORG worker did not finish {what} within {self.timeout:g} s; all workers "
                                    "were stopped (raise the timeout for slow machines)") from None
        except (EOFError, BrokenPipeError, ConnectionResetError):
            codes = [p.exitcode for p in self.processes]
            self._abort()
            raise EngineWorkerError(f"a CybORG worker process died during {what} (exit codes {codes}); all workers "
                                    "were stopped") from None
        except EngineWorkerError:
            raise
        except KeyboardInterrupt:   # Ctrl-C while waiting on workers: stop them all, so the run ends
            self._abort()
            raise
        except Exception as e:  # noqa: BLE001 - a worker's own exception, re-raised by gymnasium
            self._abort()
            raise EngineWorkerError(f"a CybORG worker raised {type(e).__name__}: {e} (its traceback is printed "
                                    "above); all workers were stopped") from e

    def close_extras(self, timeout: float | None = None, terminate: bool = False) -> None:
        """gymnasium's close, which raises on a worker that died first (a SIGTERM sent to the whole process group,
        the OOM killer): every worker is then stopped and the pipes closed without another word, since closing was
        meant to end them anyway."""
        try:
            super().close_extras(timeout, terminate)
        except (EOFError, BrokenPipeError, ConnectionResetError):
            self._abort()

    def step(self, actions):
        def go():
            self.step_async(actions)
            return self.step_wait(timeout=self.timeout)

        return self._guard(go, "a step")

    def reset(self, *, seed=None, options=None):
        def go():
            self.reset_async(seed=seed, options=options)
            return self.reset_wait(timeout=self.timeout)

        return self._guard(go, "a reset")


class SeededVectorEnv(gym.vector.VectorWrapper):
    """The contract's conventions on top of gymnasium's vector classes: env i gets the seed ``seed + i`` on the
    first reset (so a run seed defines every env's stream), and rewards are float32."""

    def __init__(self, env: gym.vector.VectorEnv, seed: int | None):
        super().__init__(env)
        self._seed = seed
        self._seeded = False

    def reset(self, *, seed=None, options=None):
        if seed is None and not self._seeded and self._seed is not None:
            seed = self._seed
        self._seeded = True
        if isinstance(seed, int):
            seed = [seed + i for i in range(self.num_envs)]
        return self.env.reset(seed=seed, options=options)

    def step(self, actions):
        obs, rew, term, trunc, info = self.env.step(actions)
        return obs, np.asarray(rew, np.float32), term, trunc, info


def make_cyborg_vector_env(num_envs: int, red: str, episode_length: int, seed: int | None,
                           vectorization: str = "sync", start_method: str | None = None, scenario=None,
                           timeout: float | None = 120.0, env_fn=None):
    if vectorization not in VECTORIZATIONS:
        raise ValueError(f"unknown vectorization {vectorization!r}: use one of {', '.join(VECTORIZATIONS)}")
    if start_method not in START_METHODS:
        raise ValueError(f"unknown start_method {start_method!r}: use spawn, fork, forkserver or None")
    if env_fn is None:
        install_scenario(scenario)  # fail here, with the fix, rather than inside a worker
    fns = [(env_fn or _EnvFn(red, episode_length, scenario, None)) for _ in range(num_envs)]
    mode = AutoresetMode.SAME_STEP
    if vectorization == "sync":
        env = gym.vector.SyncVectorEnv(fns, autoreset_mode=mode)
    else:
        env = GuardedAsyncVectorEnv(fns, timeout=timeout, shared_memory=vectorization == "shared_memory",
                                    context=start_method, autoreset_mode=mode)
    return SeededVectorEnv(env, seed)
