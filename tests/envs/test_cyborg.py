"""The real CybORG engine: conformance, mode equivalence, reference returns, episode workers, and worker faults."""
import os
import time

import numpy as np
import pytest
from fault_envs import FaultyFn
from helpers import load_reference, within_reference

from workflow_rl import make_vector_env
from workflow_rl.envs.cyborg_vector import EngineWorkerError, make_cyborg_vector_env
from workflow_rl.parity import running_returns
from workflow_rl.sim import tables as T

pytestmark = pytest.mark.cyborg


def _rollout(env, steps, seed=0):
    rng = np.random.default_rng(seed)
    obs, info = env.reset()
    out, acc, rew = [obs], [info["red_access"]], []
    for _ in range(steps):
        obs, r, term, trunc, info = env.step(rng.integers(0, 145, env.num_envs))
        out.append(obs)
        acc.append(info["red_access"])
        rew.append(r)
    return np.stack(out), np.stack(acc), np.stack(rew)


def test_conformance_and_true_access():
    env = make_vector_env(2, "bline", engine="cyborg", seed=5)
    obs, info = env.reset()
    assert obs.shape == (2, 52) and obs.dtype == np.float32 and not obs.any()
    assert (info["red_access"][:, T.USER0] == 2).all() and info["red_access"].sum() == 4
    conf = np.array([0.1, 1, 1, 1, 0.1, 0.1, 0.1, 1, 0, 0.1, 0.1, 0.1, 0.1])
    for t in range(25):
        obs, r, term, trunc, info = env.step(np.zeros(2, np.int64))
        assert r.dtype == np.float32 and not term.any()
        gap = r - (-((info["red_access"] == 2) * conf).sum(1))
        assert np.all((np.abs(gap) < 1e-4) | (np.abs(gap + 10) < 1e-4))
    assert (info["red_access"][:, T.OPS0] == 2).all()     # B_line owns Op_Server0 by step 25
    env.close()


def test_sync_pipes_and_shared_memory_give_identical_trajectories():
    results = [_rollout(make_vector_env(3, "meander", engine="cyborg", seed=11, vectorization=v), 40)
               for v in ("sync", "pipes", "shared_memory")]
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert np.array_equal(a, b)
    different = _rollout(make_vector_env(3, "meander", engine="cyborg", seed=12), 40)
    assert not np.array_equal(results[0][2], different[2])


def test_episode_length_truncates_and_resets():
    env = make_vector_env(2, "bline", engine="cyborg", episode_length=10, seed=1)
    env.reset()
    for t in range(10):
        obs, r, term, trunc, info = env.step(np.zeros(2, np.int64))
    assert trunc.all() and "final_obs" in info and not obs.any()
    env.close()


@pytest.mark.parametrize("red", ["B_lineAgent", "RedMeanderAgent"])
@pytest.mark.parametrize("policy", ["sleep", "restore_compromised"])
def test_cyborg_engine_reproduces_reference_cells(red, policy):
    """Same tolerance as the native fidelity test: max(2% of |mean|, 3 SE of the difference). The envs step in this
    process (``sync``): the episodes ``shared_memory`` plays (the test above), without two worker processes per
    pair of episodes competing with the suite's own for the cores. 48 episodes a cell (120 until issue X's time
    aim): the reference's own 400 hold the native engine; this holds our CybORG wrapper to them: a 2% shift of a
    sleep cell still fails it; restore_compromised's 100-step cell now tolerates about 11 points (8 at 120)."""
    ref = load_reference()
    ours = running_returns("cyborg", red, policy, 48, seed=77, n_envs=2, vectorization="sync")
    for length, x in ours.items():
        r = ref[(red, policy, length)]
        assert within_reference(x, r)[0], f"{red}/{policy}/{length}: {x.mean():.2f} vs {r.mean():.2f}"


@pytest.mark.parametrize("engine", ["cyborg", "native"])
def test_running_returns_reuses_envs_and_plays_what_fresh_envs_play(engine):
    """``running_returns`` builds its envs once and resets them with each round's seed (real CybORG takes ~0.13 s
    to build an env): the episodes are those a freshly built env per round plays, a short last round included."""
    from workflow_rl.policies import POLICIES

    episodes, n, seed, horizon = 5, 2, 9, 30
    got = running_returns(engine, "RedMeanderAgent", "random", episodes, seed, lengths=(horizon,), n_envs=n)[horizon]
    rng, fresh = np.random.default_rng(seed), []
    for rnd, done in enumerate(range(0, episodes, n)):
        k = min(n, episodes - done)
        env = make_vector_env(k, "RedMeanderAgent", engine=engine, episode_length=horizon,
                              seed=seed + 100_003 * rnd)
        obs, _ = env.reset()
        ret = np.zeros(k)
        for t in range(horizon):
            obs, r, *_ = env.step(np.asarray(POLICIES["random"](t, obs, rng), np.int64))
            ret += r
        env.close()
        fresh.append(ret)
    assert np.array_equal(got, np.concatenate(fresh)) and len(got) == episodes


