"""The spec vLLM's ``OffloadingSpecFactory`` makes from ``kv_connector_extra_config``."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from typing import Any

from vllm.v1.kv_offload.base import CanonicalKVCaches, OffloadingSpec
from vllm.v1.kv_offload.config import OffloadingConfig
from vllm.v1.kv_offload.file_mapper import FileMapper

from hipfile.integrations.vllm._manager import HipFileOffloadingManager
from hipfile.integrations.vllm._worker import HipFileOffloadingWorker

__all__ = ["HipFileOffloadingSpec"]


def _positive_int(extra: Mapping[str, Any], name: str) -> int:
    value = extra.get(name)
    if value is None:
        raise ValueError(f"kv_connector_extra_config needs {name!r} (a number of bytes)")
    if isinstance(value, bool):
        raise ValueError(f"{name!r} must be a positive integer, not {value!r}")
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name!r} must be a positive integer, not {value!r}") from None
    if n <= 0 or (n != value and str(n) != str(value).strip()):
        raise ValueError(f"{name!r} must be a positive integer, not {value!r}")
    return n


def _writable_root(extra: Mapping[str, Any]) -> str:
    root = extra.get("root_dir")
    if not isinstance(root, (str, os.PathLike)) or not os.fspath(root):
        raise ValueError("kv_connector_extra_config needs 'root_dir' (a directory path)")
    root = os.path.abspath(os.fspath(root))
    try:
        os.makedirs(root, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".hipfile-probe-", dir=root)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise ValueError(f"root_dir {root!r} is not a writable directory: {e}") from e
    return root


class HipFileOffloadingSpec(OffloadingSpec):  # type: ignore[misc]
    """KV chunks offloaded to files under ``root_dir`` with hipfile's engine.

    ``kv_connector_extra_config`` keys: ``spec_name`` =
    ``"HipFileOffloadingSpec"``, ``spec_module_path`` =
    ``"hipfile.integrations.vllm"``, ``root_dir`` (made if absent; must be
    writable), ``max_bytes`` (the cap on the files, all ranks counted), and
    vLLM's ``block_size`` or ``blocks_per_chunk`` (tokens or GPU blocks per
    file). Files are laid out by vLLM's ``FileMapper``, one per chunk and rank.

    Raises
    ------
    ValueError
        No ``root_dir`` or one that cannot be written, ``max_bytes`` missing or
        not positive or smaller than one chunk, a ``block_size`` that is not
        ``blocks_per_chunk`` GPU blocks of every group.
    """

    def __init__(self, config: OffloadingConfig) -> None:
        super().__init__(config)
        extra = self.extra_config
        self.root_dir = _writable_root(extra)
        self.max_bytes = _positive_int(extra, "max_bytes")
        if self.blocks_per_chunk <= 0:
            raise ValueError(f"blocks_per_chunk must be positive, not {self.blocks_per_chunk}")
        tokens = extra.get("block_size")
        if tokens is not None:
            for group in config.groups:
                if int(tokens) != group.tokens_per_block * self.blocks_per_chunk:
                    raise ValueError(
                        f"block_size {tokens} is not blocks_per_chunk ({self.blocks_per_chunk})"
                        f" GPU blocks of {group.tokens_per_block} tokens")
        self.bytes_per_key = max(1, config.worker_kv_bytes_per_block * self.blocks_per_chunk)
        ranks = max(1, config.parallel.world_size)
        if self.bytes_per_key * ranks > self.max_bytes:
            raise ValueError(f"max_bytes {self.max_bytes} is less than one chunk "
                             f"({self.bytes_per_key} bytes x {ranks} ranks)")
        self.file_mapper = FileMapper.from_offloading_spec(
            self.root_dir, self, blocks_per_file=self.blocks_per_chunk)
        self._manager: HipFileOffloadingManager | None = None
        self._worker: HipFileOffloadingWorker | None = None

    def _write_run_config(self) -> None:
        """``config.json`` beside the chunk folders, as vLLM's file layout has it."""
        path = self.file_mapper.get_config_file_path()
        if os.path.exists(path):
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".config-", dir=os.path.dirname(path))
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(self.file_mapper.get_run_config(), f, indent=2, sort_keys=True)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise

    def get_manager(self) -> HipFileOffloadingManager:
        """The scheduler side (made once): the index of the files under the root."""
        if self._manager is None:
            self._write_run_config()
            self._manager = HipFileOffloadingManager(
                self.file_mapper, world_size=self.config.parallel.world_size,
                bytes_per_key=self.bytes_per_key, max_bytes=self.max_bytes,
                enable_events=self.kv_events_config.enable_kv_cache_events)
        return self._manager

    def get_worker(self, kv_caches: CanonicalKVCaches) -> HipFileOffloadingWorker:
        """The worker side (made once): moves chunks between the KV caches and files."""
        if self._worker is None:
            self._worker = HipFileOffloadingWorker(self.file_mapper, self.blocks_per_chunk)
        return self._worker
