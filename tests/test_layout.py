"""The package's layout rules, read from its sources: one way into the
compiled core, the core's floors (docs/design/architecture.md), and no
import circle among the Python modules."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import hipfile

PKG = Path(hipfile.__file__).resolve().parent
LIB = PKG / "_lib"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _python_modules() -> dict[str, Path]:
    """Every Python module of the package outside the compiled core's folder."""
    return {_module_name(p): p for p in sorted(PKG.rglob("*.py"))
            if LIB not in p.parents and "_prefix" not in p.parts}


def _imports(path: Path, top_level_only: bool) -> list[tuple[int, str, list[str]]]:
    """``(line, module, names)`` of each import in ``path`` (relative imports
    resolved); ``top_level_only``: those that run when the module is imported
    (not inside a function)."""
    tree = ast.parse(path.read_text(), str(path))
    here = _module_name(path).split(".")
    if path.name != "__init__.py":
        here = here[:-1]
    nodes: list[ast.AST] = []
    if top_level_only:
        todo: list[ast.AST] = list(tree.body)
        while todo:
            n = todo.pop()
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                continue
            if isinstance(n, ast.If) and isinstance(n.test, ast.Name) \
                    and n.test.id == "TYPE_CHECKING":
                continue
            nodes.append(n)
            todo.extend(ast.iter_child_nodes(n))
    else:
        nodes = list(ast.walk(tree))
    out = []
    for n in nodes:
        if isinstance(n, ast.Import):
            out += [(n.lineno, a.name, []) for a in n.names]
        elif isinstance(n, ast.ImportFrom):
            base = n.module or ""
            if n.level:
                base = ".".join(here[:len(here) - n.level + 1] + ([base] if base else []))
            out.append((n.lineno, base, [a.name for a in n.names]))
    return out


def _compiled_modules() -> set[str]:
    return {_module_name(p) for p in LIB.rglob("*.pyx")}


def test_the_compiled_core_is_entered_through_one_module() -> None:
    compiled = _compiled_modules()
    assert "hipfile._lib.engine.submit" in compiled     # the rule reads the right folder
    found = []
    for name, path in _python_modules().items():
        for line, module, names in _imports(path, top_level_only=False):
            targets = {module} | {f"{module}.{n}" for n in names}
            bad = sorted(t for t in targets if t in compiled and t != "hipfile._lib._hipfile")
            if bad:
                found.append(f"{name}:{line} imports {', '.join(bad)}")
    assert not found, ("outside hipfile/_lib, the compiled modules are reached through "
                       "hipfile._lib._hipfile only:\n" + "\n".join(found))


#: The core's modules from the bottom up, as the picture of
#: docs/design/architecture.md draws them: each imports only modules before it.
CORE_FLOORS = [
    "_enums", "_errors", "_hip", "_loader", "_bindings", "_runtime", "engine.cengine",
    "_finalize", "_wait", "_decode", "_streams", "_core", "engine.device", "_api", "_pool",
    "engine.ops", "_aio", "_observe", "engine.handle", "engine.plan", "engine.submit",
    "_hipfile",
]
#: The imports that go up, each made when a function is first called
#: ("Where calls go up" in the document).
CORE_UP = {
    ("hipfile._lib._core", "hipfile._lib._api"),                  # _register_fd
    ("hipfile._lib.engine.ops", "hipfile._lib.engine.handle"),    # engine_info
}
_CYTHON_IMPORT = re.compile(
    r"^\s*(?:from\s+([\w.]+)\s+c?import\s+(.*)|c?import\s+(.*))$")


def _cython_imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """``(line, module, names)`` of each ``import``/``cimport`` line of a
    ``.pyx`` or ``.pxd`` file (parenthesised names joined)."""
    lines = path.read_text().splitlines()
    out = []
    i = 0
    while i < len(lines):
        line, first = lines[i].split("#")[0], i + 1
        if line.rstrip().endswith("("):
            while ")" not in line and i + 1 < len(lines):
                i += 1
                line += " " + lines[i].split("#")[0]
        i += 1
        m = _CYTHON_IMPORT.match(line.replace("(", " ").replace(")", " ").rstrip())
        if m is None:
            continue
        if m.group(1):
            names = [n.split()[0] for n in m.group(2).split(",") if n.strip() and n.strip() != "*"]
            out.append((first, m.group(1), names))
        else:
            out += [(first, n.split()[0], []) for n in m.group(3).split(",") if n.strip()]
    return out


