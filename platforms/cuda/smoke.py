#!/usr/bin/env python3
"""Preflight of the cuda test platform, standard library only.

Answers, before the test suite runs, whether this machine can use the
platform at all: the prefix's two libraries load, the hipFile driver opens
and closes, a file in each given folder registers, and one read lands in
device memory. Where a step fails it says why in the terms cuFile uses
(missing udev data, compatibility mode, ``O_DIRECT`` refused). Everything
else is covered by ``HIPFILE_PLATFORM=cuda python -m pytest``.

Usage::

    python3 platforms/cuda/smoke.py [--prefix PREFIX] [--dir DIR ...]

The prefix defaults to ``HIPFILE_CUDA_PREFIX`` or ``platforms/cuda/build/prefix``;
``--dir`` (repeatable) defaults to the system temporary folder. Prints one
``PASS``/``FAIL``/``INFO`` line per step and exits non-zero on a failure.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
VP = ctypes.c_void_p
HIP_MEMCPY_D2H = 2
SIZE = (1 << 20) + 12345  # not a multiple of the page size


class FileError(ctypes.Structure):
    _fields_ = [("err", ctypes.c_int), ("hip_drv_err", ctypes.c_int)]


class Descr(ctypes.Structure):
    # hipFileDescr_t: type, union {int fd; void *hFile}, fs_ops (24 bytes)
    _fields_ = [("type", ctypes.c_int), ("pad", ctypes.c_int), ("fd", ctypes.c_int64),
                ("fs_ops", VP)]


failed = 0


def report(name: str, ok: bool, detail: str = "") -> bool:
    global failed
    print(f"{'PASS' if ok else 'FAIL'} {name}" + (f": {detail}" if detail else ""), flush=True)
    failed += not ok
    return ok


def load(prefix: Path) -> tuple[ctypes.CDLL, ctypes.CDLL]:
    hip = ctypes.CDLL(str(prefix / "lib" / "libamdhip64.so"), mode=ctypes.RTLD_GLOBAL)
    hf = ctypes.CDLL(str(prefix / "lib" / "libhipfile.so"), use_errno=True)
    for name in ("hipFileDriverOpen", "hipFileDriverClose"):
        getattr(hf, name).restype = FileError
    hf.hipFileHandleRegister.argtypes = [ctypes.POINTER(VP), ctypes.POINTER(Descr)]
    hf.hipFileHandleRegister.restype = FileError
    hf.hipFileHandleDeregister.argtypes = [VP]
    hf.hipFileHandleDeregister.restype = None
    hf.hipFileRead.argtypes = [VP, VP, ctypes.c_size_t, ctypes.c_int64, ctypes.c_int64]
    hf.hipFileRead.restype = ctypes.c_ssize_t
    hf.hipFileGetOpErrorString.argtypes = [ctypes.c_int]
    hf.hipFileGetOpErrorString.restype = ctypes.c_char_p
    hip.hipMalloc.argtypes = [ctypes.POINTER(VP), ctypes.c_size_t]
    hip.hipFree.argtypes = [VP]
    hip.hipMemcpy.argtypes = [VP, VP, ctypes.c_size_t, ctypes.c_int]
    return hip, hf


def why(hf: ctypes.CDLL, e: FileError) -> str:
    return f"hipFile error {e.err} ({hf.hipFileGetOpErrorString(e.err).decode()})"


def hint_register(folder: Path) -> None:
    """Explain the usual reasons cuFile refuses a file."""
    if not Path("/run/udev/data").is_dir():
        print(f"INFO no /run/udev/data: cuFile cannot describe the block device of {folder}; "
              f"run (as root) bash platforms/cuda/udev-stub.sh {folder}")
    if str(folder).startswith(("/dev/shm", "/run")):
        print("INFO tmpfs has no block device: cuFile refuses its files; use a disk folder")
    if not Path("/proc/driver/nvidia-fs").exists():
        print("INFO no nvidia-fs driver: cuFile can only run in compatibility mode; "
              "check that allow_compat_mode is true in platforms/cuda/cufile.json")


def check_folder(hip: ctypes.CDLL, hf: ctypes.CDLL, folder: Path) -> None:
    data = os.urandom(SIZE)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        path = Path(tmp) / "hipfile-preflight.bin"
        path.write_bytes(data)
        try:
            fd, direct = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0)), True
        except OSError as exc:
            print(f"INFO [{folder}] O_DIRECT refused ({exc.strerror}): buffered I/O, "
                  "cuFile needs compatibility mode")
            fd, direct = os.open(path, os.O_RDONLY), False
        fh, dev = VP(), VP()
        try:
            e = hf.hipFileHandleRegister(ctypes.byref(fh), ctypes.byref(Descr(1, 0, fd, None)))
            if not report(f"[{folder}] hipFileHandleRegister (O_DIRECT {direct})", e.err == 0,
                          "" if e.err == 0 else why(hf, e)):
                hint_register(folder)
                return
            if not report("hipMalloc", hip.hipMalloc(ctypes.byref(dev), SIZE) == 0):
                return
            n = hf.hipFileRead(fh, dev, SIZE, 0, 0)
            got = ctypes.create_string_buffer(SIZE)
            same = n == SIZE and hip.hipMemcpy(got, dev, SIZE, HIP_MEMCPY_D2H) == 0 \
                and got.raw == data
            report(f"[{folder}] hipFileRead into device memory", same,
                   f"returned {n}" + (f", errno {ctypes.get_errno()}" if n < 0 else ""))
        finally:
            if fh.value:
                hf.hipFileHandleDeregister(fh)
            if dev.value:
                hip.hipFree(dev)
            os.close(fd)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("HIPFILE_CUDA_PREFIX") or str(HERE / "build" / "prefix")
    parser.add_argument("--prefix", default=default)
    parser.add_argument("--dir", action="append", dest="dirs",
                        help="folder for the test file (repeatable)")
    args = parser.parse_args()
    prefix = Path(args.prefix)
    if not report("prefix", (prefix / "lib" / "libhipfile.so").is_file(), str(prefix)):
        print("INFO build it: bash platforms/cuda/build.sh")
        return 1
    os.environ["ROCM_PATH"] = str(prefix)
    try:
        hip, hf = load(prefix)
    except OSError as exc:
        report("load libamdhip64.so and libhipfile.so", False, str(exc))
        print("INFO the platform needs libcudart and libcufile (CUDA 12) on the loader path")
        return 1
    report("load libamdhip64.so and libhipfile.so", True)
    e = hf.hipFileDriverOpen()
    if not report("hipFileDriverOpen", e.err == 0, "" if e.err == 0 else why(hf, e)):
        print("INFO see the cuFile log (logging.dir in platforms/cuda/cufile.json)")
        return 1
    for folder in args.dirs or [tempfile.gettempdir()]:
        check_folder(hip, hf, Path(folder))
    e = hf.hipFileDriverClose()
    report("hipFileDriverClose", e.err == 0, "" if e.err == 0 else why(hf, e))
    print(f"{'FAIL' if failed else 'PASS'} preflight: {failed} step(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
