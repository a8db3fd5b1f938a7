"""One prepared GPU run: check the CUDA kernel against the CPU kernel, time it, then time training and a search.

Usage, on a machine with a CUDA GPU, from a plain checkout (no install needed):

    PYTHONPATH=. python benchmarks/device/gpu_check.py --out "${OUT:-benchmarks/results/gpu}"

``--device cpu --engine-sizes 4096 --train-envs 64 --search-episodes 400 --search-batches 2 --batch-slots 2
--equality-envs 12 --equality-steps 30`` dry-runs every stage on a CPU (equality under numba's CUDA simulator,
engine timings of the CPU kernel): ``tests/test_benchmarks.py`` does this so the script does not rot.

Stages, most important first; each runs in its own process under its own time cap, and the whole run stays within
``--budget`` seconds (default 330: under 6 minutes). Every stage's result, error or time-out goes to OUT/gpu.json as
soon as it ends, so one failing stage never loses the others:
1. equality: the CUDA kernel and the CPU kernel stepped side by side (``sim.cuda.lockstep_mismatch``, 2,048 envs x
   200 steps, B_line, Meander and Sleep red agents, random and scripted defenders, bugs on and off; every output and
   the whole state compared after every step; and bugs on with the GPU arrays host-major, ``layout="F"``), then
   ``make_vector_env(device="cuda")`` against the CPU env in both layouts;
2. graphs / rollout: the PPO update and the rollout replayed as CUDA graphs against the same work launched op by op
   (bit equality, milliseconds each way);
3. engine: env-steps/s of the CUDA kernel at 4,096, 65,536, 1,048,576 and 4,194,304 envs through
   ``env.step_tensor`` with random actions drawn on the device (a pool of 8, cycled), kernel launch included,
   synchronised, median of 5; each also replayed as a CUDA graph (no launch path), in both GPU layouts (C
   env-major, F host-major: ``sim.native.GPU_LAYOUTS``), with the kernel's registers, local memory and PTX counts;
   registers: the engine again at >= 1M envs (layout F) with the kernel capped at ``--max-registers`` registers
   per thread (``sim.cuda.MAX_REGISTERS``: more warps per SM against spills);
   planner: a decision of the planner with its rollouts on the GPU (``--plan-device cuda``) against the CPU's, at
   ``--planner-rollouts`` futures per candidate: milliseconds per decision and whether both chose alike;
4. batched multi-workflow training (``benchmarks/studies/bench_batched.py``, with torch's profiler on one more round
   on a GPU), 5. the 100k search under each claim rule (``benchmarks/studies/search_claims.py``; ``--claims-profile``:
   under cProfile too) and one at a time, 6. single-workflow training at a large batch (``workflow-rl train``),
7. expert iteration (``workflow-rl expert-iterate``, its planner's rollouts on the GPU) for ``--expert-rounds``
   rounds under a wall cap, its rounds' log.
``--stages`` runs a subset (a device call spends its minutes on what is still unmeasured).
The card, torch, numpy, numba and numba-cuda versions (or numba-cuda's import error) go with the numbers.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from workflow_rl.sim.native import GPU_LAYOUTS

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("equality", "graphs", "rollout", "engine", "planner")
"""The stages run as child processes of this script (``--stage``), in this order."""
ALL_STAGES = (*STAGES, "registers", "batched", "claims", "search", "train", "expert")
"""Every stage ``--stages`` can name, in the order they run."""


def _save(out: Path, results: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu.json").write_text(json.dumps(results, indent=2))


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _versions() -> dict:
    out = {"torch": torch.__version__, "numpy": np.__version__}
    for pkg in ("numba", "numba-cuda"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    r = subprocess.run([sys.executable, "-c", "import workflow_rl.sim.cuda"],
                       capture_output=True, text=True, cwd=ROOT, env=_env())
    out["numba_cuda_import"] = "ok" if r.returncode == 0 else "FAILED: " + r.stderr.strip().splitlines()[-1]
    return out


def stage_planner(args) -> dict:
    """The shipped agent planned on one native B_line episode of ``--planner-steps`` steps, its rollouts on the CPU
    (up to ``--planner-cpu-max`` rollouts) and on the CUDA engine (``PlanConfig.device``), at each of
    ``--planner-rollouts`` futures per candidate: wall milliseconds per decision (median over the decisions after
    the first, which compiles; the returns' copy back synchronises each), and whether both played the same actions
    (they must: one rule source, one counter-based RNG). A CPU dry run plays the CUDA side under numba's simulator."""
    from workflow_rl import make_vector_env
    from workflow_rl.rl import pretrained
    from workflow_rl.rl.planning.planner import PlanConfig, make_act

    agent, _ = pretrained.load("pretrained:universal")
    rows = []
    for r in args.planner_rollouts:
        played = {}
        for dev in ("cpu", "cuda") if r <= args.planner_cpu_max else ("cuda",):
            plan = PlanConfig(particles=args.planner_particles, rollouts=r, device=dev)
            env = make_vector_env(1, "B_lineAgent", episode_length=args.planner_steps, seed=1)
            obs, _ = env.reset(seed=1)
            act, times, actions, ret = make_act(agent, plan, seed=0), [], [], 0.0
            for t in range(args.planner_steps):
                t0 = time.perf_counter()
                a = act(obs[0], t)
                times.append(time.perf_counter() - t0)
                actions.append(a)
                obs, reward, *_ = env.step(np.array([a]))
                ret += float(reward[0])
            planned = times[len(agent.opening) + 1:]   # after the opening and the first (compiling) decision
            played[dev] = actions
            rows.append({"rollouts": r, "device": dev, "particles": args.planner_particles,
                         "candidates": plan.top_k + plan.fix_candidates,
                         "ms_per_decision": 1e3 * statistics.median(planned) if planned else None,
                         "first_decision_s": times[len(agent.opening)] if len(times) > len(agent.opening) else None,
                         "return": ret})
            print(rows[-1], flush=True)
        if len(played) == 2:
            rows[-1]["same_actions_as_cpu"] = played["cpu"] == played["cuda"]
    return {"rows": rows, "timing": "wall clock per act(obs, t) call (belief update + search), one env"}


def _env(simulate: bool = False) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    if simulate:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    return env


# ------------------------------------------------------------------------------------------------------ stage 1
def stage_equality(args) -> dict:
    """CUDA kernel == CPU kernel, engine level for both bug settings, then through the vector env."""
    import warnings

    from workflow_rl.policies import POLICIES
    from workflow_rl.sim import cuda as C

    warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)   # only under the simulator
    out = {"envs": args.equality_envs, "steps": args.equality_steps}
    for bugs, layout in ((True, "C"), (False, "C"), (True, "F")):
        key = f"official_bugs={bugs}" + ("" if layout == "C" else f",layout={layout}")
        t0 = time.perf_counter()
        out[key] = C.lockstep_mismatch(args.equality_envs, args.equality_steps, bugs, list(POLICIES.values()),
                                       seed=7, layout=layout) or "equal"
        out[f"{key}_s"] = round(time.perf_counter() - t0, 2)
    if args.device.startswith("cuda"):
        out["vector_env"] = _env_equality(args.equality_envs, args.equality_steps)
        out["vector_env,layout=F"] = _env_equality(args.equality_envs, args.equality_steps, "F")
    out["equal"] = all(v == "equal" for k, v in out.items() if k.startswith(("official_bugs=", "vector_env"))
                       and not k.endswith("_s"))
    return out


