"""docs/extending.md's "A new setting" recipe, done: one line added to TrainConfig in a copy of the package gives the
setting its flag, its range check and its resume rule, with no other file touched."""
import shutil
import subprocess
import sys

import pytest

from helpers import REPO

LINE = ('    toy_restore_penalty: float = setting(0.0, range=Range(0.0, 1.0, "a toy setting", float), scope="run", '
        'resume="must_match")\n    """a toy setting (tests/rl/test_extending_setting.py)"""\n')
ANCHOR = "    alignment_lambda: float = setting("

CHECK = r"""
import sys
from workflow_rl.rl.config import TrainConfig, PER_RUN
from workflow_rl.rl.checkpoint import SAME_RUN, check_same_run, CheckpointError
from workflow_rl.ranges import RANGES, check
from workflow_rl.cli import main
assert "toy_restore_penalty" in PER_RUN and "toy_restore_penalty" in SAME_RUN
assert RANGES["toy_restore_penalty"].hi == 1.0
try:
    check("toy_restore_penalty", 2.0)
    print("range not checked")
except ValueError as e:
    print("range:", e)
ck = {"config": TrainConfig(toy_restore_penalty=0.5).to_dict()}
try:
    check_same_run(ck, TrainConfig(toy_restore_penalty=0.25))
    print("resume not checked")
except CheckpointError as e:
    print("resume:", e)
try:
    rc = main(["train", "--toy-restore-penalty", "7", "--out", sys.argv[1]])
except SystemExit as e:
    rc = e.code
print("rc", rc)
"""


@pytest.mark.slow
def test_a_setting_declared_on_its_field_gets_its_flag_range_and_resume_rule(tmp_path):
    pkg = tmp_path / "workflow_rl"
    shutil.copytree(REPO / "workflow_rl", pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pt"))
    shutil.copytree(REPO / "workflow_rl" / "pretrained", pkg / "pretrained", dirs_exist_ok=True)
    config = pkg / "rl" / "config.py"
    text = config.read_text()
    assert ANCHOR in text
    config.write_text(text.replace(ANCHOR, LINE + ANCHOR, 1))   # the recipe: one declaration, nothing else
    r = subprocess.run([sys.executable, "-c", CHECK, str(tmp_path / "run")], capture_output=True, text=True,
                       cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)}, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    assert "range: --toy-restore-penalty must be in" in out, out
    assert "resume: checkpoint was written with --toy-restore-penalty 0.5, this run has 0.25" in out, out
    assert "rc 2" in out and "--toy-restore-penalty" in r.stderr and "error:" in r.stderr, (out, r.stderr)