def test_episode_workers_train_and_do_not_depend_on_worker_count(tmp_path):
    from workflow_rl.rl.config import TrainConfig
    from workflow_rl.rl.trainer import Trainer

    def run(workers, path):
        cfg = TrainConfig(workflow="critical_first", engine="cyborg", vectorization="episodes", n_envs=4,
                          max_episodes=2, n_workers=workers, seed=2)
        t = Trainer(cfg, path, progress=False)
        s = t.run()
        return s, [p.detach().clone() for p in t.agent.parameters()]

    s1, p1 = run(1, tmp_path / "a")
    s2, p2 = run(2, tmp_path / "b")
    assert s1["episodes"] == s2["episodes"] == 8
    assert all((a == b).all() for a, b in zip(p1, p2))
    assert s1["mean100"] == s2["mean100"]


def test_missing_scenario_data_names_the_fix(tmp_path):
    from workflow_rl.envs.cyborg import CybORGUnavailable, install_scenario

    with pytest.raises(CybORGUnavailable, match="Scenario2.yaml"):
        install_scenario(tmp_path)


# ---------------------------------------------------------------------------------------------- worker faults
def _shm_entries():
    """What is in /dev/shm, less joblib's (loky's) semaphores: no engine of ours makes them, a test running beside
    this one (another xdist worker) may."""
    return {e for e in os.listdir("/dev/shm") if not e.startswith("sem.loky-")} if os.path.isdir("/dev/shm") else set()


def _shm_left(before: set) -> set:
    """What is in /dev/shm now and was not ``before``, less what goes within a few seconds: another process's
    (another test worker's, another job's) files come and go, a leaked one stays."""
    new = _shm_entries() - before
    deadline = time.time() + 5
    while new and time.time() < deadline:
        time.sleep(0.2)
        new &= _shm_entries()
    return new


@pytest.mark.parametrize("fault", ["raise", "die", "hang"])
@pytest.mark.parametrize("vectorization", ["pipes", "shared_memory"])
def test_worker_faults_are_reported_and_release_everything(fault, vectorization):
    before = _shm_entries()
    env = make_cyborg_vector_env(2, "B_lineAgent", 100, 0, vectorization=vectorization, start_method="fork",
                                 timeout=3.0, env_fn=FaultyFn(fault))
    env.reset()
    t0 = time.time()
    with pytest.raises(EngineWorkerError) as e:
        for _ in range(5):
            env.step(np.zeros(2, np.int64))
    assert time.time() - t0 < 30
    assert {"raise": "RuntimeError: boom", "die": "died", "hang": "did not finish"}[fault] in str(e.value)
    assert env.unwrapped.closed
    assert not any(p.is_alive() for p in env.unwrapped.processes)
    assert not _shm_left(before)


def test_evaluation_on_cyborg_uses_few_processes_and_counts_every_episode():
    from workflow_rl.rl.evaluate import evaluate_policy, scripted_act

    r = evaluate_policy(scripted_act("sleep"), "bline", length=20, episodes=5, engine="cyborg",
                        vectorization="shared_memory")
    assert r.episodes == 5 and r.mean < 0 and r.ci95 >= 0


def test_batched_training_on_real_cyborg(tmp_path):
    """Two workflows in one batch on the real engine (sync vector env of 2 x 2 CybORG envs): the batch path works
    on an engine without snapshots, each slot spends exactly its own budget and writes a usable checkpoint."""
    from workflow_rl.rl.trainer import BatchedTrainer
    from workflow_rl.rl.checkpoint import load_checkpoint
    from workflow_rl.rl.config import TrainConfig

    def cfg(wf, budget):
        return TrainConfig(workflow=wf, engine="cyborg", n_envs=2, episode_length=20, update_every_steps=10,
                           max_episodes=2, min_episodes=1, num_episodes=budget, seed=1)

    bt = BatchedTrainer(cfg("critical_first", 4), 2)
    bt.start(0, cfg("critical_first", 4), tmp_path / "a")
    bt.start(1, cfg("U,OH,OS,E,D", 3), tmp_path / "b")
    try:
        while any(s.stop_reason is None for s in bt.slots):
            bt.run_round()
    finally:
        bt.close()
    assert [s.total_episodes for s in bt.slots] == [4, 3]
    ck = load_checkpoint(tmp_path / "b" / "checkpoints" / "latest.pt")
    assert ck["counters"]["total_episodes"] == 3 and ck["env_state"] is None


def test_red_mixture_draws_one_agent_per_episode_reproducibly():
    """A mixture on real CybORG: each env holds one CybORG per agent and picks one per episode from its own stream;
    the same seed replays the same agents, and a drawn agent's episode is a B_line or Meander one (B_line's first
    Impact comes at step 15 or later; Meander never reaches Op_Server0 in 16 steps)."""
    def agents(seed):
        env = make_vector_env(2, "mix", engine="cyborg", episode_length=16, seed=seed, vectorization="sync")
        env.reset()
        drawn, impact = [], []
        for _ in range(6):
            drawn.append([e.current_red for e in env.unwrapped.envs])
            total = np.zeros(2)
            for _ in range(16):
                _, r, *_ = env.step(np.zeros(2, np.int64))
                total += r < -9
            impact.append(total > 0)
        env.close()
        return np.array(drawn), np.array(impact)

    drawn, impact = agents(21)
    assert set(drawn.ravel()) == {"B_lineAgent", "RedMeanderAgent"}
    assert not impact[drawn == "RedMeanderAgent"].any()
    assert np.array_equal(agents(21)[0], drawn)


