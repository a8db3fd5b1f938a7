"""docs/layout.md is generated from the modules' own docstrings (``benchmarks/layout_page.py``): every module of
the package has its row, and the committed page is what the modules say now."""
import ast
import importlib.util

from helpers import REPO


def _tool():
    spec = importlib.util.spec_from_file_location("layout_page", REPO / "benchmarks" / "layout_page.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_committed_layout_page_is_what_the_modules_say():
    tool = _tool()
    assert (REPO / "docs" / "layout.md").read_text() == tool.render(), \
        "docs/layout.md is stale: run `python benchmarks/layout_page.py` (or `make results`)"


def test_every_module_has_a_row_with_its_first_sentence(tmp_path):
    tool = _tool()
    page = tool.render()
    modules = [p for p in (REPO / "workflow_rl").rglob("*.py") if p.name != "__main__.py"]
    assert all(f"| `{p.relative_to(REPO)}` |" in page for p in modules)
    pkg = tmp_path / "workflow_rl"
    (pkg / "sim").mkdir(parents=True)
    (pkg / "sim" / "new.py").write_text('"""A new rule, e.g. a decoy. More words here."""\n')
    (pkg / "bare.py").write_text("x = 1\n")
    page = tool.render(tmp_path)
    assert "| `workflow_rl/sim/new.py` | A new rule, e.g. a decoy. |" in page
    assert "| `workflow_rl/bare.py` | (no docstring) |" in page
    assert page.index("bare.py") < page.index("sim/new.py")   # top-level helpers first, then the layers


def test_every_module_opens_with_a_one_line_summary():
    """Each module's docstring opens with one sentence on one line, the row docs/layout.md shows: a summary of what
    the module is, with the details below it."""
    tool = _tool()
    bad = []
    for p in sorted((REPO / "workflow_rl").rglob("*.py")):
        doc = ast.get_docstring(ast.parse(p.read_text())) or ""
        first = doc.strip().splitlines()[0] if doc.strip() else ""
        if not first or tool.summary(p) != first.replace("|", "\\|") or len(first) > 117:
            bad.append(str(p.relative_to(REPO)))
    assert not bad, ("give these modules a one-sentence first docstring line, then run `python "
                     "benchmarks/layout_page.py`: " + ", ".join(bad))


def test_check_names_the_command_that_regenerates_it(monkeypatch, tmp_path, capsys):
    tool = _tool()
    stale = tmp_path / "layout.md"
    stale.write_text("old\n")
    monkeypatch.setattr(tool, "PAGE", stale)
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    assert tool.main(["--check"]) == 1
    assert "python benchmarks/layout_page.py" in capsys.readouterr().err
    assert tool.main(["--check"]) == 1 and stale.read_text() == "old\n"   # --check writes nothing
