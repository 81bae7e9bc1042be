"""The worker side of the vLLM offloading spec: jobs as vLLM's
``OffloadingConnector`` hands them (``DevicePointers`` resolved by vLLM's own
``resolve_device_pointers`` over KV caches in device memory), moved by
hipfile's engine, byte for byte, through vLLM's ``FileMapper`` files."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from _vllm import KVCaches, finish, make_spec

from vllm.v1.kv_offload.base import make_offload_key  # isort: skip
from vllm.v1.kv_offload.fs.worker import FSLoadStoreSpec, FSOffloadingWorker  # isort: skip

BPC = 4


def keys_for(n: int, seed: int = 0, group: int = 0) -> list[Any]:
    return [make_offload_key(bytes([seed, group, i % 256, i // 256]) * 4, group)
            for i in range(n)]


@contextlib.contextmanager
def setup(tmp_path: Path, layers: Sequence[int] = (2,), pages: Sequence[int] = (1024,),
          num_blocks: int = 32, bpc: int = BPC) -> Iterator[tuple[Any, KVCaches]]:
    groups = [[f"g{g}l{i}" for i in range(n)] for g, n in enumerate(layers)]
    spec = make_spec(tmp_path, blocks_per_chunk=bpc, groups=groups,
                     bytes_per_block=sum(n * p for n, p in zip(layers, pages, strict=True)))
    with contextlib.ExitStack() as stack:
        kv = KVCaches(stack, layers, num_blocks, pages)
        worker = spec.get_worker(kv.canonical)
        try:
            yield worker, kv
        finally:
            worker.shutdown()


def snapshot(kv: KVCaches) -> list[list[np.ndarray]]:
    return [[t.numpy().copy() for t in g] for g in kv.layers]


def expected_file(kv_before: list[list[np.ndarray]], group: int, blocks: Sequence[int],
                  bpc: int = BPC) -> bytes:
    """What FileMapper's layout puts in a chunk file: per layer, its blocks."""
    out = []
    for layer in kv_before[group]:
        page = layer.shape[1]
        rows = [layer[b] for b in blocks] + [np.zeros(page, np.uint8)] * (bpc - len(blocks))
        out.append(np.concatenate(rows)[: len(blocks) * page] if len(blocks) < bpc
                   else np.concatenate(rows))
    return b"".join(o.tobytes() for o in out)


def test_a_store_writes_filemappers_files_and_a_load_brings_them_back_elsewhere(
        tmp_path: Path) -> None:
    from hipfile.integrations.vllm import HipFileOffloadingWorker

    with setup(tmp_path, layers=(2, 1), pages=(1024, 512)) as (worker, kv):
        assert isinstance(worker, HipFileOffloadingWorker)
        before = snapshot(kv)
        src = [[3, 7, 1, 9, 12, 5, 0, 2], [4, 6, 8, 10]]
        keys = keys_for(2, group=0) + keys_for(1, group=1)
        assert worker.submit_store(0, kv.pointers(src), FSLoadStoreSpec(keys))
        r = finish(worker, {0})[0]
        assert r.success and r.transfer_size == 8 * 2 * 1024 + 4 * 512
        mapper = worker._file_mapper
        for i, (g, blocks) in enumerate([(0, src[0][:4]), (0, src[0][4:]), (1, src[1])]):
            path = Path(mapper.get_file_name(keys[i]))
            assert path.read_bytes() == expected_file(before, g, blocks)
        assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]  # none aside
        dst = [[20, 21, 22, 23, 24, 25, 26, 27], [30, 29, 28, 31]]
        for g in kv.layers:
            for t in g:
                t[20:].zero_()
        assert worker.submit_load(1, FSLoadStoreSpec(keys), kv.pointers(dst))
        assert finish(worker, {1})[1].success
        for g, (s, d) in enumerate(zip(src, dst, strict=True)):
            for t, old in zip(kv.layers[g], before[g], strict=True):
                np.testing.assert_array_equal(t.numpy()[d], old[s])
                np.testing.assert_array_equal(t.numpy()[:20], old[:20])   # nothing else


