"""Episode memory (``--decoy-memory``, ``--red-memory``): the policy input remembers the decoys blue placed and the
red activity it saw this episode, the same way in the batched trainer, in evaluation and in episode workers, and a
run with it resumes exactly."""
import numpy as np
import pytest
import torch
from helpers import read_log, train_cfg

from workflow_rl.rl.checkpoint import agent_from_checkpoint, load_checkpoint
from workflow_rl.rl.memory import DECOY_DIM, RED_DIM, Memory, forget
from workflow_rl.rl.ppo import OBS_DIM, WORKFLOW_DIM, Agent, PPOConfig, input_dim
from workflow_rl.rl.trainer import BatchedTrainer, Trainer
from workflow_rl.sim.tables import A_DECOY, A_RESTORE, N_ACTIONS

BASE = OBS_DIM + WORKFLOW_DIM   # where the memory starts in the policy input
DECOYS, RED, BOTH = Memory(decoys=True), Memory(red=True), Memory(decoys=True, red=True)


def mem_cfg(decoys=True, red=False, **kw):
    return train_cfg(ppo=PPOConfig(decoy_memory=decoys, red_memory=red), **kw)


def expected_decoys(actions: np.ndarray, length: int) -> np.ndarray:
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


def expected_red(obs: np.ndarray, length: int) -> np.ndarray:
    """(T, n, 26): at each step, per host, whether any observation of the episode so far (this step's included)
    showed red activity (bit 0 of the host's four), then an exploit (bit 1)."""
    T, n, _ = obs.shape
    seen = obs.reshape(T, n, 13, 4)[..., :2].transpose(0, 1, 3, 2).reshape(T, n, RED_DIM)
    mem = np.zeros((T, n, RED_DIM), np.float32)
    for t in range(T):
        mem[t] = np.maximum(seen[t], 0 if t % length == 0 else mem[t - 1])
    return mem


def test_took_marks_decoys_only_and_forget_clears_ended_envs():
    mem = DECOYS.blank(3)
    DECOYS.took(mem, torch.tensor([A_DECOY + 5, 0, A_RESTORE]))       # a decoy, Sleep, a Restore
    DECOYS.took(mem, torch.tensor([A_DECOY, A_RESTORE - 1, 1]))
    assert mem.sum(1).tolist() == [2, 1, 0] and mem[0, 5] == 1 and mem[0, 0] == 1
    assert mem[1, DECOY_DIM - 1] == 1
    DECOYS.took(mem, torch.tensor([A_DECOY + 5, 0, 0]))               # a repeat changes nothing
    assert mem.sum().item() == 3
    forget(mem, torch.tensor([True, False, False]))
    assert mem.sum(1).tolist() == [0, 1, 0]
    assert DECOY_DIM == 104 and input_dim(DECOYS) == BASE + DECOY_DIM <= N_ACTIONS + BASE
    assert Memory().blank(3) is None and input_dim(Memory()) == BASE


def test_saw_keeps_activity_and_exploits_per_host_and_leaves_the_decoy_block_alone():
    mem = BOTH.blank(2)
    obs = torch.zeros(2, OBS_DIM)
    obs[0, 4 * 3] = 1                      # env 0: a scan on host 3
    obs[1, 4 * 7], obs[1, 4 * 7 + 1] = 1, 1   # env 1: an exploit on host 7
    obs[1, 4 * 2 + 2] = 1                  # a compromise bit: not red activity
    BOTH.saw(mem, obs)
    BOTH.saw(mem, torch.zeros(2, OBS_DIM))   # the next step shows nothing: remembered anyway
    red = mem[:, DECOY_DIM:]
    assert mem[:, :DECOY_DIM].sum() == 0 and red.shape == (2, RED_DIM)
    assert red[0].nonzero().flatten().tolist() == [3]
    assert red[1].nonzero().flatten().tolist() == [7, 13 + 7]
    assert input_dim(BOTH) == BASE + DECOY_DIM + RED_DIM and input_dim(RED) == BASE + RED_DIM


