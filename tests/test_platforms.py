"""Test platforms: prefix lookup, activation, and the emulated platform's hooks."""

from __future__ import annotations

import json
import os
import subprocess
import warnings
from pathlib import Path

import pytest
from _util import PLATFORM_VARS
from _util import run_python as python

from hipfile import platforms


def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a new interpreter without any platform or library selected
    (and without ``HIPFILE_PLATFORM_QUIET``, which a cuda run sets)."""
    return python(code, (*PLATFORM_VARS, platforms.QUIET_ENV), **env)


def fake_prefix(root: Path) -> Path:
    (root / "lib").mkdir(parents=True)
    (root / "lib" / "libhipfile.so").write_bytes(b"")
    (root / "lib" / "libamdhip64.so").write_bytes(b"")
    return root


# -- prefix lookup -----------------------------------------------------------------------------


def test_emulated_prefix_layout() -> None:
    path = platforms.prefix("emulated")
    assert isinstance(path, Path)
    assert (path / "lib" / "libhipfile.so").is_file()
    assert (path / "lib" / "libamdhip64.so").is_file()
    assert platforms.prefix() == path


def test_prefix_environment_variable_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_prefix(tmp_path / "fake")
    monkeypatch.setenv("HIPFILE_EMULATED_PREFIX", str(fake))
    assert platforms.prefix("emulated") == fake


def test_incomplete_prefix_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    half = tmp_path / "half"
    (half / "lib").mkdir(parents=True)
    (half / "lib" / "libhipfile.so").write_bytes(b"")
    monkeypatch.setenv("HIPFILE_CUDA_PREFIX", str(half))
    try:
        found = platforms.prefix("cuda")
    except FileNotFoundError as exc:
        assert str(half) in str(exc)
    else:
        assert found != half


@pytest.mark.parametrize("name", ["bogus", "Emulated", "", "ROCM"])
def test_unknown_platform(name: str) -> None:
    with pytest.raises(ValueError, match=f"unknown platform {name!r}"):
        platforms.prefix(name)


def test_platform_not_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "missing"
    monkeypatch.setenv("HIPFILE_CUDA_PREFIX", str(missing))
    try:
        found = platforms.prefix("cuda")
    except FileNotFoundError as exc:
        message = str(exc)
        assert "platform 'cuda' is not built" in message
        assert str(missing) in message
        assert "platforms/cuda/build/prefix" in message
    else:
        pytest.skip(f"the cuda platform is built here ({found})")


def test_rocm_prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_prefix(tmp_path / "rocm")
    monkeypatch.setenv("HIPFILE_ROCM_PREFIX", str(fake))
    assert platforms.prefix("rocm") == fake
    assert "rocm" in platforms.available()
    monkeypatch.setenv("HIPFILE_ROCM_PREFIX", str(tmp_path / "none"))
    with pytest.raises(FileNotFoundError, match="none"):
        platforms.prefix("rocm")
    assert "rocm" not in platforms.available()


def test_available() -> None:
    names = platforms.available()
    assert "emulated" in names
    assert set(names) <= {"emulated", "cuda", "rocm"}


# -- activation in this process ------------------------------------------------------------------


@pytest.mark.emulated
def test_active_platform() -> None:
    assert platforms.active() == "emulated"
    assert os.environ["ROCM_PATH"] == str(platforms.prefix("emulated"))


@pytest.mark.emulated
def test_activating_the_same_platform_again_is_quiet() -> None:
    rocm_path = os.environ["ROCM_PATH"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert platforms.activate("emulated") == platforms.prefix("emulated")
    assert caught == []
    assert os.environ["ROCM_PATH"] == rocm_path
    assert platforms.active() == "emulated"


@pytest.mark.emulated
@pytest.mark.parametrize("other", ["cuda", "rocm"])
def test_second_platform_is_refused(other: str) -> None:
    rocm_path = os.environ["ROCM_PATH"]
    with pytest.raises(RuntimeError, match="platform 'emulated' is already active"):
        platforms.activate(other)
    assert platforms.active() == "emulated"
    assert os.environ["ROCM_PATH"] == rocm_path


# -- activation in a new process ------------------------------------------------------------------


def test_activation_from_the_environment_warns() -> None:
    prefix = platforms.prefix("emulated")
    proc = run_python(
        """
        import json, os, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import hipfile
        from hipfile import platforms
        from hipfile._lib import _hipfile

        out = {"warnings": [[w.category.__name__, str(w.message),
                             issubclass(w.category, UserWarning)] for w in caught
                            if issubclass(w.category, platforms.PlatformWarning)],
               "rocm_path": os.environ.get("ROCM_PATH"),
               "active": platforms.active(),
               "version": list(hipfile.get_version()),
               "library": _hipfile.library_path()}
        try:
            platforms.activate("rocm")
        except RuntimeError as exc:
            out["second"] = str(exc)
        print(json.dumps(out))
        """,
        HIPFILE_PLATFORM="emulated",
        HIPFILE_EMULATED_PREFIX=str(prefix),
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(out["warnings"]) == 1
    name, message, is_user_warning = out["warnings"][0]
    assert name == "PlatformWarning"
    assert is_user_warning
    assert "the emulated test platform is active" in message
    assert str(prefix) in message
    assert "not AMD's ROCm" in message
    assert out["rocm_path"] == str(prefix)
    assert out["active"] == "emulated"
    assert out["version"] == [0, 2, 0]
    assert out["library"] == f"{prefix}/lib/libhipfile.so"
    assert out["second"] == "platform 'emulated' is already active in this process"


def test_no_platform_no_warning() -> None:
    proc = run_python(
        """
        import json, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import hipfile
        from hipfile import platforms
        print(json.dumps({"n": len(caught), "active": platforms.active()}))
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"n": 0, "active": None}


