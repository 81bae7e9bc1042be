"""Every Python block of the guides (``docs/guide``, ``docs/integrations``)
runs as written: pasted into a file of an empty folder and run there in a
fresh interpreter on the emulated platform.

A block that needs what this platform cannot give (NVIDIA's cuda-bindings,
torch with a GPU, a running vLLM or LMCache) is marked in the markdown by
the line just before its fence::

    <!-- docs-test: skip: the reason -->

and is skipped with that reason shown."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = sorted([*DOCS.glob("guide/*.md"), *DOCS.glob("integrations/*.md")])
FENCE = re.compile(r"^```(?:python|py)[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
SKIP = re.compile(r"^<!-- docs-test: skip: (.+?) -->$")


class Block(NamedTuple):
    page: str
    line: int
    code: str
    skip: str | None


def blocks(path: Path) -> list[Block]:
    """The Python blocks of one page, with the reason of a skip marker."""
    text = path.read_text()
    found = []
    for m in FENCE.finditer(text):
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = SKIP.match(before.strip())
        found.append(Block(str(path.relative_to(DOCS)), text.count("\n", 0, m.start()) + 1,
                           m.group(1), marker.group(1) if marker else None))
    return found


BLOCKS = [b for page in PAGES for b in blocks(page)]


def test_the_guides_have_their_blocks() -> None:
    assert len(BLOCKS) >= 23
    # every marker stands right before a Python block
    markers = sum(len(re.findall(r"^<!-- docs-test: skip:", p.read_text(), re.M))
                  for p in PAGES)
    assert markers == sum(b.skip is not None for b in BLOCKS)


@pytest.mark.parametrize("block", BLOCKS, ids=[f"{b.page}:{b.line}" for b in BLOCKS])
def test_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    if block.skip:
        pytest.skip(f"{block.page}:{block.line} needs {block.skip}")
    script = tmp_path / "block.py"
    script.write_text(block.code)
    env = {k: v for k, v in os.environ.items() if k not in ("ROCM_PATH", "HIPFILE_LIBRARY")}
    env.update(HIPFILE_PLATFORM="emulated", HIPFILE_PLATFORM_QUIET="1")
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, (f"{block.page}:{block.line}\n{block.code}\n"
                                  f"{proc.stdout}{proc.stderr}")
