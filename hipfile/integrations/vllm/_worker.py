"""The worker side: each transfer job as one stream-ordered engine operation."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from vllm.v1.kv_offload.base import DevicePointers, LoadStoreSpec, OffloadKey
from vllm.v1.kv_offload.file_mapper import FileMapper
from vllm.v1.kv_offload.fs.worker import FileOp, FSOffloadingWorker
from vllm.v1.kv_offload.pointer_utils import iter_pointer_groups

import hipfile

__all__ = ["HipFileOffloadingWorker", "job_ranges"]

_log = logging.getLogger(__name__)


def job_ranges(device_ptrs: DevicePointers, n_keys: int, blocks_per_file: int
               ) -> tuple[np.ndarray, int]:
    """The ranges of one job as an ``(N, 4)`` int64 array of ``(file index,
    file offset, device address, size)``, file ``i`` being the ``i``-th key:
    the files and offsets of ``FSOffloadingWorker``'s own mapping, computed
    per KV group without a Python object per block. Returns ``(ranges,
    total bytes)``.

    Raises
    ------
    ValueError
        The pointers need another number of files than ``n_keys``.
    """
    parts: list[np.ndarray] = []
    key_idx = 0
    for g in iter_pointer_groups(device_ptrs, blocks_per_file):
        n, refs = g.group_size, g.n_data_refs
        pos = g.skip + np.arange(n, dtype=np.int64)
        sl = slice(g.dev_ptr_offset, g.dev_ptr_offset + refs * n)
        ptrs = device_ptrs.ptrs[sl].astype(np.int64).reshape(refs, n)
        sizes = device_ptrs.sizes[sl].astype(np.int64).reshape(refs, n)
        ref = np.arange(refs, dtype=np.int64)[:, None]
        offsets = (ref * blocks_per_file + pos % blocks_per_file) * sizes
        files = np.broadcast_to(key_idx + pos // blocks_per_file, (refs, n))
        parts.append(np.stack([files, offsets, ptrs, sizes], axis=-1).reshape(-1, 4))
        key_idx += g.n_chunks
    if key_idx != n_keys:
        raise ValueError(f"the device pointers span {key_idx} files but the spec has "
                         f"{n_keys} keys")
    if not parts:
        return np.empty((0, 4), dtype=np.int64), 0
    ranges = np.concatenate(parts)
    ranges = ranges[np.lexsort((ranges[:, 1], ranges[:, 0]))]
    return ranges, int(ranges[:, 3].sum())


def _ops_ranges(file_ops: Sequence[tuple[str, list[FileOp]]]) -> np.ndarray:
    rows = [(i, op.file_offset, op.device_ptr, op.size_bytes)
            for i, (_, ops) in enumerate(file_ops) for op in ops]
    return np.array(rows, dtype=np.int64).reshape(-1, 4)


class _Failed:
    """The completion of a job that failed before anything was submitted."""

    def __init__(self, error: BaseException) -> None:
        self._error = error

    def done(self) -> bool:
        return True

    def result(self, timeout: float | None = None) -> int:
        raise self._error


class _Job:
    """The completion of one job: its engine handle, its files, and for a store
    the renames that make the files visible once every byte is written."""

    def __init__(self, handle: Any, files: list[Any], expected: int,
                 renames: list[tuple[str, str]]) -> None:
        self._handle = handle
        self._files = files
        self._expected = expected
        self._renames = renames
        self._error: BaseException | None = None
        self._finished = False

    def done(self) -> bool:
        if not self._finished:
            if not self._handle.done():
                return False
            self._finish(None)
        return True

    def result(self, timeout: float | None = None) -> int:
        if not self._finished:
            self._finish(timeout)
        if self._error is not None:
            raise self._error
        return self._expected

    def _finish(self, timeout: float | None) -> None:
        try:
            n = self._handle.wait(timeout)
        except (TimeoutError, KeyboardInterrupt):
            raise                            # not finished: wait again later
        except Exception as e:
            self._error = e
        else:
            if n != self._expected:
                self._error = OSError(f"moved {n} of {self._expected} bytes")
        self._finished = True
        for fh in self._files:
            fh.close()
        _settle(self._renames, self._error is None)


def _settle(renames: list[tuple[str, str]], keep: bool) -> None:
    """Rename the files written aside into place, or delete them all."""
    for i, (tmp, final) in enumerate(renames):
        if keep:
            try:
                os.replace(tmp, final)
                continue
            except OSError:
                _settle(renames[i:], False)
                raise
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


class HipFileOffloadingWorker(FSOffloadingWorker):  # type: ignore[misc]
    """An ``FSOffloadingWorker`` whose jobs are each one engine operation.

    A job's ranges (every block of every file of the job, by device address)
    go to :func:`hipfile.pread_async_addresses` or
    :func:`hipfile.pwrite_async_addresses` at once, on a stream of the
    worker that first waits for the job's ``ready_event``; the engine's own
    threads move the bytes. A store writes each file aside and renames it
    into place when the whole job completes; a failed job deletes what it
    wrote. Regular loads, expedited loads and stores each have their own
    stream. ``get_finished`` only polls; ``wait`` never raises for a
    failed job (``get_finished`` reports it with ``success=False``).

    Parameters
    ----------
    file_mapper
        vLLM's ``FileMapper`` (the names and layout of the files).
    block_size_factor
        GPU blocks per file.
    """

    def __init__(self, file_mapper: FileMapper, block_size_factor: int) -> None:
        super().__init__(file_mapper=file_mapper, block_size_factor=block_size_factor)
        self._expedited = False
        self._streams: dict[str, Any] = {}
        self._own_streams: list[Any] = []
        self._accelerator = torch.accelerator.current_accelerator() is not None

    # -- streams and the ready event ------------------------------------------

    def _stream(self, kind: str) -> Any:
        s = self._streams.get(kind)
        if s is None:
            if self._accelerator:
                s = torch.cuda.Stream()  # type: ignore[no-untyped-call]
            else:        # no torch device: a HIP stream of hipfile's platform
                from hipfile._lib import _hip

                hip: Any = _hip.hip
                s = _hip.check(hip.hipStreamCreate(), "hipStreamCreate")
                self._own_streams.append(s)
            self._streams[kind] = s
        return s

    def _ready_event(self) -> Any:
        """An event after the work enqueued so far on the current stream; None
        without a torch device (the tensors are host memory, written already)."""
        if not self._accelerator:
            return None
        ev = torch.Event()
        ev.record()
        return ev

    # -- jobs -----------------------------------------------------------------

    def submit_load(self, job_id: int, src_spec: LoadStoreSpec, device_ptrs: DevicePointers,
                    expedited: bool = False) -> bool:
        """Start a load (file -> device); an expedited one on its own stream."""
        self._expedited = expedited
        try:
            return bool(super().submit_load(job_id, src_spec, device_ptrs, expedited))
        finally:
            self._expedited = False

    def _submit_io(self, device_ptrs: DevicePointers, keys: list[OffloadKey],
                   is_store: bool) -> tuple[list[Any], int]:
        ranges, total = job_ranges(device_ptrs, len(keys), self._block_size_factor)
        paths = [self._file_mapper.get_file_name(k) for k in keys]
        return [self._issue(paths, ranges, is_store, self._ready_event())], total

    def submit_io(self, file_ops: list[tuple[str, list[FileOp]]], is_store: bool,
                  ready_event: Any) -> list[Any]:
        """``FSOffloadingWorker``'s hook: the per-file ops as one operation."""
        return [self._issue([p for p, _ in file_ops], _ops_ranges(file_ops), is_store,
                            ready_event)]

    def _issue(self, paths: list[str], ranges: np.ndarray, is_store: bool,
               ready_event: Any) -> Any:
        kind = "store" if is_store else "expedited" if self._expedited else "load"
        if len(ranges) == 0:
            return _Failed(ValueError("a transfer job with no blocks"))
        stream = self._stream(kind)
        files: list[Any] = []
        renames: list[tuple[str, str]] = []
        try:
            if is_store:
                files, renames = _open_aside(paths)
            else:
                files = _open_for_load(paths, ranges)
            if ready_event is not None:
                ready_event.wait(stream)
            if is_store:
                h = hipfile.pwrite_async_addresses(files, ranges, stream, ordered=False)
            else:
                h = hipfile.pread_async_addresses(files, ranges, stream, ordered=False,
                                                  prefetch=True)
        except OSError as e:
            _log.warning("KV %s of %d files not started: %s", kind, len(paths), e)
            for fh in files:
                fh.close()
            _settle(renames, False)
            return _Failed(e)
        except BaseException:
            for fh in files:
                fh.close()
            _settle(renames, False)
            raise
        return _Job(h, files, int(ranges[:, 3].sum()), renames)

    # -- completion -----------------------------------------------------------

    def wait(self, job_ids: set[int]) -> None:
        """Block until the given jobs complete (ids already reported are
        ignored); a failed job is reported by ``get_finished``, not raised."""
        for job_id in job_ids:
            t = self._transfers.get(job_id)
            if t is None:
                continue
            for c in t.completions:
                try:
                    c.result()
                except (OSError, hipfile.HipFileException) as e:
                    _log.debug("KV job %d failed: %s", job_id, e)

    def shutdown(self) -> None:
        """Wait for every job in flight (failures logged), then free the streams."""
        try:
            self.wait(set(self._transfers))
        finally:
            self._transfers.clear()
            self.shutdown_backend()

    def shutdown_backend(self) -> None:
        """Destroy the HIP streams the worker made."""
        from hipfile._lib import _hip

        hip: Any = _hip.hip
        self._streams.clear()
        while self._own_streams:
            hip.hipStreamDestroy(self._own_streams.pop())


