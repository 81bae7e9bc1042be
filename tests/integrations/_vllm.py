"""What the vLLM integration tests share: vLLM imported (or a skip that
says how to install it; a failure where ``CI=true``), and the configuration
vLLM hands an offloading spec, built from vLLM's own config classes."""

from __future__ import annotations

import ctypes
import os
import uuid
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

try:
    with warnings.catch_warnings():     # vLLM's and torch's own import-time warnings
        warnings.simplefilter("ignore")
        import torch
        import vllm.v1.kv_offload.factory
        import vllm.v1.kv_offload.fs.worker  # noqa: F401

        import hipfile.integrations.vllm  # noqa: F401
except ImportError as e:
    if os.environ.get("CI") == "true":
        raise ImportError(f"the vLLM tests must run in CI: {e}") from e
    pytest.skip(f"vLLM is absent ({e}): pip install 'hipfile[vllm]'",
                allow_module_level=True)

from vllm.v1.kv_offload.config import (
    OffloadingCacheConfig,
    OffloadingConfig,
    OffloadingGroupConfig,
    OffloadingModelConfig,
    OffloadingParallelConfig,
)
from vllm.v1.kv_offload.factory import OffloadingSpecFactory

SPEC = {"spec_name": "HipFileOffloadingSpec", "spec_module_path": "hipfile.integrations.vllm"}


def make_config(root: Path | str | None, *, max_bytes: Any = 1 << 30, blocks_per_chunk: int = 4,
                tokens_per_block: int = 16, groups: Sequence[Sequence[str]] = (("l0", "l1"),),
                bytes_per_block: int = 4096, world_size: int = 1, rank: int = 0,
                events: bool = True, **extra: Any) -> OffloadingConfig:
    """The ``OffloadingConfig`` vLLM makes for a model with these KV groups."""
    ec: dict[str, Any] = dict(SPEC)
    if root is not None:
        ec["root_dir"] = str(root)
    if max_bytes is not None:
        ec["max_bytes"] = max_bytes
    ec.update(extra)
    return OffloadingConfig(
        groups=tuple(OffloadingGroupConfig(tokens_per_block=tokens_per_block,
                                           layer_names=tuple(names), group_id=i)
                     for i, names in enumerate(groups)),
        worker_kv_bytes_per_block=bytes_per_block,
        enable_kv_cache_events=events,
        extra_config=ec,
        engine_id=str(uuid.uuid4()),
        model=OffloadingModelConfig(name="org/tiny-model", dtype="float16"),
        cache=OffloadingCacheConfig(tokens_per_hash=tokens_per_block,
                                    blocks_per_chunk=blocks_per_chunk),
        parallel=OffloadingParallelConfig(
            rank=rank, world_size=world_size, tp_size=world_size, pp_size=1, pcp_size=1,
            dcp_size=1, data_parallel_index=0, data_parallel_size=1,
            data_parallel_rank_local=None, is_parallelism_agnostic=False),
    )


def make_spec(root: Path | str | None, **kw: Any) -> Any:
    """The spec vLLM's own factory makes from the configuration."""
    return OffloadingSpecFactory.create_spec(make_config(root, **kw))


@contextmanager
def device_tensor(shape: Sequence[int], dtype: torch.dtype = torch.float16) -> Iterator[Any]:
    """A torch tensor over device memory of hipfile's platform (hipMalloc;
    on the emulated platform device memory is host memory, so torch's CPU
    build can view it)."""
    from _util import check
    from hip import hip

    n = 1
    for s in shape:
        n *= s
    nbytes = n * torch.empty((), dtype=dtype).element_size()
    ptr = check(hip.hipMalloc(nbytes))
    try:
        raw = (ctypes.c_uint8 * nbytes).from_address(int(ptr))
        t = torch.frombuffer(raw, dtype=torch.uint8).view(dtype).view(*shape)
        yield t
    finally:
        check(hip.hipFree(ptr))


class KVCaches:
    """KV caches of several groups in device memory, canonical as vLLM hands
    them to a spec's ``get_worker``: one (blocks, page) uint8 tensor per layer."""

    def __init__(self, stack: Any, layers_per_group: Sequence[int], num_blocks: int,
                 pages: Sequence[int]) -> None:
        from vllm.v1.kv_offload.base import (
            CanonicalKVCacheRef,
            CanonicalKVCaches,
            CanonicalKVCacheTensor,
        )

        tensors, refs = [], []
        for layers, page in zip(layers_per_group, pages, strict=True):
            group = []
            for _ in range(layers):
                t = stack.enter_context(device_tensor((num_blocks, page), torch.uint8))
                t.copy_(torch.randint(0, 256, (num_blocks, page), dtype=torch.uint8))
                group.append(CanonicalKVCacheRef(tensor_idx=len(tensors), page_size_bytes=page))
                tensors.append(CanonicalKVCacheTensor(tensor=t, page_size_bytes=page))
            refs.append(group)
        self.canonical = CanonicalKVCaches(tensors=tensors, group_data_refs=refs)
        self.layers = [[tensors[r.tensor_idx].tensor for r in g] for g in refs]

    def pointers(self, block_ids: Sequence[Sequence[int]],
                 block_indices: Sequence[int] | None = None) -> Any:
        """vLLM's ``DevicePointers`` of these blocks, one list per group."""
        from vllm.v1.kv_offload.base import GPULoadStoreSpec
        from vllm.v1.kv_offload.pointer_utils import resolve_device_pointers

        spec = GPULoadStoreSpec([b for g in block_ids for b in g],
                                group_sizes=[len(g) for g in block_ids],
                                block_indices=list(block_indices or [0] * len(block_ids)))
        return resolve_device_pointers(spec, self.canonical)


def finish(worker: Any, job_ids: set[int], timeout: float = 60) -> dict[int, Any]:
    """Poll ``get_finished`` until every job in ``job_ids`` is reported; each
    id must be reported once."""
    import time

    got: dict[int, Any] = {}
    deadline = time.monotonic() + timeout
    while set(got) != job_ids:
        for r in worker.get_finished():
            assert r.job_id not in got, f"job {r.job_id} reported twice"
            assert r.job_id in job_ids, f"job {r.job_id} was not submitted"
            got[r.job_id] = r
        assert time.monotonic() < deadline, f"jobs {job_ids - set(got)} never finished"
        time.sleep(0.002)
    return got