def _env_equality(n: int, steps: int, layout: str = "C") -> str:
    from workflow_rl import make_vector_env

    a, b = make_vector_env(n, "meander", seed=4), make_vector_env(n, "meander", seed=4, device="cuda",
                                                                  gpu_layout=layout)
    a.reset(), b.reset()
    rng = np.random.default_rng(0)
    for t in range(steps):
        act = rng.integers(0, 145, n)
        ra, rb = a.step(act), b.step(act)
        for name, x, y in zip(("obs", "reward", "terminated", "truncated"), ra[:4], rb[:4]):
            if not np.array_equal(x, y):
                return f"step {t}: {name} differs"
        if not np.array_equal(ra[4]["red_access"], rb[4]["red_access"]):
            return f"step {t}: red_access differs"
        if "final_obs" in ra[4] and not np.array_equal(ra[4]["final_obs"], rb[4]["final_obs"]):
            return f"step {t}: final_obs differs"
    return "equal"


# ------------------------------------------------------------------------------------------------------ stage 2
def stage_engine(args) -> dict:
    """Each size twice: launched step by step from Python (``env.step_tensor``: the dispatcher types and marshals
    every state array on the CPU at each launch), and as the rollout now runs it, 8 steps captured once as a CUDA
    graph and replayed (no Python per step). Their gap is the launch path; at small sizes it is most of a step."""
    rows = []
    cuda = args.device.startswith("cuda")
    for n in args.engine_sizes:
        for red in ("bline", "meander"):
            for layout in args.engine_layouts if cuda else ["C"]:
                runs = _time_engine(n, red, args.device, layout=layout)
                row = {"n_envs": n, "red": red, "layout": layout, "env_steps_per_s": statistics.median(runs),
                       "min": min(runs), "max": max(runs), "us_per_step": n / statistics.median(runs) * 1e6}
                if cuda:
                    graphed = _time_engine(n, red, args.device, graph=True, layout=layout)
                    row.update({"graph_env_steps_per_s": statistics.median(graphed),
                                "graph_us_per_step": n / statistics.median(graphed) * 1e6})
                rows.append(row)
                print(rows[-1], flush=True)
    return {"rows": rows, "timing": "env.step_tensor, device-drawn random actions (pool of 8), synchronised, "
                                   "median of 5 runs of >= 0.3 s; graph_*: the 8 steps replayed as one CUDA graph",
            **({"kernel": _kernel_resources()} if args.device.startswith("cuda") else {})}


