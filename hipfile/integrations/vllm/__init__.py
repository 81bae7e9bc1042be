"""vLLM's KV-cache offloading on hipfile: a file medium for ``vllm.v1.kv_offload``.

Turn it on with configuration alone::

    kv_transfer_config = {
        "kv_connector": "OffloadingConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {
            "spec_name": "HipFileOffloadingSpec",
            "spec_module_path": "hipfile.integrations.vllm",
            "root_dir": "/mnt/kv",
            "max_bytes": 200 << 30,
            "block_size": 256,
        },
    }

vLLM's ``OffloadingSpecFactory`` imports this module and makes a
:class:`HipFileOffloadingSpec`, whose scheduler side is a
:class:`HipFileOffloadingManager` and whose worker side is a
:class:`HipFileOffloadingWorker`. Importing this module needs vLLM
(``pip install 'hipfile[vllm]'``).
"""

from __future__ import annotations

try:
    import vllm.v1.kv_offload.fs.worker  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "hipfile.integrations.vllm needs vLLM 0.34 or later: pip install 'hipfile[vllm]'"
    ) from e

from hipfile.integrations.vllm._manager import HipFileOffloadingManager
from hipfile.integrations.vllm._spec import HipFileOffloadingSpec
from hipfile.integrations.vllm._worker import HipFileOffloadingWorker

__all__ = ["HipFileOffloadingManager", "HipFileOffloadingSpec", "HipFileOffloadingWorker"]
