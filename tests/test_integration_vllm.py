"""examples/vllm_kv_connector.py driven the way vLLM's worker drives a
``KVConnectorBase_V1`` connector: bind, start_load_kv, per layer
wait_for_layer_load and save_kv_layer, wait_for_save, get_finished."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import EXAMPLES, StreamBlocker, load_example, random_bytes

import hipfile
from hipfile._lib import _hipfile

SCRIPT = EXAMPLES / "vllm_kv_connector.py"
LAYERS = 24
BLOCKS = 12
BLOCK = 16 << 10

vkv = load_example("vllm_kv_connector")


@pytest.fixture
def model() -> Iterator[Any]:
    m = vkv.FakeModel(LAYERS, BLOCKS, BLOCK, matmuls=1, use_torch=False)
    try:
        yield m
    finally:
        m.synchronize()
        m.close()


@pytest.fixture
def connector(tmp_path: Path, model: Any) -> Iterator[Any]:
    with hipfile.Driver(), vkv.HipFileKVConnector(tmp_path, BLOCK,
                                                  current_stream=model.current_stream,
                                                  task_size=4096) as conn:
        conn.register_kv_caches(model.kv)
        yield conn


def _ids(seed: int, n: int) -> list[int]:
    return [int(b) for b in np.random.default_rng(seed).permutation(BLOCKS)[:n]]


def _stored(tmp_path: Path, req: str, nblocks: int, seed: int = 5) -> np.ndarray:
    data = random_bytes(LAYERS * nblocks * BLOCK, seed=seed)
    (tmp_path / f"{req}.kv").write_bytes(data.tobytes())
    return data


def _check_observed(model: Any, data: np.ndarray, nblocks: int) -> None:
    n = nblocks * BLOCK
    for i in range(LAYERS):
        assert np.array_equal(model.observed_bytes(i, nblocks), data[i * n:(i + 1) * n]), \
            f"layer {i}'s compute did not see its loaded bytes"


def _check_saved(tmp_path: Path, req: str, nblocks: int) -> None:
    saved = np.fromfile(tmp_path / f"{req}.kv", np.uint8)
    assert saved.size == LAYERS * nblocks * BLOCK
    for i in range(LAYERS):
        for k in range(nblocks):
            at = (i * nblocks + k) * BLOCK
            assert (saved[at:at + BLOCK] == vkv.pattern(i, k)).all(), f"layer {i} block {k}"


@pytest.mark.parametrize("path", ["engine", "read_async"])
def test_load_and_save_many_layers(tmp_path: Path, model: Any, path: str) -> None:
    load_ids = [3, 4, 5, 9, 0, 1]          # two runs of neighbours and a single block
    save_ids = [2, 6, 7, 11]
    data = _stored(tmp_path, "a", len(load_ids))
    meta = vkv.HipFileConnectorMetadata([vkv.ReqMeta("a", load_ids, load=True),
                                         vkv.ReqMeta("b", save_ids, save=True)])
    with hipfile.Driver(), vkv.HipFileKVConnector(tmp_path, BLOCK, path=path,
                                                  current_stream=model.current_stream,
                                                  task_size=4096) as conn:
        conn.register_kv_caches(model.kv)
        vkv.forward_pass(model, conn, meta)
        model.synchronize()
        assert vkv.collect_finished(conn, set()) == (set(), {"a"})  # b: not finished yet
        assert conn.get_finished({"b"}) == ({"b"}, None)
        assert conn.get_finished({"a", "b"}) == (None, None)  # reported once
        assert conn.get_block_ids_with_load_errors() == set()
    _check_observed(model, data, len(load_ids))
    _check_saved(tmp_path, "b", len(save_ids))


@pytest.mark.emulated
def test_each_layer_waits_for_its_own_load(tmp_path: Path, model: Any, connector: Any) -> None:
    """The loads are held at the gate (the compute stream is busy) and slow
    (short transfers); wait_for_layer_load returns at once, yet each
    layer's compute copies exactly its loaded bytes."""
    from hipfile.platforms import emulated

    ids = _ids(1, 8)
    data = _stored(tmp_path, "r", len(ids))
    meta = vkv.HipFileConnectorMetadata([vkv.ReqMeta("r", ids, load=True)])
    emulated.set_short_transfer(1024)
    blocker = StreamBlocker(model.stream)
    try:
        t0 = time.monotonic()
        vkv.forward_pass(model, connector, meta)
        assert time.monotonic() - t0 < 5, "a host block in the pass"
        assert not any(h.done() for h in connector._loads["r"].handles), \
            "a load started before the compute stream passed start_load_kv"
    finally:
        blocker.release()
    model.synchronize()
    _check_observed(model, data, len(ids))
    assert vkv.collect_finished(connector, set()) == (set(), {"r"})


@pytest.mark.emulated
def test_save_reads_what_the_compute_stream_produced(tmp_path: Path, model: Any,
                                                     connector: Any) -> None:
    """The blocks are filled on the compute stream while it is held: a save
    that did not wait for the stream would write zeros."""
    ids = _ids(2, 6)
    meta = vkv.HipFileConnectorMetadata([vkv.ReqMeta("s", ids, save=True)])
    blocker = StreamBlocker(model.stream)
    try:
        connector.bind_connector_metadata(meta)
        for i, name in enumerate(model.names):
            model.produce(i, ids)
            connector.save_kv_layer(name, model.kv[name], None)
        time.sleep(0.1)
        assert not any(h.done() for _, h in connector._saves)
    finally:
        blocker.release()
    connector.wait_for_save()
    connector.clear_connector_metadata()
    _check_saved(tmp_path, "s", len(ids))
    assert connector.get_finished({"s"}) == ({"s"}, None)


