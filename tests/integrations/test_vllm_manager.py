"""The scheduler side of the vLLM offloading spec: made by vLLM's own
``OffloadingSpecFactory`` from ``kv_connector_extra_config``; lookups,
stores, eviction, holds, events, restart and a root shared by two servers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from _vllm import make_spec

from vllm.v1.kv_offload.base import (  # isort: skip
    LookupResult,
    Medium,
    ReqContext,
    make_offload_key,
)
from vllm.v1.kv_offload.fs.worker import FSLoadStoreSpec  # isort: skip

CHUNK = 4 * 4096     # blocks_per_chunk x worker_kv_bytes_per_block


def key(i: int, group: int = 0) -> Any:
    return make_offload_key(i.to_bytes(8, "big") * 2, group)


def ctx() -> ReqContext:
    return ReqContext(req_id="r")


def write_files(manager: Any, k: Any, size: int = CHUNK) -> None:
    """The files a worker's store leaves behind."""
    for p in manager.paths(k):
        os.makedirs(os.path.dirname(p), exist_ok=True)
        Path(p).write_bytes(b"\x01" * size)


def store(manager: Any, *keys: Any, size: int = CHUNK) -> Any:
    out = manager.prepare_store(list(keys), ctx())
    assert out is not None
    for k in out.keys_to_store:
        write_files(manager, k, size)
    manager.complete_store(out.keys_to_store, ctx())
    return out


def events(manager: Any) -> list[tuple[bool, list[Any]]]:
    got = list(manager.take_events())
    assert all(e.medium is Medium.STORAGE for e in got)
    return [(e.removed, list(e.keys)) for e in got]


def test_the_factory_makes_the_spec_from_configuration_alone(tmp_path: Path) -> None:
    from hipfile.integrations.vllm import HipFileOffloadingManager, HipFileOffloadingSpec

    spec = make_spec(tmp_path / "kv", block_size=64)
    assert isinstance(spec, HipFileOffloadingSpec)
    assert isinstance(spec.get_manager(), HipFileOffloadingManager)
    assert spec.get_manager() is spec.get_manager()
    assert (tmp_path / "kv").is_dir()
    assert Path(spec.file_mapper.get_config_file_path()).is_file()


@pytest.mark.parametrize(("change", "message"), [
    ({"root": None}, "root_dir"),
    ({"root": "FILE/below"}, "not a writable directory"),
    ({"max_bytes": None}, "max_bytes"),
    ({"max_bytes": 0}, "max_bytes"),
    ({"max_bytes": -5}, "max_bytes"),
    ({"max_bytes": "lots"}, "max_bytes"),
    ({"max_bytes": 1.5}, "max_bytes"),
    ({"max_bytes": CHUNK - 1}, "less than one chunk"),
    ({"block_size": 40}, "block_size"),
])
def test_bad_configuration_is_a_clear_error_at_start(tmp_path: Path, change: dict[str, Any],
                                                     message: str) -> None:
    (tmp_path / "FILE").write_text("not a directory")
    kw: dict[str, Any] = {"root": tmp_path / "kv"}
    kw.update(change)
    if isinstance(kw["root"], str):
        kw["root"] = tmp_path / kw["root"]
    root = kw.pop("root")
    with pytest.raises(ValueError, match=message):
        make_spec(root, **kw)


def test_a_store_is_pending_until_complete_then_a_hit(tmp_path: Path) -> None:
    m = make_spec(tmp_path).get_manager()
    k1, k2 = key(1), key(2)
    assert m.lookup(k1, ctx()) is LookupResult.MISS
    out = m.prepare_store([k1, k2, k1], ctx())
    assert out.keys_to_store == [k1, k2]
    assert isinstance(out.store_spec, FSLoadStoreSpec) and out.store_spec.keys == [k1, k2]
    assert m.lookup(k1, ctx()) is LookupResult.HIT_PENDING
    for k in (k1, k2):
        write_files(m, k)
    m.complete_store([k1, k2], ctx())
    assert m.lookup(k1, ctx()) is LookupResult.HIT
    assert m.used_bytes == 2 * CHUNK
    assert events(m) == [(False, [k1, k2])]
    # already stored: nothing to store again
    again = m.prepare_store([k1, key(3)], ctx())
    assert again.keys_to_store == [key(3)]


def test_a_failed_store_drops_its_keys_and_offers_them_again(tmp_path: Path) -> None:
    m = make_spec(tmp_path).get_manager()
    out = m.prepare_store([key(1), key(2)], ctx())
    m.complete_store(out.keys_to_store, ctx(), success=False)
    assert m.lookup(key(1), ctx()) is LookupResult.MISS
    assert m.used_bytes == 0
    assert events(m) == []
    assert m.prepare_store([key(1)], ctx()).keys_to_store == [key(1)]


def test_a_store_reported_done_whose_file_is_missing_is_not_a_hit(tmp_path: Path) -> None:
    m = make_spec(tmp_path).get_manager()
    out = m.prepare_store([key(1)], ctx())
    m.complete_store(out.keys_to_store, ctx())
    assert m.lookup(key(1), ctx()) is LookupResult.MISS
    assert m.used_bytes == 0


