"""Run the workflow search's trainings as Ray tasks: q workflows at once, on one machine or a cluster.

The driver keeps the GP, the budget and the search state; each task trains and evaluates one workflow in a
scratch folder on whatever node Ray places it and sends back its record and files (checkpoint, training log), which
the driver writes into RUN_DIR. So no shared filesystem is needed, and inheritance ships the parent's weights with
the task. Budget claims are made at dispatch, so the total is never exceeded however many tasks run. A search
interrupted while tasks run restarts those workflows from their parents on ``--resume`` (the serial search resumes
them mid-training instead).
"""
from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from workflow_rl.search.config import SearchConfig
from workflow_rl.search.evaluation import train_and_evaluate
from workflow_rl.search.executors import SearchJob
from workflow_rl.search.records import Proposal, Record


class SearchWorkerError(RuntimeError):
    """A Ray task failed; the message carries the remote traceback."""


def _ray_train(cfg_dict: dict, prop_dict: dict, parent_bytes: bytes | None, threads: int):
    """Body of the remote task: train + evaluate in a scratch folder, return (record, {relative path: bytes}).
    Settings and proposal travel as plain dicts, their saved form."""
    from workflow_rl import threads as thread_policy

    cfg, prop = SearchConfig.from_dict(cfg_dict), Proposal.from_dict(prop_dict)
    thread_policy.configure(cfg.train.thread_work(), cores=max(1, threads))   # the task's CPUs, not the machine's
    with tempfile.TemporaryDirectory(prefix="workflow-rl-") as d:
        if parent_bytes is not None:
            (Path(d) / "parent.pt").write_bytes(parent_bytes)
        p = dataclasses.replace(prop, parent_checkpoint="parent.pt" if parent_bytes is not None else None)
        record = train_and_evaluate(cfg, d, p)
        run_dir = Path(d) / prop.run_dir
        files = {str(Path(prop.run_dir) / f.relative_to(run_dir)): f.read_bytes()
                 for f in sorted(run_dir.rglob("*")) if f.is_file()}
    return record.to_dict(), files


def check_ray_address(text: str | None) -> str | None:
    """``--ray``'s value checked for form before anything starts: None or ``local`` (start Ray here), ``auto`` (the
    cluster this machine belongs to), ``ray://HOST:PORT`` (Ray Client) or ``HOST:PORT`` (the head's GCS), the port
    in 1..65535; a ValueError naming the forms otherwise."""
    if text is None or text in ("local", "auto"):
        return text
    rest = text[len("ray://"):] if text.startswith("ray://") else text
    host, sep, port = rest.rpartition(":")
    if not sep or not host or "/" in host or "://" in rest or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"--ray {text!r} is not a Ray address: use no value (start Ray here), auto, "
                         "ray://HOST:PORT (e.g. ray://head:10001) or HOST:PORT (e.g. head:6379)")
    return text


def connect_ray(address: str | None = None, num_cpus: int | None = None):
    """The ``ray`` module, connected: to the Ray this process already runs (a caller's ``ray.init``), else to a
    fresh one started here (``address`` None or ``local``; ``num_cpus``: its CPUs, default the machine's), else to
    the cluster at ``address`` (:func:`check_ray_address`'s forms). One ValueError naming the fix where Ray is not
    installed or the cluster cannot be reached; a HOST:PORT is tried first (5 s), as Ray itself retries an
    unreachable one for minutes. Returns (ray, whether it started Ray here: whoever did shuts it down)."""
    try:
        import ray
    except ImportError:
        raise ValueError("--ray needs Ray: pip install 'workflow-rl[ray]'") from None
    local = address in (None, "", "local")
    if not local:
        check_ray_address(address)
        _check_reachable(address)
    if ray.is_initialized():
        return ray, False
    if local:
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
        return ray, True
    try:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as e:
        raise ValueError(f"cannot reach the Ray cluster at {address!r} ({e}): start it with "
                         "`ray start --head` or pass its address (ray://host:10001 or host:6379)") from None
    return ray, False


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """A ValueError naming the fix unless something listens at ``address``'s HOST:PORT (``auto``: Ray finds its
    own cluster, and says at once when there is none)."""
    import socket

    if address == "auto":
        return
    host, _, port = (address[len("ray://"):] if address.startswith("ray://") else address).rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        raise ValueError(f"cannot reach the Ray cluster at {address!r} ({e.strerror or e}): start it with "
                         "`ray start --head` or pass its address (ray://host:10001 or host:6379)") from None


class RayExecutor:
    """``workers`` concurrent trainings as Ray tasks (``address``: None/"local" starts Ray here)."""

    def __init__(self, address: str | None = None, workers: int = 2, cpus_per_task: float = 1.0,
                 num_cpus: int | None = None):
        ray, _ = connect_ray(address, num_cpus)
        self.ray = ray
        self.slots = int(workers)
        self.threads = max(1, int(cpus_per_task))
        self.task = ray.remote(num_cpus=cpus_per_task, max_retries=0)(_ray_train)
        self.refs: dict = {}
        self.job: SearchJob | None = None

    def open(self, job: SearchJob) -> None:
        self.job = job

    def free(self) -> int:
        return self.slots - len(self.refs)

    def running(self) -> int:
        return len(self.refs)

    def submit(self, prop: Proposal) -> None:
        parent = (self.job.out / prop.parent_checkpoint).read_bytes() if prop.parent_checkpoint else None
        ref = self.task.remote(self.job.cfg.to_dict(), prop.to_dict(), parent, self.threads)
        self.refs[ref] = prop

    def claims(self) -> dict[int, list[int]]:
        return {}   # a remote task's counters are not seen before it returns: claims stay whole

    def needs(self) -> None:
        return None   # nor can a remote task's claim grow once it runs

    def extend(self, iteration: int, seed_budgets: list[int]) -> None:
        raise NotImplementedError("a Ray search's claims do not grow")

    def wait_one(self) -> tuple[Proposal, Record]:
        ready, _ = self.ray.wait(list(self.refs), num_returns=1)
        prop = self.refs.pop(ready[0])
        try:
            record, files = self.ray.get(ready[0])
        except self.ray.exceptions.RayError as e:
            raise SearchWorkerError(f"training {prop.workflow} failed on a Ray worker:\n{e}") from None
        for rel, data in files.items():
            dst = self.job.out / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(data)
        return prop, Record.from_dict(record)

    def shutdown(self) -> None:
        for ref in list(self.refs):
            self.ray.cancel(ref, force=True)
        self.refs.clear()
