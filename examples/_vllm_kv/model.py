"""A tiny fake model that drives the connector the way vLLM's worker does."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

import numpy as np
from _support import hip_check
from hip import hip

from _vllm_kv.stand_ins import (
    AttentionLayer,
    DeviceKV,
    ForwardContext,
    HipFileConnectorMetadata,
)

if TYPE_CHECKING:
    from vllm_kv_connector import HipFileKVConnector


# ----------------------------------------------------------------------------------------
# A tiny fake model
# ----------------------------------------------------------------------------------------


class FakeModel:
    """Layers that read their loaded KV, compute, and write new KV, all on
    one compute stream.

    Per layer: wait for the layer's load; copy the load request's blocks to
    an observation buffer (what attention would read); the "model" (matrix
    products with PyTorch when PyTorch and a GPU are present, else device
    memsets); fill the save request's blocks with a pattern of the layer;
    save the layer.
    """

    def __init__(self, layers: int, blocks: int, block_bytes: int, *, dim: int = 1024,
                 matmuls: int = 2, use_torch: bool | None = None) -> None:
        self.layers, self.blocks, self.block_bytes = layers, blocks, block_bytes
        self.names = [f"model.layers.{i}.self_attn.attn" for i in range(layers)]
        self.matmuls = matmuls
        self.torch: Any = None
        if use_torch is None:
            use_torch = _torch_gpu()
        self.kv: dict[str, Any] = {}
        self.scratch: Any = None
        self.observed: Any = None
        try:
            if use_torch:
                import torch

                self.torch = torch
                self.stream_obj = torch.cuda.Stream()
                self.stream = self.stream_obj.cuda_stream
                for n in self.names:
                    self.kv[n] = torch.zeros(blocks * block_bytes, dtype=torch.uint8,
                                             device="cuda")
                self.weight = torch.randn(dim, dim, dtype=torch.bfloat16, device="cuda")
                self.act = torch.randn(dim, dim, dtype=torch.bfloat16, device="cuda")
                self.out = torch.empty(dim, dim, dtype=torch.bfloat16, device="cuda")
                self.compute_kind = f"torch bf16 matmul {dim}x{dim} x{matmuls}"
            else:
                self.stream = hip_check(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
                for n in self.names:
                    self.kv[n] = DeviceKV(blocks * block_bytes)
                    hip_check(hip.hipMemset(self.kv[n].ptr, 0, blocks * block_bytes))
                self.scratch = DeviceKV(max(block_bytes * blocks, 1 << 20))
                self.compute_kind = f"device memset x{matmuls}"
            self.observed = DeviceKV(layers * blocks * block_bytes)
        except BaseException:
            self.close()
            raise

    def current_stream(self) -> Any:
        """The compute stream (the connector's ``current_stream``)."""
        return self.stream

    def context(self) -> ForwardContext:
        """The forward context of a pass (layers by name)."""
        return ForwardContext({n: AttentionLayer([self.kv[n]]) for n in self.names})

    def compute(self, layer: int) -> None:
        """The layer's "model" work on the compute stream."""
        if self.torch is not None:
            with self.torch.cuda.stream(self.stream_obj):
                for _ in range(self.matmuls):
                    self.torch.matmul(self.act, self.weight, out=self.out)
        else:
            for _ in range(self.matmuls):
                hip_check(hip.hipMemsetAsync(self.scratch.ptr, layer & 0xFF,
                                             self.scratch.nbytes, self.stream))

    def observe(self, layer: int, block_ids: list[int]) -> None:
        """Copy the layer's blocks ``block_ids`` to the observation buffer
        (stream-ordered: sees what the layer's compute sees)."""
        kv = _address(self.kv[self.names[layer]])
        base = int(self.observed.ptr) + layer * self.blocks * self.block_bytes
        for i, b in enumerate(block_ids):
            hip_check(hip.hipMemcpyAsync(base + i * self.block_bytes, kv + b * self.block_bytes,
                                         self.block_bytes,
                                         hip.hipMemcpyKind.hipMemcpyDeviceToDevice,
                                         self.stream))

    def produce(self, layer: int, block_ids: list[int]) -> None:
        """Fill the layer's blocks ``block_ids`` with :func:`pattern` on the
        compute stream (the new KV a pass computes)."""
        kv = _address(self.kv[self.names[layer]])
        for i, b in enumerate(block_ids):
            hip_check(hip.hipMemsetAsync(kv + b * self.block_bytes, pattern(layer, i),
                                         self.block_bytes, self.stream))

    def synchronize(self) -> None:
        """Wait for the compute stream."""
        hip_check(hip.hipStreamSynchronize(self.stream))

    def observed_bytes(self, layer: int, nblocks: int) -> np.ndarray:
        """The observation buffer's bytes of ``layer`` (host copy)."""
        out = np.empty(nblocks * self.block_bytes, np.uint8)
        base = int(self.observed.ptr) + layer * self.blocks * self.block_bytes
        hip_check(hip.hipMemcpy(out, base, out.nbytes,
                                hip.hipMemcpyKind.hipMemcpyDeviceToHost))
        return out

    def close(self) -> None:
        """Free the device memory and the stream."""
        if self.torch is not None:
            self.kv.clear()
        else:
            for kv in self.kv.values():
                kv.free()
            self.kv.clear()
            if self.scratch is not None:
                self.scratch.free()
                self.scratch = None
            if getattr(self, "stream", None) is not None:
                hip_check(hip.hipStreamSynchronize(self.stream))
                hip_check(hip.hipStreamDestroy(self.stream))
                self.stream = None
        if self.observed is not None:
            self.observed.free()
            self.observed = None


def pattern(layer: int, index: int) -> int:
    """The byte the fake model writes into a saved block."""
    return (layer * 31 + index * 7 + 1) & 0xFF


def _address(obj: Any) -> int:
    if hasattr(obj, "data_ptr"):
        return int(obj.data_ptr())
    return int(obj)


def _torch_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def collect_finished(connector: HipFileKVConnector, finished_req_ids: set[str],
                     timeout: float = 30.0) -> tuple[set[str], set[str]]:
    """Call :meth:`~HipFileKVConnector.get_finished` until every load has
    been reported (a stream released by a load can run a moment before the
    host sees the load done); returns the union of ``(saved, loaded)``."""
    saved: set[str] = set()
    loaded: set[str] = set()
    deadline = time.monotonic() + timeout
    while True:
        s, r = connector.get_finished(finished_req_ids)
        saved |= s or set()
        loaded |= r or set()
        if not connector.loading:
            return saved, loaded
        if time.monotonic() > deadline:
            raise TimeoutError(f"loads of {sorted(connector.loading)} not finished")
        time.sleep(0.0005)


def forward_pass(model: FakeModel, connector: HipFileKVConnector,
                 meta: HipFileConnectorMetadata, *, observe: bool = True) -> None:
    """One pass of vLLM's worker: bind, load, the layers with their waits and
    saves, wait for the saves, clear."""
    loads = [r for r in meta.requests if r.load]
    saves = [r for r in meta.requests if r.save]
    connector.bind_connector_metadata(meta)
    try:
        ctx = model.context()
        connector.start_load_kv(ctx)
        for i, name in enumerate(model.names):
            connector.wait_for_layer_load(name)
            if observe:
                for r in loads:
                    model.observe(i, r.block_ids)
            model.compute(i)
            for r in saves:
                model.produce(i, r.block_ids)
            connector.save_kv_layer(name, model.kv[name], ctx.attn_metadata)
        connector.wait_for_save()
    finally:
        connector.clear_connector_metadata()




def write_request_file(root: str, req_id: str, layers: int, nblocks: int, block_bytes: int,
                       seed: int = 7) -> np.ndarray:
    """A stored request: random bytes for ``nblocks`` blocks of every layer."""
    data = np.random.default_rng(seed).integers(0, 256, layers * nblocks * block_bytes,
                                                dtype=np.uint8)
    with open(os.path.join(root, f"{req_id}.kv"), "wb") as f:
        f.write(data.tobytes())
    return data
