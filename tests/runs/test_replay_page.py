"""``workflow-rl replay``: the command writes one page for any agent, refuses bad input with one ``error:`` line,
and the page, opened in a real headless Chromium, draws what the episodes' data says at every step it is moved to
(keyboard, slider, play, the episode chooser)."""
import json
import shutil
import time
from pathlib import Path

import pytest

from workflow_rl.cli import main
from workflow_rl.sim import tables as T


def _data(page: Path) -> dict:
    text = page.read_text()
    tag = '<script id="data" type="application/json">'
    start = text.index(tag) + len(tag)
    return json.loads(text[start:text.index("</script>", start)])


@pytest.mark.parametrize("argv", [["sleep", "--episodes", "2", "--length", "12"],
                                  ["greedy_workflow", "--workflow", "critical_first", "--red-agent", "meander",
                                   "--length", "10", "--mode", "sampled"]])
def test_replay_writes_one_page(tmp_path, capsys, argv):
    out = tmp_path / "new" / "r.html"
    assert main(["replay", *argv, "--out", str(out)]) == 0
    data = _data(out)
    assert len(data["episodes"]) == (2 if "2" in argv else 3)
    assert all(len(e["steps"]) == int(argv[argv.index("--length") + 1]) for e in data["episodes"])
    assert ("critical_first" in argv) == (data["meta"]["workflow"] == "D,OS,E,OH,U")
    assert data["meta"]["mode"] == "scripted"   # a baseline acts one way, whatever --mode says
    assert f"wrote {out}" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["no_such_agent"], "no checkpoint at no_such_agent and no baseline of that name"),
    (["pretrained:nope"], "no pretrained agent 'nope'"),
    (["sleep", "--episodes", "0"], "--episodes: must be in 1..100,000"),
    (["sleep", "--out", "{file}/x.html"], "is a file, not a folder"),
    (["sleep", "--out", "{file}/sub/x.html"], "cannot be created"),
    (["sleep", "--out", "{dir}"], "is a folder: name a file in it"),
    (["sleep", "--red-agent", "purple"], "red agent"),
    (["greedy_workflow"], "needs --workflow"),
    (["pretrained:universal"], "name the workflow to play it under with --workflow (one, e.g. D,OS,E,OH,U, or none"),
])
def test_replay_bad_input(tmp_path, capsys, argv, message):
    (tmp_path / "file").write_text("x")
    argv = [a.format(file=tmp_path / "file", dir=tmp_path) for a in argv]
    if "--out" not in argv:
        argv += ["--out", str(tmp_path / "r.html")]
    assert _status(["replay", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err
    assert not (tmp_path / "r.html").exists() and list(tmp_path.iterdir()) == [tmp_path / "file"]


def _status(argv) -> int:
    """The exit status of the command line (argparse's own errors exit instead of returning)."""
    try:
        return main(argv)
    except SystemExit as e:
        return e.code


# ------------------------------------------------------------------------------------------------- in a browser
def _chromium():
    """A headless Chromium driven by selenium and Debian's chromedriver, or a skip saying what is missing."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (pip install 'workflow-rl[dev]')")
    browser = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)),
                   None)
    driver = shutil.which("chromedriver")
    if not browser or not driver:
        pytest.skip("no Chromium/chromedriver found: apt-get install chromium chromium-driver (.ci/run does)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1100,800"):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(driver), options=opts)


def _drawn(browser) -> dict:
    """What the page shows now: per host its access and marks, and the step panel's texts."""
    hosts = browser.execute_script(
        "return [...document.querySelectorAll('g.host')].map(g => [g.dataset.host, g.getAttribute('data-access'),"
        " g.classList.contains('blue-target'), g.classList.contains('red-target')])")
    panel = {k: browser.find_element("id", k).text for k in ("red-action", "blue-action", "reward", "return", "fix",
                                                             "target")}
    body = browser.find_element("tag name", "body")
    return {"hosts": {h: (a, b, r) for h, a, b, r in hosts}, "panel": panel,
            "step": int(body.get_attribute("data-step")), "episode": int(body.get_attribute("data-episode"))}


def _expected(episode: dict, t: int) -> dict:
    """What the data says the page must show at step t of an episode."""
    names = ("none", "user", "privileged")
    s = episode["steps"][t - 1] if t else None
    access = s["access"] if s else episode["access0"]
    return {h: (names[access[i]], bool(s) and s["blue_host"] == i, bool(s) and s["red_host"] == i)
            for i, h in enumerate(T.HOSTS)}


def _check_step(browser, episode: dict, t: int) -> None:
    d = _drawn(browser)
    assert d["step"] == t and d["hosts"] == _expected(episode, t)
    if t:
        s = episode["steps"][t - 1]
        assert d["panel"]["red-action"] == s["red"] and d["panel"]["blue-action"] == s["blue"]
        assert float(d["panel"]["return"]) == pytest.approx(s["return"], abs=0.006)
        if episode["workflow"]:
            assert d["panel"]["fix"] == (s["fix"] or "not a fix")


@pytest.mark.slow
@pytest.mark.parametrize("agent, red", [(["pretrained:universal", "--workflow", "none"], "meander"),
                                        (["pretrained:universal", "--workflow", "D,OS,E,OH,U"], "bline")])
def test_page_plays_in_chromium(tmp_path, agent, red):
    """The issue's command, then the page in headless Chromium: step with the keyboard and the slider, choose
    another episode, play and pause; at each stop the hosts drawn privileged / user / clean, blue's and red's marked
    hosts and the step panel are the recorded episode's. The workflow-conditioned agent shows compliance."""
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    out = tmp_path / "runs" / "replay.html"
    t0 = time.monotonic()
    assert main(["replay", *agent, "--red-agent", red, "--episodes", "3", "--out", str(out)]) == 0
    assert time.monotonic() - t0 < 120   # "in seconds": a generous bound that only a hang or a loop would break
    data = _data(out)
    browser = _chromium()
    try:
        browser.get(out.as_uri())
        body = browser.find_element("tag name", "body")
        _check_step(browser, data["episodes"][0], 0)
        for t in range(1, 16):                      # right arrow, one step at a time
            body.send_keys(Keys.ARROW_RIGHT)
            _check_step(browser, data["episodes"][0], t)
        body.send_keys(Keys.ARROW_LEFT)
        _check_step(browser, data["episodes"][0], 14)
        Select(browser.find_element("id", "episode")).select_by_value("2")
        ep = data["episodes"][2]
        assert _drawn(browser)["episode"] == 2
        _check_step(browser, ep, 0)
        browser.execute_script("const s = document.getElementById('slider'); s.value = 57;"
                               "s.dispatchEvent(new Event('input'))")
        _check_step(browser, ep, 57)
        body.send_keys(Keys.END)
        _check_step(browser, ep, 100)
        privileged = {h for h, (a, _, _) in _drawn(browser)["hosts"].items() if a == "privileged"}
        assert privileged == {T.HOSTS[i] for i, a in enumerate(ep["steps"][-1]["access"]) if a == 2}
        body.send_keys(Keys.HOME)
        body.send_keys(" ")                          # play ...
        deadline = time.monotonic() + 30
        while _drawn(browser)["step"] < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        body.send_keys(" ")                          # ... and pause
        t = _drawn(browser)["step"]
        assert t >= 3
        time.sleep(0.8)
        _check_step(browser, ep, _drawn(browser)["step"])
        assert _drawn(browser)["step"] in (t, t + 1)   # paused (a tick already due may land)
        summary = browser.find_element("id", "sum-compliance").text
        if data["meta"]["workflow"]:
            assert "%" in summary and f"{ep['summary']['violations']} violations" in summary
        else:
            assert summary.startswith("n/a")
    finally:
        browser.quit()