def _kernel_resources() -> dict:
    """What the compiled step kernel asks of the GPU, per compiled layout (registers and local memory per thread
    limit occupancy; float64 and local-memory instructions in its PTX are the usual suspects of a kernel far from
    the memory roofline)."""
    from workflow_rl.sim import cuda as C

    k, out = C.kernel(), {"max_registers_cap": C.MAX_REGISTERS}
    for sig, compiled in list(k.overloads.items()):
        layout = "F" if "2d, F" in str(sig) else "C"   # which GPU layout this compilation is for (numba's array type)
        row = out.setdefault(layout, {})
        for name in ("regs_per_thread", "local_mem_per_thread", "shared_mem_per_block", "max_threads_per_block"):
            try:
                row[name] = getattr(compiled, name)
            except Exception as e:  # noqa: BLE001 - a diagnostic; report what failed and go on
                row[name] = f"unavailable ({type(e).__name__})"
        try:
            ptx = compiled.library.get_asm_str()
            row["ptx_lines"] = ptx.count("\n")
            row.update({f"ptx_{tag}": ptx.count(tag) for tag in (".f64", "ld.local", "st.local", "bra ", "div.")})
        except Exception as e:  # noqa: BLE001
            row["ptx"] = f"unavailable ({type(e).__name__})"
    return out


