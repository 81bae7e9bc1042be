"""Run a peer project's own Python tests against hipfile, imports changed.

The drop-in modules promise that code written for safetensors, cufile-python
or KvikIO runs unchanged but for its imports. This runs that peer's own test
files to check it: the files are copied to a scratch folder, each import of
the peer is rewritten to the hipfile module that stands in for it, and
pytest runs there. A name imported from the peer moves to hipfile's module
when that module has it; names it does not have (the peer's own helpers)
stay imported from the peer, and each import is listed. Nothing else in the
files changes.

The copy is named ``tests`` and pytest runs from the folder above it, as
the peers run their suites (safetensors' tests write ``./tests/data/...``);
a file named on the command line is looked up in the copy.

    python tools/peer_tests.py safetensors PATH/TO/safetensors/bindings/python/tests \
        [-k EXPR] [pytest arguments ...]

Prints the rewrites made per file, then pytest's own report; exits with
pytest's status (2 when the folder holds no test file).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# peer -> the hipfile module that stands in for it
STAND_INS = {
    "safetensors": "hipfile.safetensors",
    "cufile": "hipfile.compat.cufile",
    "kvikio": "hipfile.compat.kvikio",
}


def _has(module: str, name: str) -> bool:
    try:
        return hasattr(importlib.import_module(module), name)
    except ImportError:
        return False


def _spell(names: list[ast.alias]) -> str:
    return ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in names)


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def _rewrite_import(node: ast.Import, peer: str, notes: list[str]) -> str | None:
    """The lines that replace ``import <peer>[.sub] [as name], ...``: each
    module of the peer that hipfile's stand-in has is imported from there,
    bound to the same name (``import kvikio.utils`` binds ``kvikio`` to the
    stand-in package, its ``utils`` loaded); None when nothing changes."""
    ours = STAND_INS[peer]
    pad = " " * node.col_offset
    out, changed = "", False
    for a in node.names:
        target = ours + a.name[len(peer):]
        if (a.name != peer and not a.name.startswith(peer + ".")) or not _importable(target):
            out += f"{pad}import {_spell([a])}\n"
            continue
        changed = True
        if a.asname:
            out += f"{pad}import {target} as {a.asname}\n"
        else:
            if a.name != peer:
                out += f"{pad}import {target}\n"
            parent, _, leaf = ours.rpartition(".")
            out += f"{pad}from {parent} import {leaf}" + (
                f" as {peer}\n" if leaf != peer else "\n")
        notes.append(f"line {node.lineno}: import {_spell([a])} -> {target}")
    return out if changed else None


def rewrite(text: str, peer: str) -> tuple[str, list[str]]:
    """``text`` with each ``from <peer>[.sub] import ...`` taking the names
    hipfile's stand-in module has from it, and only the others from the
    peer, and each ``import <peer>[.sub]`` importing the stand-in (when it
    has that module) under the same name; returns the new text and a line
    per import changed or kept."""
    ours = STAND_INS[peer]
    lines = text.splitlines(keepends=True)
    notes: list[str] = []
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            new = _rewrite_import(node, peer, notes)
            if new is not None:
                edits.append((node.lineno - 1, node.end_lineno or node.lineno, new))
            continue
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
            continue
        if node.module != peer and not node.module.startswith(peer + "."):
            continue
        target = ours + node.module[len(peer):]
        pad = " " * node.col_offset
        moved = [a for a in node.names if a.name != "*" and _has(target, a.name)]
        kept = [a for a in node.names if a not in moved]
        out = ""
        if moved:
            out += f"{pad}from {target} import {_spell(moved)}\n"
            notes.append(f"line {node.lineno}: from {target}: {_spell(moved)}")
        if kept:
            out += f"{pad}from {node.module} import {_spell(kept)}\n"
            notes.append(f"line {node.lineno}: kept from {node.module}: {_spell(kept)}")
        edits.append((node.lineno - 1, node.end_lineno or node.lineno, out))
    for first, last, out in sorted(edits, reverse=True):
        lines[first:last] = [out]
    return "".join(lines), notes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("peer", choices=sorted(STAND_INS), help="whose tests these are")
    ap.add_argument("tests", type=Path, help="the peer's folder of test files")
    args, pytest_args = ap.parse_known_args(argv)
    if not args.tests.is_dir():
        ap.error(f"{args.tests} is not a folder")
    if not any(args.tests.rglob("test_*.py")):
        print(f"no test_*.py under {args.tests}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix=f"{args.peer}-tests-") as scratch:
        top = Path(scratch)
        root = top / "tests"
        shutil.copytree(args.tests, root)
        for f in sorted(root.rglob("*.py")):
            text, notes = rewrite(f.read_text(), args.peer)
            f.write_text(text)
            for note in notes:
                print(f"{f.relative_to(root)}: {note}")
        named = [f"tests/{a}" if not a.startswith("-") and (root / a.split("::")[0]).exists()
                 else a for a in pytest_args]
        if not any((top / a.split("::")[0]).exists() for a in named if not a.startswith("-")):
            named.append("tests")
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *named]
        return subprocess.call(cmd, cwd=top)


if __name__ == "__main__":
    sys.exit(main())
