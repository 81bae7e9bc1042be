#!/usr/bin/env python3
"""Smoke test of the cuda test platform, through ctypes only.

Loads ``<prefix>/lib/libamdhip64.so`` and ``<prefix>/lib/libhipfile.so`` of a
built cuda platform (``bash platforms/cuda/build.sh``) and checks, on a real
NVIDIA GPU, that file data reaches device memory through every I/O path:
synchronous read and write, a stream-ordered read and write, and a batch read,
plus a few error paths. Prints one ``PASS``/``FAIL``/``INFO`` line per check
and exits non-zero if any check failed.

Usage::

    python3 platforms/cuda/smoke.py [--prefix PREFIX] [--dir DIR ...]

The prefix defaults to ``HIPFILE_CUDA_PREFIX`` or ``platforms/cuda/build/prefix``.
Each ``--dir`` (default: the system temporary folder) gets its own run of the
file checks, so file systems with and without ``O_DIRECT`` can be compared.
Needs nothing but the standard library.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# hipFile ABI facts.
HANDLE_TYPE_OPAQUE_FD = 1
BATCH_MODE = 1
OP_READ = 0
STATUS_COMPLETE = 16
STATUS_FAILED = 64
INVALID_VALUE = 5022
HANDLE_NOT_REGISTERED = 5027
HIP_MEMCPY_H2D = 1
HIP_MEMCPY_D2H = 2


class FileError(ctypes.Structure):
    _fields_ = [("err", ctypes.c_int), ("hip_drv_err", ctypes.c_int)]


class _Handle(ctypes.Union):
    _fields_ = [("fd", ctypes.c_int), ("hFile", ctypes.c_void_p)]


class Descr(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("handle", _Handle), ("fs_ops", ctypes.c_void_p)]


class DriverProps(ctypes.Structure):
    class _Nvfs(ctypes.Structure):
        _fields_ = [
            ("major_version", ctypes.c_uint),
            ("minor_version", ctypes.c_uint),
            ("poll_thresh_size", ctypes.c_uint64),
            ("max_direct_io_size", ctypes.c_uint64),
            ("driver_status_flags", ctypes.c_uint),
            ("driver_control_flags", ctypes.c_uint),
        ]

    _fields_ = [
        ("nvfs", _Nvfs),
        ("feature_flags", ctypes.c_uint),
        ("max_device_cache_size", ctypes.c_uint64),
        ("per_buffer_cache_size", ctypes.c_uint64),
        ("max_device_pinned_mem_size", ctypes.c_uint64),
        ("max_batch_io_count", ctypes.c_uint),
        ("max_batch_io_timeout_msecs", ctypes.c_uint),
    ]


class _BatchIO(ctypes.Structure):
    _fields_ = [
        ("devPtr_base", ctypes.c_void_p),
        ("file_offset", ctypes.c_int64),
        ("devPtr_offset", ctypes.c_int64),
        ("size", ctypes.c_size_t),
    ]


class IOParams(ctypes.Structure):
    _fields_ = [
        ("mode", ctypes.c_int),
        ("batch", _BatchIO),
        ("fh", ctypes.c_void_p),
        ("opcode", ctypes.c_int),
        ("cookie", ctypes.c_void_p),
    ]


class IOEvents(ctypes.Structure):
    _fields_ = [("cookie", ctypes.c_void_p), ("status", ctypes.c_int), ("ret", ctypes.c_size_t)]


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class PointerAttributes(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("device", ctypes.c_int),
        ("devicePointer", ctypes.c_void_p),
        ("hostPointer", ctypes.c_void_p),
        ("isManaged", ctypes.c_int),
        ("allocationFlags", ctypes.c_uint),
    ]


HOST_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
STREAM_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)


class Slots(ctypes.Structure):
    """The four stream-ordered I/O slots, kept together in pinned memory."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("file_offset", ctypes.c_int64),
        ("buffer_offset", ctypes.c_int64),
        ("bytes", ctypes.c_ssize_t),
    ]


