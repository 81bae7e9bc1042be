"""Failures of the vLLM offloading spec lose nothing and never poison the
cache: missing, short or resized files, a file deleted between lookup and
load, EIO and ENOSPC from the engine's file calls (its fault injection).
Each failed job is reported once with ``success=False``, no KV block gets a
byte that is not its own, no partial file is visible, and the manager's
accounting stays right."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _vllm import KVCaches, finish, make_spec

from hipfile._lib import _hipfile

from vllm.v1.kv_offload.base import LookupResult, ReqContext, make_offload_key  # isort: skip
from vllm.v1.kv_offload.fs.worker import FSLoadStoreSpec  # isort: skip

BPC = 4
PAGE = 64 << 10        # several engine calls per file


def keys_for(n: int, seed: int = 7) -> list[Any]:
    return [make_offload_key(bytes([seed, i]) * 8, 0) for i in range(n)]


@contextlib.contextmanager
def system(tmp_path: Path) -> Iterator[tuple[Any, Any, KVCaches]]:
    """A manager and a worker from two specs made by the factory (as in two
    processes), over KV caches of 2 layers x 32 blocks."""
    kw = dict(blocks_per_chunk=BPC, groups=[["a", "b"]], bytes_per_block=2 * PAGE)
    manager = make_spec(tmp_path, **kw).get_manager()
    with contextlib.ExitStack() as stack:
        stack.callback(_hipfile.engine_inject_faults)
        kv = KVCaches(stack, [2], 32, [PAGE])
        worker = make_spec(tmp_path, **kw).get_worker(kv.canonical)
        try:
            yield manager, worker, kv
        finally:
            worker.shutdown()


def ctx() -> ReqContext:
    return ReqContext(req_id="r")


def stored(manager: Any, worker: Any, kv: KVCaches, keys: list[Any], job: int = 0) -> Any:
    out = manager.prepare_store(keys, ctx())
    blocks = list(range(len(out.keys_to_store) * BPC))
    worker.submit_store(job, kv.pointers([blocks]), out.store_spec)
    ok = finish(worker, {job})[job].success
    manager.complete_store(out.keys_to_store, ctx(), success=ok)
    return ok


def load(manager: Any, worker: Any, kv: KVCaches, keys: list[Any], dst: list[int],
         job: int) -> bool:
    spec = manager.prepare_load(keys, ctx())
    worker.submit_load(job, spec, kv.pointers([dst]))
    worker.wait({job})                                  # never raises
    ok = finish(worker, {job})[job].success
    manager.complete_load(keys, ctx())
    return ok


def blocks(kv: KVCaches) -> list[np.ndarray]:
    return [t.numpy().copy() for t in kv.layers[0]]


def only_own_bytes(kv: KVCaches, before: list[np.ndarray], src: list[int],
                   dst: list[int]) -> None:
    """Every byte of a destination block is what it held, its source's, or 0
    (the engine zeroes what a failed read did not bring: no stale staging
    byte, no other file's byte)."""
    for t, old in zip(kv.layers[0], before, strict=True):
        for s, d in zip(src, dst, strict=True):
            got = t.numpy()[d]
            ok = (got == old[d]) | (got == old[s]) | (got == 0)
            assert ok.all(), f"block {d} has foreign bytes"


@pytest.mark.parametrize("fault", ["deleted", "truncated"])
def test_a_file_gone_or_short_after_lookup_fails_the_load_and_becomes_a_miss(
        tmp_path: Path, fault: str) -> None:
    with system(tmp_path) as (m, w, kv):
        keys = keys_for(2)
        assert stored(m, w, kv, keys)
        assert m.lookup(keys[1], ctx()) is LookupResult.HIT
        path = m.paths(keys[1])[0]
        if fault == "deleted":              # by a server sharing the root
            os.unlink(path)
        else:
            with open(path, "r+b") as f:
                f.truncate(os.path.getsize(path) - 1)
        before = blocks(kv)
        assert not load(m, w, kv, keys, list(range(16, 24)), job=1)
        for t, old in zip(kv.layers[0], before, strict=True):
            np.testing.assert_array_equal(t.numpy(), old)      # nothing landed
        assert m.lookup(keys[1], ctx()) is LookupResult.MISS
        assert m.lookup(keys[0], ctx()) is LookupResult.HIT
        assert m.used_bytes == 2 * BPC * PAGE
        assert m.prepare_store(keys, ctx()).keys_to_store == [keys[1]]


def test_a_file_cut_after_the_size_check_fails_the_load_with_no_foreign_byte(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The window the worker cannot close: the file shrinks between its size
    check and the engine's reads. The job still fails, and what landed is
    the file's own bytes or zeros."""
    from hipfile.integrations.vllm import _worker

    checked = _worker._open_for_load

    def then_cut(paths: list[str], ranges: Any) -> list[Any]:
        files = checked(paths, ranges)
        os.truncate(paths[1], os.path.getsize(paths[1]) // 2 + 100)
        return files

    with system(tmp_path) as (m, w, kv):
        keys = keys_for(2)
        assert stored(m, w, kv, keys)
        before = blocks(kv)
        monkeypatch.setattr(_worker, "_open_for_load", then_cut)
        dst = list(range(16, 24))
        assert not load(m, w, kv, keys, dst, job=1)
        only_own_bytes(kv, before, list(range(8)), dst)
        assert m.lookup(keys[1], ctx()) is LookupResult.MISS


def test_a_file_of_another_size_is_a_miss(tmp_path: Path) -> None:
    with system(tmp_path) as (m, w, kv):
        keys = keys_for(1)
        assert stored(m, w, kv, keys)
        with open(m.paths(keys[0])[0], "ab") as f:
            f.write(b"junk")
        assert m.lookup(keys[0], ctx()) is LookupResult.MISS
        assert m.used_bytes == 0


def test_an_eio_during_a_load_fails_it_and_lands_no_foreign_byte(tmp_path: Path) -> None:
    with system(tmp_path) as (m, w, kv):
        keys = keys_for(2)
        assert stored(m, w, kv, keys)
        before = blocks(kv)
        dst = list(range(16, 24))
        _hipfile.engine_inject_faults(errno.EIO, 1 << 20, 0, 1)   # after one call
        assert not load(m, w, kv, keys, dst, job=1)
        _hipfile.engine_inject_faults()
        only_own_bytes(kv, before, list(range(8)), dst)
        assert load(m, w, kv, keys, dst, job=2)                     # the files are whole
        for t, old in zip(kv.layers[0], before, strict=True):
            np.testing.assert_array_equal(t.numpy()[dst], old[:8])


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EIO])
def test_a_store_that_fails_leaves_no_file_and_the_keys_are_offered_again(
        tmp_path: Path, err: int) -> None:
    with system(tmp_path) as (m, w, kv):
        keys = keys_for(3)
        _hipfile.engine_inject_faults(err, 1 << 20, 0, 1)    # after one call
        assert not stored(m, w, kv, keys)
        _hipfile.engine_inject_faults()
        assert [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".json"] == []
        for k in keys:
            assert m.lookup(k, ctx()) is LookupResult.MISS
        assert m.used_bytes == 0
        assert list(m.take_events()) == []
        assert stored(m, w, kv, keys, job=1)                  # offered again, stored
        assert all(m.lookup(k, ctx()) is LookupResult.HIT for k in keys)
        assert m.used_bytes == 3 * 2 * BPC * PAGE


def test_failed_and_collected_jobs_are_reported_once_and_wait_never_raises(
        tmp_path: Path) -> None:
    with system(tmp_path) as (_m, w, kv):
        keys = keys_for(2)
        w.submit_load(0, FSLoadStoreSpec(keys), kv.pointers([list(range(8))]))  # no files
        w.submit_store(1, kv.pointers([list(range(8))]), FSLoadStoreSpec(keys))
        w.wait({0, 1})
        got = finish(w, {0, 1})
        assert not got[0].success and got[1].success
        assert got[0].transfer_size == got[1].transfer_size == 8 * 2 * PAGE
        assert all(r.transfer_time is not None for r in got.values())
        w.wait({0, 1})
        assert w.get_finished() == []
