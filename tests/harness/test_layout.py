"""The import rules of DEVELOPING.md, checked over the package source with `ast`.

DEVELOPING.md's `layers` block lists every folder or module of portcheck/ in a layer; a module may
import from its own layer and the layers below, never from a layer above, and no modules import
each other in a circle (imports inside functions count: a lazy import is still a dependency).
Kernels are held to their own, narrower list (the `kernels` block): the leaves and the Case API.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "portcheck"


def _block(name: str) -> list[list[str]]:
    text = (ROOT / "DEVELOPING.md").read_text()
    match = re.search(rf"```{name}\n(.*?)```", text, re.S)
    assert match, f"DEVELOPING.md has no ```{name} block"
    return [line.split() for line in match.group(1).splitlines() if line.strip()]


def _modules() -> dict[str, Path]:
    mods = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The portcheck modules `name` imports, resolved to the most specific module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            bases = [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            bases = [(base, [a.name for a in node.names])]
        else:
            continue
        for base, names in bases:
            if not (base == "portcheck" or base.startswith("portcheck.")):
                continue
            subs = [f"{base}.{n}" for n in names if f"{base}.{n}" in MODULES]
            found.update(subs or [base])
            if len(subs) < len(names):      # names taken from the module itself, not submodules
                found.add(base)
    found.discard(name)
    return {m for m in found if m in MODULES}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _unit(module: str, units: dict[str, int]) -> str | None:
    rel = module.removeprefix("portcheck").lstrip(".") or "__init__"
    while rel:
        if rel in units:
            return rel
        rel = rel.rpartition(".")[0]
    return None


def _layers() -> dict[str, int]:
    return {unit: int(row[0]) for row in _block("layers") for unit in row[1:]}


def test_every_module_has_a_layer():
    layers = _layers()
    assert [m for m in MODULES if _unit(m, layers) is None] == []


def upward_imports(graph: dict, layers: dict) -> list[str]:
    found = []
    for src, deps in graph.items():
        s = _unit(src, layers)
        for dst in deps:
            d = _unit(dst, layers)
            if s != d and layers[d] > layers[s]:
                found.append(f"{src} (layer {layers[s]}) imports {dst} (layer {layers[d]})")
    return found


def circles(graph: dict) -> list[list[str]]:
    """Tarjan's strongly connected components: every one larger than a module is a circle."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_from_a_layer_above_its_own():
    assert upward_imports(GRAPH, _layers()) == []


def test_kernels_import_only_the_leaves_and_the_case_api():
    allowed = {unit: 0 for row in _block("kernels") for unit in row}
    wrong = [f"{src} imports {dst}" for src, deps in GRAPH.items() if src.startswith("portcheck.kernels")
             for dst in deps if _unit(dst, allowed) is None]
    assert wrong == []


def test_no_import_circles():
    assert circles(GRAPH) == []


def test_the_checks_find_what_they_look_for():
    """Import resolution on known edges of the real tree, and both rules on a made-up graph."""
    assert {"portcheck.errors", "portcheck.commands"} <= GRAPH["portcheck.cli"]
    assert "portcheck.cases" in GRAPH["portcheck.testing"]
    made_up = {"portcheck.a": {"portcheck.b"}, "portcheck.b": {"portcheck.c"}, "portcheck.c": {"portcheck.a"},
               "portcheck.d": set()}
    assert circles(made_up) == [["portcheck.a", "portcheck.b", "portcheck.c"]]
    assert upward_imports({"portcheck.d": {"portcheck.a"}}, {"a": 1, "d": 0}) == [
        "portcheck.d (layer 0) imports portcheck.a (layer 1)"]


def _registering_support_modules() -> set[str]:
    """The tests/support modules that register cases when imported."""
    return {f"tests.support.{p.stem}" for p in (ROOT / "tests" / "support").glob("*.py")
            if "register(" in p.read_text()}


def _top_level_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return found


def test_no_test_module_registers_cases_when_collected():
    """The kernel suite (tests/kernels/test_kernels.py) runs every case registered at collection:
    a test module that imports a registering support module at its top level adds its planted
    bugs to that suite (446f067 did, and CI failed on seven planted cases)."""
    registering = _registering_support_modules()
    assert "tests.support.planted_bugs" in registering
    offenders = {str(p.relative_to(ROOT)): sorted(_top_level_imports(p) & registering)
                 for p in sorted((ROOT / "tests").rglob("test_*.py"))}
    assert {k: v for k, v in offenders.items() if v} == {}