def _core_imports() -> dict[str, list[tuple[str, str]]]:
    """For each module of ``hipfile/_lib``: ``(where, module)`` of each
    module of the package it imports or cimports (its ``.pxd`` included)."""
    found: dict[str, list[tuple[str, str]]] = {}
    known = {_module_name(p) for p in PKG.rglob("*") if p.suffix in (".py", ".pyx")} | {"hipfile"}
    for path in sorted(LIB.rglob("*")):
        if path.suffix == ".py":
            imports = _imports(path, top_level_only=False)
        elif path.suffix in (".pyx", ".pxd"):
            imports = _cython_imports(path)
        else:
            continue
        edges = found.setdefault(_module_name(path), [])
        for line, module, names in imports:
            targets = [f"{module}.{n}" for n in names if f"{module}.{n}" in known]
            for target in targets or ([module] if module in known or
                                      module.startswith("hipfile.") else []):
                edges.append((f"{path.relative_to(PKG.parent)}:{line}", target))
    return found


def test_the_core_imports_nothing_of_the_python_layer() -> None:
    imports = _core_imports()
    assert "hipfile._lib.engine.ops" in {t for _w, t in imports["hipfile._lib.engine.handle"]}, \
        "the cimports are read"
    found = [f"{where} imports {target}" for edges in imports.values()
             for where, target in edges if not target.startswith("hipfile._lib")]
    assert not found, "hipfile/_lib imports no module of the package outside it:\n" + \
        "\n".join(found)


def test_the_core_imports_only_the_floors_under_each_module() -> None:
    imports = _core_imports()
    floor = {f"hipfile._lib.{m}": i for i, m in enumerate(CORE_FLOORS)}
    missing = sorted(set(imports) - set(floor) - {"hipfile._lib", "hipfile._lib.chipfile",
                                                  "hipfile._lib.engine"})
    assert not missing, f"modules of the core not in CORE_FLOORS (and the picture): {missing}"
    found = []
    for name, edges in imports.items():
        for where, target in edges:
            if (name in floor and target in floor and floor[target] >= floor[name]
                    and target != name and (name, target) not in CORE_UP):
                found.append(f"{where}: {name} imports {target}, which is not under it")
    assert not found, ("the core's imports go down its floors (CORE_FLOORS, the picture "
                       "of docs/design/architecture.md):\n" + "\n".join(found))
    up = {(n, t) for n, edges in imports.items() for _w, t in edges
          if n in floor and t in floor and floor[t] > floor[n]}
    assert up == CORE_UP, f"the imports that go up are the ones named: {sorted(up)}"


def _graph() -> dict[str, set[str]]:
    modules = _python_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set()
        for _line, module, names in _imports(path, top_level_only=True):
            for n in names or [""]:
                sub = f"{module}.{n}" if n else module
                target = sub if sub in modules else module
                if target in modules and target != name:
                    edges.add(target)
        graph[name] = edges
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return [*stack[stack.index(m):], m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_the_cycle_finder_finds_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_circle_among_the_python_modules() -> None:
    graph = _graph()
    assert graph["hipfile.file._handle"], "the graph has the package's imports"
    # a package's __init__ importing its own submodules is how packages are
    # built; what must not happen is a module reaching back up into its
    # package's __init__ (or any module) that imports it again
    inner = {n: {m for m in e if not n.startswith(m + ".")} for n, e in graph.items()}
    cycle = _cycle(inner)
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_no_source_file_is_over_700_lines() -> None:
    """A file a reader can hold: every source of the package (Python,
    Cython, C) stays under 700 lines."""
    long = {str(p.relative_to(PKG)): n for p in sorted(PKG.rglob("*"))
            if p.suffix in (".py", ".pyx", ".pxd", ".pyi", ".c", ".h")
            and "_prefix" not in p.parts and "build" not in p.parts
            and (n := len(p.read_text().splitlines())) > 700}
    assert not long, long
