"""Code written for upstream's ``hipfile`` package (AMD's 0.4 bindings)
runs here unchanged: its module paths and names import with the same
meaning, and a program written the way upstream's example is runs."""

from __future__ import annotations

import ctypes
import hashlib
import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _platform import PLATFORM

import hipfile

# upstream's public modules and the names each one holds
UPSTREAM = {
    "hipfile": ["Driver", "FileHandle", "Stream", "supports_async", "Buffer",
                "HipFileException", "FileHandleType", "OpError", "driver_get_properties",
                "get_version", "__version__"],
    "hipfile.error": ["HipFileException"],
    "hipfile.file": ["FileHandle", "Stream", "supports_async"],
    "hipfile.buffer": ["Buffer"],
    "hipfile.driver": ["Driver"],
    "hipfile.enums": ["FileHandleType", "OpError"],
    "hipfile.properties": ["driver_get_properties", "get_version"],
    "hipfile.hipMalloc": ["hipMalloc", "hipFree"],
}


@pytest.mark.parametrize("module", sorted(UPSTREAM))
def test_upstream_module_paths_and_names(module: str) -> None:
    mod = importlib.import_module(module)
    for name in UPSTREAM[module]:
        assert hasattr(mod, name), f"{module}.{name}"
        if module not in ("hipfile", "hipfile.hipMalloc"):
            # the same objects as the package's own names
            assert getattr(mod, name) is getattr(hipfile, name), f"{module}.{name}"


def test_version_is_the_packages_own() -> None:
    from importlib.metadata import version

    # __version__ is this distribution's version; the library's is get_version()
    assert hipfile.__version__ == version("hipfile")
    assert isinstance(hipfile.get_version(), tuple)


def test_hipmalloc_returns_a_void_p_that_hipfree_takes(driver: hipfile.Driver) -> None:
    from hipfile.hipMalloc import hipFree, hipMalloc

    ptr = hipMalloc(1 << 16)
    assert isinstance(ptr, ctypes.c_void_p) and ptr.value
    try:
        with hipfile.Buffer.from_ctypes_void_p(ptr, 1 << 16, 0) as buf:
            assert buf.ptr == ptr.value
    finally:
        hipFree(ptr)
    hipFree(None)   # nothing to free
    with pytest.raises(TypeError):
        hipMalloc(1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        hipMalloc(-1)
    with pytest.raises(TypeError):
        hipFree("0x1")  # type: ignore[arg-type]
    with pytest.raises(RuntimeError) as info:   # as upstream raises
        hipMalloc(1 << 62)
    assert isinstance(info.value, hipfile.HipFileException)
    assert "hipMalloc" in str(info.value)


# A program written the way upstream's example is: allocate with
# hipfile.hipMalloc, register the memory, read a file through it and write
# it to another file with FileHandle, then compare the files' hashes.
PROGRAM = textwrap.dedent('''
    import hashlib
    import os
    import sys

    from hipfile.hipMalloc import hipFree, hipMalloc
    from hipfile.error import HipFileException
    from hipfile.file import FileHandle, Stream, supports_async
    from hipfile import Buffer, Driver, FileHandleType, get_version

    def digest(path):
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()

    src, dst, direct = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    flags = os.O_DIRECT if direct else 0
    print("library", get_version(), "async", supports_async())
    size = os.stat(src).st_size
    mem = hipMalloc(size)
    print("uses before", Driver.use_count())
    try:
        with Driver() as drv:
            print("uses after", drv.use_count())
            with Buffer.from_ctypes_void_p(mem, size, 0) as buf:
                with FileHandle(src, os.O_RDWR | os.O_CREAT | flags,
                                handle_type=FileHandleType.OPAQUE_FD) as fin:
                    with FileHandle(dst, os.O_RDWR | os.O_CREAT | os.O_TRUNC | flags) as fout:
                        print("read", fin.read(buf, size, 0, 0))
                        print("written", fout.write(buf, size, 0, 0))
    except HipFileException as e:
        print("failed:", e, file=sys.stderr)
        sys.exit(2)
    finally:
        hipFree(mem)
    same = digest(src) == digest(dst)
    print("hashes match" if same else "hashes differ")
    sys.exit(0 if same else 1)
''')


@pytest.mark.parametrize("direct", [False, True], ids=["buffered", "O_DIRECT"])
def test_program_written_for_upstream_runs_unchanged(tmp_path: Path, direct: bool) -> None:
    if direct:
        try:
            os.close(os.open(tmp_path / "probe", os.O_RDWR | os.O_CREAT | os.O_DIRECT))
        except OSError:
            pytest.skip("the temporary folder's file system has no O_DIRECT")
    src = tmp_path / "random_2MiB.bin"
    data = os.urandom(2 << 20)
    src.write_bytes(data)
    dst = tmp_path / "output.bin"
    script = tmp_path / "main.py"
    script.write_text(PROGRAM)
    env = dict(os.environ)
    if PLATFORM in ("emulated", "cuda"):
        env["HIPFILE_PLATFORM"] = PLATFORM
    env["PYTHONWARNINGS"] = "ignore::UserWarning"
    proc = subprocess.run([sys.executable, str(script), str(src), str(dst), str(int(direct))],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"read {len(data)}" in proc.stdout and f"written {len(data)}" in proc.stdout
    assert "hashes match" in proc.stdout
    assert hashlib.sha256(dst.read_bytes()).digest() == hashlib.sha256(data).digest()


def test_readme_says_what_the_index_package_is() -> None:
    """``pip install hipfile`` must not surprise: the README and the
    migration guide say that the index's hipfile is AMD's package, how this
    one is installed, and name this package's version."""
    root = Path(__file__).resolve().parent.parent
    readme = " ".join((root / "README.md").read_text().split())
    guide = " ".join((root / "docs" / "migration.md").read_text().split())
    for text in (readme, guide):
        assert "`pip install hipfile`" in text
        assert "AMD's" in text and "0.4.0.dev0" in text
        assert f"`hipfile` {hipfile.__version__}" in text
        assert "`hipfile.get_version()`" in text or "get_version()" in text
    assert "pip install -e '.[test]'" in readme
