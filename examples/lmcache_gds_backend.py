"""An LMCache-style GDS backend on hipfile: a slab file, stream-ordered chunks.

LMCache's multi-process GPU-direct path talks to storage through a small
backend interface (``GDSBackend``/``GDSHandle``): the backend opens one
pre-allocated *slab* file, registers the KV buffers and the copy streams once,
and each handle enqueues reads and writes of chunks on a stream with
``read_async``/``write_async(buf_base, size, file_offset, buf_offset,
raw_stream)``. Every call returns a *submission* that holds ``bytes_done``
and has to stay alive until an event recorded behind it has completed.

This file implements that interface shape on the ``hipfile`` package instead of
raw ctypes:

* :meth:`HipFileGDSBackend.open_slab` creates and pre-allocates the slab and
  opens it with ``O_DIRECT``; where the file system refuses ``O_DIRECT``
  (tmpfs, for example) it falls back to buffered I/O and says so
  (:attr:`SlabHandle.direct_io` is then ``False``);
* :meth:`~HipFileGDSBackend.register_buffer` and
  :meth:`~HipFileGDSBackend.register_stream` register once and keep the
  :class:`hipfile.Buffer`/:class:`hipfile.Stream` for every later call;
* a submission is the package's :class:`hipfile.AsyncIOHandle`: it owns the
  pinned slots the library reads and writes when the operation runs, so a
  caller that drops it early corrupts nothing (its slots stay parked until
  the stream has passed the operation);
* :class:`Retirement` keeps submissions with the event recorded behind them
  and retires them once the event has completed, checking ``bytes_done``;
* :class:`ChunkFiles` stores chunks one file per chunk, as LMCache's local
  disk backends do, and moves a whole set of them in one stream-ordered
  operation (:func:`hipfile.pwrite_async_gather` /
  :func:`hipfile.pread_async_scatter`): one handle and the engine's threads
  on every file at once, instead of one open, read and close per chunk.

Run the demo (puts many chunks into a slab, gets them back in another order
and checks every byte)::

    HIPFILE_PLATFORM=emulated python examples/lmcache_gds_backend.py --chunks 64
"""

from __future__ import annotations

import argparse
import collections
import errno
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, TypeVar

import numpy as np
from _support import folder, hip_check, positive_int, require_runtime  # examples/_support
from hip import hip

import hipfile
from hipfile import AsyncIOHandle, Buffer, FileHandle, Stream, StreamFlags

__all__ = ["SLAB_NAME", "ChunkFiles", "HipFileGDSBackend", "Retirement", "SlabHandle"]

log = logging.getLogger("lmcache_gds_backend")

#: What the backend registers and keeps by address or handle.
_Reg = TypeVar("_Reg", Buffer, Stream)

#: Name of the slab file inside ``location``.
SLAB_NAME = "lmcache_gds_slab.bin"

#: Stream flags LMCache registers with: size and offsets are fixed at submit.
STREAM_FLAGS = (StreamFlags.FIXED_BUF_OFFSET | StreamFlags.FIXED_FILE_OFFSET
                | StreamFlags.FIXED_FILE_SIZE)


def _preallocate(fd: int, size: int) -> None:
    """Reserve ``size`` bytes of blocks, or at least set the length where the
    file system cannot reserve (``posix_fallocate`` unsupported)."""
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
        os.ftruncate(fd, size)