def test_memory_of_a_saved_config_defaults_to_off():
    assert Memory.of({"hidden": [64, 64]}) == Memory()
    assert Memory.of({"decoy_memory": True}) == DECOYS
    assert Memory.of(PPOConfig(decoy_memory=True, red_memory=True)) == BOTH


@pytest.mark.parametrize("red", [False, True])
def test_the_trainer_feeds_each_env_its_own_memory_of_this_episode(tmp_path, red):
    """Two episodes of 20 steps per rollout, two slots: every step's memory columns are exactly the decoy actions
    its env took earlier in the same episode and the red activity its observations showed (cleared at the
    boundary)."""
    cfg = mem_cfg(red=red, episode_length=20, update_every_steps=40, n_envs=8)
    bt = BatchedTrainer(cfg, 2)
    bt.start(0, cfg, tmp_path / "a")
    bt.start(1, mem_cfg(red=red, episode_length=20, update_every_steps=40, n_envs=8, workflow="U,OH,OS,E,D"),
             tmp_path / "b")
    batch, _, _ = bt._collect(40, np.array([8, 8]))
    assert batch.x.shape[-1] == input_dim(Memory(True, red))
    for k in range(2):
        acts = batch.actions[k].view(40, 8).numpy()
        x = batch.x[k].view(40, 8, -1).numpy()
        mem = x[..., BASE:BASE + DECOY_DIM]
        assert np.array_equal(mem, expected_decoys(acts, 20))
        assert mem.sum() > 0                                         # decoys were placed and remembered
        if red:
            got = x[..., BASE + DECOY_DIM:]
            assert np.array_equal(got, expected_red(x[..., :OBS_DIM], 20))
            assert got.sum() > x[..., :OBS_DIM].reshape(40, 8, 13, 4)[..., :2].sum()   # more than this step shows


def test_evaluation_remembers_from_each_episode_start():
    """``make_act`` keeps the same memory as training: reset at t == 0, then each decoy it chose and the red
    activity it saw, this step's included."""
    from workflow_rl.rl.planning.planner import make_act

    seen = []

    class Recorder(Agent):
        def logits(self, x):   # what acting reads (rl.actor.Actor.act): logits whose greedy choice is ``a``
            seen.append(x[:, BASE:].clone())
            a = torch.tensor([A_DECOY + 3, 7])[: x.shape[0]] if len(seen) % 2 else torch.tensor([A_DECOY, 0])
            return torch.nn.functional.one_hot(a, N_ACTIONS).float()

    act = make_act(Recorder(memory=BOTH))
    obs = torch.zeros(2, OBS_DIM)
    scan = obs.clone()
    scan[1, 4 * 5] = 1
    for t, o in enumerate((obs, scan, obs)):
        act(o, t)
    assert [s[:, :DECOY_DIM].sum(1).tolist() for s in seen] == [[0, 0], [1, 0], [2, 0]]
    assert [s[:, DECOY_DIM:].sum(1).tolist() for s in seen] == [[0, 0], [0, 1], [0, 1]]
    act(obs, 0)                                                       # a new episode: forgotten
    assert seen[-1].sum().item() == 0


def test_episode_workers_remember_like_the_trainer():
    from workflow_rl.envs.native_env import NativeEnv
    from workflow_rl.rl.episode_workers import _play

    torch.manual_seed(0)
    agent = Agent(memory=BOTH)
    traj = _play(NativeEnv("RedMeanderAgent", 30), agent, torch.zeros(WORKFLOW_DIM), None, 0.0, 5, 6, 0)
    assert traj.x.shape == (30, input_dim(BOTH))
    assert np.array_equal(traj.x[:, BASE:BASE + DECOY_DIM], expected_decoys(traj.actions[:, None], 30)[:, 0])
    assert np.array_equal(traj.x[:, BASE + DECOY_DIM:], expected_red(traj.x[:, None, :OBS_DIM], 30)[:, 0])
    assert traj.x[:, BASE:BASE + DECOY_DIM].sum() > 0 and traj.x[:, BASE + DECOY_DIM:].sum() > 0


