"""Names every engine and layer agrees on: red agents (and their aliases), engines, vectorizations, start
methods, devices. A module of its own so the env modules below ``make_vector_env`` can use them without importing
the factory that imports them."""
from __future__ import annotations


RED_AGENTS = ("B_lineAgent", "RedMeanderAgent", "SleepAgent")
_ALIASES = {
    "b_lineagent": "B_lineAgent", "b_line": "B_lineAgent", "bline": "B_lineAgent",
    "redmeanderagent": "RedMeanderAgent", "meander": "RedMeanderAgent",
    "sleepagent": "SleepAgent", "sleep": "SleepAgent",
}
ENGINES = ("native", "cyborg")
VECTORIZATIONS = ("sync", "pipes", "shared_memory")
START_METHODS = ("spawn", "fork", "forkserver", None)


def parse_red_agent(name: str) -> str:
    """Canonical CybORG class name for a red agent name or alias (any case)."""
    key = str(name).strip().lower()
    if key not in _ALIASES:
        raise ValueError(f"unknown red agent {name!r}: use one of {', '.join(RED_AGENTS)} "
                         "(aliases: b_line/bline, meander, sleep; any case)")
    return _ALIASES[key]


def check_device(device: str) -> str:
    dev = str(device)
    kind = dev.split(":")[0]
    if kind not in ("cpu", "cuda", "mps"):
        raise ValueError(f"unknown device {device!r}: use 'cpu', 'cuda' (or 'cuda:N') or 'mps'")
    return dev
