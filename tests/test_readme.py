"""Each of the README's Python blocks runs on its own (a fresh namespace, an
empty folder), as a reader pastes it; the settings tables of the README and
the docs list every setting of hipfile.defaults."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hipfile import defaults

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CONFIG_PAGE = ROOT / "docs" / "guide" / "configuration.md"

#: What each Python block prints: the first read, read_async, the engine,
#: (the batch, pread, batch_read of 256 entries, a host read), the statistics,
#: a safetensors round trip.
EXPECTED = [["4096"], ["65536"], [str(1 << 20)],
            [str(8 * 4096), str(1 << 20), str(1 << 20), str(1 << 20)], ["True"], ["16.0"]]


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)


@pytest.mark.needs("hipFileBatchIOGetStatus", "hipFileStatsCreateContext")  # batch, stats
def test_readme_blocks_each_run_on_their_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    blocks = python_blocks(README.read_text())
    assert len(blocks) == len(EXPECTED)
    for i, (code, expected) in enumerate(zip(blocks, EXPECTED, strict=True), 1):
        folder = tmp_path / f"block{i}"
        folder.mkdir()
        monkeypatch.chdir(folder)
        namespace: dict[str, object] = {"__name__": "__readme__"}
        exec(compile(code, f"README.md (python block {i})", "exec"), namespace)
        namespace.clear()
        assert capsys.readouterr().out.split() == expected, f"python block {i}"


def test_readme_usage_opens_with_the_emulated_platform() -> None:
    usage = README.read_text().split("## Usage\n", 1)[1]
    first_block = usage.index("```")
    assert "without" in usage[:first_block].lower() or "no gpu" in usage[:first_block].lower()
    assert usage[first_block:].startswith("```bash\nexport HIPFILE_PLATFORM=emulated")


def table_rows(text: str) -> dict[str, str]:
    """setting -> environment variable, from the markdown settings table."""
    rows = re.findall(r"^\| `([a-z_]+)` \| `(HIPFILE_[A-Z_]+)` \|", text, flags=re.MULTILINE)
    return dict(rows)


@pytest.mark.parametrize("page", [README, CONFIG_PAGE], ids=["README", "docs"])
def test_settings_tables_are_complete(page: Path) -> None:
    assert table_rows(page.read_text()) == {n: s.env for n, s in defaults.SETTINGS.items()}


def test_readme_quick_start_says_what_to_set_beside_hipmalloc() -> None:
    """The first Python block says, next to its hipMalloc, that a machine
    without ROCm needs HIPFILE_PLATFORM=emulated (or hipMalloc fails to
    dlopen libamdhip64.so)."""
    first = python_blocks(README.read_text())[0]
    lines = first.splitlines()
    at = next(i for i, line in enumerate(lines) if "hip.hipMalloc(" in line)
    near = "\n".join(lines[max(0, at - 3):at + 1])
    assert "HIPFILE_PLATFORM=emulated" in near and "libamdhip64.so" in near
