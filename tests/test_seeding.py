"""Every seed derived from a run's seed follows a rule of ``workflow_rl.seeding``, written nowhere else: a changed
rule changes which episodes a seed names, so each is pinned here to the values every committed result used."""
import re

import numpy as np

from helpers import REPO
from workflow_rl import seeding


def test_the_streams_are_the_rules_the_committed_results_used():
    assert [seeding.eval_round_seed(7, r) for r in range(3)] == [7, 7 + 7919, 7 + 2 * 7919]
    assert [seeding.engine_round_seed(0, r) for r in range(3)] == [0, 100_003, 200_006]
    assert seeding.design_rng(3).integers(120) == np.random.default_rng([3, 1_000_003]).integers(120)
    assert seeding.sub_seed(5, 2) == int(np.random.SeedSequence([5, 2]).generate_state(1, np.uint64)[0] >> 1)
    want = int(np.random.SeedSequence([1, 2, 4, 3]).generate_state(1, np.uint64)[0] >> 1)
    assert seeding.expert_round_seed(1, 4, "minibatches") == seeding.expert_round_seed(1, 4, 3) == want


def test_no_stride_is_written_outside_the_seeding_module():
    """The strides appear as numbers only in seeding.py (docstrings may quote them as ``seed + 7919 r``)."""
    pattern = re.compile(r"(?<![\w`])(7919|100_003|1_000_003)(?![\w`])")
    found = []
    for path in (REPO / "workflow_rl").rglob("*.py"):
        if path.name == "seeding.py":
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#")[0]
            if pattern.search(code) and "``" not in code and '"""' not in code:
                found.append(f"{path.relative_to(REPO)}:{i}: {line.strip()}")
    assert not found, found
