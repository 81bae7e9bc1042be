"""The staged reader: parallel ``pread`` into pinned staging, then copies to the GPU.

For files read from the disk (``O_DIRECT``): many threads keep many
requests in flight, handed out in file order, each thread with two pinned
staging slots so that one slot's disk read runs while the other's
host-to-device copy does (the shape fastsafetensors' nogds reader has). The
bytes never go through the page cache, and the copies run on the threads'
own streams.

One reader serves every file of a load, so that the threads move on to
file *k+1* as soon as file *k*'s last blocks are handed out.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from hipfile._interop import wait_event
from hipfile.safetensors._header import ALIGNMENT
from hipfile.safetensors._read import ReadRange, _on_device

#: Threads of the staged reader (requests in flight to the disk).
STAGED_THREADS = 16
#: Bytes per request of the staged reader.
STAGED_BLOCK = 1 << 20


def _pread(fd: int, view: memoryview, offset: int) -> int:
    """``preadv``; where the file system took ``O_DIRECT`` at open but refuses
    direct reads (``EINVAL``), the flag is cleared on the descriptor and the
    read is done buffered."""
    try:
        return os.preadv(fd, [view], offset)
    except OSError as e:
        import errno
        import fcntl

        o_direct = getattr(os, "O_DIRECT", 0)
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        if e.errno != errno.EINVAL or not flags & o_direct:
            raise
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~o_direct)
        return os.preadv(fd, [view], offset)


class _Job:
    """One file's reads: counted down as blocks complete."""

    def __init__(self, fd: int, base: int, reads: Sequence[ReadRange], block: int) -> None:
        self.fd = fd
        self.base = base
        self.blocks: list[tuple[int, int, int]] = []
        for r in reads:
            done = 0
            while done < r.size:
                n = min(block, r.size - done)
                self.blocks.append((r.file_offset + done, n, r.buffer_offset + done))
                done += n
        self.left = len(self.blocks)
        self.got = 0
        self.error: BaseException | None = None
        self.done = threading.Event()
        if not self.blocks:
            self.done.set()


