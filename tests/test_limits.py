"""Sizes and settings (issue Q, item 3): every setting has a sane upper bound, training that goes non-finite stops
with one error line and keeps its last good checkpoint, the memory check holds requests against every limit on
the process (ulimit -v and -d, a container's), the planner's settings against memory together, worker counts
against the cores, and the public API checks what it is handed."""
import numpy as np
import pytest
import torch

from helpers import assert_one_error_line, run_main, tiny

from workflow_rl import resources

TINY = tiny(max_episodes=3, eval_episodes=0, checkpoint_every=1)


@pytest.mark.parametrize("args,match", [
    (["train", "--learning-rate", "2"], "--learning-rate must be in \\[0, 1\\]"),
    (["train", "--learning-rate", "1e30"], "--learning-rate must be in"),
    (["train", "--reward-scale", "1e30"], "--reward-scale must be in \\[0, 100\\]"),
    (["train", "--alignment-lambda", "1e30"], "--alignment-lambda must be in \\[0, 10000\\]"),
    (["search", "--learning-rate", "1e30"], "--learning-rate must be in"),
    (["replay", "sleep", "--length", "1000000000"], "3,000,000,000 steps, more than the 100,000 a replay page"),
    (["replay", "sleep", "--episodes", "1001"], "lower --length or --episodes"),
    (["bench", "--repeats", str(2**31)], "--repeats: must be in 1..100"),
    (["bench", "--cyborg-steps", str(2**31)], "--cyborg-steps: must be in 1..100,000"),
    (["curves", "--workers", "1000"], "--workers 1,000 starts that many processes, .* use at most"),
    (["evaluate", "sleep", "--workers", "1000"], "--workers: 1,000 starts that many processes"),
    (["train", "--vectorization", "episodes", "--n-workers", "1000", "--n-envs", "2000"], "--n-workers 1,000 starts"),
    (["evaluate", "sleep", "--plan", "--plan-rollouts", "1000000", "--plan-top-k", "100"],
     "planning with .* would need about .* of memory, .*: lower --plan-rollouts or --plan-top-k"),
    (["train", "--threads", "0"], "--threads: must be a count >= 1 .*, 'auto' .* or 'off'"),
    (["train", "--threads", "1000000"], r"--threads: must be a count >= 1 \(at most 1024\)"),
    (["evaluate", "sleep", "--threads", "1000000"], r"--threads: must be a count >= 1 \(at most 1024\)"),
    (["search", "--threads", "1025"], r"--threads: must be a count >= 1 \(at most 1024\)"),
    (["search", "--ray", "garbage://nowhere:1"], "--ray: 'garbage://nowhere:1' is not a Ray address: use"),
    (["search", "--ray", "localhost:99999"], "is not a Ray address"),
    (["search", "--ray", ""], "is not a Ray address"),
])
def test_sizes_and_settings_refused_in_one_line(args, match, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # a refused command writes nothing: its default folders would land here
    monkeypatch.setattr(resources, "usable_cores", lambda: 2)
    rc, _, err = run_main(args, capsys)
    assert_one_error_line(rc, err, match)
    assert not list(tmp_path.iterdir()), "a refused command wrote"


@pytest.mark.parametrize("poison", ["loss", "weights"])
def test_training_that_goes_non_finite_stops_and_keeps_the_last_good_checkpoint(poison, tmp_path, capsys, monkeypatch):
    """Within the bounds a run can still diverge (a setting near its bound, an unlucky seed): the update that goes
    NaN (here made to) ends the run with one line naming the settings to lower, before it is logged or saved."""
    from workflow_rl.rl.stack import StackedUpdate

    real, calls = StackedUpdate.run, []

    def run(self, *a, **k):
        stats = real(self, *a, **k)
        calls.append(1)
        if len(calls) == 2:   # the second update diverges
            if poison == "loss":
                stats[0]["value_loss"] = float("nan")
            else:
                self.agents.flat.data[0, :5] = float("inf")
        return stats

    monkeypatch.setattr(StackedUpdate, "run", run)
    out = tmp_path / "run"
    rc, _, err = run_main(["train", *TINY, "--reward-scale", "50", "--out", str(out)], capsys)
    assert_one_error_line(rc, err, "training diverged: update 2's " + ("value_loss" if poison == "loss" else "weights")
                    + " is not finite .* lower --reward-scale \\(now 50, default 0.1\\), or --learning-rate")
    ck = torch.load(out / "checkpoints" / "latest.pt", weights_only=False)
    assert ck["counters"]["update"] == 1   # the first update's checkpoint, not the diverged one
    assert all(torch.isfinite(v).all() for v in ck["agent"].values())
    assert len((out / "training_log.csv").read_text().splitlines()) == 2   # header and update 1 only


def test_divergence_names_the_setting_furthest_above_its_default():
    from workflow_rl.rl.config import TrainConfig, divergence_message

    msg = divergence_message(TrainConfig.from_flat({"learning_rate": 0.5}), "update 3's value_loss")
    assert msg.index("--learning-rate (now 0.5") < msg.index("--reward-scale") < msg.index("--alignment-lambda")
    assert "--alignment-lambda" not in divergence_message(TrainConfig(workflow=None), "x")   # plain PPO has none


def _limits(monkeypatch, rlimits: dict, used: int = 2**30) -> None:
    """Fake address-space/data limits (bytes) and what the process already maps, on a machine of 64 GiB."""
    import resource

    monkeypatch.setattr(resources, "physical_memory", lambda: 64 * 2**30)
    monkeypatch.setattr(resources, "cgroup_memory_limit", lambda: None)
    monkeypatch.setattr(resources.resource, "getrlimit",
                        lambda res: (rlimits.get(res, resource.RLIM_INFINITY), resource.RLIM_INFINITY))
    monkeypatch.setattr(resources, "process_memory", lambda field: used)


@pytest.mark.parametrize("limit,match", [("RLIMIT_AS", ("address-space limit leaves \\(ulimit -v: 3.0 GiB, of which "
                                                        "this process already maps 1.0 GiB\\).*raise the limit")),
                                         ("RLIMIT_DATA", "data-size limit .*ulimit -d")])
def test_the_memory_check_holds_requests_against_ulimits(limit, match, monkeypatch):
    import resource

    from workflow_rl.rl.config import TrainConfig

    _limits(monkeypatch, {getattr(resource, limit): 3 * 2**30})
    TrainConfig().check_memory(1)   # the defaults fit the 2 GiB left
    with pytest.raises(ValueError, match=match):
        TrainConfig(n_envs=20_000).check_memory(1)   # ~2.7 GiB: fits the machine, not what the limit leaves


def test_the_memory_check_holds_requests_against_a_containers_limit(monkeypatch):
    from workflow_rl.rl.config import TrainConfig

    _limits(monkeypatch, {})
    monkeypatch.setattr(resources, "cgroup_memory_limit", lambda: 2**30)
    with pytest.raises(ValueError, match="this container's memory limit \\(cgroup\\), 1.0 GiB: use fewer envs"):
        TrainConfig(n_envs=20_000).check_memory(1)


def test_planner_settings_are_checked_against_memory_together(monkeypatch):
    from workflow_rl.rl.planning.planner import PlanConfig

    _limits(monkeypatch, {})
    PlanConfig().validate()
    PlanConfig(particles=2**20).validate()   # each setting within range and together within memory: accepted
    with pytest.raises(ValueError, match="lower --plan-rollouts or --plan-top-k"):
        PlanConfig(rollouts=2**20, top_k=145).validate()
    with pytest.raises(ValueError, match="for 100,000 envs at once .*: lower --plan-particles or plan fewer envs"):
        PlanConfig(particles=2**16).check_memory(100_000)


def test_worker_counts_are_bounded_by_the_cores(monkeypatch):
    monkeypatch.setattr(resources, "usable_cores", lambda: 2)
    assert resources.check_workers("--workers", 8) == 8
    with pytest.raises(ValueError, match="--workers 9 starts .* 4 per core of the 2 .* use at most 8"):
        resources.check_workers("--workers", 9)


def test_usable_cores_reads_affinity_and_cgroup_quota(monkeypatch):
    monkeypatch.setattr(resources.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(resources, "_cgroup_cpu_quota", lambda: None)
    assert resources.usable_cores() == 4
    monkeypatch.setattr(resources, "_cgroup_cpu_quota", lambda: 1.5)   # docker --cpus 1.5
    assert resources.usable_cores() == 2


# ---------------------------------------------------------------------------------------------------- the API
def _gym_make(**kw):
    import gymnasium as gym

    import workflow_rl.envs  # noqa: F401  (registers the env)

    return gym.make("workflow_rl/CAGE2-v0", **kw)


@pytest.fixture(scope="module")
def act():
    from workflow_rl.rl.planning.planner import make_act

    return make_act("pretrained:universal")


@pytest.mark.parametrize("call,match", [
    (lambda act: _gym_make(episode_length=-5), "episode_length must be in \\[1, "),
    (lambda act: _gym_make(episode_length=2.5), "episode_length must be an integer"),
    (lambda act: _gym_make(official_bugs="no"), "official_bugs must be True or False"),
    (lambda act: act(np.zeros(51), 0), ("act takes one observation of shape \\(52,\\) or a batch \\(N, 52\\), "
                                        "got shape \\(51,\\)")),
    (lambda act: act(np.full(52, np.nan), 0), "observation bits 0 or 1 .* got nan"),
    (lambda act: act(np.full(52, 0.5), 0), "observation bits 0 or 1 .* got 0.5"),
    (lambda act: act([[0] * 52, [0] * 51], 0), "act takes an observation of 52 values"),
    (lambda act: act(np.zeros(52), -1), "step within the episode as an integer t >= 0"),
    (lambda act: act(np.zeros(52), 1.5), "step within the episode as an integer t >= 0"),
])
def test_the_python_api_checks_what_it_is_handed(call, match, act):
    with pytest.raises(ValueError, match=match):
        call(act)


def test_act_still_takes_bits_of_any_numeric_kind(act):
    a = act(np.zeros(52, np.int64), 0)
    assert isinstance(a, int) and a == act([0.0] * 52, 0) == act(torch.zeros(52, dtype=torch.bool), 0)
    assert act(np.zeros((3, 52), np.float32), 0).shape == (3,)
    _gym_make(episode_length=np.int64(30))   # a numpy count is a count


@pytest.mark.parametrize("address", [None, "local", "auto", "ray://head:10001", "10.0.0.2:6379", "head:6379"])
def test_ray_addresses_of_every_documented_form_pass_the_check(address):
    from workflow_rl.search.ray_executor import check_ray_address

    assert check_ray_address(address) == address
