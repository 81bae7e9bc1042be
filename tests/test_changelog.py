"""The changelog's shape: Keep a Changelog 1.1.0, one section per release.

These tests read ``CHANGELOG.md`` and ``pyproject.toml`` only. They check
that the changelog stays a document for users: an ``[Unreleased]`` section
that stays short, a dated section for the package's version, only the
subsection names Keep a Changelog defines, and no benchmark-run notes or
test counts (those belong in ``docs/benchmarks.md`` and
``docs/platform-cuda.md``).
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHANGELOG = ROOT / "CHANGELOG.md"
PYPROJECT = ROOT / "pyproject.toml"

SUBSECTIONS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}
UNRELEASED_MAX_LINES = 180
RELEASE = re.compile(r"^## \[(?P<version>\d+\.\d+\.\d+)\] - (?P<date>\d{4}-\d{2}-\d{2})$")

#: Lines that read as notes of a benchmark or test run, not as a change a
#: user meets: run numbers and run letters, GPU run narratives, test counts
#: and throughput figures.
RUN_NOTES = [
    re.compile(r"\bruns? \d+\b", re.IGNORECASE),
    re.compile(r"\b[Rr]un [A-Z]\b(?![/\w])"),
    re.compile(r"\bH200 runs?\b|\bruns? on the H200\b", re.IGNORECASE),
    re.compile(r"\b\d+ (passed|failed|skipped|xfailed|xpassed)\b"),
    re.compile(r"\b\d+(\.\d+)? GB/s\b"),
    re.compile(r"native_backtrace|duplicates --most"),
]


def _lines() -> list[str]:
    return CHANGELOG.read_text(encoding="utf-8").splitlines()


def _package_version() -> str:
    """The ``version`` of ``[project]`` in pyproject.toml (no tomllib on 3.10)."""
    text = PYPROJECT.read_text(encoding="utf-8")
    project = re.search(r"^\[project\]\s*$(?P<body>.*?)(?=^\[|\Z)", text, re.M | re.S)
    assert project is not None, "pyproject.toml has no [project] table"
    version = re.search(r'^version\s*=\s*"(?P<v>[^"]+)"\s*$', project["body"], re.M)
    assert version is not None, "[project] in pyproject.toml has no version"
    return version["v"]


def _sections() -> list[tuple[str, int, int]]:
    """Each ``## `` section as (heading, first line index, end line index)."""
    lines = _lines()
    starts = [i for i, line in enumerate(lines) if line.startswith("## ")]
    ends = [*starts[1:], len(lines)]
    return [(lines[s], s, e) for s, e in zip(starts, ends, strict=True)]


def test_the_changelog_names_its_format() -> None:
    lines = _lines()
    assert lines[0] == "# Changelog"
    text = "\n".join(lines)
    assert "https://keepachangelog.com/en/1.1.0/" in text
    assert "https://semver.org/" in text


def test_every_release_heading_is_unreleased_or_a_dated_version() -> None:
    bad = [h for h, _, _ in _sections()
           if h != "## [Unreleased]" and RELEASE.match(h) is None]
    assert bad == [], f"release headings not in Keep a Changelog's form: {bad}"
    for heading, _, _ in _sections():
        match = RELEASE.match(heading)
        if match is not None:
            datetime.date.fromisoformat(match["date"])  # a real date


def test_exactly_one_unreleased_section_and_it_comes_first() -> None:
    headings = [h for h, _, _ in _sections()]
    assert headings.count("## [Unreleased]") == 1, headings
    assert headings[0] == "## [Unreleased]", headings


def test_releases_are_unique_and_newest_first() -> None:
    versions = []
    for heading, _, _ in _sections():
        match = RELEASE.match(heading)
        if match is not None:
            versions.append(tuple(int(p) for p in match["version"].split(".")))
    assert versions, "no released version has a section"
    assert len(set(versions)) == len(versions), f"a version appears twice: {versions}"
    assert versions == sorted(versions, reverse=True), f"not newest first: {versions}"


def test_the_package_version_has_a_dated_section() -> None:
    version = _package_version()
    heading = re.compile(rf"^## \[{re.escape(version)}\] - \d{{4}}-\d{{2}}-\d{{2}}$")
    assert any(heading.match(h) for h, _, _ in _sections()), (
        f"CHANGELOG.md has no '## [{version}] - YYYY-MM-DD' section for the "
        "version in pyproject.toml")


def test_only_keep_a_changelog_subsections() -> None:
    lines = _lines()
    first_release = _sections()[0][1]
    for index, line in enumerate(lines):
        if line.startswith("### "):
            assert index > first_release, f"line {index + 1}: subsection outside a release"
            assert line[4:] in SUBSECTIONS, (
                f"line {index + 1}: {line!r} is not one of {sorted(SUBSECTIONS)}")
        elif line.startswith("#") and not line.startswith(("# Changelog", "## ")):
            pytest.fail(f"line {index + 1}: heading {line!r} is not a release or a change type")
    for heading, start, end in _sections():
        subs = [line for line in lines[start:end] if line.startswith("### ")]
        assert subs, f"{heading} has no Added/Changed/... subsection"
        assert len(subs) == len(set(subs)), f"{heading} repeats a subsection: {subs}"


def test_unreleased_stays_short() -> None:
    (_, start, end), = [s for s in _sections() if s[0] == "## [Unreleased]"]
    assert end - start < UNRELEASED_MAX_LINES, (
        f"[Unreleased] is {end - start} lines; cut a release or shorten it")


def test_no_benchmark_run_notes_or_test_counts() -> None:
    found = [f"line {i + 1}: {line.strip()}"
             for i, line in enumerate(_lines())
             if any(p.search(line) for p in RUN_NOTES)]
    assert found == [], ("run notes belong in docs/benchmarks.md or "
                         "docs/platform-cuda.md:\n" + "\n".join(found))


@pytest.mark.parametrize("line", [
    "- Runs 37 to 49 ended green.",
    "  (10 of 13 H200 runs on 2026-12-04)",
    "  `docs/benchmarks.md` run H (H200): 512 blocks",
    "  cufile's tests: 12 passed, 11 skipped, 5 failed",
    "  40.4 GB/s, 0.97x the page-cache limit",
    "- `tools/native_backtrace.c`: preloaded into a process",
])
def test_the_run_note_patterns_catch_what_they_are_for(line: str) -> None:
    assert any(p.search(line) for p in RUN_NOTES), line


@pytest.mark.parametrize("line", [
    "- `engine_task_size` defaults to 2 MiB (`HIPFILE_ENGINE_TASK_SIZE`).",
    "  `hipfile.engine.prepare(device=-1)` allocates a device's engine state",
    "  (`engine_copy_streams`, 1 to 8, default 1) run on the device's streams",
    "- Work may run I/O on another stream.",
])
def test_the_run_note_patterns_leave_change_notes_alone(line: str) -> None:
    assert not any(p.search(line) for p in RUN_NOTES), line