def test_unknown_platform_in_the_environment_fails_the_import() -> None:
    proc = run_python("import hipfile", HIPFILE_PLATFORM="bogus")
    assert proc.returncode != 0
    assert "ValueError: unknown platform 'bogus'" in proc.stderr


def test_unbuilt_platform_in_the_environment_fails_the_import(tmp_path: Path) -> None:
    proc = run_python("import hipfile", HIPFILE_PLATFORM="rocm",
                      HIPFILE_ROCM_PREFIX=str(tmp_path / "none"))
    assert proc.returncode != 0
    assert "FileNotFoundError: platform 'rocm' is not built" in proc.stderr


def test_hooks_need_the_emulated_platform() -> None:
    proc = run_python(
        """
        import json
        from hipfile.platforms import emulated
        out = {}
        for name, call in [("counters", emulated.counters), ("reset", emulated.reset),
                           ("fault", lambda: emulated.inject_fault("read", 5))]:
            try:
                call()
            except RuntimeError as exc:
                out[name] = str(exc)
        print(json.dumps(out))
        """
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(out) == {"counters", "reset", "fault"}
    for message in out.values():
        assert "the emulated platform is not active in this process" in message


# -- the emulated platform's hooks -----------------------------------------------------------


@pytest.mark.emulated
def test_counters_shape() -> None:
    from hipfile.platforms import emulated

    counts = emulated.counters()
    assert set(counts) == {
        "handles", "buffers", "streams_registered", "inflight", "batches",
        "allocations", "host_allocations", "streams", "events",
        "stream_waits", "blocked_waits",
    }
    assert all(type(v) is int for v in counts.values())


@pytest.mark.emulated
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("open", 5), "unknown fault op 'open'"),
        (("read", 5, -1), "count and after"),
        (("read", 5, 1, -1), "count and after"),
        (("read", 0), "bad errno 0"),
        (("read", -5), "bad errno -5"),
        (("read", 5039), "bad errno 5039"),
        (("read", 5000), "bad errno 5000"),
    ],
)
def test_inject_fault_validation(args: tuple[object, ...], message: str) -> None:
    from hipfile.platforms import emulated

    with pytest.raises(ValueError, match=message):
        emulated.inject_fault(*args)  # type: ignore[arg-type]


@pytest.mark.emulated
def test_other_hook_validation() -> None:
    from hipfile.platforms import emulated

    with pytest.raises(ValueError, match="max_bytes"):
        emulated.set_short_transfer(-1)
    with pytest.raises(ValueError, match="microseconds"):
        emulated.set_completion_delay(-1)
    emulated.set_short_transfer(None)
    emulated.set_completion_delay(0)
    assert sorted(emulated.FAULT_OPS) == [
        "batch", "read", "read_async", "register", "write", "write_async",
    ]
