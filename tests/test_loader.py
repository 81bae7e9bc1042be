"""Finding and loading libhipfile: search order, missing library, missing symbols."""

from __future__ import annotations

import ctypes.util
import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from _util import PLATFORM_VARS
from _util import run_python as python

import hipfile
from hipfile import platforms
from hipfile._lib import _hipfile


def run_python(code: str, **env: str) -> dict[str, object]:
    """Run ``code`` in a new interpreter without any platform or library
    selected (plus ``env``); it prints one JSON line, returned here."""
    proc = python(code, PLATFORM_VARS, **env)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


# Imports hipfile, then tries the first calls that need the library.
PROBE = """
    import json, os, sys
    import hipfile
    from hipfile._lib import _hipfile

    out = {"loaded_by_import": _hipfile.library_loaded(),
           "hip_imported": "hip" in sys.modules}
    out["supports_async"] = hipfile.supports_async()

    def outcome(fn):
        try:
            value = fn()
        except Exception as exc:
            return {"type": type(exc).__name__, "oserror": isinstance(exc, OSError),
                    "library_error": isinstance(exc, hipfile.HipFileLibraryError),
                    "message": str(exc)}
        return {"value": value}

    out["open"] = outcome(lambda: hipfile.Driver().open() and None)
    out["version"] = outcome(hipfile.get_version)
    out["path"] = _hipfile.library_path()
    fds = len(os.listdir("/proc/self/fd"))
    def open_and_register():
        # open() needs no library: the registration at first need does
        with hipfile.open(sys.executable) as fh:
            return fh.handle and None

    out["opened_without_library"] = outcome(lambda: hipfile.open(sys.executable).close())
    out["file"] = outcome(open_and_register)
    out["fd_leak"] = len(os.listdir("/proc/self/fd")) - fds
    out["buffer_len"] = len(hipfile.Buffer(0x1000, 16))
    out["message_without_library"] = str(hipfile.InvalidValueError(5022))
    print(json.dumps(out))
"""