def test_curve_shards_on_real_cyborg_are_reproducible_whichever_worker_runs_them(tmp_path):
    """Issue K's collector: two spawned workers run real CybORG shards; each episode's access depends only on
    (seed, episode), so the in-process rerun of one shard is identical, and CybORG's session table shows red's
    User0 foothold as privileged at every step."""
    from workflow_rl import curves as C

    ran = C.collect_cyborg(["B_lineAgent"], ["restore_compromised"], 4, tmp_path, workers=2, seed=5,
                           shard_episodes=2, progress=None)
    assert ran == 2
    with np.load(C.shard_path(tmp_path / "shards", "B_lineAgent", "restore_compromised", 2, 2)) as z:
        pooled = z["access"]
    again = C.cyborg_access("B_lineAgent", "restore_compromised", 5, 2, 2)
    np.testing.assert_array_equal(pooled, again)
    assert pooled.shape == (2, C.HORIZON, T.N_HOSTS)
    assert (pooled[:, :, T.USER0] == T.ACCESS_PRIVILEGED).all()
    assert (pooled[:, 20:, [T.USER1, T.USER2, T.USER3, T.USER4]] > 0).any()   # B_line got somewhere


def test_an_interrupt_while_workers_start_stops_them_before_their_pipes_close(monkeypatch):
    """SIGTERM (or Ctrl-C) reaching the parent while its workers still build their envs: the workers are stopped
    by the signal, not left to read a closed pipe and print a traceback over the one-line 'terminated' (a CI
    failure of test_sigterm_stops_cyborg_evaluation_workers_quietly)."""
    import signal

    import gymnasium as gym

    from workflow_rl.envs.cyborg_vector import GuardedAsyncVectorEnv

    started = []

    def interrupted(self):
        started.extend(self.processes)
        raise KeyboardInterrupt

    monkeypatch.setattr(gym.vector.AsyncVectorEnv, "_check_spaces", interrupted)
    with pytest.raises(KeyboardInterrupt) as e:
        GuardedAsyncVectorEnv([FaultyFn("slow start")] * 2, context="fork")
    # `e` holds the half-built env alive, as the CLI's report did: no __del__ has closed it; the workers are gone
    assert len(started) == 2 and e.value is not None
    assert [p.exitcode for p in started] == [-signal.SIGTERM] * 2


@pytest.mark.cyborg
@pytest.mark.parametrize("start_method", ["spawn", "fork"])
@pytest.mark.parametrize("when", ["starting", "stepping"])
def test_a_process_group_ctrl_c_leaves_the_workers_to_the_parent(tmp_path, start_method, when):
    """A terminal's Ctrl-C reaches the whole process group. The env workers are born ignoring SIGINT and keep
    ignoring it (``interrupt.children_ignore_sigint``, ``_EnvFn``), so the parent, which asked to finish its round
    (``GracefulInterrupt``), steps on: here a process in a session of its own sends SIGINT to its group just after
    its first worker starts (while that worker boots), or between two steps; the step still answers, and the parent
    alone says it stops."""
    import subprocess
    import sys

    script = tmp_path / "group_sigint.py"
    script.write_text(f"""
import os, signal
import multiprocessing.process
import numpy as np
from workflow_rl.envs.cyborg_vector import make_cyborg_vector_env
from workflow_rl.interrupt import GracefulInterrupt

def group_sigint():
    os.killpg(os.getpgid(0), signal.SIGINT)

if __name__ == "__main__":
    with GracefulInterrupt("the step") as stop:
        if {when!r} == "starting":
            start = multiprocessing.process.BaseProcess.start
            def start_then_sigint(self):
                start(self)
                multiprocessing.process.BaseProcess.start = start
                group_sigint()
            multiprocessing.process.BaseProcess.start = start_then_sigint
        env = make_cyborg_vector_env(2, "B_lineAgent", 10, 1, vectorization="shared_memory",
                                     start_method={start_method!r})
        env.reset(seed=1)
        env.step(np.zeros(2, np.int64))
        if {when!r} == "stepping":
            group_sigint()
        env.step(np.zeros(2, np.int64))
        print("stepped on, stop requested:", stop.requested, flush=True)
    env.close()
""")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                       start_new_session=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert r.returncode == 0, r.stderr[-2000:]
    assert "stepped on" in r.stdout and "Traceback" not in r.stderr   # no worker died of it
    if when == "stepping":
        assert "stop requested: True" in r.stdout
        assert r.stdout.count("interrupt: finishing") == 1   # the parent says it, not every worker too
    # (while it starts its workers the parent ignores SIGINT too, for milliseconds: that Ctrl-C is lost, the run on)
