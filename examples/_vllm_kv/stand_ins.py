"""Stand-ins for vLLM's objects (no vLLM import) and the block-range arithmetic."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from _support import hip_check
from hip import hip

# ----------------------------------------------------------------------------------------
# Stand-ins for vLLM's objects
# ----------------------------------------------------------------------------------------


class DeviceKV:
    """A layer's paged KV buffer in device memory (stands in for the
    ``torch.Tensor`` vLLM passes): ``nbytes`` bytes from ``hipMalloc``,
    exposed through ``__cuda_array_interface__``."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self.ptr = hip_check(hip.hipMalloc(nbytes))

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"shape": (self.nbytes,), "typestr": "|u1", "data": (int(self.ptr), False),
                "strides": None, "version": 3}

    def data_ptr(self) -> int:
        """The device address (the ``torch.Tensor`` name)."""
        return int(self.ptr)

    def free(self) -> None:
        """Give the memory back (idempotent)."""
        if self.ptr is not None:
            hip_check(hip.hipFree(self.ptr))
            self.ptr = None


class AttentionLayer:
    """vLLM's attention layer as the connector sees it: ``kv_cache`` holds
    one paged buffer per virtual engine."""

    def __init__(self, kv_cache: list[Any]) -> None:
        self.kv_cache = kv_cache


class ForwardContext:
    """vLLM's ``ForwardContext``: the layers by name, the attention metadata
    and the virtual engine of this pass."""

    def __init__(self, no_compile_layers: dict[str, AttentionLayer], attn_metadata: Any = None,
                 virtual_engine: int = 0) -> None:
        self.no_compile_layers = no_compile_layers
        self.attn_metadata = attn_metadata
        self.virtual_engine = virtual_engine


class ReqMeta:
    """One request of a step: its KV blocks in the paged buffers, and
    whether the step loads them from storage or saves them to it."""

    def __init__(self, req_id: str, block_ids: list[int], load: bool = False,
                 save: bool = False) -> None:
        self.req_id = req_id
        self.block_ids = list(block_ids)
        self.load = load
        self.save = save


class HipFileConnectorMetadata:
    """What vLLM's scheduler-side connector binds to the worker for a step
    (``KVConnectorMetadata``)."""

    def __init__(self, requests: list[ReqMeta] | None = None) -> None:
        self.requests = list(requests or [])


def coalesce(block_ids: Iterable[int], block_bytes: int,
             file_base: int) -> list[tuple[int, int, int]]:
    """Engine ranges ``(size, file_offset, buffer_offset)`` for a request's
    blocks: block *i* of the request at ``file_base + i * block_bytes`` in
    the file, block ``block_ids[i]`` in the paged buffer; neighbours on both
    sides merge into one range."""
    ranges: list[list[int]] = []
    for i, b in enumerate(block_ids):
        foff, boff = file_base + i * block_bytes, b * block_bytes
        if ranges and ranges[-1][1] + ranges[-1][0] == foff and \
                ranges[-1][2] + ranges[-1][0] == boff:
            ranges[-1][0] += block_bytes
        else:
            ranges.append([block_bytes, foff, boff])
    return [(s, f, o) for s, f, o in ranges]
