"""KvikIO's compatibility mode for device memory: ``CuFile.pread``/``pwrite``
with ``defaults`` ``compat_mode`` ON move the bytes with POSIX calls through
pinned host bounce buffers of ``bounce_buffer_size`` bytes, which a pool
keeps for the next call; :func:`free_idle` (``bounce_buffer_free``) frees
those not in use and says how many bytes that was.

A change of ``bounce_buffer_size`` takes effect at the next transfer: the
idle buffers of the old size are freed then.
"""

from __future__ import annotations

import ctypes
import os
import threading
from concurrent.futures import Future
from typing import Any

from hipfile._lib import _hip
from hipfile._lib._errors import name_file
from hipfile._lib._hip import check

__all__ = ["free_idle", "submit"]

hip: Any = _hip.hip     # HIP-Python (untyped)


class _Pool:
    """Idle pinned host buffers, all of one size."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.size = 0
        self.idle: list[Any] = []      # HIP-Python pointers of hipHostMalloc

    def take(self, size: int) -> Any:
        """An idle buffer of ``size`` bytes, or a new one; idle buffers of
        another size are freed first."""
        with self.lock:
            if size != self.size:
                old, self.idle, self.size = self.idle, [], size
            else:
                old = []
                if self.idle:
                    return self.idle.pop()
        for ptr in old:
            check(hip.hipHostFree(ptr), "hipHostFree")
        return check(hip.hipHostMalloc(size, 0), "hipHostMalloc")

    def give(self, ptr: Any, size: int) -> None:
        """Keep ``ptr`` for the next transfer (freed when the size changed)."""
        with self.lock:
            if size == self.size:
                self.idle.append(ptr)
                return
        check(hip.hipHostFree(ptr), "hipHostFree")

    def free_idle(self) -> int:
        with self.lock:
            idle, self.idle = self.idle, []
            size = self.size
        for ptr in idle:
            check(hip.hipHostFree(ptr), "hipHostFree")
        return size * len(idle)


_POOL = _Pool()


def free_idle() -> int:
    """Free the idle bounce buffers; returns their bytes.

    See Also
    --------
    hipHostFree
    """
    return _POOL.free_idle()


def _move(write: bool, fd: int, dev: int, size: int, file_offset: int, bounce: int) -> int:
    """Move ``size`` bytes between device memory at ``dev`` and the file at
    ``file_offset`` through one bounce buffer; a read stops at end of file."""
    ptr = _POOL.take(bounce)
    d2h, h2d = hip.hipMemcpyKind.hipMemcpyDeviceToHost, hip.hipMemcpyKind.hipMemcpyHostToDevice
    try:
        view = memoryview((ctypes.c_char * bounce).from_address(int(ptr))).cast("B")
        done = 0
        while done < size:
            n = min(bounce, size - done)
            if write:
                check(hip.hipMemcpy(ptr, dev + done, n, d2h), "hipMemcpy")
                put = 0
                while put < n:
                    put += os.pwrite(fd, view[put:n], file_offset + done + put)
                done += n
                continue
            got = os.preadv(fd, [view[:n]], file_offset + done)
            if got:
                check(hip.hipMemcpy(dev + done, ptr, got, h2d), "hipMemcpy")
            done += got
            if got < n:
                break          # end of file
        return done
    finally:
        _POOL.give(ptr, bounce)


def submit(fh: Any, write: bool, dev: int, size: int, file_offset: int, bounce: int,
           executor: Any) -> Future[int]:
    """Run one compatibility-mode transfer of ``fh`` on ``executor``; the
    file is held open until it ends. Its error names the file."""
    fh._hold_open()
    try:
        fd = fh._host_fd()
    except BaseException:
        fh._hold(-1)
        raise

    def run() -> int:
        try:
            return _move(write, fd, dev, size, file_offset, bounce)
        except OSError as exc:
            name_file(exc, fh.path)
            raise
        finally:
            fh._hold(-1)

    try:
        future: Future[int] = executor.submit(run)
        return future
    except BaseException:
        fh._hold(-1)
        raise