def test_episode_workers_pay_the_configured_alignment_reward():
    """The episode-worker path counts fixes as the trainer does and pays the chosen form: -lambda/100 per
    violation and nothing else under ``violations``; the same episode's counts under ``ratio``."""
    from workflow_rl.envs.native_env import NativeEnv
    from workflow_rl.rl.compliance import VIOLATION_SCALE
    from workflow_rl.rl.episode_workers import _play
    from workflow_rl.workflow import Workflow

    wf = Workflow.parse("reverse")
    torch.manual_seed(0)
    agent = Agent()
    play = [_play(NativeEnv("B_lineAgent", 100), agent, torch.as_tensor(wf.encode()), torch.as_tensor(wf.rank),
                  10.0, 5, 6, 0, form=f) for f in ("ratio", "violations")]
    assert np.array_equal(play[0].actions, play[1].actions) and play[0].violations == play[1].violations > 0
    assert set(np.round(play[1].rewards["align"] * VIOLATION_SCALE / 10.0, 5)) <= {0.0, -1.0}
    assert play[1].rewards["align"].sum() == pytest.approx(-10.0 * play[1].violations / VIOLATION_SCALE, abs=1e-4)


@pytest.mark.slow
def test_a_run_with_memory_resumes_mid_episode_exactly_and_loads_for_evaluation(tmp_path):
    """Checkpointed 25 steps into its first episode (the memory in the engine snapshot) and resumed, it equals the
    uninterrupted run; its checkpoint builds an agent with the memory inputs."""
    cfg = lambda: mem_cfg(red=True, update_every_steps=25)   # noqa: E731
    full = Trainer(cfg(), tmp_path / "full", progress=False)
    full.run()
    part = Trainer(cfg(), tmp_path / "part", progress=False)
    part.batch.update(25, np.array([16]))                  # one update, mid-episode
    assert part.batch.mem[:, :DECOY_DIM].sum() > 0 and part.batch.mem[:, DECOY_DIM:].sum() > 0
    part.batch.save(0, engine=True)
    part.batch.close()
    resumed = Trainer(cfg(), tmp_path / "part", progress=False)
    resumed.restore(load_checkpoint(tmp_path / "part" / "checkpoints" / "latest.pt"))
    resumed.run()
    assert read_log(tmp_path / "full") == read_log(tmp_path / "part")
    assert all(torch.equal(p, r) for p, r in zip(full.agent.parameters(), resumed.agent.parameters()))
    agent = agent_from_checkpoint(load_checkpoint(tmp_path / "full" / "checkpoints" / "latest.pt"), "cpu")
    assert agent.memory == BOTH and agent.actor[0].in_features == input_dim(BOTH)


def test_a_checkpoint_of_the_old_decoy_only_format_still_resumes(tmp_path):
    """Checkpoints written before ``--red-memory`` keep the decoy memory under ``decoys_placed``."""
    part = Trainer(mem_cfg(update_every_steps=25), tmp_path / "run", progress=False)
    part.batch.update(25, np.array([16]))
    part.batch.save(0, engine=True)
    part.batch.close()
    path = tmp_path / "run" / "checkpoints" / "latest.pt"
    ck = load_checkpoint(path)
    ck["decoys_placed"] = ck.pop("memory")
    again = Trainer(mem_cfg(update_every_steps=25), tmp_path / "run", progress=False)
    again.restore(ck)
    assert torch.equal(again.batch.mem, ck["decoys_placed"])


# ------------------------------------------------------------------------------------------------ --mask-decoys
MASKED = Memory(decoys=True, masked=True)


