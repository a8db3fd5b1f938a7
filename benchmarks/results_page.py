"""Build docs/results.md and the README's results table from the committed result files (``make results``).

    python benchmarks/results_page.py             # rewrite docs/results.md and the README block in place
    python benchmarks/results_page.py --out DIR   # write DIR/results.md and DIR/README.md instead
    python benchmarks/results_page.py --check     # exit 1 (naming the file) if either is not what the files say

Thin over :mod:`workflow_rl.search.results_page` (why the page is generated: its docstring). Reads committed files
only; runs in seconds.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workflow_rl.search import results_page as report


def build(root: Path = report.ROOT) -> dict[str, str]:
    """The page and the README (its block regenerated), by file name."""
    facts = report.gather(root)
    readme = (root / "README.md").read_text()
    return {"results.md": report.page(facts), "README.md": report.splice(readme, report.readme_block(facts))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path,
                        help="write results.md and README.md into DIR, not over the committed files")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a committed file is stale")
    args = parser.parse_args(argv)
    root = report.ROOT
    texts = build(root)
    targets = {"results.md": root / "docs" / "results.md", "README.md": root / "README.md"}
    if args.check:
        stale = [str(p.relative_to(root)) for name, p in targets.items()
                 if not p.is_file() or p.read_text() != texts[name]]
        if stale:
            print(f"error: stale: {', '.join(stale)}; run `make results`", file=sys.stderr)
            return 1
        print("results page and README block are current")
        return 0
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        targets = {name: args.out / name for name in targets}
    for name, p in targets.items():
        p.write_text(texts[name])
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