def test_missing_explicit_library(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "libhipfile.so"
    out = run_python(PROBE, HIPFILE_LIBRARY=str(missing))
    assert out["loaded_by_import"] is False
    assert out["hip_imported"] is False
    assert out["supports_async"] is False
    assert out["opened_without_library"] == {"value": None}
    for key in ("open", "version", "file"):
        exc = out[key]
        assert isinstance(exc, dict)
        assert exc["type"] == "HipFileLibraryNotFound", key
        assert exc["oserror"] is True
        assert exc["library_error"] is True
        assert f"{missing} (no such file)" in exc["message"]
        assert "HIPFILE_LIBRARY" in exc["message"]
    assert out["path"] is None
    assert out["fd_leak"] == 0
    assert out["buffer_len"] == 16
    assert "INVALID_VALUE (5022)" in str(out["message_without_library"])


def _system_has_hipfile() -> bool:
    return any(Path(p).exists() for p in ("/opt/rocm/lib/libhipfile.so",
                                          "/opt/rocm/lib/libhipfile.so.0")) or bool(
        ctypes.util.find_library("hipfile")
    )


def test_nothing_selected_lists_every_path() -> None:
    if _system_has_hipfile():
        pytest.skip("this machine has a system libhipfile")
    out = run_python(PROBE)
    assert out["supports_async"] is False
    exc = out["open"]
    assert isinstance(exc, dict)
    assert exc["type"] == "HipFileLibraryNotFound"
    message = exc["message"]
    for path in ("/opt/rocm/lib/libhipfile.so", "/opt/rocm/lib/libhipfile.so.0",
                 "libhipfile.so.0", "libhipfile.so"):
        assert path in message
    assert message.index("/opt/rocm/lib/libhipfile.so") < message.index("; libhipfile.so.0")
    # a first try without ROCm is told how to use the emulated platform
    assert "HIPFILE_PLATFORM=emulated" in message


def test_rocm_path_is_searched_first(tmp_path: Path) -> None:
    if _system_has_hipfile():
        pytest.skip("this machine has a system libhipfile")
    out = run_python(PROBE, ROCM_PATH=str(tmp_path))
    exc = out["open"]
    assert isinstance(exc, dict)
    message = exc["message"]
    ours = f"{tmp_path}/lib/libhipfile.so"
    assert ours in message
    assert message.index(ours) < message.index("/opt/rocm/lib/libhipfile.so")


def test_rocm_path_loads_the_platform() -> None:
    prefix = platforms.prefix("emulated")
    out = run_python(PROBE, ROCM_PATH=str(prefix))
    assert out["open"] == {"value": None}
    assert out["version"] == {"value": [0, 2, 0]}
    assert out["path"] == f"{prefix}/lib/libhipfile.so"
    assert out["supports_async"] is True


@pytest.fixture
def old_library(tmp_path: Path) -> Path:
    """A library of hipFile 0.1.0 with only two functions."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    src = tmp_path / "old.c"
    src.write_text(
        textwrap.dedent(
            """
            typedef struct { int err; int hip_drv_err; } hipFileError_t;

            hipFileError_t hipFileGetVersion(unsigned *major, unsigned *minor,
                                             unsigned *patch)
            {
                hipFileError_t ok = {0, 0};
                *major = 0;
                *minor = 1;
                *patch = 0;
                return ok;
            }

            const char *hipFileGetOpErrorString(int status)
            {
                return status == 0 ? "success" : "error of the old library";
            }
            """
        )
    )
    lib = tmp_path / "libhipfile-old.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True,
                   capture_output=True, timeout=120)
    return lib


def test_missing_symbol_of_an_older_library(old_library: Path) -> None:
    # ROCM_PATH names a complete library: the explicit one must win.
    out = run_python(PROBE, HIPFILE_LIBRARY=str(old_library),
                     ROCM_PATH=str(platforms.prefix("emulated")))
    assert out["supports_async"] is False
    assert out["path"] == str(old_library)
    assert out["version"] == {"value": [0, 1, 0]}
    exc = out["open"]
    assert isinstance(exc, dict)
    assert exc["type"] == "HipFileSymbolNotFound"
    assert exc["oserror"] is True
    assert exc["library_error"] is True
    assert "hipFileDriverOpen" in exc["message"]
    assert "0.1.0" in exc["message"]
    assert str(old_library) in exc["message"]
    file_exc = out["file"]
    assert isinstance(file_exc, dict)
    assert file_exc["type"] == "HipFileSymbolNotFound"
    assert "hipFileHandleRegister" in file_exc["message"]
    assert out["fd_leak"] == 0


def test_explicit_library_wins(tmp_path: Path) -> None:
    lib = platforms.prefix("emulated") / "lib" / "libhipfile.so"
    out = run_python(PROBE, HIPFILE_LIBRARY=str(lib), ROCM_PATH=str(tmp_path))
    assert out["path"] == str(lib)
    assert out["open"] == {"value": None}
    assert out["version"] == {"value": [0, 2, 0]}


# -- in this process ------------------------------------------------------------------------


def test_candidate_paths_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HIPFILE_LIBRARY", raising=False)
    monkeypatch.setenv("ROCM_PATH", "/some/rocm")
    assert _hipfile.candidate_paths() == [
        "/some/rocm/lib/libhipfile.so",
        "/some/rocm/lib/libhipfile.so.0",
        "/opt/rocm/lib/libhipfile.so",
        "/opt/rocm/lib/libhipfile.so.0",
        "libhipfile.so.0",
        "libhipfile.so",
    ]
    monkeypatch.delenv("ROCM_PATH")
    assert _hipfile.candidate_paths()[0] == "/opt/rocm/lib/libhipfile.so"
    monkeypatch.setenv("HIPFILE_LIBRARY", "/explicit/libhipfile.so")
    assert _hipfile.candidate_paths() == ["/explicit/libhipfile.so"]


def test_loaded_library_in_this_process() -> None:
    path = _hipfile.load_library()
    assert _hipfile.library_loaded()
    assert _hipfile.library_path() == path
    assert Path(path).name.startswith("libhipfile.so")
    assert _hipfile.has_symbol("hipFileRead")
    assert _hipfile.has_symbol("hipFileDriverOpen")
    assert not _hipfile.has_symbol("hipFileNoSuchFunction")


@pytest.mark.emulated
def test_loaded_from_the_active_platform() -> None:
    assert Path(_hipfile.load_library()).parent == platforms.prefix("emulated") / "lib"
    assert hipfile.supports_async() is True


def test_abi_layout_of_the_shim() -> None:
    """The structs as compiled into the shim match the ABI's layouts."""
    layout = _hipfile.abi_layout()
    assert layout["descr"] == (24, 8, 16)
    # nvfs {4, 4, 8, 8, 4, 4} = 32, feature_flags 4 (+4 padding), 3 x 8, 2 x 4
    assert layout["driver_props"] == 72 == _hipfile.SIZEOF_DRIVER_PROPS
    assert layout["io_params"] == (64, {
        "mode": 0, "buffer": 8, "file_offset": 16, "buffer_offset": 24, "size": 32,
        "fh": 40, "opcode": 48, "cookie": 56,
    })
    assert layout["io_events"] == (24, {"cookie": 0, "status": 8, "ret": 16})
    assert _hipfile.SIZEOF_DESCR == 24
    assert _hipfile.SIZEOF_IO_PARAMS == 64
    assert _hipfile.SIZEOF_IO_EVENTS == 24


def test_public_names_resolve() -> None:
    for name in hipfile.__all__:
        assert getattr(hipfile, name) is not None, name
    assert sorted(set(hipfile.__all__)) == sorted(hipfile.__all__)
