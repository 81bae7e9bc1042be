"""The README's Python blocks run in order, as one program; the settings
tables of the README and the docs list every setting of hipfile.defaults."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hipfile import defaults

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CONFIG_PAGE = ROOT / "docs" / "guide" / "configuration.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)


@pytest.mark.needs("hipFileBatchIOGetStatus", "hipFileStatsCreateContext")  # batch, stats
def test_readme_blocks_run_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    blocks = python_blocks(README.read_text())
    assert len(blocks) >= 2
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__readme__"}
    for i, code in enumerate(blocks, 1):
        exec(compile(code, f"README.md (python block {i})", "exec"), namespace)
    out = capsys.readouterr().out.split()
    # read_async, the engine, the batch, pread, batch_read (256 entries), a host
    # read, stats
    assert out == ["65536", str(1 << 20), str(8 * 4096), str(1 << 20), str(1 << 20),
                   str(1 << 20), "True"]
    namespace.clear()


def table_rows(text: str) -> dict[str, str]:
    """setting -> environment variable, from the markdown settings table."""
    rows = re.findall(r"^\| `([a-z_]+)` \| `(HIPFILE_[A-Z_]+)` \|", text, flags=re.MULTILINE)
    return dict(rows)


@pytest.mark.parametrize("page", [README, CONFIG_PAGE], ids=["README", "docs"])
def test_settings_tables_are_complete(page: Path) -> None:
    assert table_rows(page.read_text()) == {n: s.env for n, s in defaults.SETTINGS.items()}
