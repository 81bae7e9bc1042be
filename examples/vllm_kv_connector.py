"""A layer-wise vLLM KV connector on hipfile's stream-ordered engine.

vLLM's ``KVConnectorBase_V1`` asks a worker-side connector for six calls per
forward pass. This file implements them with their vLLM names and meanings on
:meth:`hipfile.FileHandle.pread_async_scatter` and
:meth:`~hipfile.FileHandle.pwrite_async_gather` (a layer's blocks as one
operation), with small stand-ins for
vLLM's own objects (no vLLM import):

* :meth:`HipFileKVConnector.register_kv_caches` registers every layer's
  paged KV buffer once;
* :meth:`~HipFileKVConnector.start_load_kv` issues the loads of every layer
  of every request at once, on a load stream ordered after the current
  stream; the engine's threads move the bytes, each layer completing on its
  own;
* :meth:`~HipFileKVConnector.wait_for_layer_load` makes the current
  (compute) stream wait for that layer only: the host does not block;
* :meth:`~HipFileKVConnector.save_kv_layer` writes a layer once the compute
  stream has produced it (the write is ordered after the current stream);
* :meth:`~HipFileKVConnector.wait_for_save` waits on the host for every save
  and raises the first error;
* :meth:`~HipFileKVConnector.get_finished` reports, without blocking, the
  requests whose saves and loads have completed.

Storage: one file per request, ``<root>/<request id>.kv``, holding the
request's blocks layer by layer (layer *l*, block *i* at
``(l * blocks + i) * block_bytes``).

Run the demo (a fake model: a load request and a save request over
``--layers`` layers, every byte checked)::

    HIPFILE_PLATFORM=emulated python examples/vllm_kv_connector.py --layers 8

``--bench`` times the workload on a GPU: loads only (``t_io``), the model
only (``t_compute``) and both overlapped (``t_both``), for the engine and for
one ``read_async`` per range with an event per layer.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

import numpy as np
from hip import hip

import hipfile

# The stand-ins for vLLM's objects and the fake model live in _vllm_kv/ beside this file.
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from _support import folder_to_make, positive_int, require_runtime  # noqa: E402 (beside this file)
from _vllm_kv.model import FakeModel, collect_finished, forward_pass, pattern, write_request_file  # noqa: E402
from _vllm_kv.stand_ins import (  # noqa: E402
    AttentionLayer,
    DeviceKV,
    ForwardContext,
    HipFileConnectorMetadata,
    ReqMeta,
    coalesce,
    hip_check,
)

__all__ = [
    "AttentionLayer",
    "DeviceKV",
    "ForwardContext",
    "HipFileConnectorMetadata",
    "HipFileKVConnector",
    "ReqMeta",
    "coalesce",
]

# ----------------------------------------------------------------------------------------
# The connector
# ----------------------------------------------------------------------------------------


class _Load:
    """The loads of one request in flight."""

    def __init__(self, fh: hipfile.FileHandle, handles: list[Any],
                 block_ids: list[int]) -> None:
        self.fh = fh
        self.handles = handles
        self.block_ids = block_ids


class HipFileKVConnector:
    """The worker side of a layer-wise KV connector (``KVConnectorBase_V1``
    method names and meanings) on the stream-ordered engine.

    Parameters
    ----------
    root
        Folder of the request files.
    block_bytes
        Bytes of one KV block of one layer.
    current_stream
        Returns the stream the model runs on now (vLLM: PyTorch's current
        stream); default: PyTorch's current stream when PyTorch and a GPU are
        present, else the null stream.
    path
        ``"engine"`` (the stream-ordered engine) or ``"read_async"`` (one
        ``read_async`` per range on the load stream and an event per layer:
        the library's own stream-ordered path, for comparison; saves use the
        engine in both).
    task_size
        Engine chunk size in bytes (None: ``hipfile.defaults``).
    """

    def __init__(self, root: str | os.PathLike[str], block_bytes: int, *,
                 current_stream: Callable[[], Any] | None = None, path: str = "engine",
                 task_size: int | None = None) -> None:
        if block_bytes <= 0:
            raise ValueError(f"block_bytes must be positive, got {block_bytes}")
        if path not in ("engine", "read_async"):
            raise ValueError(f"path must be 'engine' or 'read_async', got {path!r}")
        self.root = os.fspath(root)
        self.block_bytes = block_bytes
        self.path = path
        self.task_size = task_size
        self._current_stream = current_stream or _default_current_stream()
        self._meta: HipFileConnectorMetadata | None = None
        self._layers: list[str] = []
        self._buffers: dict[str, hipfile.Buffer] = {}
        self._load_stream: Any = None
        self._hip_stream: hipfile.Stream | None = None
        self._ordered: Any = None                       # event: load stream after current
        self._layer_waits: dict[str, list[Any]] = {}    # layer -> handles (or one event)
        self._loads: dict[str, _Load] = {}              # req id -> loads in flight
        self._layer_events: list[Any] = []
        self._save_files: dict[str, hipfile.FileHandle] = {}
        self._saves: list[tuple[str, Any]] = []         # (req id, handle)
        self._saved: set[str] = set()                   # saves complete, not reported
        self._finished_reqs: set[str] = set()           # announced by get_finished
        self._load_errors: set[int] = set()

    # -- context manager ------------------------------------------------------------------

    def __enter__(self) -> HipFileKVConnector:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.shutdown()

    # -- metadata (vLLM's bind/clear) -----------------------------------------------------

    def bind_connector_metadata(self, connector_metadata: HipFileConnectorMetadata) -> None:
        """Set the step's metadata (called before the forward pass)."""
        self._meta = connector_metadata

    def clear_connector_metadata(self) -> None:
        """Forget the step's metadata (called after the forward pass)."""
        self._meta = None

    def has_connector_metadata(self) -> bool:
        """Whether metadata is bound."""
        return self._meta is not None

    def _metadata(self) -> HipFileConnectorMetadata:
        if self._meta is None:
            raise RuntimeError("no connector metadata bound: call bind_connector_metadata first")
        return self._meta

    # -- registration ---------------------------------------------------------------------

    def register_kv_caches(self, kv_caches: dict[str, Any]) -> None:
        """Register every layer's paged KV buffer with hipFile once, create
        the load stream, and allocate the engine's staging
        (:func:`hipfile.engine.prepare`).

        Parameters
        ----------
        kv_caches
            Layer name -> paged KV buffer (a torch tensor, a :class:`DeviceKV`,
            anything :class:`hipfile.Buffer` accepts). The order is the layer
            order of the request files.
        """
        if self._buffers:
            raise RuntimeError("register_kv_caches was already called")
        try:
            for name, kv in kv_caches.items():
                buf = hipfile.Buffer(kv)
                # registration only speeds I/O up: memory another owner
                # registered is used as it is
                with contextlib.suppress(hipfile.MemoryAlreadyRegisteredError):
                    buf.register()
                self._buffers[name] = buf
                self._layers.append(name)
            self._load_stream = hip_check(
                hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
            self._ordered = hip_check(hip.hipEventCreateWithFlags(hip.hipEventDisableTiming))
            if self.path == "read_async":
                self._hip_stream = hipfile.Stream(self._load_stream)
                self._hip_stream.register()
            else:
                # the engine's pinned staging and flags, allocated now: a
                # pinned allocation during serving could wait for the GPU
                hipfile.engine.prepare()
        except BaseException:
            self._release()
            raise

    def _file(self, req_id: str) -> str:
        if not req_id or os.sep in req_id or req_id in (".", ".."):
            raise ValueError(f"request id {req_id!r} cannot name a file")
        return os.path.join(self.root, f"{req_id}.kv")

    def _layer_index(self, layer_name: str) -> int:
        try:
            return self._layers.index(layer_name)
        except ValueError:
            raise KeyError(f"layer {layer_name!r} was not registered") from None

    # -- loads ----------------------------------------------------------------------------

    def start_load_kv(self, forward_context: ForwardContext, **kwargs: Any) -> None:
        """Start loading the KV of every request marked ``load``, every
        layer at once, into the paged buffers.

        The loads start once the current stream has passed this point (the
        load stream waits for it). Returns without waiting; each layer then
        completes on its own (:meth:`wait_for_layer_load`).

        Raises
        ------
        RuntimeError
            No metadata bound, or :meth:`register_kv_caches` not called.
        FileNotFoundError
            A request's file does not exist (nothing of it is submitted).
        """
        meta = self._metadata()
        if self._load_stream is None:
            raise RuntimeError("register_kv_caches must be called before start_load_kv")
        requests = [r for r in meta.requests if r.load]
        if not requests:
            return
        hip_check(hip.hipEventRecord(self._ordered, self._current_stream()))
        hip_check(hip.hipStreamWaitEvent(self._load_stream, self._ordered, 0))
        layers = [n for n in forward_context.no_compile_layers if n in self._buffers]
        for req in requests:
            if req.req_id in self._loads:
                raise RuntimeError(f"request {req.req_id!r} is already loading")
            fh = hipfile.FileHandle(self._file(req.req_id)).open()
            load = _Load(fh, [], list(req.block_ids))
            self._loads[req.req_id] = load
            n = len(req.block_ids)
            for name in layers:
                base = self._layer_index(name) * n * self.block_bytes
                ranges = coalesce(req.block_ids, self.block_bytes, base)
                if self.path == "engine":
                    # the layer's blocks as one operation: one handle, one
                    # completion for the compute stream to wait on
                    # (prefetch: the saved file is not written in stream order,
                    # so every layer's reads start now; the copies follow the
                    # load stream)
                    hs = [fh.pread_async_scatter(self._buffers[name], ranges, self._load_stream,
                                                 task_size=self.task_size, prefetch=True)
                          ] if ranges else []
                    self._layer_waits.setdefault(name, []).extend(hs)
                else:
                    hs = [fh.read_async(self._buffers[name], s, f, o, self._hip_stream)
                          for s, f, o in ranges]
                    if hs:
                        ev = hs[-1].record_event()    # the stream completes in order
                        self._layer_waits.setdefault(name, []).append(ev)
                load.handles.extend(hs)

    def wait_for_layer_load(self, layer_name: str) -> None:
        """Make the current stream wait until ``layer_name``'s loads have
        landed; the host does not block. Work already on the stream is not
        delayed. A failed load still releases the stream: errors are
        reported by :meth:`get_finished` and
        :meth:`get_block_ids_with_load_errors`.
        """
        waits = self._layer_waits.pop(layer_name, [])
        if not waits:
            return
        stream = self._current_stream()
        for w in waits:
            if self.path == "engine":
                w.wait_on(stream)
            else:
                hip_check(hip.hipStreamWaitEvent(stream, w, 0))

    def get_block_ids_with_load_errors(self) -> set[int]:
        """Blocks whose load failed, as observed so far by
        :meth:`get_finished` (the set is emptied by this call)."""
        out, self._load_errors = self._load_errors, set()
        return out

    # -- saves ----------------------------------------------------------------------------

    def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any,
                      **kwargs: Any) -> None:
        """Start writing ``kv_layer``'s blocks of every request marked
        ``save``; the writes read the buffer only once the current stream
        (which produced the layer) has passed this point.

        Raises
        ------
        KeyError
            The layer was not registered.
        """
        meta = self._metadata()
        index = self._layer_index(layer_name)
        buf = self._buffers[layer_name]
        target: Any = buf if _same_memory(buf, kv_layer) else kv_layer
        stream = self._current_stream()
        for req in meta.requests:
            if not req.save:
                continue
            fh = self._save_files.get(req.req_id)
            if fh is None:
                fh = hipfile.FileHandle(self._file(req.req_id),
                                        os.O_RDWR | os.O_CREAT).open()
                self._save_files[req.req_id] = fh
            n = len(req.block_ids)
            ranges = coalesce(req.block_ids, self.block_bytes, index * n * self.block_bytes)
            if ranges:
                self._saves.append((req.req_id, fh.pwrite_async_gather(
                    target, ranges, stream, task_size=self.task_size)))

    def wait_for_save(self) -> None:
        """Block until every save has finished; raise the first error.

        Every save is waited for before the error is raised, so nothing is
        in flight afterwards; the files of the step's saves are closed.

        Raises
        ------
        OSError, hipfile.HipFileException
            A save failed (the first error in submission order).
        """
        first: BaseException | None = None
        failed: set[str] = set()
        saves, self._saves = self._saves, []
        for req_id, h in saves:
            try:
                h.wait()
            except Exception as e:
                failed.add(req_id)
                if first is None:
                    first = e
        for req_id, fh in self._save_files.items():
            fh.close()
            if req_id not in failed:
                self._saved.add(req_id)
        self._save_files.clear()
        if first is not None:
            raise first

    # -- completion -----------------------------------------------------------------------

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None,
                                                                set[str] | None]:
        """Requests whose asynchronous transfers are complete, without
        blocking: ``(saved, loaded)``, each None when empty.

        A saved request is reported once vLLM has said it finished
        (``finished_req_ids`` of this call or an earlier one). A loaded
        request is reported once all its layers have landed; blocks whose
        load failed go to :meth:`get_block_ids_with_load_errors`.
        """
        self._finished_reqs |= set(finished_req_ids)
        sending = self._saved & self._finished_reqs
        self._saved -= sending
        self._finished_reqs -= sending
        recving: set[str] = set()
        for req_id, load in list(self._loads.items()):
            if all(h.done() for h in load.handles):
                self._retire_load(req_id, load)
                recving.add(req_id)
        return sending or None, recving or None

    @property
    def loading(self) -> set[str]:
        """Requests with loads not yet reported by :meth:`get_finished`."""
        return set(self._loads)

    def _retire_load(self, req_id: str, load: _Load) -> None:
        for h in load.handles:
            try:
                h.wait()
            except Exception:
                self._load_errors.update(load.block_ids)
        load.fh.close()
        del self._loads[req_id]

    # -- teardown -------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Wait for everything in flight, close the files, deregister the
        buffers and destroy the load stream (idempotent). Errors of loads
        and saves not observed before are dropped here; call
        :meth:`wait_for_save` first to see them."""
        try:
            for load in self._loads.values():
                for h in load.handles:
                    with contextlib.suppress(Exception):
                        h.wait()
                load.fh.close()
            self._loads.clear()
            self._layer_waits.clear()
            with contextlib.suppress(Exception):
                self.wait_for_save()
        finally:
            self._release()

    def _release(self) -> None:
        if self._hip_stream is not None:
            self._hip_stream.deregister()
            self._hip_stream = None
        for buf in self._buffers.values():
            if buf.registered:
                buf.deregister()
        self._buffers.clear()
        self._layers.clear()
        if self._load_stream is not None:
            hip_check(hip.hipStreamSynchronize(self._load_stream))
            hip_check(hip.hipStreamDestroy(self._load_stream))
            self._load_stream = None
        if self._ordered is not None:
            hip_check(hip.hipEventDestroy(self._ordered))
            self._ordered = None


def _same_memory(buf: hipfile.Buffer, obj: Any) -> bool:
    try:
        return int(hipfile.Buffer(obj).ptr) == int(buf.ptr)
    except (TypeError, ValueError):
        return False


def _default_current_stream() -> Callable[[], Any]:
    try:
        import torch

        if torch.cuda.is_available():
            return lambda: torch.cuda.current_stream().cuda_stream
    except ImportError:
        pass
    return lambda: 0



# ----------------------------------------------------------------------------------------
# Demo and benchmark
# ----------------------------------------------------------------------------------------


def run_demo(root: str, layers: int, blocks: int, block_bytes: int,
             task_size: int | None = None) -> tuple[bool, dict[str, Any]]:
    """Load one request and save another over ``layers`` layers; check the
    loaded bytes as the compute saw them and the saved file."""
    rng = np.random.default_rng(3)
    perm = [int(b) for b in rng.permutation(blocks)]
    half = blocks // 2
    load_ids, save_ids = perm[:half], perm[half:]
    data = write_request_file(root, "req-load", layers, len(load_ids), block_bytes)
    meta = HipFileConnectorMetadata([ReqMeta("req-load", load_ids, load=True),
                                     ReqMeta("req-save", save_ids, save=True)])
    model = FakeModel(layers, blocks, block_bytes, matmuls=1)
    stats: dict[str, Any] = {"compute": model.compute_kind}
    try:
        with hipfile.Driver(), HipFileKVConnector(root, block_bytes,
                                                  current_stream=model.current_stream,
                                                  task_size=task_size) as conn:
            conn.register_kv_caches(model.kv)
            t0 = time.perf_counter()
            forward_pass(model, conn, meta)
            model.synchronize()
            stats["pass_s"] = time.perf_counter() - t0
            stats["finished"] = collect_finished(conn, {"req-load", "req-save"})
            stats["load_errors"] = conn.get_block_ids_with_load_errors()
            stats["mechanism"] = hipfile.engine.mechanism()
        n = len(load_ids) * block_bytes
        ok = all(np.array_equal(model.observed_bytes(i, len(load_ids)), data[i * n:(i + 1) * n])
                 for i in range(layers))
        saved = np.fromfile(os.path.join(root, "req-save.kv"), np.uint8)
        expect = np.concatenate([np.full(block_bytes, pattern(i, k), np.uint8)
                                 for i in range(layers) for k in range(len(save_ids))])
        ok = ok and np.array_equal(saved, expect) and stats["finished"] == (
            {"req-save"}, {"req-load"}) and not stats["load_errors"]
    finally:
        model.close()
    return ok, stats


def run_bench(root: str, args: argparse.Namespace) -> dict[str, Any]:
    """Medians of ``t_io``, ``t_compute`` and ``t_both`` for the engine and
    for ``read_async`` with an event per layer (one request, contiguous
    blocks: one range per layer)."""
    layers, blocks, bb = args.layers, args.blocks, args.block_kib << 10
    ids = list(range(blocks))
    write_request_file(root, "req", layers, blocks, bb)
    load = HipFileConnectorMetadata([ReqMeta("req", ids, load=True)])
    model = FakeModel(layers, blocks, bb, dim=args.dim, matmuls=args.matmuls)
    out: dict[str, Any] = {"compute": model.compute_kind, "layers": layers,
                           "layer_bytes": blocks * bb, "mechanism": hipfile.engine.mechanism()}
    try:
        with hipfile.Driver():
            conns = {p: HipFileKVConnector(root, bb, current_stream=model.current_stream,
                                           path=p, task_size=args.task_size)
                     for p in ("engine", "read_async")}
            try:
                for c in conns.values():
                    c.register_kv_caches(model.kv)

                def io_only(c: HipFileKVConnector) -> None:
                    c.bind_connector_metadata(load)
                    c.start_load_kv(model.context())
                    for n in model.names:
                        c.wait_for_layer_load(n)
                    model.synchronize()
                    c.clear_connector_metadata()
                    assert collect_finished(c, set())[1] == {"req"}

                def compute_only() -> None:
                    for i in range(layers):
                        model.compute(i)
                    model.synchronize()

                def both(c: HipFileKVConnector) -> None:
                    c.bind_connector_metadata(load)
                    c.start_load_kv(model.context())
                    for i, n in enumerate(model.names):
                        c.wait_for_layer_load(n)
                        model.compute(i)
                    model.synchronize()
                    c.clear_connector_metadata()
                    assert collect_finished(c, set())[1] == {"req"}

                cases: dict[str, Callable[[], None]] = {"compute": compute_only}
                for p, c in conns.items():
                    cases[f"io/{p}"] = functools.partial(io_only, c)
                    cases[f"both/{p}"] = functools.partial(both, c)
                times: dict[str, list[float]] = {k: [] for k in cases}
                for fn in cases.values():   # warm-up
                    fn()
                for _ in range(args.repeats):
                    for k, fn in cases.items():
                        t0 = time.perf_counter()
                        fn()
                        times[k].append(time.perf_counter() - t0)
            finally:
                for c in conns.values():
                    c.shutdown()
        med = {k: statistics.median(v) for k, v in times.items()}
        out["t_compute"] = med["compute"]
        for p in ("engine", "read_async"):
            t_io, t_both = med[f"io/{p}"], med[f"both/{p}"]
            out[p] = {"t_io": t_io, "t_both": t_both,
                      "overlap": t_both / max(t_io, med["compute"]),
                      "GBps": layers * blocks * bb / t_io / 1e9}
    finally:
        model.close()
    return out


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        description="A layer-wise vLLM KV connector on hipfile's stream-ordered engine: "
                    "a fake model loads and saves KV per layer; --bench times the workload.")
    ap.add_argument("--layers", type=positive_int, default=8, help="model layers (default: 8)")
    ap.add_argument("--blocks", type=positive_int, default=16,
                    help="KV blocks per layer in the paged buffers (default: 16)")
    ap.add_argument("--block-kib", type=positive_int, default=64,
                    help="bytes of one block of one layer, KiB (default: 64)")
    ap.add_argument("--task-size", type=positive_int, default=None,
                    help="engine chunk size in bytes (default: hipfile.defaults)")
    ap.add_argument("--dir", type=folder_to_make, default=None,
                    help="folder in which the request files are written, in a temporary "
                         "folder removed at the end (default: the system's temporary folder)")
    ap.add_argument("--bench", action="store_true",
                    help="time loads, compute and both, engine against read_async + events "
                         "(for a GPU; see --allow-emulated)")
    ap.add_argument("--dim", type=positive_int, default=4096,
                    help="--bench: matrix size of the model's products (default: 4096)")
    ap.add_argument("--matmuls", type=positive_int, default=4,
                    help="--bench: matrix products (or memsets) per layer (default: 4)")
    ap.add_argument("--repeats", type=positive_int, default=5,
                    help="--bench: interleaved repeats per case (default: 5)")
    ap.add_argument("--allow-emulated", action="store_true",
                    help="--bench: run on the emulated platform (correctness only, "
                         "the times mean nothing)")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if min(args.layers, args.blocks, args.block_kib, args.dim, args.matmuls,
           args.repeats) <= 0 or (args.task_size is not None and args.task_size <= 0):
        ap.error("sizes and counts must be positive")
    if args.blocks < 2 and not args.bench:
        ap.error("--blocks must be at least 2 (one load and one save request)")
    platform = hipfile.platforms.active() or "rocm"
    if args.bench and platform == "emulated" and not args.allow_emulated:
        print("refusing to time the emulated platform (no GPU): pass --allow-emulated",
              file=sys.stderr)
        return 2
    with _folder(args.dir) as root:
        if args.bench:
            r = run_bench(root, args)
            print(f"platform={platform} layers={r['layers']} "
                  f"layer={r['layer_bytes'] >> 20} MiB compute={r['compute']} "
                  f"release={r['mechanism']}")
            print(f"t_compute={1e3 * r['t_compute']:.2f} ms")
            for p in ("engine", "read_async"):
                c = r[p]
                print(f"{p:10s} t_io={1e3 * c['t_io']:.2f} ms ({c['GBps']:.2f} GB/s) "
                      f"t_both={1e3 * c['t_both']:.2f} ms "
                      f"t_both/max(t_io,t_compute)={c['overlap']:.2f}")
            if platform == "emulated":
                print("(emulated platform: correctness only, the times mean nothing)")
            return 0
        ok, st = run_demo(root, args.layers, args.blocks, args.block_kib << 10, args.task_size)
    print(f"platform={platform} layers={args.layers} blocks={args.blocks} "
          f"block={args.block_kib} KiB compute={st['compute']} release={st['mechanism']} "
          f"pass={1e3 * st['pass_s']:.2f} ms result={'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


@contextlib.contextmanager
def _folder(path: str | None) -> Iterator[str]:
    """A temporary folder for the request files, inside ``path`` when given
    (made if missing); nothing is left behind: the temporary folder goes,
    and ``path`` too when this run made it."""
    made = bool(path) and not os.path.exists(path)
    if path:
        os.makedirs(path, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory(prefix="hipfile-vllm-", dir=path or None) as tmp:
            yield tmp
    finally:
        if made:
            with contextlib.suppress(OSError):
                os.rmdir(path)


if __name__ == "__main__":
    require_runtime(__file__)  # one line saying what to set, without a GPU runtime
    sys.exit(main())