def _open_for_load(paths: list[str], ranges: np.ndarray) -> list[Any]:
    """Every file opened for reading and long enough for its ranges."""
    need = np.zeros(len(paths), dtype=np.int64)
    np.maximum.at(need, ranges[:, 0], ranges[:, 1] + ranges[:, 3])
    files: list[Any] = []
    try:
        for p, n in zip(paths, need.tolist(), strict=True):
            fh = hipfile.open(p, "r")
            files.append(fh)
            size = fh.size()
            if size < n:
                raise OSError(f"{p} has {size} bytes, fewer than the {n} its blocks need")
    except BaseException:
        for fh in files:
            fh.close()
        raise
    return files


def _open_aside(paths: list[str]) -> tuple[list[Any], list[tuple[str, str]]]:
    """A new file beside each of ``paths`` to write; (handles, renames)."""
    tag = uuid.uuid4().hex[:12]
    files: list[Any] = []
    renames: list[tuple[str, str]] = []
    try:
        for p in paths:
            os.makedirs(os.path.dirname(p), exist_ok=True)
            tmp = f"{p}.{tag}.tmp"
            files.append(hipfile.open(tmp, "x"))
            renames.append((tmp, p))
    except BaseException:
        for fh in files:
            fh.close()
        _settle(renames, False)
        raise
    return files, renames
