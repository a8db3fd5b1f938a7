"""``--decoy-memory``: the policy input remembers the decoys blue placed this episode, the same way in the batched
trainer, in evaluation and in episode workers, and a run with it resumes exactly."""
import numpy as np
import pytest
import torch
from helpers import read_log, train_cfg

from workflow_rl.rl.checkpoint import agent_from_checkpoint, load_checkpoint
from workflow_rl.rl.memory import forget, no_decoys, remember
from workflow_rl.rl.ppo import DECOY_DIM, WORKFLOW_DIM, Agent, PPOConfig, input_dim
from workflow_rl.rl.trainer import BatchedTrainer, Trainer
from workflow_rl.sim.tables import A_DECOY, A_RESTORE, N_ACTIONS

BASE = 52 + WORKFLOW_DIM   # where the memory starts in the policy input


def mem_cfg(**kw):
    return train_cfg(ppo=PPOConfig(decoy_memory=True), **kw)


def expected_memory(actions: np.ndarray, length: int) -> np.ndarray:
    """(T, n, 104): before each step, the decoy actions taken earlier in the same episode (``actions``: (T, n))."""
    T, n = actions.shape
    mem = np.zeros((T, n, DECOY_DIM), np.float32)
    for t in range(1, T):
        mem[t] = 0 if t % length == 0 else mem[t - 1]
        a = actions[t - 1]
        dec = (a >= A_DECOY) & (a < A_RESTORE)
        if t % length:
            mem[t, np.flatnonzero(dec), a[dec] - A_DECOY] = 1
    return mem


def test_remember_marks_decoys_only_and_forget_clears_ended_envs():
    placed = no_decoys(3)
    remember(placed, torch.tensor([A_DECOY + 5, 0, A_RESTORE]))       # a decoy, Sleep, a Restore
    remember(placed, torch.tensor([A_DECOY, A_RESTORE - 1, 1]))
    assert placed.sum(1).tolist() == [2, 1, 0] and placed[0, 5] == 1 and placed[0, 0] == 1
    assert placed[1, DECOY_DIM - 1] == 1
    remember(placed, torch.tensor([A_DECOY + 5, 0, 0]))               # a repeat changes nothing
    assert placed.sum().item() == 3
    forget(placed, torch.tensor([True, False, False]))
    assert placed.sum(1).tolist() == [0, 1, 0]
    assert A_RESTORE - A_DECOY == DECOY_DIM and input_dim(True) == BASE + DECOY_DIM <= N_ACTIONS + BASE


def test_the_trainer_feeds_each_env_its_own_decoys_of_this_episode(tmp_path):
    """Two episodes of 20 steps per rollout, two slots: every step's memory columns are exactly the decoy actions
    its env took earlier in the same episode (cleared at the boundary)."""
    cfg = mem_cfg(episode_length=20, update_every_steps=40, n_envs=8)
    bt = BatchedTrainer(cfg, 2)
    bt.start(0, cfg, tmp_path / "a")
    bt.start(1, mem_cfg(episode_length=20, update_every_steps=40, n_envs=8, workflow="U,OH,OS,E,D"), tmp_path / "b")
    batch, _, _ = bt._collect(40, np.array([8, 8]))
    assert batch.x.shape[-1] == input_dim(True)
    for k in range(2):
        acts = batch.actions[k].view(40, 8).numpy()
        mem = batch.x[k].view(40, 8, -1)[..., BASE:].numpy()
        assert np.array_equal(mem, expected_memory(acts, 20))
        assert mem.sum() > 0                                         # decoys were placed and remembered


def test_evaluation_remembers_decoys_from_each_episode_start():
    """``agent_act`` keeps the same memory as training: reset at t == 0, then each decoy it chose."""
    from workflow_rl.rl.evaluate import agent_act

    seen = []

    class Recorder(Agent):
        def act(self, x, generator=None, greedy=False):
            seen.append(x[:, BASE:].clone())
            a = torch.tensor([A_DECOY + 3, 7])[: x.shape[0]] if len(seen) % 2 else torch.tensor([A_DECOY, 0])
            return a, None, None

    act = agent_act(Recorder(decoy_memory=True), None, greedy=True)
    obs = torch.zeros(2, 52)
    for t in range(3):
        act(obs, t)
    assert [s.sum(1).tolist() for s in seen] == [[0, 0], [1, 0], [2, 0]]
    act(obs, 0)                                                       # a new episode: forgotten
    assert seen[-1].sum().item() == 0


def test_episode_workers_remember_decoys_like_the_trainer():
    from workflow_rl.envs.native import NativeEnv
    from workflow_rl.rl.episode_workers import _play

    torch.manual_seed(0)
    agent = Agent(decoy_memory=True)
    traj = _play(NativeEnv("B_lineAgent", 30), agent, torch.zeros(WORKFLOW_DIM), None, 0.0, 5, 6, 0)
    assert traj.x.shape == (30, input_dim(True))
    assert np.array_equal(traj.x[:, BASE:], expected_memory(traj.actions[:, None], 30)[:, 0])
    assert traj.x[:, BASE:].sum() > 0


@pytest.mark.slow
def test_a_run_with_decoy_memory_resumes_mid_episode_exactly_and_loads_for_evaluation(tmp_path):
    """Checkpointed 25 steps into its first episode (the memory in the engine snapshot) and resumed, it equals the
    uninterrupted run; its checkpoint builds an agent with the memory inputs."""
    full = Trainer(mem_cfg(update_every_steps=25), tmp_path / "full", progress=False)
    full.run()
    part = Trainer(mem_cfg(update_every_steps=25), tmp_path / "part", progress=False)
    part.batch.update(25, np.array([16]))                  # one update, mid-episode
    assert part.batch.placed.sum() > 0                      # something to remember across the checkpoint
    part.batch.save(0, engine=True)
    part.batch.close()
    resumed = Trainer(mem_cfg(update_every_steps=25), tmp_path / "part", progress=False)
    resumed.restore(load_checkpoint(tmp_path / "part" / "checkpoints" / "latest.pt"))
    resumed.run()
    assert read_log(tmp_path / "full") == read_log(tmp_path / "part")
    assert all(torch.equal(p, r) for p, r in zip(full.agent.parameters(), resumed.agent.parameters()))
    agent = agent_from_checkpoint(load_checkpoint(tmp_path / "full" / "checkpoints" / "latest.pt"))
    assert agent.decoy_memory and agent.actor[0].in_features == input_dim(True)