def _time_engine(n: int, red: str, device: str, repeats: int = 5, graph: bool = False, layout: str = "C"
                 ) -> list[float]:
    from workflow_rl import make_vector_env

    env = make_vector_env(n, red, seed=0, device=device, **({"gpu_layout": layout} if device.startswith("cuda")
                                                              else {}))
    env.reset()
    g = torch.Generator(device=device).manual_seed(0)
    pool = torch.randint(0, 145, (8, n), device=device, generator=g)

    def eight():
        for k in range(8):
            env.step_tensor(pool[k])

    for k in range(3):   # compile and warm up
        env.step_tensor(pool[k])
    run = eight
    if graph:   # capture the 8 steps once (the warm-up above loaded the kernel); replay them
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            eight()
        torch.cuda.current_stream(device).wait_stream(side)
        cg = torch.cuda.CUDAGraph()
        with torch.cuda.graph(cg):
            eight()
        run = cg.replay
    _sync(device)
    t0 = time.perf_counter()
    run()
    _sync(device)
    rounds = max(2, int(0.3 / max(time.perf_counter() - t0, 1e-6)))
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(rounds):
            run()
        _sync(device)
        runs.append(n * 8 * rounds / (time.perf_counter() - t0))
    del env
    return runs


def _first_step_s() -> float | str:
    code = ("import time, torch; t = time.perf_counter(); from workflow_rl import make_vector_env; "
            "e = make_vector_env(1024, 'bline', seed=0, device='cuda'); e.reset(); "
            "e.step_tensor(torch.zeros(1024, dtype=torch.int64, device='cuda')); torch.cuda.synchronize(); "
            "print(time.perf_counter() - t)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=_env(),
                       timeout=120)
    return float(r.stdout.split()[-1]) if r.returncode == 0 else "failed: " + r.stderr.strip()[-300:]