def test_a_load_that_starts_and_ends_inside_files(tmp_path: Path) -> None:
    """``block_indices``: blocks 2..8 of a request, its first chunk partly on
    the GPU already; the last file read only in part."""
    with setup(tmp_path) as (worker, kv):
        before = snapshot(kv)
        src = list(range(12))
        keys = keys_for(3)
        worker.submit_store(0, kv.pointers([src]), FSLoadStoreSpec(keys))
        assert finish(worker, {0})[0].success
        dst = [16, 17, 18, 19, 20, 21, 22]
        worker.submit_load(1, FSLoadStoreSpec(keys[:3]), kv.pointers([dst], [2]))
        assert finish(worker, {1})[1].success
        for t, old in zip(kv.layers[0], before[0], strict=True):
            np.testing.assert_array_equal(t.numpy()[dst], old[2:9])


def test_the_ranges_are_fsoffloadingworkers_own_mapping(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    """Files and offsets of every block as vLLM's FSOffloadingWorker maps them
    (its ``_submit_io`` run with a recording ``submit_io``; ``torch.Event``,
    which CPU torch cannot record, replaced)."""
    from hipfile.integrations.vllm._worker import job_ranges

    class Recorder(FSOffloadingWorker):  # type: ignore[misc]
        def submit_io(self, file_ops: Any, is_store: bool, ready_event: Any) -> list[Any]:
            self.ops = file_ops
            return []

    class NoEvent:
        def record(self) -> None:
            pass

    monkeypatch.setattr(torch, "Event", NoEvent)
    with setup(tmp_path, layers=(3, 2), pages=(256, 128), bpc=3) as (worker, kv):
        ptrs = kv.pointers([[5, 1, 9, 2, 7, 11, 30], [3, 4, 8, 6]], [4, 1])
        keys = keys_for(3, group=0) + keys_for(2, group=1)
        rec = Recorder(worker._file_mapper, 3)
        rec._submit_io(ptrs, keys, is_store=False)
        want = sorted((i, op.file_offset, op.device_ptr, op.size_bytes)
                      for i, (_, ops) in enumerate(rec.ops) for op in ops)
        ranges, total = job_ranges(ptrs, len(keys), 3)
        assert sorted(map(tuple, ranges.tolist())) == want
        assert total == sum(w[3] for w in want)
        assert [p for p, _ in rec.ops] == [worker._file_mapper.get_file_name(k) for k in keys]
        with pytest.raises(ValueError, match="span 5 files but the spec has 4 keys"):
            job_ranges(ptrs, 4, 3)


def test_a_thousand_files_in_one_job(tmp_path: Path) -> None:
    n = 1000
    with setup(tmp_path, layers=(1,), pages=(256,), num_blocks=2 * n, bpc=1) as (worker, kv):
        before = snapshot(kv)
        keys = keys_for(n)
        src = list(range(0, 2 * n, 2))
        worker.submit_store(0, kv.pointers([src]), FSLoadStoreSpec(keys))
        assert finish(worker, {0})[0].success
        dst = list(range(1, 2 * n, 2))[::-1]
        worker.submit_load(1, FSLoadStoreSpec(keys), kv.pointers([dst]))
        assert finish(worker, {1})[1].success
        np.testing.assert_array_equal(kv.layers[0][0].numpy()[dst], before[0][0][src])


def test_jobs_overlap_and_an_expedited_load_is_not_queued_behind_others(
        tmp_path: Path) -> None:
    with setup(tmp_path) as (worker, kv):
        before = snapshot(kv)
        keys = keys_for(4)
        worker.submit_store(0, kv.pointers([list(range(16))]), FSLoadStoreSpec(keys))
        finish(worker, {0})
        worker.submit_load(1, FSLoadStoreSpec(keys[:2]), kv.pointers([list(range(16, 24))]))
        worker.submit_load(2, FSLoadStoreSpec(keys[2:]), kv.pointers([list(range(24, 32))]),
                           expedited=True)
        assert {s for s in worker._streams} == {"store", "load", "expedited"}
        worker.wait({2})
        worker.wait({2})                     # again: no error
        got = finish(worker, {1, 2})
        assert got[1].success and got[2].success
        for t, old in zip(kv.layers[0], before[0], strict=True):
            np.testing.assert_array_equal(t.numpy()[16:32], old[0:16])
        worker.wait({0, 1, 2})               # all collected: nothing to do, no error
        assert worker.get_finished() == []


def test_get_finished_does_not_block_and_a_job_waits_for_its_stream(tmp_path: Path) -> None:
    """A load held back by work on its stream (a host function that waits):
    ``get_finished`` answers at once with nothing, and reports the job once
    the stream goes on."""
    import time

    from _util import StreamBlocker

    with setup(tmp_path) as (worker, kv):
        before = snapshot(kv)
        keys = keys_for(1)
        worker.submit_store(0, kv.pointers([[0, 1, 2, 3]]), FSLoadStoreSpec(keys))
        finish(worker, {0})
        blocker = StreamBlocker(worker._stream("load"))
        try:
            worker.submit_load(1, FSLoadStoreSpec(keys), kv.pointers([[4, 5, 6, 7]]))
            t0 = time.monotonic()
            for _ in range(5):
                assert worker.get_finished() == []
                time.sleep(0.02)
            assert time.monotonic() - t0 < 1
            np.testing.assert_array_equal(kv.layers[0][0].numpy()[4:8], before[0][0][4:8])
        finally:
            blocker.release()
        assert finish(worker, {1})[1].success
        np.testing.assert_array_equal(kv.layers[0][0].numpy()[4:8], before[0][0][0:4])


def test_a_store_in_flight_is_invisible_until_its_job_completes(tmp_path: Path) -> None:
    """While a store waits for its stream, no file has its final name (a
    reader, or a restarted manager, sees nothing torn); once it completes
    every file has, and nothing is left aside."""
    from _util import StreamBlocker

    with setup(tmp_path) as (worker, kv):
        before = snapshot(kv)
        keys = keys_for(3)
        paths = [Path(worker._file_mapper.get_file_name(k)) for k in keys]
        blocker = StreamBlocker(worker._stream("store"))
        try:
            worker.submit_store(0, kv.pointers([list(range(12))]), FSLoadStoreSpec(keys))
            assert worker.get_finished() == []
            assert not any(p.exists() for p in paths)
        finally:
            blocker.release()
        assert finish(worker, {0})[0].success
        for i, p in enumerate(paths):
            assert p.read_bytes() == expected_file(before, 0, range(4 * i, 4 * i + 4))
        assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]


def test_the_submit_io_hook_moves_fileops_as_one_operation(tmp_path: Path) -> None:
    """``submit_io``, the hook FSOffloadingWorker leaves to a medium, called
    with vLLM's own FileOps: one completion for all the files."""
    from vllm.v1.kv_offload.fs.worker import FileOp

    with setup(tmp_path, layers=(1,), pages=(4096,)) as (worker, kv):
        before = snapshot(kv)
        t = kv.layers[0][0]
        base, page = t.data_ptr(), 4096
        paths = [str(tmp_path / "x" / f"{i}.bin") for i in range(3)]
        store = [(p, [FileOp(base + (2 * i + j) * page, page, j * page) for j in range(2)])
                 for i, p in enumerate(paths)]
        (c,) = worker.submit_io(store, True, None)
        assert c.result(timeout=60) == 6 * page
        load = [(p, [FileOp(base + (20 + 2 * i + j) * page, page, j * page) for j in range(2)])
                for i, p in enumerate(paths)]
        (c,) = worker.submit_io(load, False, None)
        assert c.result(timeout=60) == 6 * page and c.done()
        np.testing.assert_array_equal(t.numpy()[20:26], before[0][0][0:6])