def test_eviction_is_lru_by_bytes_and_never_takes_a_held_key(tmp_path: Path) -> None:
    m = make_spec(tmp_path, max_bytes=3 * CHUNK).get_manager()
    store(m, key(1), key(2), key(3))
    events(m)
    assert m.lookup(key(1), ctx()) is LookupResult.HIT          # order: 2 3 1
    spec = m.prepare_load([key(2)], ctx())                     # order: 3 1 2, 2 held
    assert spec.keys == [key(2)]
    out = m.prepare_store([key(4)], ctx())
    assert out.evicted_keys == [key(3)]
    assert not any(os.path.exists(p) for p in m.paths(key(3)))
    assert events(m) == [(True, [key(3)])]
    assert m.used_bytes == 3 * CHUNK
    m.complete_store([key(4)], ctx(), success=False)
    m.complete_load([key(2)], ctx())
    out = m.prepare_store([key(5), key(6)], ctx())
    assert out is not None and out.evicted_keys == [key(1)]
    # everything held or in flight: no room, nothing evicted
    m.prepare_load([key(2)], ctx())
    assert m.prepare_store([key(7)], ctx()) is None
    assert m.lookup(key(2), ctx()) is LookupResult.HIT


def test_a_vanished_or_shrunk_file_is_a_miss_and_frees_its_bytes(tmp_path: Path) -> None:
    m = make_spec(tmp_path).get_manager()
    store(m, key(1), key(2))
    events(m)
    os.unlink(m.paths(key(1))[0])
    with open(m.paths(key(2))[0], "r+b") as f:
        f.truncate(CHUNK // 2)
    assert m.lookup(key(1), ctx()) is LookupResult.MISS
    assert m.lookup(key(2), ctx()) is LookupResult.MISS
    assert m.used_bytes == 0
    assert events(m) == [(True, [key(1)]), (True, [key(2)])]


def test_a_restart_finds_what_was_stored_oldest_first(tmp_path: Path) -> None:
    m = make_spec(tmp_path).get_manager()
    for i in range(4):
        store(m, key(i, group=i % 2))
        p = m.paths(key(i, group=i % 2))[0]
        os.utime(p, (1000 + i, 1000 + i))
    Path(m.paths(key(9))[0] + ".abc.tmp").parent.mkdir(parents=True, exist_ok=True)
    Path(m.paths(key(9))[0] + ".abc.tmp").write_bytes(b"x" * CHUNK)   # a store in flight
    m.shutdown()
    # a new engine (new engine_id) and a smaller cap: the oldest goes
    m2 = make_spec(tmp_path, max_bytes=3 * CHUNK).get_manager()
    assert m2.used_bytes == 3 * CHUNK
    assert m2.lookup(key(0, 0), ctx()) is LookupResult.MISS
    for i in (1, 2, 3):
        assert m2.lookup(key(i, group=i % 2), ctx()) is LookupResult.HIT
    assert m2.lookup(key(9), ctx()) is LookupResult.MISS
    got = events(m2)
    assert got[0] == (False, [key(0, 0), key(1, 1), key(2, 0), key(3, 1)])
    assert got[1] == (True, [key(0, 0)])


def test_two_managers_sharing_a_root_see_each_others_files(tmp_path: Path) -> None:
    a = make_spec(tmp_path).get_manager()
    b = make_spec(tmp_path).get_manager()
    store(a, key(1))
    assert b.lookup(key(1), ctx()) is LookupResult.HIT
    assert b.used_bytes == CHUNK
    a.reset_cache()                     # deletes the files
    assert b.lookup(key(1), ctx()) is LookupResult.MISS
    assert b.used_bytes == 0


def test_reset_deletes_files_but_defers_those_in_use(tmp_path: Path) -> None:
    m = make_spec(tmp_path).get_manager()
    store(m, key(1), key(2))
    m.prepare_load([key(2)], ctx())
    pending = m.prepare_store([key(3)], ctx())
    events(m)
    m.reset_cache()
    assert events(m) == [(True, [key(1), key(2), key(3)])]
    assert m.used_bytes == 0
    assert not os.path.exists(m.paths(key(1))[0])
    assert os.path.exists(m.paths(key(2))[0])                 # a load reads it
    write_files(m, key(3))                                     # the store lands late
    m.complete_store(pending.keys_to_store, ctx())
    m.complete_load([key(2)], ctx())
    m.on_reset_flushed()
    assert not os.path.exists(m.paths(key(2))[0])
    assert not os.path.exists(m.paths(key(3))[0])
    assert m.lookup(key(3), ctx()) is LookupResult.MISS


def test_every_rank_has_its_file_and_all_count(tmp_path: Path) -> None:
    m = make_spec(tmp_path, world_size=2).get_manager()
    store(m, key(1))
    paths = m.paths(key(1))
    assert len(paths) == 2 and "_r0/" in paths[0] and "_r1/" in paths[1]
    assert m.used_bytes == 2 * CHUNK
    os.unlink(paths[1])
    assert m.lookup(key(1), ctx()) is LookupResult.MISS