@pytest.mark.emulated
def test_wait_for_save_raises_the_first_error(tmp_path: Path, model: Any,
                                              connector: Any) -> None:
    from hipfile.platforms import emulated

    ids = _ids(3, 4)
    meta = vkv.HipFileConnectorMetadata([vkv.ReqMeta("ok", ids[:2], save=True),
                                         vkv.ReqMeta("bad", ids[2:], save=True)])
    emulated.inject_fault("write", errno.ENOSPC, count=1, after=LAYERS // 2)
    _hipfile.engine_inject_faults(errno.ENOSPC, count=1, after=LAYERS // 2)  # staged path
    with pytest.raises(OSError) as info:
        vkv.forward_pass(model, connector, meta)
    _hipfile.engine_inject_faults()
    assert info.value.errno == errno.ENOSPC
    assert connector._saves == [] and connector._save_files == {}, "saves left in flight"
    # the failed write belongs to one of the two requests (the engine's
    # threads interleave them): that one is not reported as saved
    sending, _ = connector.get_finished({"ok", "bad"})
    assert sending is not None and len(sending) == 1
    # the connector keeps working after the error
    meta2 = vkv.HipFileConnectorMetadata([vkv.ReqMeta("again", ids, save=True)])
    vkv.forward_pass(model, connector, meta2)
    _check_saved(tmp_path, "again", len(ids))


@pytest.mark.emulated
def test_a_failed_load_releases_the_stream_and_is_reported(tmp_path: Path, model: Any,
                                                           connector: Any) -> None:
    from hipfile.platforms import emulated

    ids = _ids(4, 5)
    _stored(tmp_path, "r", len(ids))
    meta = vkv.HipFileConnectorMetadata([vkv.ReqMeta("r", ids, load=True)])
    emulated.inject_fault("read", errno.EIO, count=1, after=3)
    _hipfile.engine_inject_faults(errno.EIO, count=1, after=3)    # the staged path's reads
    vkv.forward_pass(model, connector, meta)
    _hipfile.engine_inject_faults()
    model.synchronize()                      # released although a range failed
    assert vkv.collect_finished(connector, set()) == (set(), {"r"})
    assert connector.get_block_ids_with_load_errors() == set(ids)
    assert connector.get_block_ids_with_load_errors() == set()


def test_bad_calls_raise_and_submit_nothing(tmp_path: Path, model: Any,
                                            connector: Any) -> None:
    ctx = model.context()
    with pytest.raises(RuntimeError, match="metadata"):
        connector.start_load_kv(ctx)
    connector.bind_connector_metadata(vkv.HipFileConnectorMetadata(
        [vkv.ReqMeta("missing", [0, 1], load=True)]))
    with pytest.raises(FileNotFoundError):
        connector.start_load_kv(ctx)
    connector.bind_connector_metadata(vkv.HipFileConnectorMetadata(
        [vkv.ReqMeta("../x", [0], save=True)]))
    with pytest.raises(ValueError, match="cannot name a file"):
        connector.save_kv_layer(model.names[0], model.kv[model.names[0]], None)
    with pytest.raises(KeyError):
        connector.save_kv_layer("no.such.layer", model.kv[model.names[0]], None)
    with pytest.raises(RuntimeError, match="already"):
        connector.register_kv_caches(model.kv)
    assert hipfile.engine.info()["outstanding"] == 0
    with pytest.raises(ValueError):
        vkv.HipFileKVConnector(tmp_path, 0)
    with pytest.raises(ValueError):
        vkv.HipFileKVConnector(tmp_path, BLOCK, path="gds")


def test_coalesce() -> None:
    assert vkv.coalesce([4, 5, 6, 1, 2, 9], 10, 1000) == [
        (30, 1000, 40), (20, 1030, 10), (10, 1050, 90)]
    assert vkv.coalesce([], 10, 0) == []


def test_shutdown_waits_and_releases(tmp_path: Path, model: Any) -> None:
    ids = _ids(5, 6)
    _stored(tmp_path, "r", len(ids))
    with hipfile.Driver():
        conn = vkv.HipFileKVConnector(tmp_path, BLOCK, current_stream=model.current_stream)
        conn.register_kv_caches(model.kv)
        conn.bind_connector_metadata(vkv.HipFileConnectorMetadata(
            [vkv.ReqMeta("r", ids, load=True), vkv.ReqMeta("w", ids, save=True)]))
        conn.start_load_kv(model.context())
        conn.save_kv_layer(model.names[0], model.kv[model.names[0]], None)
        conn.shutdown()                       # nothing waited for by the caller
        conn.shutdown()
        assert hipfile.engine.info()["outstanding"] == 0


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HIPFILE_PLATFORM="emulated", HIPFILE_PLATFORM_QUIET="1")
    return subprocess.run([sys.executable, str(SCRIPT), *args], env=env, capture_output=True,
                          text=True, timeout=300, check=False)


@pytest.mark.emulated
def test_script_demo_and_bench_modes() -> None:
    proc = _run("--layers", "4", "--blocks", "4", "--block-kib", "8")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "result=OK" in proc.stdout
    proc = _run("--bench")
    assert proc.returncode == 2
    assert "--allow-emulated" in proc.stderr
    proc = _run("--bench", "--allow-emulated", "--layers", "3", "--blocks", "2",
                "--block-kib", "8", "--repeats", "1", "--matmuls", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for word in ("t_compute=", "engine", "read_async", "t_both/max(t_io,t_compute)="):
        assert word in proc.stdout
    proc = _run("--layers", "0")
    assert proc.returncode == 2 and "must be positive" in proc.stderr
