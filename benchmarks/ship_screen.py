"""``python benchmarks/ship_screen.py NAME``: write a shipped agent's screen (``search.screen_cache``) at the
default search settings beside its weights; a maintainer's tool, beside ``ship_agent.py``."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """``python benchmarks/ship_screen.py NAME``: compute a shipped agent's screen at the default search
    settings and write it beside its weights (``workflow_rl/pretrained/NAME.screen.json``), reading no stored
    screen. How ``universal.screen.json`` was made; ``tests/search/test_screen_cache.py`` recomputes it."""
    import argparse
    import time

    from workflow_rl.rl import pretrained
    from workflow_rl.search import universal
    from workflow_rl.search.config import SearchConfig
    from workflow_rl.search.screen_cache import file_sha256, screen_key, shipped_file, write

    p = argparse.ArgumentParser(prog="python benchmarks/ship_screen.py", description=main.__doc__)
    p.add_argument("name", help="a shipped agent (pretrained:NAME or NAME)")
    args = p.parse_args(argv)
    try:
        weights = pretrained.path(args.name)
    except ValueError as e:
        p.exit(2, f"error: {e}\n")
    settings = universal.screen_settings(SearchConfig())
    t0 = time.perf_counter()
    screened = universal.compute_screen(weights, settings, "cpu")
    sha = file_sha256(weights)
    write(shipped_file(weights), screened, screen_key(weights, settings, sha), settings, sha)
    print(f"{shipped_file(weights)}: {len(screened)} workflows, {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
