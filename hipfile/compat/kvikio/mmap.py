"""KvikIO's ``Mmap``: a file read through a memory mapping, into host or
device memory.

::

    from hipfile.compat import kvikio

    with kvikio.Mmap(path, "r", initial_map_size, initial_map_offset) as m:
        n = m.read(buf, size, offset)             # blocking
        n = m.pread(buf, size, offset, task_size).get()

The mapping is made once, by the constructor, over the file region
``[initial_map_offset, initial_map_offset + initial_map_size)``; every read
must lie inside it. Reads into host memory are plain copies out of the
mapping; reads into device memory are ``hipMemcpy`` calls from the mapping
(pageable memory), at most ``defaults`` ``bounce_buffer_size`` bytes each.
``pread`` splits the read into tasks of ``task_size`` bytes on the thread
pool of ``pread``/``pwrite`` (``defaults`` ``num_threads``).

Checks and errors are KvikIO's: a region outside the file or the mapping
raises :class:`IndexError`, an empty mapping :class:`ValueError`, a read of
a closed handle :class:`RuntimeError`, a negative offset or size
:class:`OverflowError` (also a :class:`ValueError` here), a size larger
than the buffer :class:`ValueError`.
"""

from __future__ import annotations

import ctypes
import errno
import mmap as _mmap
import os
import stat
import threading
from concurrent.futures import Future
from types import TracebackType
from typing import Any

from hipfile._interop import as_int, buffer_info, host_view, wait_event
from hipfile._lifetime import guarded_del
from hipfile.compat._errors import also
from hipfile.compat.kvikio import defaults
from hipfile.compat.kvikio._args import size_t
from hipfile.compat.kvikio.cufile import IOFuture

__all__ = ["Mmap"]

_DEFAULT_MODE = stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH


_size_t = size_t


class _Dest:
    """Where a read lands: host memory (a writable view) or device memory
    (an address), and the object to keep alive meanwhile."""

    __slots__ = ("address", "device", "nbytes", "owner")

    def __init__(self, buf: Any) -> None:
        view = host_view(buf)
        if view is not None:
            if view.readonly:
                raise TypeError(f"cannot read into a read-only {type(buf).__name__}")
            self.device = False
            self.nbytes = view.nbytes
            self.owner: Any = view
            self.address = (ctypes.addressof(ctypes.c_char.from_buffer(view))
                            if view.nbytes else 0)
            return
        ptr, nbytes, owner = buffer_info(buf)
        self.device = True
        self.nbytes = int(nbytes)
        self.owner = owner
        self.address = int(ptr)


def _copy(dest: _Dest, dest_offset: int, src: int, size: int) -> None:
    """Copy ``size`` bytes at host address ``src`` to ``dest`` at
    ``dest_offset``."""
    if size == 0:
        return
    if not dest.device:
        ctypes.memmove(dest.address + dest_offset, src, size)
        return
    from hipfile._lib import _hip

    hip: Any = _hip.hip        # HIP-Python, whichever module path it has
    step = int(defaults.get("bounce_buffer_size"))
    done = 0
    while done < size:
        n = min(step, size - done)
        _hip.check(hip.hipMemcpy(dest.address + dest_offset + done, src + done, n,
                                 hip.hipMemcpyKind.hipMemcpyHostToDevice), "hipMemcpy")
        done += n


