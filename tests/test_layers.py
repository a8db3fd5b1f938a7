"""The package's layers import downward only (sim -> envs -> rl -> search -> runs -> cli) and no module imports
itself back through another: read from the source, so a cycle fails here before it confuses a reader."""
import ast
from pathlib import Path
from helpers import REPO

PKG = REPO / "workflow_rl"
LAYER = {"checks": 0, "devices": 0, "files": 0, "resources": 0, "interrupt": 0, "multitest": 0, "sim": 0, "workflow": 0,
         "pretrained": 0, "envs": 1, "policies": 1, "rl": 2, "parity": 2, "curves": 2, "bench": 2, "search": 4,
         "runs": 5, "cli": 6}
"""Rank of each top-level module or subpackage; a module may import only from ranks <= its own."""
def _module(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """workflow_rl modules a file imports (at module level or inside functions)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("workflow_rl"):
            out.add(node.module)
            for a in node.names:   # `from workflow_rl.sim import tables` imports a module
                if (PKG.parent / (node.module.replace(".", "/") + f"/{a.name}.py")).exists():
                    out.add(f"{node.module}.{a.name}")
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("workflow_rl")}
    return out


def _graph() -> dict[str, set[str]]:
    files = {_module(p): p for p in PKG.rglob("*.py")}
    return {m: {i for i in _imports(p) if i in files and i != m} for m, p in files.items()}


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYER.get(parts[1]) if len(parts) > 1 else None


def test_layers_import_downward_only():
    bad = [f"{m} -> {i}" for m, deps in _graph().items() for i in deps
           if _layer(m) is not None and _layer(i) is not None and _layer(i) > _layer(m)]
    assert not bad, "upward imports: " + ", ".join(sorted(bad))


def test_no_import_cycles():
    graph = _graph()
    cycles = []

    def visit(m, stack, on_stack, done):
        on_stack.add(m)
        stack.append(m)
        for d in sorted(graph[m]):
            if d in on_stack:
                cycles.append(" -> ".join(stack[stack.index(d):] + [d]))
            elif d not in done:
                visit(d, stack, on_stack, done)
        stack.pop()
        on_stack.discard(m)
        done.add(m)

    done: set[str] = set()
    for m in sorted(graph):
        if m not in done:
            visit(m, [], set(), done)
    assert not cycles, "import cycles: " + "; ".join(cycles)