class HipFileGDSBackend:
    """The ``GDSBackend`` interface on hipfile.

    One object owns one driver reference (opened on first use), the buffers
    and streams it registered, and the slabs it opened. :meth:`close` (or the
    context manager) releases all of them; it raises
    :class:`hipfile.InFlightError` while operations are still in flight
    rather than deregistering memory the library may still write.
    """

    name = "hipfile"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._driver: hipfile.Driver | None = None
        self._buffers: dict[int, Buffer] = {}
        self._streams: dict[int, Stream] = {}
        self._slabs: list[SlabHandle] = []

    # -- driver ------------------------------------------------------------

    def _ensure_driver_open(self) -> None:
        with self._lock:
            if self._driver is None:
                self._driver = hipfile.Driver().open()

    def close_driver(self) -> None:
        """Release this backend's driver reference (idempotent)."""
        with self._lock:
            driver, self._driver = self._driver, None
        if driver is not None:
            driver.close()

    # -- slab ----------------------------------------------------------------

    def open_slab(self, location: str, size: int, direct_io: bool) -> SlabHandle:
        """Create ``location/lmcache_gds_slab.bin`` of ``size`` bytes and open it.

        The file is truncated and pre-allocated. With ``direct_io`` it is
        opened with ``O_DIRECT``; a file system that refuses ``O_DIRECT``
        (``EINVAL``) gets buffered I/O instead, logged as a warning and
        visible as ``SlabHandle.direct_io is False``.

        Raises
        ------
        ValueError
            ``size`` is not positive.
        OSError
            The file could not be created or pre-allocated.
        HipFileException
            Registration failed (nothing is left open).
        """
        if size <= 0:
            raise ValueError(f"slab size must be positive, got {size}")
        os.makedirs(location, exist_ok=True)
        path = os.path.join(location, SLAB_NAME)
        fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
        try:
            _preallocate(fd, size)
        finally:
            os.close(fd)
        self._ensure_driver_open()
        use_direct = bool(direct_io) and hasattr(os, "O_DIRECT")
        fh: FileHandle | None = None
        if use_direct:
            try:
                fh = FileHandle(path, os.O_RDWR | os.O_DIRECT).open()
            except OSError as e:
                if e.errno != errno.EINVAL:
                    raise
                log.warning("%s does not support O_DIRECT; the slab uses buffered I/O",
                            location)
                use_direct = False
        if fh is None:
            fh = FileHandle(path, os.O_RDWR).open()
        slab = SlabHandle(self, fh, path, size, use_direct)
        with self._lock:
            self._slabs.append(slab)
        return slab

    # -- registrations (buffers and streams alike) ----------------------------

    def _add(self, table: dict[int, _Reg], key: int, make: Callable[[], _Reg],
             taken: str) -> None:
        """Register ``make()`` and keep it in ``table`` under ``key``; raises
        ``ValueError(taken)`` when ``key`` is there already."""
        with self._lock:
            if key in table:
                raise ValueError(taken)
        self._ensure_driver_open()
        obj = make()
        obj.register()
        with self._lock:
            table[key] = obj

    def _remove(self, table: dict[int, _Reg], key: int, missing: str) -> None:
        """Deregister the object under ``key`` and drop it from ``table``;
        raises ``KeyError(missing)`` when there is none (and leaves it kept
        when deregistering raises)."""
        with self._lock:
            obj = table.get(key)
            if obj is None:
                raise KeyError(missing)
        obj.deregister()
        with self._lock:
            del table[key]

    # -- buffers -------------------------------------------------------------

    def register_buffer(self, buf: Any) -> None:
        """Register a contiguous device buffer (any object :class:`hipfile.Buffer`
        takes: a torch tensor, a HIP-Python ``DeviceArray``) once.

        Raises
        ------
        ValueError
            The base address is already registered by this backend.
        HipFileException
            The library refused the registration.
        """
        b = Buffer(buf)
        self._add(self._buffers, b.ptr, lambda: b,
                  f"buffer at {b.ptr:#x} is already registered")

    def deregister_buffer(self, buf: Any) -> None:
        """Deregister the buffer at ``buf``'s base address (``buf`` itself is
        left alone).

        Raises
        ------
        KeyError
            The address was not registered by this backend.
        InFlightError
            Operations on the buffer are still in flight.
        """
        ptr = Buffer(buf).ptr
        self._remove(self._buffers, ptr, f"no buffer registered at {ptr:#x}")

    def buffer(self, buf_base: int) -> Buffer:
        """The registered :class:`hipfile.Buffer` at ``buf_base``.

        Raises
        ------
        ValueError
            Nothing is registered at that address.
        """
        b = self._buffers.get(int(buf_base))
        if b is None:
            raise ValueError(f"buf_base {int(buf_base):#x} was not registered with "
                             "register_buffer")
        return b

    # -- streams -------------------------------------------------------------

    def register_stream(self, raw_stream: int) -> None:
        """Register a raw HIP stream handle (not taken over) once.

        Raises
        ------
        ValueError
            Already registered by this backend.
        HipFileException
            The library refused.
        """
        raw = int(raw_stream)
        self._add(self._streams, raw, lambda: Stream(raw, STREAM_FLAGS),
                  f"stream {raw:#x} is already registered")

    def deregister_stream(self, raw_stream: int) -> None:
        """Deregister a stream registered by :meth:`register_stream`.

        Raises
        ------
        KeyError
            Not registered by this backend.
        InFlightError
            Operations on the stream are still in flight.
        """
        raw = int(raw_stream)
        self._remove(self._streams, raw, f"stream {raw:#x} is not registered")

    def stream(self, raw_stream: int) -> Stream:
        """The registered :class:`hipfile.Stream` of ``raw_stream``.

        Raises
        ------
        ValueError
            Not registered.
        """
        st = self._streams.get(int(raw_stream))
        if st is None:
            raise ValueError(f"stream {int(raw_stream):#x} was not registered with "
                             "register_stream")
        return st

    # -- teardown ------------------------------------------------------------

    def close(self) -> None:
        """Close every slab, deregister every buffer and stream, release the
        driver. Stops at the first error (e.g. :class:`hipfile.InFlightError`),
        leaving the rest registered so that nothing in use is torn down."""
        for slab in list(self._slabs):
            slab.close()
        for ptr in list(self._buffers):
            self._buffers[ptr].deregister()
            del self._buffers[ptr]
        for raw in list(self._streams):
            self._streams[raw].deregister()
            del self._streams[raw]
        self.close_driver()

    def _forget(self, slab: SlabHandle) -> None:
        with self._lock:
            if slab in self._slabs:
                self._slabs.remove(slab)

    def __enter__(self) -> HipFileGDSBackend:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is None:
            self.close()
            return
        try:  # keep the caller's exception; tear down what can be
            self.close()
        except Exception as cleanup:
            log.warning("backend teardown after an error failed: %r", cleanup)