def test_the_decoy_mask_agrees_with_the_engine_on_every_pair_of_decoys_on_a_host():
    """For every host and every decoy a placed first (or none), then decoy b: the native engine (official rules,
    red asleep) changes the host's decoys at the second step exactly when the mask allows b. The one deliberate
    difference: official Vsftpd stacks on itself (it checks port 21 and opens 80), which the mask forbids."""
    from workflow_rl.rl.memory import _POSSIBLE
    from workflow_rl.sim import native
    from workflow_rl.sim.tables import N_HOSTS, RED_SLEEP, D_VSFTPD

    firsts = [None] + [j for j in range(DECOY_DIM) if _POSSIBLE[j]]
    pairs = [(a, b) for a in firsts for b in range(DECOY_DIM) if a is None or a % N_HOSTS == b % N_HOSTS]
    n = len(pairs)
    state, buf = native.allocate_state(n), native.allocate_buffers(n)
    native.seed_state(state, 0, RED_SLEEP)
    native.reset_envs(state, buf)
    first = np.array([0 if a is None else A_DECOY + a for a, _ in pairs])
    native.step(state, first, buf, 100)
    before = state.decoys.copy(), state.vsftpd.copy()
    native.step(state, np.array([A_DECOY + b for _, b in pairs]), buf, 100)
    changed = ((state.decoys != before[0]) | (state.vsftpd != before[1])).any(1)

    mem = MASKED.blank(n)
    MASKED.took(mem, torch.as_tensor(first))
    x = torch.cat([torch.zeros(n, BASE), mem], 1)
    allowed = MASKED.mask(torch.zeros(n, N_ACTIONS), x)[torch.arange(n), A_DECOY + torch.tensor([b for _, b in pairs])] == 0
    vs_on_vs = np.array([a is not None and a == b and b // N_HOSTS == D_VSFTPD for a, b in pairs])
    assert changed[vs_on_vs].all() and not allowed.numpy()[vs_on_vs].any()
    assert np.array_equal(changed[~vs_on_vs], allowed.numpy()[~vs_on_vs])
    assert 0 < allowed.sum() < n


def test_masked_memory_clears_a_restored_hosts_decoys_and_ignores_impossible_ones():
    h, other = 7, 1                                            # Op_Server0, Enterprise0
    apache, femitter = 0, 1                                    # decoy types: Apache is possible on both hosts here
    for memory, cleared in ((MASKED, True), (DECOYS, False)):
        mem = memory.blank(1)
        memory.took(mem, torch.tensor([A_DECOY + 13 * apache + h]))
        memory.took(mem, torch.tensor([A_DECOY + 13 * apache + other]))
        memory.took(mem, torch.tensor([A_RESTORE + h]))
        assert mem[0, 13 * apache + h].item() == (0.0 if cleared else 1.0)
        assert mem[0, 13 * apache + other].item() == 1.0       # another host's decoys stay
    mem = MASKED.blank(1)
    MASKED.took(mem, torch.tensor([A_DECOY + 13 * femitter + h]))   # Femitter is Windows-only: nothing placed
    assert mem.sum() == 0


def test_a_masked_agent_never_picks_an_impossible_or_placed_decoy_and_its_entropy_stays_finite():
    torch.manual_seed(0)
    agent = Agent((32,), MASKED)
    with torch.no_grad():
        agent.actor[-1].bias[A_DECOY:A_RESTORE] = 50.0         # it wants nothing but decoys
    mem = MASKED.blank(64)
    g = torch.Generator().manual_seed(0)
    for _ in range(30):
        x = torch.cat([torch.rand(64, BASE), mem], 1)
        a, logp, _ = agent.act(x, g)
        allowed = agent.logits(x).gather(1, a[:, None]).squeeze(1) > -1e7
        assert allowed.all() and torch.isfinite(logp).all()
        newlogp, ent, _ = agent.evaluate(x, a)
        assert torch.allclose(newlogp, logp) and torch.isfinite(ent).all()
        MASKED.took(mem, a)
    # every possible decoy got placed once, none twice: at most 41 decoys per env, and then something else
    assert (mem.sum(1) <= 41).all() and mem.sum() > 0
    assert Memory.of(PPOConfig(decoy_memory=True, mask_decoys=True)) == MASKED


def test_mask_decoys_without_the_decoy_memory_is_refused():
    cfg = train_cfg(ppo=PPOConfig(mask_decoys=True))
    with pytest.raises(ValueError, match="--decoy-memory"):
        cfg.validate()


def test_the_trainer_with_masked_decoys_never_repeats_a_decoy_in_place(tmp_path):
    cfg = train_cfg(ppo=PPOConfig(decoy_memory=True, mask_decoys=True), episode_length=20, update_every_steps=20,
                    n_envs=16)
    bt = BatchedTrainer(cfg, 1)
    bt.start(0, cfg, tmp_path / "a")
    batch, _, _ = bt._collect(20, np.array([16]))
    acts = batch.actions[0].view(20, 16).numpy()
    x = batch.x[0].view(20, 16, -1)
    mem = x[..., BASE:BASE + DECOY_DIM].numpy()
    dec = (acts >= A_DECOY) & (acts < A_RESTORE)
    assert dec.sum() > 0
    t, i = np.nonzero(dec)
    assert (mem[t, i, acts[t, i] - A_DECOY] == 0).all()        # never a decoy already in place


def test_the_clock_counts_this_episodes_steps_in_training_evaluation_and_episode_workers(tmp_path):
    """``--clock-memory``: the last policy input is the steps taken so far this episode / 100 -- 0 at every
    episode's first step, in the trainer (two 20-step episodes per rollout), in ``make_act`` and in the episode
    workers alike, after the decoy block it leaves intact."""
    from workflow_rl.envs.native_env import NativeEnv
    from workflow_rl.rl.episode_workers import _play
    from workflow_rl.rl.planning.planner import make_act

    clock = Memory(decoys=True, clock=True)
    assert clock.dim == DECOY_DIM + 1 and Memory.of(PPOConfig(decoy_memory=True, clock_memory=True)) == clock
    assert Memory(clock=True).flags == "--clock-memory"
    cfg = train_cfg(ppo=PPOConfig(decoy_memory=True, clock_memory=True), episode_length=20, update_every_steps=40,
                    n_envs=8)
    bt = BatchedTrainer(cfg, 1)
    bt.start(0, cfg, tmp_path / "a")
    batch, _, _ = bt._collect(40, np.array([8]))
    x = batch.x[0].view(40, 8, -1).numpy()
    want = (np.arange(40) % 20)[:, None] * np.float32(0.01)
    assert np.allclose(x[..., -1], want, atol=1e-6)
    assert np.array_equal(x[..., BASE:BASE + DECOY_DIM], expected_decoys(batch.actions[0].view(40, 8).numpy(), 20))
    seen = []

    class Recorder(Agent):
        def logits(self, x):   # what acting reads (rl.actor.Actor.act)
            seen.append(float(x[0, -1]))
            return torch.zeros(x.shape[0], N_ACTIONS)

    act = make_act(Recorder(memory=clock))
    for t in (0, 1, 2, 0, 1):
        act(torch.zeros(1, OBS_DIM), t)
    assert seen == pytest.approx([0.0, 0.01, 0.02, 0.0, 0.01])
    traj = _play(NativeEnv("B_lineAgent", 30), Agent(memory=clock), torch.zeros(WORKFLOW_DIM), None, 0.0, 5, 6, 0)
    assert np.allclose(traj.x[:, -1], np.arange(30) * 0.01, atol=1e-6)


def test_a_run_may_add_the_clock_to_weights_trained_without_it():
    """``--init-checkpoint pretrained:universal --clock-memory``: the clock's input weights start at zero, so the new
    network chooses exactly as the old one whatever the clock reads; other changes of memory are still refused."""
    from workflow_rl.rl import pretrained

    old, _ = pretrained.load("pretrained:universal")
    ppo = PPOConfig(hidden=(256, 256), decoy_memory=True, mask_decoys=True, clock_memory=True)
    new = Agent((256, 256), Memory.of(ppo))
    new.load_state_dict(pretrained.starting_weights("pretrained:universal", ppo))
    x = torch.rand(64, input_dim(old.memory)).round()
    x_clock = torch.cat([x, torch.rand(64, 1)], 1)
    assert torch.allclose(new.logits(x_clock), old.logits(x), atol=1e-5)
    assert torch.allclose(new.value(x_clock), old.value(x), atol=1e-5)
    with pytest.raises(ValueError, match="same --hidden and memory flags"):
        pretrained.starting_weights("pretrained:universal", PPOConfig(hidden=(256, 256), decoy_memory=True,
                                                                  mask_decoys=True, red_memory=True, clock_memory=True))
