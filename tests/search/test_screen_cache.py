"""The reuse of a universal agent's screen (``search.screen_cache``): the key, cache hit / miss / damaged file /
disabled, the shipped screen of ``pretrained:universal`` (equal to a recomputation), the pick margin
(``--pick-margin``) and what the summary and the printed mode line say."""
import dataclasses
import json
import math

import pytest

from workflow_rl.search import screen_cache as C
from workflow_rl.search import universal as U
from workflow_rl.search.records import Screened
from workflow_rl.workflow import all_workflows

SETTINGS = C.ScreenSettings(episodes=500, length=100, red_agent="B_lineAgent", engine="native", seed=20_240_601,
                            mode="greedy")


def _screen(comp=lambda i: 0.99) -> list[Screened]:
    return [Screened(workflow=w.codes, observed_reward=-14.0 - i / 100, observed_ci95=0.3, eval_compliance=comp(i),
                     fixes=1000 + i) for i, w in enumerate(all_workflows())]


class Counter:
    """A stand-in for the evaluation: counts its calls."""

    def __init__(self, screened=None):
        self.calls, self.screened = 0, screened or _screen()

    def __call__(self):
        self.calls += 1
        return self.screened


@pytest.fixture
def ckpt(tmp_path, monkeypatch):
    monkeypatch.setenv(C.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(C.NO_CACHE_ENV, raising=False)
    p = tmp_path / "agent.pt"
    p.write_bytes(b"weights v1")
    return p


def test_the_key_changes_with_the_weights_and_every_setting(ckpt):
    key = C.screen_key(ckpt, SETTINGS)
    assert key == C.screen_key(ckpt, SETTINGS)
    changed = dict(episodes=499, length=50, red_agent="RedMeanderAgent", engine="cyborg", seed=1, mode="sampled")
    for name, value in changed.items():
        assert C.screen_key(ckpt, dataclasses.replace(SETTINGS, **{name: value})) != key, name
    ckpt.write_bytes(b"weights v2")
    assert C.screen_key(ckpt, SETTINGS) != key


def test_miss_computes_and_caches_then_a_hit_reads_the_same_numbers(ckpt):
    compute = Counter()
    first, src = C.screen_of(ckpt, SETTINGS, compute)
    assert (src, compute.calls) == ("computed", 1)
    assert C.cache_file(C.screen_key(ckpt, SETTINGS)).is_file()
    again, src = C.screen_of(ckpt, SETTINGS, compute)
    assert (src, compute.calls) == ("cache", 1) and again == first
    _, src = C.screen_of(ckpt, dataclasses.replace(SETTINGS, episodes=100), compute)   # other settings: a miss
    assert (src, compute.calls) == ("computed", 2)


def _damage(rows_edit=None, text=None):
    def edit(path):
        if text is not None:
            path.write_text(text)
            return
        d = json.loads(path.read_text())
        rows_edit(d)
        path.write_text(json.dumps(d))
    return edit


@pytest.mark.parametrize("damage", [
    _damage(text="{not json"),
    _damage(text=""),
    _damage(lambda d: d["rows"].pop()),                                        # a workflow missing
    _damage(lambda d: d["rows"].__setitem__(1, d["rows"][0])),                 # a workflow twice
    _damage(lambda d: d["rows"][3].__setitem__("mean", math.nan)),            # NaN (json writes NaN)
    _damage(lambda d: d["rows"][3].__setitem__("mean", "-14")),
    _damage(lambda d: d["rows"][5].__setitem__("compliance", 1.5)),
    _damage(lambda d: d["rows"][5].__setitem__("ci95", -0.1)),
    _damage(lambda d: d["rows"][7].__setitem__("fixes", 2.5)),
    _damage(lambda d: d.__setitem__("key", "0" * 64)),                          # another key under this name
    _damage(lambda d: d.__setitem__("format", 0)),
    _damage(lambda d: d.__setitem__("rows", {})),
    _damage(text="[" * 200_000 + "]" * 200_000),                                # deeper than Python's parser
    # finite, but what no screen's episodes score (issue Z, class 3: the search computes with them)
    _damage(lambda d: d["rows"][3].__setitem__("mean", -1e308)),
    _damage(lambda d: d["rows"][3].__setitem__("ci95", 1e308)),
    _damage(lambda d: d["rows"][7].__setitem__("fixes", 10**30)),
], ids=["syntax", "empty", "missing", "twice", "nan", "string", "compliance", "ci95", "fixes", "key", "format",
        "rows", "deep", "mean -1e308", "ci95 1e308", "fixes 10**30"])
def test_a_damaged_cache_file_is_ignored_with_one_warning_and_recomputed(ckpt, capsys, damage):
    compute = Counter()
    good, _ = C.screen_of(ckpt, SETTINGS, compute)
    path = C.cache_file(C.screen_key(ckpt, SETTINGS))
    damage(path)
    capsys.readouterr()
    got, src = C.screen_of(ckpt, SETTINGS, compute)
    err = capsys.readouterr().err
    assert (src, compute.calls) == ("computed", 2) and got == good
    assert err.startswith("warning: ") and str(path) in err and len(err.strip().splitlines()) == 1
    assert C.screen_of(ckpt, SETTINGS, compute)[1] == "cache"   # rewritten whole


def test_disabled_reads_and_writes_nothing(ckpt, monkeypatch):
    compute = Counter()
    C.screen_of(ckpt, SETTINGS, compute)                       # cached
    monkeypatch.setenv(C.NO_CACHE_ENV, "1")
    for _ in range(2):
        assert C.screen_of(ckpt, SETTINGS, compute, shipped=True)[1] == "computed"
    assert compute.calls == 3
    ckpt.write_bytes(b"other weights")
    C.screen_of(ckpt, SETTINGS, compute)
    assert not C.cache_file(C.screen_key(ckpt, SETTINGS)).exists()


def test_the_cache_folder(monkeypatch, tmp_path):
    monkeypatch.delenv(C.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert C.cache_dir() == tmp_path / "xdg" / "workflow-rl"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")             # not absolute: ignored, as the XDG spec says
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert C.cache_dir() == tmp_path / "home" / ".cache" / "workflow-rl"
    monkeypatch.setenv(C.CACHE_ENV, str(tmp_path / "mine"))
    assert C.cache_dir() == tmp_path / "mine"


def test_an_unwritable_cache_costs_the_reuse_not_the_screen(ckpt, monkeypatch, capsys):
    (ckpt.parent / "file").write_text("")
    monkeypatch.setenv(C.CACHE_ENV, str(ckpt.parent / "file"))    # a file where the folder should be
    got, src = C.screen_of(ckpt, SETTINGS, Counter())
    assert src == "computed" and len(got) == 120
    assert capsys.readouterr().err.startswith("warning: screen not cached")


def test_a_shipped_screen_is_used_only_under_its_own_key(ckpt, capsys):
    shipped = _screen(lambda i: 0.5)
    key = C.screen_key(ckpt, SETTINGS)
    C.write(C.shipped_file(ckpt), shipped, key, SETTINGS, C.file_sha256(ckpt))
    compute = Counter()
    assert C.screen_of(ckpt, SETTINGS, compute, shipped=True) == (shipped, "shipped")
    assert C.screen_of(ckpt, SETTINGS, compute)[1] == "computed"          # not a shipped agent: not read
    other = dataclasses.replace(SETTINGS, episodes=50)                     # other settings: silently not used
    capsys.readouterr()
    assert C.screen_of(ckpt, other, compute, shipped=True)[1] == "computed"
    assert capsys.readouterr().err == ""


def _search_settings():
    from workflow_rl.search.config import SearchConfig

    return U.screen_settings(SearchConfig())


def test_the_shipped_universal_screen_is_valid_and_keyed_to_the_default_search_settings():
    """What a ``search --init-checkpoint pretrained:universal`` at the default evaluation settings reads."""
    from workflow_rl.rl import pretrained

    weights = pretrained.path("universal")
    path = C.shipped_file(weights)
    got = C.from_json(path.read_text(), C.screen_key(weights, _search_settings()))
    assert [s.workflow for s in got] == [w.codes for w in all_workflows()]
    assert json.loads(path.read_text())["settings"] == dataclasses.asdict(_search_settings())


def test_a_search_on_cuda_reads_the_shipped_screen(monkeypatch, tmp_path):
    """The issue's crash: the shipped screen was keyed by device "cpu", so a search with ``--device cuda`` missed it
    and recomputed it (on an agent left on the CPU). The screen is the same agent and settings on either device
    (``ScreenSettings``), so a CUDA search is served the shipped file and computes nothing."""
    import dataclasses as dc

    from workflow_rl.search.config import SearchConfig

    monkeypatch.setenv(C.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(C.NO_CACHE_ENV, raising=False)
    cfg = SearchConfig(init_checkpoint="pretrained:universal")
    cuda = dc.replace(cfg, train=dc.replace(cfg.train, device="cuda"))
    assert U.screen_settings(cuda) == U.screen_settings(cfg)

    def no_compute(*a, **k):
        raise AssertionError("the shipped screen should have been read")

    monkeypatch.setattr(U, "compute_screen", no_compute)
    got, source = U.screen(cuda, tmp_path)
    assert source == "shipped" and len(got) == len(all_workflows())


@pytest.mark.slow
def test_the_shipped_universal_screen_equals_a_recomputation():
    """Bit-equal to the evaluation itself. All 120 are recomputed: ``evaluate_workflows`` deals every workflow's
    episodes over shared rounds, so one workflow's numbers depend on which others share its batch (checked: the
    first workflow's 20-episode mean is -14.46 beside one other workflow, -15.79 beside two)."""
    from workflow_rl.rl import pretrained

    weights = pretrained.path("universal")
    shipped = C.from_json(C.shipped_file(weights).read_text(), C.screen_key(weights, _search_settings()))
    assert U.compute_screen(weights, _search_settings(), "cpu") == shipped


# ------------------------------------------------------------------------------------------------ pick margin
def test_the_pick_margin_prefers_workflows_that_comply_with_margin():
    ws = list(all_workflows())
    comp = {0: 0.996, 1: 0.958, 2: 0.951, 3: 0.94, 4: None}               # None: no fix counted
    screen = _screen(lambda i: comp.get(i, 0.5))
    among, label = U.pick_pool(screen, set(), 0.95, 0.02)
    assert among == [0, 4] and "margin 0.02" in label
    among, _ = U.pick_pool(screen, {0, 4}, 0.95, 0.02)                     # none with margin left: the threshold
    assert among == [1, 2]
    among, label = U.pick_pool(screen, {0, 1, 2, 4}, 0.95, 0.02)           # none eligible left: every untried
    assert len(among) == len(ws) - 4 and "none called eligible" in label
    assert U.pick_pool(screen, set(), 0.95, 0.0)[0] == [0, 1, 2, 4]        # margin 0: the call itself


def test_pick_margin_setting(tmp_path):
    from workflow_rl.search.config import SearchConfig

    assert SearchConfig().pick_margin == 0.02
    assert SearchConfig.from_dict({k: v for k, v in SearchConfig().to_dict().items()
                                   if k != "pick_margin"}).pick_margin == 0.0   # an older search resumes as it ran
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="--pick-margin"):
            SearchConfig(pick_margin=bad).validate()


def test_cli_bad_pick_margin_one_line(tmp_path, capsys):
    from tests.helpers import run_main

    rc, _, err = run_main(["search", "--pick-margin", "-1", "--out", str(tmp_path / "x")], capsys)
    assert rc == 2 and err.startswith("error:") and "--pick-margin" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


# ----------------------------------------------------------------------------------------------- the report
@pytest.mark.parametrize("source,own,says", [
    ("computed", 0, "from the universal agent pretrained:universal; its screen of all 120 workflows computed here "
                    "(236 s); not counted in budget or wall time: its training ({card}"),
    ("cache", 0, "not counted in budget or wall time: its training ({card}, from random weights: its card, "
                 "workflow_rl/pretrained/universal.json) and its screen of all 120 workflows (cached)"),
    ("shipped", 0, "and its screen of all 120 workflows (shipped with it)"),
    ("computed", 30000, "mode: trained its own universal agent (30,000 episodes of the budget), then fine-tuned the "
                        "GP's picks from it; its screen of all 120 workflows computed here (236 s)"),
])
def test_the_mode_line_says_the_mode_and_what_budget_and_wall_time_leave_out(source, own, says):
    from workflow_rl.search.outputs import mode_line, wall_note

    u = {"agent": "pretrained:universal", "training_episodes_counted": own, "screen_source": source,
         "screen_seconds": 236.0 if source == "computed" else 0.01, "wall_note": wall_note(bool(own), source)}
    from workflow_rl.rl import pretrained

    c = pretrained.card("universal")
    line = mode_line({"universal": u})
    says = says.format(card=f"{c['episodes_trained']:,} episodes, {c['training_seconds']:,.0f} s")
    assert line.startswith("mode: ") and says in line, line
    assert ("not counted" in line) == (not own)
    assert mode_line({}) is None


def test_a_shipped_starting_agents_training_is_quoted_from_its_card():
    from workflow_rl.rl import pretrained
    from workflow_rl.search.outputs import card_note

    c = pretrained.card("universal")
    note = card_note("pretrained:universal")
    assert note.startswith(f"{c['episodes_trained']:,} episodes") and "workflow_rl/pretrained/universal.json" in note
    assert card_note("/some/file.pt") == ""
    with pytest.raises(ValueError, match="retired"):   # an old name: refused, naming the one that plays it
        card_note("pretrained:cage2")