class Smoke:
    def __init__(self, prefix: Path) -> None:
        lib = prefix / "lib"
        self.failed = 0
        self.folder = Path(tempfile.gettempdir())
        self.hip = ctypes.CDLL(str(lib / "libamdhip64.so"), mode=ctypes.RTLD_GLOBAL)
        self.hf = ctypes.CDLL(str(lib / "libhipfile.so"), use_errno=True)
        self._declare()

    # -- reporting ----------------------------------------------------------
    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        print(f"{'PASS' if ok else 'FAIL'} {name}" + (f": {detail}" if detail else ""), flush=True)
        if not ok:
            self.failed += 1
        return ok

    @staticmethod
    def info(name: str, detail: str) -> None:
        print(f"INFO {name}: {detail}", flush=True)

    def hip_ok(self, name: str, code: int) -> bool:
        if code == 0:
            return True
        text = self.hip.hipGetErrorName(code).decode()
        return self.check(name, False, f"hipError {code} ({text})")

    def err_text(self, e: FileError) -> str:
        text = self.hf.hipFileGetOpErrorString(e.err).decode()
        return f"hipFile error {e.err} ({text}), hip_drv_err {e.hip_drv_err}"

    # -- declarations ------------------------------------------------------
    def _declare(self) -> None:
        c = ctypes
        vp, sz, i64 = c.c_void_p, c.c_size_t, c.c_int64
        for name, args in {
            "hipInit": [c.c_uint],
            "hipGetDeviceCount": [c.POINTER(c.c_int)],
            "hipSetDevice": [c.c_int],
            "hipDriverGetVersion": [c.POINTER(c.c_int)],
            "hipRuntimeGetVersion": [c.POINTER(c.c_int)],
            "hipMalloc": [c.POINTER(vp), sz],
            "hipFree": [vp],
            "hipHostMalloc": [c.POINTER(vp), sz, c.c_uint],
            "hipHostFree": [vp],
            "hipMemcpy": [vp, vp, sz, c.c_int],
            "hipMemset": [vp, c.c_int, sz],
            "hipStreamCreate": [c.POINTER(vp)],
            "hipStreamDestroy": [vp],
            "hipStreamSynchronize": [vp],
            "hipDeviceSynchronize": [],
            "hipGetLastError": [],
            "hipPeekAtLastError": [],
            "hipMemGetInfo": [c.POINTER(sz), c.POINTER(sz)],
            "hipMemcpyAsync": [vp, vp, sz, c.c_int, vp],
            "hipMemsetAsync": [vp, c.c_int, sz, vp],
            "hipPointerGetAttributes": [c.POINTER(PointerAttributes), vp],
            "hipStreamCreateWithFlags": [c.POINTER(vp), c.c_uint],
            "hipStreamQuery": [vp],
            "hipStreamGetDevice": [vp, c.POINTER(c.c_int)],
            "hipStreamGetFlags": [vp, c.POINTER(c.c_uint)],
            "hipStreamWaitEvent": [vp, vp, c.c_uint],
            "hipLaunchHostFunc": [vp, HOST_FN, vp],
            "hipStreamAddCallback": [vp, STREAM_CALLBACK, vp, c.c_uint],
            "hipEventCreate": [c.POINTER(vp)],
            "hipEventRecord": [vp, vp],
            "hipEventSynchronize": [vp],
            "hipEventQuery": [vp],
            "hipEventElapsedTime": [c.POINTER(c.c_float), vp, vp],
            "hipEventDestroy": [vp],
        }.items():
            f = getattr(self.hip, name)
            f.argtypes, f.restype = args, c.c_int
        self.hip.hipGetErrorName.argtypes = [c.c_int]
        self.hip.hipGetErrorName.restype = c.c_char_p

        for name, args in {
            "hipFileDriverOpen": [],
            "hipFileDriverClose": [],
            "hipFileDriverGetProperties": [c.POINTER(DriverProps)],
            "hipFileGetVersion": [c.POINTER(c.c_uint)] * 3,
            "hipFileGetParameterBool": [c.c_int, c.POINTER(c.c_bool)],
            "hipFileHandleRegister": [c.POINTER(vp), c.POINTER(Descr)],
            "hipFileBufRegister": [vp, sz, c.c_int],
            "hipFileBufDeregister": [vp],
            "hipFileReadAsync": [vp, vp, vp, vp, vp, vp, vp],
            "hipFileWriteAsync": [vp, vp, vp, vp, vp, vp, vp],
            "hipFileStreamRegister": [vp, c.c_uint],
            "hipFileStreamDeregister": [vp],
            "hipFileBatchIOSetUp": [c.POINTER(vp), c.c_uint],
            "hipFileBatchIOSubmit": [vp, c.c_uint, c.POINTER(IOParams), c.c_uint],
            "hipFileBatchIOGetStatus": [
                vp,
                c.c_uint,
                c.POINTER(c.c_uint),
                c.POINTER(IOEvents),
                c.POINTER(Timespec),
            ],
        }.items():
            f = getattr(self.hf, name)
            f.argtypes, f.restype = args, FileError
        self.hf.hipFileUseCount.argtypes, self.hf.hipFileUseCount.restype = [], c.c_int64
        self.hf.hipFileHandleDeregister.argtypes = [vp]
        self.hf.hipFileHandleDeregister.restype = None
        self.hf.hipFileBatchIODestroy.argtypes = [vp]
        self.hf.hipFileBatchIODestroy.restype = None
        for name in ("hipFileRead", "hipFileWrite"):
            f = getattr(self.hf, name)
            f.argtypes, f.restype = [vp, vp, sz, i64, i64], c.c_ssize_t
        self.hf.hipFileGetOpErrorString.argtypes = [c.c_int]
        self.hf.hipFileGetOpErrorString.restype = c.c_char_p

    # -- utilities -----------------------------------------------------------
    def device_alloc(self, size: int) -> int | None:
        p = ctypes.c_void_p()
        if not self.hip_ok(f"hipMalloc({size})", self.hip.hipMalloc(ctypes.byref(p), size)):
            return None
        return p.value

    def to_host(self, dev: int, size: int) -> bytes:
        buf = ctypes.create_string_buffer(size)
        code = self.hip.hipMemcpy(buf, dev, size, HIP_MEMCPY_D2H)
        if code != 0:
            raise RuntimeError(f"hipMemcpy D2H failed: {code}")
        return buf.raw

    # -- checks ----------------------------------------------------------------
    def runtime(self) -> bool:
        if not self.hip_ok("hipInit", self.hip.hipInit(0)):
            return False
        n = ctypes.c_int()
        if not self.hip_ok("hipGetDeviceCount", self.hip.hipGetDeviceCount(ctypes.byref(n))):
            return False
        drv, rt = ctypes.c_int(), ctypes.c_int()
        self.hip.hipDriverGetVersion(ctypes.byref(drv))
        self.hip.hipRuntimeGetVersion(ctypes.byref(rt))
        self.check(
            "HIP runtime over CUDA",
            n.value > 0,
            f"{n.value} device(s), driver {drv.value}, runtime {rt.value}",
        )
        bad = self.hip.hipMemcpy(None, None, 1, 77)
        self.check(
            "hipMemcpy with a bad kind gives hipErrorInvalidMemcpyDirection",
            bad == 21,
            f"got {bad}",
        )
        return self.hip_ok("hipSetDevice(0)", self.hip.hipSetDevice(0)) and n.value > 0

    def runtime_extras(self) -> None:
        """Pointer attributes, streams, events and host functions."""
        c = ctypes
        err = self.hip.hipGetLastError()
        self.check(
            "hipGetLastError reports the last failure, then clears it",
            err == 21 and self.hip.hipGetLastError() == 0,
            f"got {err}",
        )
        free, total = c.c_size_t(), c.c_size_t()
        self.hip_ok("hipMemGetInfo", self.hip.hipMemGetInfo(c.byref(free), c.byref(total)))
        self.info("device memory", f"{free.value >> 20} MiB free of {total.value >> 20} MiB")

        dev, pinned = c.c_void_p(), c.c_void_p()
        if not (
            self.hip_ok("hipMalloc", self.hip.hipMalloc(c.byref(dev), 1 << 20))
            and self.hip_ok("hipHostMalloc", self.hip.hipHostMalloc(c.byref(pinned), 1 << 20, 0))
        ):
            return
        d_addr, h_addr = int(dev.value or 0), int(pinned.value or 0)
        stream, ev0, ev1 = c.c_void_p(), c.c_void_p(), c.c_void_p()
        try:
            a = PointerAttributes()
            code = self.hip.hipPointerGetAttributes(c.byref(a), d_addr + 100)
            self.check(
                "hipPointerGetAttributes on device memory",
                code == 0 and a.type == 2 and a.device == 0 and a.devicePointer == d_addr + 100,
                f"code {code}, type {a.type}, device {a.device}",
            )
            a = PointerAttributes()
            code = self.hip.hipPointerGetAttributes(c.byref(a), h_addr)
            self.check(
                "hipPointerGetAttributes on pinned host memory",
                code == 0 and a.type == 1 and a.hostPointer == h_addr,
                f"code {code}, type {a.type}, flags {a.allocationFlags:#x}",
            )
            plain = c.create_string_buffer(64)
            a = PointerAttributes()
            code = self.hip.hipPointerGetAttributes(c.byref(a), c.addressof(plain))
            self.info(
                "hipPointerGetAttributes on pageable host memory", f"code {code}, type {a.type}"
            )
            self.hip.hipGetLastError()

            code = self.hip.hipStreamCreateWithFlags(c.byref(stream), 1)
            if not self.hip_ok("hipStreamCreateWithFlags", code):
                return
            flags, device = c.c_uint(), c.c_int(-1)
            self.hip.hipStreamGetFlags(stream, c.byref(flags))
            code = self.hip.hipStreamGetDevice(stream, c.byref(device))
            self.check(
                "hipStreamGetFlags / hipStreamGetDevice",
                flags.value == 1 and code == 0 and device.value == 0,
                f"flags {flags.value}, device {device.value} (code {code})",
            )
            self.hip.hipEventCreate(c.byref(ev0))
            self.hip.hipEventCreate(c.byref(ev1))
            ran: list[object] = []
            host_fn = HOST_FN(lambda _data: ran.append("host"))
            callback = STREAM_CALLBACK(lambda _s, status, _d: ran.append(status))
            pattern = bytes(range(256)) * 16
            self.hip.hipEventRecord(ev0, stream)
            self.hip.hipMemsetAsync(dev, 0, 1 << 20, stream)
            self.hip.hipMemcpyAsync(dev, pattern, len(pattern), HIP_MEMCPY_H2D, stream)
            self.hip.hipMemcpyAsync(pinned, dev, len(pattern), HIP_MEMCPY_D2H, stream)
            code_fn = self.hip.hipLaunchHostFunc(stream, host_fn, None)
            code_cb = self.hip.hipStreamAddCallback(stream, callback, None, 0)
            self.hip.hipEventRecord(ev1, stream)
            self.hip.hipEventSynchronize(ev1)
            self.hip.hipStreamSynchronize(stream)
            ms = c.c_float(-1)
            code = self.hip.hipEventElapsedTime(c.byref(ms), ev0, ev1)
            self.check(
                "hipEventRecord / hipEventElapsedTime",
                code == 0 and ms.value >= 0,
                f"code {code}, {ms.value:.3f} ms",
            )
            self.check(
                "hipMemcpyAsync / hipMemsetAsync on a stream",
                c.string_at(h_addr, len(pattern)) == pattern,
            )
            self.check(
                "hipLaunchHostFunc and hipStreamAddCallback run in order",
                code_fn == 0 and code_cb == 0 and ran == ["host", 0],
                f"codes {code_fn}/{code_cb}, ran {ran}",
            )
            self.check(
                "hipStreamQuery / hipEventQuery after synchronizing",
                self.hip.hipStreamQuery(stream) == 0 and self.hip.hipEventQuery(ev1) == 0,
            )
        finally:
            for ev in (ev0, ev1):
                if ev.value:
                    self.hip.hipEventDestroy(ev)
            if stream.value:
                self.hip.hipStreamDestroy(stream)
            self.hip.hipFree(dev)
            self.hip.hipHostFree(pinned)

    def driver(self) -> bool:
        major, minor, patch = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
        e = self.hf.hipFileGetVersion(ctypes.byref(major), ctypes.byref(minor), ctypes.byref(patch))
        self.check("hipFileGetVersion", e.err == 0, f"{major.value}.{minor.value}.{patch.value}")
        e = self.hf.hipFileDriverOpen()
        if not self.check("hipFileDriverOpen", e.err == 0, "" if e.err == 0 else self.err_text(e)):
            return False
        self.check(
            "hipFileUseCount after open",
            self.hf.hipFileUseCount() >= 1,
            str(self.hf.hipFileUseCount()),
        )
        props = DriverProps()
        e = self.hf.hipFileDriverGetProperties(ctypes.byref(props))
        if self.check(
            "hipFileDriverGetProperties", e.err == 0, "" if e.err == 0 else self.err_text(e)
        ):
            nv = props.nvfs
            self.info(
                "properties",
                f"nvidia-fs {nv.major_version}.{nv.minor_version}, "
                f"status flags {nv.driver_status_flags:#x}, "
                f"control flags {nv.driver_control_flags:#x} "
                f"(poll {bool(nv.driver_control_flags & 1)}, "
                f"compat allowed {bool(nv.driver_control_flags & 2)}), "
                f"feature flags {props.feature_flags:#x} "
                f"(batch {bool(props.feature_flags & 2)}, "
                f"streams {bool(props.feature_flags & 4)}), "
                f"max direct I/O {nv.max_direct_io_size} KiB, "
                f"max batch {props.max_batch_io_count}",
            )
        for index, name in ((1, "allow_compat_mode"), (2, "force_compat_mode")):
            value = ctypes.c_bool()
            e = self.hf.hipFileGetParameterBool(index, ctypes.byref(value))
            self.info(f"parameter {name}", str(value.value) if e.err == 0 else self.err_text(e))
        return True

    def file_checks(self, folder: Path) -> None:
        size = (1 << 20) + 12345  # not a multiple of the page size
        data = os.urandom(size)
        path = folder / "hipfile-cuda-smoke.bin"
        path.write_bytes(data)
        tag = f"[{folder}]"
        fd, direct = -1, False
        try:
            fd = os.open(path, os.O_RDWR | getattr(os, "O_DIRECT", 0))
            direct = True
        except OSError as exc:
            self.info(f"{tag} O_DIRECT", f"refused ({exc.strerror}); using buffered I/O")
            fd = os.open(path, os.O_RDWR)
        dev = out = None
        fh = ctypes.c_void_p()
        try:
            descr = Descr(HANDLE_TYPE_OPAQUE_FD, _Handle(fd=fd), None)
            e = self.hf.hipFileHandleRegister(ctypes.byref(fh), ctypes.byref(descr))
            if not self.check(
                f"{tag} hipFileHandleRegister (O_DIRECT {direct})",
                e.err == 0,
                "" if e.err == 0 else self.err_text(e),
            ):
                return
            dev = self.device_alloc(size + 4096)
            out = self.device_alloc(size)
            if dev is None or out is None:
                return
            self.hip.hipMemset(dev, 0, size + 4096)
            self.folder = folder
            self.sync_io(tag, fh, dev, out, data, folder)
            self.async_io(tag, fh, dev, data)
            self.batch_io(tag, fh, dev, data)
        finally:
            if fh.value:
                self.hf.hipFileHandleDeregister(fh)
            for p in (dev, out):
                if p:
                    self.hip.hipFree(p)
            if fd >= 0:
                os.close(fd)
            path.unlink(missing_ok=True)

    def sync_io(
        self, tag: str, fh: ctypes.c_void_p, dev: int, out: int, data: bytes, folder: Path
    ) -> None:
        size = len(data)
        e = self.hf.hipFileBufRegister(dev, size + 4096, 0)
        self.check(
            f"{tag} hipFileBufRegister (device memory)",
            e.err == 0,
            "" if e.err == 0 else self.err_text(e),
        )
        n = self.hf.hipFileRead(fh, dev, size, 0, 0)
        got = self.to_host(dev, size) if n == size else b""
        self.check(
            f"{tag} hipFileRead whole file into device memory",
            n == size and got == data,
            f"returned {n}",
        )
        if e.err == 0:
            self.hf.hipFileBufDeregister(dev)
        n = self.hf.hipFileRead(fh, dev, 4096, 8192, 4096)
        got = self.to_host(dev, 8192)[4096:] if n == 4096 else b""
        self.check(
            f"{tag} hipFileRead with file and buffer offsets (unregistered buffer)",
            n == 4096 and got == data[8192:12288],
            f"returned {n}",
        )
        n = self.hf.hipFileRead(fh, dev, 1 << 16, size - 100, 0)
        self.check(f"{tag} hipFileRead at end of file is short", n == 100, f"returned {n}")
        ctypes.set_errno(0)
        n = self.hf.hipFileRead(fh, dev, 16, -1, 0)
        err = ctypes.get_errno()
        self.check(
            f"{tag} hipFileRead with a negative offset gives -1/EINVAL",
            n == -1 and err == 22,
            f"returned {n}, errno {err}",
        )
        n = self.hf.hipFileRead(None, dev, 16, 0, 0)
        self.check(
            f"{tag} hipFileRead on a NULL handle gives -HandleNotRegistered",
            n == -HANDLE_NOT_REGISTERED,
            f"returned {n}",
        )

        # Write device memory to a second file and read it back on the host.
        wpath = folder / "hipfile-cuda-smoke-write.bin"
        wfd = os.open(wpath, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        wfh = ctypes.c_void_p()
        try:
            descr = Descr(HANDLE_TYPE_OPAQUE_FD, _Handle(fd=wfd), None)
            e = self.hf.hipFileHandleRegister(ctypes.byref(wfh), ctypes.byref(descr))
            if self.check(
                f"{tag} hipFileHandleRegister (write file)",
                e.err == 0,
                "" if e.err == 0 else self.err_text(e),
            ):
                self.hip.hipMemcpy(out, data, size, HIP_MEMCPY_H2D)
                n = self.hf.hipFileWrite(wfh, out, size, 0, 0)
                self.hf.hipFileHandleDeregister(wfh)
                wfh = ctypes.c_void_p()
                os.fsync(wfd)
                back = wpath.read_bytes()
                self.check(
                    f"{tag} hipFileWrite from device memory",
                    n == size and back == data,
                    f"returned {n}, file has {len(back)} bytes",
                )
        finally:
            if wfh.value:
                self.hf.hipFileHandleDeregister(wfh)
            os.close(wfd)
            wpath.unlink(missing_ok=True)

    def async_io(self, tag: str, fh: ctypes.c_void_p, dev: int, data: bytes) -> None:
        stream = ctypes.c_void_p()
        if not self.hip_ok("hipStreamCreate", self.hip.hipStreamCreate(ctypes.byref(stream))):
            return
        pinned = ctypes.c_void_p()
        if not self.hip_ok(
            "hipHostMalloc", self.hip.hipHostMalloc(ctypes.byref(pinned), ctypes.sizeof(Slots), 0)
        ):
            self.hip.hipStreamDestroy(stream)
            return
        base = int(pinned.value or 0)
        slots = Slots.from_address(base)

        def addr(field: str) -> int:
            return base + int(getattr(Slots, field).offset)

        try:
            e = self.hf.hipFileStreamRegister(stream, 0)
            self.check(
                f"{tag} hipFileStreamRegister", e.err == 0, "" if e.err == 0 else self.err_text(e)
            )
            again = self.hf.hipFileStreamRegister(stream, 0)
            self.check(
                f"{tag} registering a stream twice gives InvalidValue",
                again.err == INVALID_VALUE,
                self.err_text(again),
            )
            bad = self.hf.hipFileStreamRegister(stream, 0x10)
            self.check(
                f"{tag} stream flags outside the mask give InvalidValue",
                bad.err == INVALID_VALUE,
                self.err_text(bad),
            )

            self.hip.hipMemset(dev, 0, len(data))
            length = 65536 + 100
            slots.size, slots.file_offset, slots.buffer_offset, slots.bytes = length, 4096, 0, -7
            e = self.hf.hipFileReadAsync(
                fh,
                dev,
                addr("size"),
                addr("file_offset"),
                addr("buffer_offset"),
                addr("bytes"),
                stream,
            )
            if self.check(
                f"{tag} hipFileReadAsync submit", e.err == 0, "" if e.err == 0 else self.err_text(e)
            ):
                code = self.hip.hipStreamSynchronize(stream)
                got = self.to_host(dev, length) if slots.bytes == length else b""
                self.check(
                    f"{tag} hipFileReadAsync result",
                    code == 0 and slots.bytes == length and got == data[4096 : 4096 + length],
                    f"sync {code}, bytes {slots.bytes}",
                )

            # Write what was just read to a second file, then read that file back.
            wpath = Path(self.folder) / "hipfile-cuda-smoke-async.bin"
            wfd = os.open(wpath, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
            wfh = ctypes.c_void_p()
            try:
                descr = Descr(HANDLE_TYPE_OPAQUE_FD, _Handle(fd=wfd), None)
                e = self.hf.hipFileHandleRegister(ctypes.byref(wfh), ctypes.byref(descr))
                slots.size, slots.file_offset, slots.buffer_offset, slots.bytes = length, 0, 0, -7
                if e.err == 0:
                    e = self.hf.hipFileWriteAsync(
                        wfh,
                        dev,
                        addr("size"),
                        addr("file_offset"),
                        addr("buffer_offset"),
                        addr("bytes"),
                        stream,
                    )
                if self.check(
                    f"{tag} hipFileWriteAsync submit",
                    e.err == 0,
                    "" if e.err == 0 else self.err_text(e),
                ):
                    code = self.hip.hipStreamSynchronize(stream)
                    back = wpath.read_bytes()
                    self.check(
                        f"{tag} hipFileWriteAsync result",
                        code == 0 and slots.bytes == length and back == data[4096 : 4096 + length],
                        f"sync {code}, bytes {slots.bytes}, file has {len(back)} bytes",
                    )
            finally:
                if wfh.value:
                    self.hf.hipFileHandleDeregister(wfh)
                os.close(wfd)
                wpath.unlink(missing_ok=True)

            e = self.hf.hipFileStreamDeregister(stream)
            self.check(
                f"{tag} hipFileStreamDeregister", e.err == 0, "" if e.err == 0 else self.err_text(e)
            )

            # An unregistered stream: AMD accepts it; record what cuFile does.
            slots.size, slots.file_offset, slots.buffer_offset, slots.bytes = 4096, 0, 0, -7
            e = self.hf.hipFileReadAsync(
                fh,
                dev,
                addr("size"),
                addr("file_offset"),
                addr("buffer_offset"),
                addr("bytes"),
                stream,
            )
            code = self.hip.hipStreamSynchronize(stream)
            self.info(
                f"{tag} hipFileReadAsync on an unregistered stream",
                f"submit {e.err}, sync {code}, bytes {slots.bytes}",
            )
            # The null stream.
            slots.size, slots.file_offset, slots.buffer_offset, slots.bytes = 4096, 0, 0, -7
            e = self.hf.hipFileReadAsync(
                fh,
                dev,
                addr("size"),
                addr("file_offset"),
                addr("buffer_offset"),
                addr("bytes"),
                None,
            )
            code = self.hip.hipDeviceSynchronize()
            self.info(
                f"{tag} hipFileReadAsync on the null stream",
                f"submit {e.err}, sync {code}, bytes {slots.bytes}",
            )
            # A bad size reported at execution, as cuFile does.
            slots.size, slots.file_offset, slots.buffer_offset, slots.bytes = 4096, 1 << 40, 0, -7
            e = self.hf.hipFileReadAsync(
                fh,
                dev,
                addr("size"),
                addr("file_offset"),
                addr("buffer_offset"),
                addr("bytes"),
                stream,
            )
            code = self.hip.hipStreamSynchronize(stream)
            self.info(
                f"{tag} hipFileReadAsync past the end of the file",
                f"submit {e.err}, sync {code}, bytes {slots.bytes}",
            )
        finally:
            self.hip.hipStreamSynchronize(stream)
            self.hip.hipHostFree(pinned)
            self.hip.hipStreamDestroy(stream)

    def batch_io(self, tag: str, fh: ctypes.c_void_p, dev: int, data: bytes) -> None:
        batch = ctypes.c_void_p()
        e = self.hf.hipFileBatchIOSetUp(ctypes.byref(batch), 4)
        if not self.check(
            f"{tag} hipFileBatchIOSetUp", e.err == 0, "" if e.err == 0 else self.err_text(e)
        ):
            return
        try:
            self.hip.hipMemset(dev, 0, len(data))
            chunks = [(0, 0, 8192), (65536, 8192, 4096), (len(data) - 4000, 16384, 4000)]
            params = (IOParams * len(chunks))()
            for i, (foff, boff, n) in enumerate(chunks):
                params[i].mode = BATCH_MODE
                params[i].batch = _BatchIO(dev, foff, boff, n)
                params[i].fh = fh.value
                params[i].opcode = OP_READ
                params[i].cookie = 1000 + i
            e = self.hf.hipFileBatchIOSubmit(batch, len(chunks), params, 0)
            if not self.check(
                f"{tag} hipFileBatchIOSubmit", e.err == 0, "" if e.err == 0 else self.err_text(e)
            ):
                return
            events = (IOEvents * len(chunks))()
            done: dict[int, IOEvents] = {}
            deadline = time.monotonic() + 30
            while len(done) < len(chunks) and time.monotonic() < deadline:
                nr = ctypes.c_uint(len(chunks))
                ts = Timespec(1, 0)
                e = self.hf.hipFileBatchIOGetStatus(
                    batch, 0, ctypes.byref(nr), events, ctypes.byref(ts)
                )
                if e.err != 0:
                    self.check(f"{tag} hipFileBatchIOGetStatus", False, self.err_text(e))
                    return
                for i in range(nr.value):
                    ev = events[i]
                    if ev.status & (STATUS_COMPLETE | STATUS_FAILED | 4 | 8 | 32):
                        done[ev.cookie] = IOEvents(ev.cookie, ev.status, ev.ret)
                if len(done) < len(chunks):
                    time.sleep(0.01)
            host = self.to_host(dev, 16384 + 4000)
            ok = len(done) == len(chunks)
            details = []
            for i, (foff, boff, n) in enumerate(chunks):
                entry = done.get(1000 + i)
                if entry is None:
                    details.append(f"#{i} missing")
                    ok = False
                    continue
                good = (
                    entry.status == STATUS_COMPLETE
                    and entry.ret == n
                    and host[boff : boff + n] == data[foff : foff + n]
                )
                ok = ok and good
                details.append(
                    f"#{i} status {entry.status} ret {ctypes.c_ssize_t(entry.ret).value}"
                )
            self.check(f"{tag} batch read of {len(chunks)} entries", ok, ", ".join(details))
        finally:
            self.hf.hipFileBatchIODestroy(batch)

    def close(self) -> None:
        e = self.hf.hipFileDriverClose()
        self.check("hipFileDriverClose", e.err == 0, "" if e.err == 0 else self.err_text(e))


def loaded_libraries() -> list[str]:
    found = set()
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                name = os.path.basename(path)
                if name.startswith(
                    ("libcudart", "libcufile", "libcuda.so", "libamdhip64", "libhipfile")
                ):
                    found.add(path)
    except OSError:
        pass
    return sorted(found)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("HIPFILE_CUDA_PREFIX") or str(HERE / "build" / "prefix")
    parser.add_argument("--prefix", default=default)
    parser.add_argument(
        "--dir", action="append", dest="dirs", help="folder for the test files (repeatable)"
    )
    args = parser.parse_args()
    prefix = Path(args.prefix)
    if not (prefix / "lib" / "libhipfile.so").is_file():
        print(f"FAIL no cuda platform at {prefix}; run: bash platforms/cuda/build.sh")
        return 1
    os.environ["ROCM_PATH"] = str(prefix)
    smoke = Smoke(prefix)
    print(f"INFO prefix: {prefix}", flush=True)
    runtime_ok = smoke.runtime()
    if runtime_ok:
        smoke.runtime_extras()
    if runtime_ok and smoke.driver():
        for folder in args.dirs or [tempfile.gettempdir()]:
            with tempfile.TemporaryDirectory(dir=folder) as tmp:
                smoke.file_checks(Path(tmp))
        smoke.close()
    for path in loaded_libraries():
        print(f"INFO loaded: {path}")
    print(f"{'FAIL' if smoke.failed else 'PASS'} smoke: {smoke.failed} check(s) failed")
    return 1 if smoke.failed else 0


if __name__ == "__main__":
    sys.exit(main())
