"""Devices: where a run's network and engine go, resolved and checked in one place.

Every job that takes ``--device`` (train, search, evaluate, replay, bench) and every env factory asks here, so a
GPU-less machine answers ``--device cuda`` with the same one line wherever it is typed, and the rule "real CybORG
runs on the CPU, the native engine on the CPU or an NVIDIA GPU" is written once.
"""
from __future__ import annotations

KINDS = ("cpu", "cuda", "mps")
"""The device kinds torch names that a run may ask for (``cuda:N`` picks one GPU)."""


def check_device(device: str) -> str:
    """``device`` as a string if its kind is one torch knows (no check that it is present: a saved config names the
    device it was trained on, and is read on machines without it)."""
    dev = str(device)
    if dev.split(":")[0] not in KINDS:
        raise ValueError(f"unknown device {device!r}: use 'cpu', 'cuda' (or 'cuda:N') or 'mps'")
    return dev


def check_device_available(device: str) -> str:
    """``device`` if torch can allocate on it here; otherwise a ValueError naming the fix. Checked before a run
    allocates anything, so a GPU-less machine answers ``--device cuda`` with one line, not a CUDA traceback."""
    import torch

    dev = check_device(device)
    kind, _, index = dev.partition(":")
    if kind == "cuda":
        if index and not index.isdigit():
            raise ValueError(f"unknown device {dev!r}: use 'cuda' or 'cuda:N' with N a GPU index")
        if not torch.cuda.is_available():
            raise ValueError(f"--device {dev}: torch sees no CUDA GPU on this machine: use --device cpu")
        n = torch.cuda.device_count()
        if index and int(index) >= n:
            raise ValueError(f"--device {dev}: this machine has {n} CUDA GPU(s): use cuda:0 to cuda:{n - 1}")
    elif kind == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"--device {dev}: torch has no MPS (Apple GPU) support here: use --device cpu")
    elif kind == "cpu" and index:
        raise ValueError(f"unknown device {dev!r}: use 'cpu'")
    return dev


def check_engine_device(engine: str, device: str) -> None:
    """The one rule for where an engine runs: real CybORG on the CPU; the native engine's one rule source compiled
    for the CPU (``device='cpu'``) or as a CUDA kernel (``device='cuda'``) (``make_vector_env`` picks the build from
    the device)."""
    if engine != "native" and device != "cpu":
        raise ValueError(f"the {engine} engine runs on the CPU: use --device cpu, not {device}")
    if engine == "native" and device != "cpu" and not device.startswith("cuda"):
        raise ValueError(f"the native engine runs on the CPU or an NVIDIA GPU: use --device cpu or cuda, not {device}")


def engine_device(engine: str, device: str) -> str:
    """Where an evaluation's engine runs when its agent is on ``device``: the native engine there too (its CPU or
    CUDA build), real CybORG on the CPU whatever the device. The agent stays on its device either way: its acting
    function moves the observations to it and the actions back (``rl.planning.planner.make_act``)."""
    return device if engine == "native" else "cpu"


def check_play_devices(device: str, engines) -> str:
    """The checks of a job that plays an agent on ``engines`` (evaluate, replay): ``device`` present here, and usable
    by the native engine where it is asked for (real CybORG takes the CPU whatever the device:
    :func:`engine_device`), before anything loads or plays."""
    dev = check_device_available(device)
    if "native" in ([engines] if isinstance(engines, str) else engines):
        check_engine_device("native", dev)
    return dev


def device_memory(device: str) -> tuple[int | None, str]:
    """(bytes, whose) of the memory a run on ``device`` allocates in: the GPU's own on CUDA, else this machine's
    (None: let ``resources.check_memory`` ask the OS)."""
    if device.startswith("cuda"):
        import torch

        return torch.cuda.get_device_properties(torch.device(device)).total_memory, f"{device}'s"
    return None, "this machine's"