class _Tasks:
    """The tasks of one :meth:`Mmap.pread`: ``result()`` waits for them all
    (in short slices, so that Ctrl-C is seen) and raises the first failure;
    ``done()`` tells without waiting."""

    def __init__(self, futures: list[Future[int]], release: Any) -> None:
        self._futures = futures
        self._left = len(futures)
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._release = release
        if not futures:
            self._finish()
        for f in futures:
            f.add_done_callback(self._one_done)

    def _one_done(self, _f: Future[int]) -> None:
        with self._lock:
            self._left -= 1
            last = self._left == 0
        if last:
            self._finish()

    def _finish(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()
        self._event.set()

    def done(self) -> bool:
        return self._event.is_set()

    def result(self) -> int:
        wait_event(self._event, None)
        total = 0
        for f in self._futures:
            total += f.result()
        return total


class Mmap:
    """A file mapped into host memory for reading (KvikIO's ``Mmap``).

    Parameters
    ----------
    file_path
        The file.
    flags
        ``"r"`` (reading; a ``"b"`` is ignored). ``"w"`` raises
        :class:`ValueError` (writing through a mapping is not supported, as
        in KvikIO); anything else raises ``ValueError("Unknown file open
        flag")``.
    initial_map_size
        Bytes to map; None maps from ``initial_map_offset`` to the end of
        the file.
    initial_map_offset
        Where in the file the mapping starts.
    mode
        Accepted for KvikIO's signature (the permissions of a created file;
        no file is created for reading).
    map_flags
        The ``flags`` of ``mmap(2)`` (default ``MAP_PRIVATE``); the mapping
        is always read-only.

    An empty file opens with nothing mapped, and reads of 0 bytes only.

    Raises
    ------
    RuntimeError
        ``Unable to open file`` (also the :class:`OSError` for the errno,
        e.g. :class:`FileNotFoundError`).
    IndexError
        ``initial_map_offset`` not below the file size, or a region past the
        end of the file.
    ValueError
        Bad ``flags``, or ``initial_map_size`` 0.
    OverflowError
        A negative size or offset (also a :class:`ValueError`).
    TypeError
        A size, offset or ``map_flags`` that is not an int.

    See Also
    --------
    mmap, munmap
    """

    def __init__(self, file_path: str | os.PathLike[str], flags: str = "r",
                 initial_map_size: int | None = None, initial_map_offset: int = 0,
                 mode: int = _DEFAULT_MODE, map_flags: int | None = None) -> None:
        self._lock = threading.Lock()
        self._busy = 0
        self._map: _mmap.mmap | None = None
        self._fd = -1
        self._base = 0
        self._closed = True
        self._initial_map_size = 0
        self._initial_map_offset = 0
        self._file_size = 0
        if not isinstance(flags, str):
            raise TypeError(f"flags must be a str, not {type(flags).__name__}")
        if flags[:1] == "w":
            raise ValueError("File-backed mmap write is not supported yet")
        if flags[:1] != "r" or set(flags[1:]) - set("b+") or len(flags) > 3:
            raise ValueError(f"Unknown file open flag {flags!r} (expected 'r')")
        offset = _size_t("initial_map_offset", initial_map_offset)
        size = None if initial_map_size is None else _size_t("initial_map_size",
                                                             initial_map_size)
        _size_t("mode", mode)
        mflags = _mmap.MAP_PRIVATE
        if map_flags is not None:
            mflags = as_int(map_flags, "map_flags")
        path = os.fspath(file_path)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as e:
            err = OSError(e.errno, f"Unable to open file. {e.strerror}", e.filename)
            raise also(err, RuntimeError) from e
        try:
            file_size = os.fstat(fd).st_size
            self._initial_map_offset = offset
            if file_size > 0:
                if offset >= file_size:
                    raise IndexError(f"Offset must be less than the file size. "
                                     f"initial_map_offset: {offset}, file size: {file_size}")
                if size is None:
                    size = file_size - offset
                if size == 0:
                    raise ValueError("Mapped region should not be zero byte")
                if offset + size > file_size:
                    raise IndexError(f"Mapped region is past the end of file. initial map "
                                     f"offset: {offset}, initial map size: {size}, file "
                                     f"size: {file_size}")
                start = offset - offset % _mmap.ALLOCATIONGRANULARITY
                try:
                    m = _mmap.mmap(fd, size + offset - start, flags=mflags,
                                   prot=_mmap.PROT_READ, offset=start)
                except OSError as e:
                    raise also(OSError(e.errno, f"Cannot create memory mapping: {e.strerror}",
                                       path), RuntimeError) from e
                # the mapping's address (read-only: only ever copied from)
                import numpy as np

                exported = np.frombuffer(m, dtype=np.uint8)
                self._base = int(exported.ctypes.data) + (offset - start)
                del exported
                self._map = m
                self._initial_map_size = size
        except BaseException:
            os.close(fd)
            raise
        if self._map is not None:
            # the mapping holds a descriptor of its own (mmap.size() asks it)
            os.close(fd)
            fd = -1
        self._fd = fd
        self._file_size = file_size
        self._closed = False

    # -- state ---------------------------------------------------------------------------

    def initial_map_size(self) -> int:
        """Bytes mapped when the handle was made (0 for an empty file)."""
        return self._initial_map_size

    def initial_map_offset(self) -> int:
        """Where in the file the mapping starts."""
        return self._initial_map_offset

    def file_size(self) -> int:
        """The file's size now (``fstat``); 0 once closed.

        See Also
        --------
        fstat
        """
        with self._lock:
            if self._closed:
                return 0
            if self._map is not None:
                return self._map.size()
            return os.fstat(self._fd).st_size

    def closed(self) -> bool:
        """Whether the handle is closed (a method, as in KvikIO)."""
        return self._closed

    def close(self) -> None:
        """Unmap the file and close its descriptor; does nothing when
        closed already.

        Raises
        ------
        hipfile.InFlightError
            ``pread`` tasks on it are still running (wait for their future
            first); the handle stays open.

        See Also
        --------
        munmap
        """
        with self._lock:
            if self._closed:
                return
            if self._busy:
                from hipfile.errors import InFlightError

                raise InFlightError(f"the Mmap has {self._busy} read(s) in flight; "
                                    "wait for them (IOFuture.get()) before closing it")
            self._closed = True
            m, self._map = self._map, None
            fd, self._fd = self._fd, -1
            self._base = 0
            self._initial_map_size = self._initial_map_offset = self._file_size = 0
        try:
            if m is not None:
                m.close()
        finally:
            if fd >= 0:
                os.close(fd)

    def __enter__(self) -> Mmap:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _collected(self) -> None:
        try:
            if not getattr(self, "_closed", True) and not self._busy:
                self.close()
        except Exception:
            pass

    __del__ = guarded_del(_collected)

    def __repr__(self) -> str:
        if self._closed:
            return "<hipfile.compat.kvikio.Mmap closed>"
        return (f"<hipfile.compat.kvikio.Mmap offset={self._initial_map_offset} "
                f"size={self._initial_map_size}>")

    # -- reads ---------------------------------------------------------------------------

    def _range(self, buf: Any, size: Any, offset: Any) -> tuple[_Dest, int, int]:
        """Check a read as KvikIO does; returns (destination, bytes, offset)
        and holds the handle open (the caller releases it)."""
        want = None if size is None else _size_t("size", size)
        off = _size_t("offset", offset)
        dest = _Dest(buf)
        if want is not None and want > dest.nbytes:
            raise ValueError(f"Size is greater than the size of the buffer "
                             f"(size {want}, buffer {dest.nbytes} bytes)")
        with self._lock:
            if self._closed:
                raise RuntimeError("Cannot read from a closed MmapHandle")
            if off > self._file_size:
                raise IndexError(f"Offset is past the end of file. offset: {off}, file size: "
                                 f"{self._file_size}")
            n = self._file_size - off if want is None else want
            lo, hi = self._initial_map_offset, self._initial_map_offset + self._initial_map_size
            if off < lo or off + n > hi:
                raise IndexError(f"Read is out of bound. offset: {off}, actual size to read: "
                                 f"{n}, initial map offset: {lo}, initial map size: "
                                 f"{self._initial_map_size}")
            if n > dest.nbytes:
                raise ValueError(f"Size is greater than the size of the buffer (size {n}, "
                                 f"buffer {dest.nbytes} bytes)")
            if n and self._map is not None and off + n > self._map.size():
                # pages past the end of a file that shrank cannot be read
                # (SIGBUS): refuse instead
                raise also(OSError(errno.EIO, f"the file shrank to {self._map.size()} bytes "
                                   f"since it was mapped; cannot read {n} bytes at {off}"),
                           RuntimeError)
            self._busy += 1
        return dest, n, off

    def _release(self) -> None:
        with self._lock:
            self._busy -= 1

    def read(self, buf: Any, size: int | None = None, offset: int = 0) -> int:
        """Read ``size`` bytes (None: to the end of the file) at file
        ``offset`` into ``buf`` (host or device memory) on the calling
        thread; returns the bytes read.

        Raises
        ------
        IndexError
            ``offset`` past the end of the file, or a region outside the
            mapping.
        ValueError
            ``size`` larger than ``buf``.
        OverflowError
            A negative ``size`` or ``offset`` (also a :class:`ValueError`).
        RuntimeError
            The handle is closed, or the file shrank since it was mapped
            and the range is past its end now (also an :class:`OSError`,
            ``EIO``; reading those pages would kill the process).
        TypeError
            ``buf`` is neither host nor device memory, or is read-only.

        See Also
        --------
        hipMemcpy
        """
        dest, n, off = self._range(buf, size, offset)
        try:
            _copy(dest, 0, self._base + off - self._initial_map_offset, n)
        finally:
            self._release()
        return n

    def pread(self, buf: Any, size: int | None = None, offset: int = 0,
              task_size: int | None = None) -> IOFuture:
        """:meth:`read` in tasks of ``task_size`` bytes (default
        ``defaults`` ``task_size``) on the thread pool; returns at once an
        :class:`~hipfile.compat.kvikio.IOFuture` whose ``get()`` is the
        bytes read. The handle cannot be closed until the tasks have ended.

        Raises
        ------
        IndexError, ValueError, OverflowError, RuntimeError, TypeError
            As :meth:`read` (nothing is submitted); ``task_size`` 0 raises
            :class:`ValueError`.

        See Also
        --------
        hipMemcpy
        """
        if task_size is None:
            tsize = int(defaults.get("task_size"))
        else:
            tsize = _size_t("task_size", task_size)
            if tsize == 0:
                raise ValueError("task_size must be a positive integer, got 0")
        dest, n, off = self._range(buf, size, offset)
        src = self._base + off - self._initial_map_offset
        futures: list[Future[int]] = []
        try:
            from hipfile.parallel import _default_executor

            pool = _default_executor()
            for start in range(0, n, tsize):
                part = min(tsize, n - start)
                futures.append(pool.submit(self._task, dest, start, src + start, part))
        except BaseException:
            for f in futures:
                f.cancel()
            _Tasks(futures, self._release)     # releases the handle once they have ended
            raise
        return IOFuture(_Tasks(futures, self._release))

    @staticmethod
    def _task(dest: _Dest, dest_offset: int, src: int, size: int) -> int:
        _copy(dest, dest_offset, src, size)
        return size