class SlabHandle:
    """One open slab: the ``GDSHandle`` interface.

    ``file_offset`` is relative to the slab, ``buf_offset`` to the registered
    ``buf_base``; operations are ordered on ``raw_stream``. Each call returns
    its :class:`hipfile.AsyncIOHandle` (the submission): ``bytes_done`` is
    ``None`` until the operation has completed, then the bytes moved or a
    negative error code.
    """

    def __init__(self, backend: HipFileGDSBackend, fh: FileHandle, path: str, size: int,
                 direct_io: bool) -> None:
        self._backend = backend
        self._fh = fh
        self.path = path
        self.size = size
        self.direct_io = direct_io

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run."""
        return self._fh.closed

    def _check(self, size: int, file_offset: int) -> None:
        if file_offset < 0 or size < 0 or file_offset + size > self.size:
            raise ValueError(f"slab range [{file_offset}, {file_offset + size}) is outside "
                             f"the {self.size}-byte slab")

    def read_async(self, buf_base: int, size: int, file_offset: int, buf_offset: int,
                   raw_stream: int) -> AsyncIOHandle:
        """Enqueue a slab-to-device read on ``raw_stream``; returns at once.

        Raises
        ------
        ValueError
            Unregistered buffer or stream, or a range outside the slab or buffer.
        HipFileException
            The submission failed.

        See Also
        --------
        hipFileReadAsync
        """
        return self._submit(False, buf_base, size, file_offset, buf_offset, raw_stream)

    def write_async(self, buf_base: int, size: int, file_offset: int, buf_offset: int,
                    raw_stream: int) -> AsyncIOHandle:
        """Enqueue a device-to-slab write on ``raw_stream``; returns at once.
        Raises as :meth:`read_async`.

        See Also
        --------
        hipFileWriteAsync
        """
        return self._submit(True, buf_base, size, file_offset, buf_offset, raw_stream)

    def read_chunks_async(self, buf_base: int,
                          chunks: Iterable[tuple[int, int, int]],
                          raw_stream: int) -> hipfile.StreamIOHandle:
        """Enqueue the reads of many ``(size, file_offset, buf_offset)``
        chunks of the slab into one registered buffer as **one**
        stream-ordered operation (the engine's scatter read); returns its
        handle at once. Work enqueued on ``raw_stream`` afterwards sees the
        bytes; ``handle.wait()`` is the total.

        Raises
        ------
        ValueError
            Unregistered buffer, or a chunk outside the slab or buffer.

        See Also
        --------
        hipfile.FileHandle.pread_async_scatter
        """
        return self._fh.pread_async_scatter(self._backend.buffer(buf_base),
                                            self._check_all(chunks), raw_stream)

    def write_chunks_async(self, buf_base: int,
                           chunks: Iterable[tuple[int, int, int]],
                           raw_stream: int) -> hipfile.StreamIOHandle:
        """Enqueue the writes of many chunks of one registered buffer into
        the slab as one stream-ordered operation; the counterpart of
        :meth:`read_chunks_async`.

        See Also
        --------
        hipfile.FileHandle.pwrite_async_gather
        """
        return self._fh.pwrite_async_gather(self._backend.buffer(buf_base),
                                            self._check_all(chunks), raw_stream)

    def _check_all(self, chunks: Iterable[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
        """The chunks as a list, each checked against the slab."""
        checked = list(chunks)
        for size, file_offset, _ in checked:
            self._check(size, file_offset)
        return checked

    def _submit(self, write: bool, buf_base: int, size: int, file_offset: int,
                buf_offset: int, raw_stream: int) -> AsyncIOHandle:
        self._check(size, file_offset)
        submit = self._fh.write_async if write else self._fh.read_async
        return submit(self._backend.buffer(buf_base), size, file_offset, buf_offset,
                      self._backend.stream(raw_stream))

    def close(self) -> None:
        """Deregister and close the slab (idempotent).

        Raises
        ------
        InFlightError
            Operations on the slab are still in flight.
        """
        self._fh.close()
        self._backend._forget(self)

    def __enter__(self) -> SlabHandle:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class Retirement:
    """Event-based retirement of submissions, as LMCache's context does it.

    :meth:`track` records a HIP event on the submission's stream behind it
    (owned by the submission) and keeps the submission; :meth:`poll` retires,
    without blocking, every tracked submission whose event has completed;
    :meth:`drain` waits for all. A retired submission whose ``bytes_done``
    differs from its size raises (the library's error, or ``OSError`` for a
    short transfer), after the others are retired.
    """

    def __init__(self) -> None:
        self._live: collections.deque[AsyncIOHandle] = collections.deque()
        self.retired = 0
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._live)

    def track(self, subs: AsyncIOHandle | Iterable[AsyncIOHandle]) -> None:
        """Keep submissions until their events complete."""
        for s in [subs] if isinstance(subs, AsyncIOHandle) else subs:
            s.record_event()
            self._live.append(s)

    def poll(self) -> int:
        """Retire the completed submissions; returns how many are still live."""
        self._retire(block=False)
        return len(self._live)

    def drain(self) -> None:
        """Wait for every tracked submission and retire it."""
        self._retire(block=True)

    def _retire(self, block: bool) -> None:
        keep: collections.deque[AsyncIOHandle] = collections.deque()
        error: BaseException | None = None
        while self._live:
            s = self._live.popleft()
            if not block and not s.done():
                keep.append(s)
                continue
            try:
                n = s.wait()
                if n != s.size:
                    raise OSError(errno.EIO, f"short transfer: {n} of {s.size} bytes")
                self.bytes += n
            except Exception as e:  # the first error is re-raised below
                if error is None:
                    error = e
            self.retired += 1
        self._live = keep
        if error is not None:
            raise error


# --------------------------------------------------------------------------
# Demo
# --------------------------------------------------------------------------


class ChunkFiles:
    """Chunks stored one file per chunk (``<folder>/<key>.kv``), put and
    got as one stream-ordered operation over all the files named.

    Raises
    ------
    ValueError
        A key that is not a non-negative int, or no chunk.
    """

    def __init__(self, folder: str) -> None:
        os.makedirs(folder, exist_ok=True)
        self.folder = folder

    def path(self, key: int) -> str:
        if isinstance(key, bool) or not isinstance(key, int) or key < 0:
            raise ValueError(f"a chunk key is a non-negative int, got {key!r}")
        return os.path.join(self.folder, f"{key}.kv")

    def _move(self, write: bool, buf: Any, chunks: Iterable[tuple[int, int, int]],
              stream: int) -> int:
        items = list(chunks)
        if not items:
            raise ValueError("no chunk to move")
        files = [hipfile.open(self.path(key), "w" if write else "r") for key, _, _ in items]
        try:
            ranges = [(fh, size, 0, off) for fh, (_, size, off) in zip(files, items, strict=True)]
            if write:
                h = hipfile.pwrite_async_gather(buf, ranges, stream)
            else:
                h = hipfile.pread_async_scatter(buf, ranges, stream, prefetch=True)
            return int(h.wait())    # the files close once every byte has moved
        finally:
            for fh in files:
                fh.close(wait=True)

    def put(self, buf: Any, chunks: Iterable[tuple[int, int, int]], stream: int) -> int:
        """Write ``(key, size, buffer_offset)`` chunks of ``buf``, each to its
        own file; returns the bytes written."""
        return self._move(True, buf, chunks, stream)

    def get(self, buf: Any, chunks: Iterable[tuple[int, int, int]], stream: int) -> int:
        """Read ``(key, size, buffer_offset)`` chunks, each from its own
        file, into ``buf``; returns the bytes read."""
        return self._move(False, buf, chunks, stream)


def run_demo(location: str, chunks: int, chunk_size: int, nstreams: int,
             direct_io: bool, seed: int = 0) -> tuple[bool, dict[str, Any]]:
    """Put ``chunks`` chunks from one device buffer into a slab, get them
    back into another in a shuffled order, and compare. Returns ``(ok,
    stats)``."""
    total = chunks * chunk_size
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, total, dtype=np.uint8)
    order = rng.permutation(chunks)
    src = hip_check(hip.hipMalloc(total))
    dst = hip_check(hip.hipMalloc(total))
    streams = [hip_check(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
               for _ in range(nstreams)]
    stats: dict[str, Any] = {}
    try:
        hip_check(hip.hipMemcpy(src, data, total, hip.hipMemcpyKind.hipMemcpyHostToDevice))
        hip_check(hip.hipMemset(dst, 0, total))
        with HipFileGDSBackend() as backend:
            backend.register_buffer(Buffer(src, total))
            backend.register_buffer(Buffer(dst, total))
            for s in streams:
                backend.register_stream(int(s))
            slab = backend.open_slab(location, total, direct_io)
            stats["direct_io"] = slab.direct_io
            ret = Retirement()

            def every_chunk(move: Callable[..., AsyncIOHandle], buf: Any) -> None:
                """Chunk i of ``buf`` <-> slab slot order[i], round-robin over
                the streams, retiring as it goes."""
                for i in range(chunks):
                    raw = int(streams[i % nstreams])
                    ret.track(move(int(buf), chunk_size, int(order[i]) * chunk_size,
                                   i * chunk_size, raw))
                    ret.poll()
                ret.drain()

            t0 = time.perf_counter()
            every_chunk(slab.write_async, src)  # put: chunk i of src to slot order[i]
            t1 = time.perf_counter()
            every_chunk(slab.read_async, dst)  # get: slot order[i] back to chunk i of dst
            t2 = time.perf_counter()
            stats.update(put_s=t1 - t0, get_s=t2 - t1, moved=ret.bytes, retired=ret.retired)
            out = np.empty(total, dtype=np.uint8)
            hip_check(hip.hipMemcpy(out, dst, total, hip.hipMemcpyKind.hipMemcpyDeviceToHost))
            ok = stats["moved"] == 2 * total and np.array_equal(out, data)
            # the same get as one scatter operation of every chunk
            hip_check(hip.hipMemset(dst, 0, total))
            t3 = time.perf_counter()
            h = slab.read_chunks_async(int(dst), [(chunk_size, int(order[i]) * chunk_size,
                                                   i * chunk_size) for i in range(chunks)],
                                       int(streams[0]))
            got = h.wait()
            stats.update(get_scatter_s=time.perf_counter() - t3)
            hip_check(hip.hipMemcpy(out, dst, total, hip.hipMemcpyKind.hipMemcpyDeviceToHost))
            ok = ok and got == total and np.array_equal(out, data)
            # one file per chunk: put every chunk of src, get them back shuffled
            store = ChunkFiles(os.path.join(location, "chunks"))
            hip_check(hip.hipMemset(dst, 0, total))
            t4 = time.perf_counter()
            put = store.put(src, [(i, chunk_size, i * chunk_size) for i in range(chunks)],
                            int(streams[0]))
            t5 = time.perf_counter()
            got = store.get(dst, [(int(order[i]), chunk_size, i * chunk_size)
                                  for i in range(chunks)], int(streams[0]))
            stats.update(files_put_s=t5 - t4, files_get_s=time.perf_counter() - t5)
            hip_check(hip.hipMemcpy(out, dst, total, hip.hipMemcpyKind.hipMemcpyDeviceToHost))
            want = data.reshape(chunks, chunk_size)[order].reshape(-1)
            ok = ok and put == total and got == total and np.array_equal(out, want)
        return ok, stats
    finally:
        for s in streams:
            hip_check(hip.hipStreamDestroy(s))
        hip_check(hip.hipFree(src))
        hip_check(hip.hipFree(dst))


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        description="LMCache-style GDS backend on hipfile: put and get chunks through a "
                    "slab file and verify them.")
    ap.add_argument("--location", type=folder,
                    help="directory for the slab (default: a temporary one)")
    ap.add_argument("--chunks", type=positive_int, default=32, help="number of chunks (32)")
    ap.add_argument("--chunk-kib", type=positive_int, default=64, help="chunk size in KiB (64)")
    ap.add_argument("--streams", type=positive_int, default=2, help="copy streams (2)")
    ap.add_argument("--no-direct-io", action="store_true", help="open the slab without O_DIRECT")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.chunks <= 0 or args.chunk_kib <= 0 or args.streams <= 0:
        ap.error("--chunks, --chunk-kib and --streams must be positive")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    with tempfile.TemporaryDirectory() as tmp:
        ok, st = run_demo(args.location or tmp, args.chunks, args.chunk_kib << 10,
                          args.streams, not args.no_direct_io)
    total = args.chunks * (args.chunk_kib << 10)
    print(f"platform={hipfile.platforms.active() or 'rocm'} chunks={args.chunks} "
          f"chunk={args.chunk_kib} KiB streams={args.streams} direct_io={st['direct_io']} "
          f"put={total / st['put_s'] / 1e9:.2f} GB/s get={total / st['get_s'] / 1e9:.2f} GB/s "
          f"retired={st['retired']} result={'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    require_runtime(__file__)  # one line saying what to set, without a GPU runtime
    sys.exit(main())