# ------------------------------------------------------------------------------------------------------ stage 3
def stage_graphs(args) -> dict:
    """The PPO update replayed as CUDA graphs against the same update launched kernel by kernel: after one update
    the weights must be bit-equal (the same kernels on the same buffers); after a second update with a slot left out
    the eager path gathers 15 members' rows (other GEMM shapes, so rounding may differ: reported, not required),
    then five more; and the time of one update each way."""
    from workflow_rl.rl.ppo import PPOConfig, Rollout
    from workflow_rl.rl.stack import AgentStack, StackedAdam, StackedUpdate

    dev, q, n = args.device, 16, args.graph_rows
    g = torch.Generator(device=dev).manual_seed(0)
    batch = Rollout(torch.randn(q, n, 77, device=dev, generator=g), torch.randint(0, 145, (q, n), device=dev,
                                                                                   generator=g),
                    -5 + torch.rand(q, n, device=dev, generator=g), *(torch.randn(q, n, device=dev, generator=g)
                                                                      for _ in range(3)))
    mask = torch.ones(q, n, dtype=torch.bool, device=dev)
    mask[3, n * 4 // 5:] = False
    out = {}
    for graphs in (False, True):
        torch.manual_seed(0)
        stack = AgentStack(q).to(dev)
        opt = StackedAdam(stack.flat, lr=5e-4)
        upd = StackedUpdate(stack, opt, PPOConfig(), graphs=graphs)
        gen = torch.Generator(device=dev).manual_seed(1)
        stats = [upd.run(batch, mask, gen)]
        first = stack.flat.detach().clone()   # one update: the same kernels either way, so bit-equal is expected
        stats.append(upd.run(batch, mask, gen, [k for k in range(q) if k != 5]))   # eager gathers 15 members here
        _sync(dev)
        t0 = time.perf_counter()
        for _ in range(5):
            upd.run(batch, mask, gen)
        _sync(dev)
        out["graphs" if graphs else "eager"] = {"update_ms": (time.perf_counter() - t0) / 5 * 1e3,
                                                "flat": stack.flat.detach().clone(), "stats": stats, "first": first,
                                                "adam": opt.exp_avg.clone()}
    e, gr = out["eager"], out["graphs"]
    return {"first_update_weights_equal": bool(torch.equal(e["first"], gr["first"])),
            "first_update_stats_equal": e["stats"][0] == gr["stats"][0],
            "max_abs_weight_diff": float((e["flat"] - gr["flat"]).abs().max()),
            "max_abs_adam_diff": float((e["adam"] - gr["adam"]).abs().max()),
            "stats_equal": e["stats"] == gr["stats"], "eager_update_ms": e["update_ms"],
            "graph_update_ms": gr["update_ms"], "rows_per_member": n, "members": q}


def stage_rollout(args) -> dict:
    """The rollout replayed as CUDA graphs (``--cuda-graphs``: one graph per segment shape) against the same rollout
    launched op by op: two batches of 16 workflows x 200 envs (fewer in a CPU dry run, where graphs are off and the
    stage only checks that two batches with one seed collect the same rollouts) collect 12 segments of 25 steps
    (three episode ends) without updating; every rollout tensor and every finished episode must be bit-equal (the same
    kernels on the same buffers, the generator advanced alike); and the milliseconds per segment each way, over the
    3rd and later runs of each segment shape (the 1st runs eagerly, the 2nd captures). Then the same equality for 2
    workflows with the shipped agents' policy input (decoy memory, masked decoys): its tables must be on the device
    before the capture."""
    from workflow_rl.rl.ppo import PPOConfig

    dev, q, n, segments = args.device, min(16, max(args.batch_slots)), min(200, args.train_envs), 12
    (eager, e_ms), (graph, g_ms) = (_rollouts(dev, q, n, segments, PPOConfig(), graphs) for graphs in (False, True))
    unequal = _unequal(eager, graph)
    masked = [_rollouts(dev, 2, n, segments, PPOConfig(decoy_memory=True, mask_decoys=True), graphs)[0]
              for graphs in (False, True)]
    # a segment's shape is whether it holds the episode end (every 4th); its 1st run is eager, its 2nd captures:
    # time only 3rd and later runs of each shape, the same segments both ways
    shape = [(i + 1) % 4 == 0 for i in range(segments)]
    replays = [i for i in range(segments) if shape[:i].count(shape[i]) >= 2]
    return {"rollouts_equal": not unequal, "unequal_segments": unequal,
            "masked_decoy_rollouts_equal": not _unequal(*masked),
            "eager_segment_ms": statistics.median(e_ms[i] for i in replays),
            "graph_segment_ms": statistics.median(g_ms[i] for i in replays), "timed_segments": replays,
            "segment_ms": {"eager": e_ms, "graphs": g_ms}, "workflows": q, "envs_per_workflow": n,
            "graphs_active": dev.startswith("cuda")}


def _rollouts(dev: str, q: int, n: int, segments: int, ppo, graphs: bool) -> tuple[list, list[float]]:
    """``segments`` rollout segments of 25 steps of ``q`` workflows x ``n`` envs (no updates), and each one's ms."""
    import tempfile

    from workflow_rl.rl.config import TrainConfig
    from workflow_rl.rl.trainer import BatchedTrainer
    from workflow_rl.workflow import all_workflows

    cfg = TrainConfig(n_envs=n, update_every_steps=25, device=dev, seed=0, cuda_graphs=graphs, ppo=ppo)
    bt = BatchedTrainer(cfg, q)
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(q):
            bt.start(k, TrainConfig.from_flat({**cfg.flat(), "workflow": all_workflows()[k].codes}), f"{tmp}/{k}")
        active, outs, ms = np.full(q, n), [], []
        for _ in range(segments):
            _sync(dev)
            t0 = time.perf_counter()
            batch, _mask, finished = bt._collect(25, active)
            _sync(dev)
            ms.append((time.perf_counter() - t0) * 1e3)
            bt.global_step += 25
            outs.append((batch, finished))
        bt.close()
    return outs, ms


def _unequal(eager: list, graph: list) -> list[int]:
    """The segments whose rollout tensors or finished episodes differ."""
    return [i for i, ((a, fa), (b, fb)) in enumerate(zip(eager, graph))
            if fa != fb or not all(torch.equal(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__)]


# ------------------------------------------------------------------------------------------------- stage runner
def _registers_stage(args, out: Path, left) -> list[dict]:
    """The engine stage again, once per ``--max-registers`` cap (``sim.cuda.MAX_REGISTERS``, compiled afresh: a
    capped kernel is not cached), layout F, at the large sizes where a step is bound by latency, not launches. At
    56 registers per thread (F, uncapped) an SM holds 36 of its 64 warps; a cap lets more in at the cost of spills
    (ptxas for sm_90: 40 registers, 88 bytes of spill stores per thread)."""
    sizes = [n for n in args.engine_sizes if n >= 1 << 20] or [max(args.engine_sizes)]
    rows = []
    for cap in args.max_registers:
        sub = out / f"registers_{cap}"
        cmd = [sys.executable, __file__, "--device", args.device, "--engine-sizes", *map(str, sizes),
               "--engine-layouts", "F", "--stage", "engine", "--out", str(sub)]
        res = _timed_script(cmd, min(args.stage_timeout, left()),
                            env={**_env(), "WORKFLOW_RL_CUDA_MAX_REGISTERS": str(cap)})
        f = sub / "stage_engine.json"
        rows.append({"max_registers": cap, **res, **(json.loads(f.read_text()) if f.exists() else {})})
        print("registers", cap, json.dumps(rows[-1])[:1500], flush=True)
    return rows


def _run_stage(name: str, args, out: Path, cap: float) -> dict:
    """One stage of this script in its own process (a crash or hang there costs only that stage)."""
    cmd = [sys.executable, __file__, *sys.argv[1:], "--stage", name, "--out", str(out)]
    res = _timed_script(cmd, cap, env=_env(simulate=name in ("equality", "planner") and not args.device.startswith(
        "cuda")))
    f = out / f"stage_{name}.json"
    if f.exists() and "wall_s" in res:
        res.update(json.loads(f.read_text()))
    return res


def _timed_script(cmd: list[str], timeout: float, env: dict | None = None) -> dict:
    """Wall-clock of a command; a run past ``timeout`` or a failing one is recorded as such (with its last error
    line), and the script goes on to the next stage."""
    t0 = time.perf_counter()
    if timeout <= 1:
        return {"skipped": "no time left in --budget"}
    try:
        r = subprocess.run(cmd, timeout=timeout, capture_output=True, text=True, env=env or _env(), cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"timed_out_after_s": timeout}
    sys.stdout.write(r.stdout[-4000:])
    if r.returncode != 0:
        tail = r.stderr.strip().splitlines()[-3:]
        return {"failed_with_exit_code": r.returncode, "after_s": time.perf_counter() - t0, "error": tail}
    return {"wall_s": time.perf_counter() - t0}


def _timed(cmd: list[str], timeout: float) -> dict:
    return _timed_script([sys.executable, "-m", "workflow_rl.cli", *cmd], timeout)


def _training_stages(args, out: Path, results: dict, left) -> None:
    dev = args.device
    bench = [sys.executable, str(ROOT / "benchmarks" / "studies" / "bench_batched.py"), "--device", dev, "--slots",
             *map(str, args.batch_slots), "--n-envs", str(args.batch_envs), "--repeats", "1", "--out", str(out),
             *(["--cuda-graphs", "--profile"] if dev.startswith("cuda") else [])]
    if "batched" in args.stages:
        results["batched_training"] = _timed_script(bench, min(args.search_timeout, left()))
        table = out / f"batched_{'cuda' if dev.startswith('cuda') else 'cpu'}.md"
        if table.exists():
            results["batched_training"]["table"] = table.read_text()
        _save(out, results)
    if "claims" in args.stages:
        _claims_stage(args, out, results, left)
    if "search" in args.stages:
        _search_stage(args, out, results, left)
    if "train" in args.stages:
        _train_stage(args, out, results, left)
    if "expert" in args.stages:
        _expert_stage(args, out, results, left)


def _claims_stage(args, out: Path, results: dict, left) -> None:
    dev = args.device
    # the first batch size through benchmarks/studies/search_claims.py: the search as shipped (elastic claims), with
    # claims lowered at the gate and kept whole, in rounds (device-independent), most workflows in flight and wall time
    q0 = args.search_batches[0]
    claims = _timed_script([sys.executable, str(ROOT / "benchmarks" / "studies" / "search_claims.py"), "--device", dev,
                            "--total-episodes", str(args.search_episodes), "--batch-workflows", str(q0),
                            "--modes", *args.claim_modes, "--out", str(out / "claims"),
                            *(["--cprofile"] if args.claims_profile else [])],
                           min(len(args.claim_modes) * args.search_timeout, left()))
    if (out / "claims" / "claims.json").exists():
        claims["rows"] = json.loads((out / "claims" / "claims.json").read_text())["rows"]
    results["search_claims"] = claims
    _save(out, results)


def _search_stage(args, out: Path, results: dict, left) -> None:
    dev = args.device
    results["search"] = []
    for q in args.search_batches[1:]:
        row = {"total_episodes": args.search_episodes, "batch_workflows": q,
               **_timed(["search", "--device", dev, "--total-episodes", str(args.search_episodes),
                         "--batch-workflows", str(q), "--out", str(out / f"search_b{q}"), "--no-progress",
                         *(["--cuda-graphs"] if dev.startswith("cuda") else [])],
                        min(args.search_timeout, left()))}
        results["search"].append(row)
        _save(out, results)


def _train_stage(args, out: Path, results: dict, left) -> None:
    dev = args.device
    run = out / "train"
    results["training"] = {"n_envs": args.train_envs, **_timed(
        ["train", "--device", dev, "--n-envs", str(args.train_envs), "--max-episodes", "3", "--eval-episodes", "1000",
         "--out", str(run), "--no-progress"], min(args.search_timeout, left()))}
    if (run / "training_log.csv").exists():
        import csv

        with open(run / "training_log.csv") as f:
            results["training"]["sps_per_update"] = [float(r["sps"]) for r in csv.DictReader(f)]
    _save(out, results)


def _expert_stage(args, out: Path, results: dict, left) -> None:
    """Expert iteration from the shipped agent, its planner's rollouts on the device (``--plan-device``), under a wall
    cap: the seconds it took and each round's log (rounds.csv: planned return, overrides, agreement, losses)."""
    run = out / "expert"
    results["expert_iteration"] = {"rounds": args.expert_rounds, "episodes_per_round": args.expert_episodes,
                                   "plan_rollouts": args.expert_rollouts, **_timed(
        ["expert-iterate", "--rounds", str(args.expert_rounds), "--episodes-per-round", str(args.expert_episodes),
         "--episode-length", str(args.expert_length), "--plan-rollouts", str(args.expert_rollouts),
         "--plan-particles", str(args.expert_particles),
         "--plan-device", "cuda" if args.device.startswith("cuda") else "cpu", "--out", str(run)],
        min(args.expert_timeout, left()))}
    if (run / "rounds.csv").exists():
        import csv

        with open(run / "rounds.csv") as f:
            results["expert_iteration"]["log"] = list(csv.DictReader(f))
    _save(out, results)


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="benchmarks/results/gpu")
    p.add_argument("--device", default="cuda", help="cpu: a dry run of every stage at small sizes")
    p.add_argument("--budget", type=float, default=330.0, help="seconds for the whole run (every stage included)")
    p.add_argument("--equality-envs", type=int, default=2048)
    p.add_argument("--equality-steps", type=int, default=200)
    p.add_argument("--engine-sizes", type=int, nargs="+", default=[4096, 65536, 1 << 20, 1 << 22])
    p.add_argument("--engine-layouts", nargs="+", choices=list(GPU_LAYOUTS), default=list(GPU_LAYOUTS),
                   help="GPU memory orders to time (sim.native.GPU_LAYOUTS)")
    p.add_argument("--train-envs", type=int, default=65536)
    p.add_argument("--search-episodes", type=int, default=20_000)
    p.add_argument("--search-batches", type=int, nargs="+", default=[16, 1],
                   help="--batch-workflows values to time the search with, in this order")
    p.add_argument("--search-timeout", type=float, default=60.0)
    p.add_argument("--batch-slots", type=int, nargs="+", default=[1, 16, 64],
                   help="workflows per batch for the batched-training throughput stage")
    p.add_argument("--batch-envs", type=int, default=200,
                   help="batched-training stage: envs per workflow (bench_batched.py --n-envs; a CPU dry run needs few)")
    p.add_argument("--graph-rows", type=int, default=25 * 200,
                   help="graphs stage: rows per member of the PPO update (a CPU dry run needs far fewer)")
    p.add_argument("--stage-timeout", type=float, default=120.0, help="cap of the equality and engine stages")
    p.add_argument("--stages", nargs="+", choices=ALL_STAGES, default=list(ALL_STAGES),
                   help="the stages to run (default: all), always in the order listed here")
    p.add_argument("--max-registers", type=int, nargs="+", default=[48, 40],
                   help="registers stage: the engine at the sizes >= 1M of --engine-sizes (else the largest), GPU "
                        "layout F, with the step kernel capped at each of these registers per thread")
    p.add_argument("--claim-modes", nargs="+", default=["elastic", "lowered", "whole"],
                   help="claims stage: the search's claim rules to time (benchmarks/studies/search_claims.py --modes)")
    p.add_argument("--claims-profile", action="store_true",
                   help="claims stage: each search under cProfile too (OUT/claims/profile_MODE.txt)")
    p.add_argument("--planner-rollouts", type=int, nargs="+", default=[8, 64, 512, 4096],
                   help="planner stage: futures per candidate to time (PlanConfig.rollouts)")
    p.add_argument("--planner-cpu-max", type=int, default=64,
                   help="planner stage: the most rollouts also timed on the CPU (beyond, the CPU takes seconds)")
    p.add_argument("--planner-particles", type=int, default=1024, help="planner stage: the belief's particles")
    p.add_argument("--planner-steps", type=int, default=20, help="planner stage: steps of the episode played")
    p.add_argument("--expert-rounds", type=int, default=2, help="expert stage: rounds of play-then-train")
    p.add_argument("--expert-episodes", type=int, default=64, help="expert stage: planned episodes per round")
    p.add_argument("--expert-length", type=int, default=100, help="expert stage: steps per episode")
    p.add_argument("--expert-rollouts", type=int, default=64, help="expert stage: the planner's rollouts per candidate")
    p.add_argument("--expert-particles", type=int, default=1024, help="expert stage: the planner's belief particles")
    p.add_argument("--expert-timeout", type=float, default=240.0, help="expert stage: its wall-clock cap (seconds)")
    p.add_argument("--stage", choices=STAGES, help=argparse.SUPPRESS)
    return p.parse_args()


def main() -> None:
    args = _parse()
    out = Path(args.out).resolve()
    if args.stage:   # a child process: run one stage, write its result
        res = {"equality": stage_equality, "graphs": stage_graphs, "rollout": stage_rollout,
               "engine": stage_engine, "planner": stage_planner}[args.stage](args)
        _save(out, {})   # make sure the folder exists
        (out / f"stage_{args.stage}.json").write_text(json.dumps(res, indent=2))
        return
    t_end = time.perf_counter() + args.budget
    left = lambda: t_end - time.perf_counter()  # noqa: E731
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU visible to torch")
    results = {"gpu": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "none (cpu dry run)",
               **_versions()}
    _save(out, results)
    if args.device.startswith("cuda"):
        results["kernel_cache"] = {"first_step_s": [_first_step_s() for _ in range(2)],
                                   "note": "a fresh process's first CUDA step, twice: compile + write the cache, "
                                           "then load it"}
        _save(out, results)
    for name in (n for n in STAGES if n in args.stages):
        results[name] = _run_stage(name, args, out, min(args.stage_timeout, left()))
        _save(out, results)
        print(name, json.dumps(results[name])[:2000], flush=True)
    if "registers" in args.stages and args.device.startswith("cuda"):
        results["registers"] = _registers_stage(args, out, left)
        _save(out, results)
    _training_stages(args, out, results, left)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