class StagedReader:
    """Threads reading blocks of registered jobs into pinned staging and
    copying them to device memory (``hipMemcpyAsync`` on a stream per thread).

    Raises
    ------
    HipRuntimeError
        Pinned memory, streams or events could not be made.

    See Also
    --------
    hipHostMalloc, hipMemcpyAsync, hipEventSynchronize
    """

    def __init__(self, device: int, threads: int = STAGED_THREADS,
                 block: int = STAGED_BLOCK) -> None:
        from hipfile._lib import _hip

        if threads <= 0 or block <= 0:
            raise ValueError("threads and block must be positive")
        self._hip: Any = _hip.hip
        self._check = _hip.check
        self.device = device
        self.block = -(-block // ALIGNMENT) * ALIGNMENT
        self.threads = threads
        self._stride = self.block + ALIGNMENT
        self._lock = threading.Lock()
        self._queue: deque[tuple[_Job, int]] = deque()
        self._wake = threading.Condition(self._lock)
        self._closing = False
        self._pinned: Any = None
        self._workers: list[threading.Thread] = []
        hip = self._hip
        with _on_device(device):
            self._pinned = self._check(hip.hipHostMalloc(self._stride * 2 * threads, 0),
                                       "hipHostMalloc")
        self._base = int(self._pinned)

    def add(self, fd: int, base: int, reads: Sequence[ReadRange]) -> Callable[
            [Callable[[int], None]], int]:
        """Queue one file's reads (``fd`` read with ``os.preadv``, block *i*
        to device address ``base + buffer_offset``); returns
        ``wait(progress) -> bytes``."""
        job = _Job(fd, base, reads, self.block)
        with self._wake:
            for i in range(len(job.blocks)):
                self._queue.append((job, i))
            self._wake.notify_all()
        if not self._workers:
            for k in range(self.threads):
                t = threading.Thread(target=self._work, args=(k,), daemon=True,
                                     name=f"hipfile-staged-{k}")
                t.start()
                self._workers.append(t)

        def wait(progress: Callable[[int], None]) -> int:
            wait_event(job.done, None)
            if job.error is not None:
                raise job.error
            progress(sum(n for _, n, _ in job.blocks))
            return job.got

        return wait

    def _take(self, block: bool) -> tuple[_Job, int] | None:
        """The next block; None when the queue is empty and (``block``) the
        reader is closing."""
        with self._wake:
            while block and not self._queue and not self._closing:
                self._wake.wait()
            while self._queue:
                job, i = self._queue.popleft()
                if job.error is None:
                    return job, i
                self._finish(job, 0)       # a failed job's blocks are skipped
            return None

    def _finish(self, job: _Job, got: int) -> None:
        # under self._lock
        job.got += got
        job.left -= 1
        if job.left == 0:
            job.done.set()

    def _work(self, k: int) -> None:
        hip = self._hip
        check = self._check
        stream = None
        events: list[Any] = []
        pending: list[tuple[_Job, int] | None] = [None, None]
        slot = 0
        try:
            check(hip.hipSetDevice(self.device), "hipSetDevice")
            stream = check(hip.hipStreamCreate(), "hipStreamCreate")
            events = [check(hip.hipEventCreate(), "hipEventCreate") for _ in range(2)]
        except BaseException as e:   # fail every job: no thread may leave work undone
            self._fail_all(e)
            return
        views = [(ctypes.c_char * self._stride).from_address(
            self._base + (2 * k + s) * self._stride) for s in range(2)]
        try:
            while True:
                item = self._take(block=False)
                if item is None:
                    # nothing queued: finish this thread's copies before sleeping,
                    # so that every job it holds can complete
                    for s in range(2):
                        if pending[s] is not None:
                            self._settle(events[s], pending[s])
                            pending[s] = None
                    item = self._take(block=True)
                if item is None:
                    break
                job, i = item
                if pending[slot] is not None:
                    self._settle(events[slot], pending[slot])
                    pending[slot] = None
                off, n, boff = job.blocks[i]
                try:
                    got = _pread(job.fd, memoryview(views[slot])[:n], off)
                    if got:
                        check(hip.hipMemcpyAsync(job.base + boff,
                                                 self._base + (2 * k + slot) * self._stride,
                                                 got, hip.hipMemcpyKind.hipMemcpyHostToDevice,
                                                 stream), "hipMemcpyAsync")
                        check(hip.hipEventRecord(events[slot], stream), "hipEventRecord")
                        pending[slot] = (job, got)
                    else:
                        with self._lock:
                            self._finish(job, 0)
                except BaseException as e:
                    with self._lock:
                        if job.error is None:
                            job.error = e
                        self._finish(job, 0)
                slot ^= 1
        finally:
            for s in range(2):
                if pending[s] is not None:
                    self._settle(events[s], pending[s])
            for ev in events:
                hip.hipEventDestroy(ev)
            if stream is not None:
                hip.hipStreamDestroy(stream)

    def _settle(self, event: Any, item: tuple[_Job, int] | None) -> None:
        assert item is not None
        job, got = item
        try:
            self._check(self._hip.hipEventSynchronize(event), "hipEventSynchronize")
        except BaseException as e:
            with self._lock:
                if job.error is None:
                    job.error = e
                self._finish(job, 0)
            return
        with self._lock:
            self._finish(job, got)

    def _fail_all(self, error: BaseException) -> None:
        with self._wake:
            while self._queue:
                job, _ = self._queue.popleft()
                if job.error is None:
                    job.error = error
                self._finish(job, 0)

    def close(self) -> None:
        """Stop the threads once the queue is empty, wait for them, free the
        staging memory (idempotent)."""
        with self._wake:
            self._closing = True
            self._wake.notify_all()
        for t in self._workers:
            t.join()
        self._workers = []
        if self._pinned is not None:
            pinned, self._pinned = self._pinned, None
            self._hip.hipHostFree(pinned)
