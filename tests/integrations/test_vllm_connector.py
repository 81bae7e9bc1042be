"""vLLM's own ``OffloadingConnector`` over hipfile's spec, request by request.

vLLM's ``Scheduler`` owns the scheduler-side connector (lookups, block
allocation, store and load jobs, completions, finished requests); a
worker-side connector has the KV caches of a tiny model registered with
``register_kv_caches``. Each engine step does what vLLM's model runner does
around a forward pass (``handle_preemptions``, ``bind_connector_metadata``,
``start_load_kv``, ``wait_for_save``, ``get_transfer_results``,
``build_connector_worker_meta``), the forward pass itself writing random
bytes into the KV slots of the tokens it computes. The model is a config
directory written by the test: no weights, no tokenizer, no network."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import torch
from _vllm import device_tensor

from vllm import SamplingParams  # isort: skip
from vllm.config import (  # isort: skip
    CacheConfig,
    DeviceConfig,
    KVTransferConfig,
    ModelConfig,
    SchedulerConfig,
    VllmConfig,
    set_current_vllm_config,
)
from vllm.distributed.kv_transfer.kv_connector.v1 import KVConnectorRole  # isort: skip
from vllm.distributed.kv_transfer.kv_connector.v1.offloading_connector import (  # isort: skip
    OffloadingConnector,
)
from vllm.utils.hashing import sha256  # isort: skip
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash  # isort: skip
from vllm.v1.core.sched.scheduler import Scheduler  # isort: skip
from vllm.v1.kv_cache_interface import (  # isort: skip
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
)
from vllm.v1.outputs import KVConnectorOutput, ModelRunnerOutput  # isort: skip
from vllm.v1.request import Request  # isort: skip
from vllm.v1.structured_output import StructuredOutputManager  # isort: skip

TOKENS = 16            # tokens per GPU block
HEADS, HEAD = 2, 16    # KV heads and head size of the tiny model
LAYERS = [f"model.layers.{i}.self_attn.attn" for i in range(2)]
NUM_BLOCKS = 48
CHUNK = 2              # GPU blocks per file
PREFIX = 4 * TOKENS    # the prompt both requests share: 4 blocks, 2 files

SCHEDULER_CALLS = ("get_num_new_matched_tokens", "update_state_after_alloc",
                   "build_connector_meta", "update_connector_output", "request_finished",
                   "request_finished_all_groups")


def tiny_model(path: Path) -> Path:
    """A Llama config with 2 layers of 2 KV heads x 16 (fp16); nothing else."""
    path.mkdir()
    (path / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": HEADS * 2 * HEAD, "num_attention_heads": 2 * HEADS,
        "num_key_value_heads": HEADS, "num_hidden_layers": len(LAYERS),
        "intermediate_size": 128, "vocab_size": 256, "max_position_embeddings": 1024,
        "torch_dtype": "float16"}))
    return path


def vllm_config(tmp_path: Path, **extra: Any) -> VllmConfig:
    """The configuration of a server offloading to hipfile under ``tmp_path/kv``."""
    model = ModelConfig(model=str(tiny_model(tmp_path / "model")), skip_tokenizer_init=True,
                        dtype="float16", seed=0)
    scheduler = SchedulerConfig(max_num_seqs=4, max_num_batched_tokens=1024,
                                max_model_len=1024, enable_chunked_prefill=True,
                                is_encoder_decoder=False)
    scheduler.async_scheduling = False
    transfer = KVTransferConfig(
        kv_connector="OffloadingConnector", kv_role="kv_both",
        kv_load_failure_policy="recompute",
        kv_connector_extra_config={
            "spec_name": "HipFileOffloadingSpec",
            "spec_module_path": "hipfile.integrations.vllm",
            "root_dir": str(tmp_path / "kv"), "max_bytes": 1 << 30,
            "block_size": CHUNK * TOKENS, **extra})
    config = VllmConfig(model_config=model, scheduler_config=scheduler,
                        cache_config=CacheConfig(block_size=TOKENS, enable_prefix_caching=True),
                        kv_transfer_config=transfer, device_config=DeviceConfig("cpu"))
    config.cache_config.num_gpu_blocks = NUM_BLOCKS
    return config


class Engine:
    """A scheduler, a worker-side connector and the KV caches of the tiny
    model (one ``(blocks, K/V, tokens, heads, head)`` fp16 tensor per layer
    in device memory of hipfile's platform)."""

    def __init__(self, tmp_path: Path, stack: contextlib.ExitStack) -> None:
        config = vllm_config(tmp_path)
        spec = FullAttentionSpec(block_size=TOKENS, num_kv_heads=HEADS, head_size=HEAD,
                                 dtype=torch.float16)
        kv_cache_config = KVCacheConfig(num_blocks=NUM_BLOCKS, kv_cache_tensors=[],
                                        kv_cache_groups=[KVCacheGroupSpec(LAYERS, spec)])
        self.root = tmp_path / "kv"
        self.scheduler = Scheduler(vllm_config=config, kv_cache_config=kv_cache_config,
                                   structured_output_manager=StructuredOutputManager(config),
                                   block_size=TOKENS, log_stats=True)
        connector = self.scheduler.connector
        assert isinstance(connector, OffloadingConnector)
        self.calls = {name: stack.enter_context(mock.patch.object(
            connector, name, wraps=getattr(connector, name))) for name in SCHEDULER_CALLS}
        stack.callback(self.scheduler.shutdown)
        self.kv = {name: stack.enter_context(
            device_tensor((NUM_BLOCKS, 2, TOKENS, HEADS, HEAD), torch.float16))
            for name in LAYERS}
        self.worker = OffloadingConnector(config, KVConnectorRole.WORKER, kv_cache_config)
        stack.callback(self.worker.shutdown)        # before the KV caches are freed
        for t in self.kv.values():
            t.view(torch.uint8).zero_()
        with set_current_vllm_config(config):
            self.worker.register_kv_caches(self.kv)
        init_none_hash(sha256)
        self._hasher = get_request_block_hasher(TOKENS, sha256)
        self._rng = np.random.default_rng(0)
        self.before_load: Callable[[Any], None] | None = None   # called with the metadata
        self.on_results: Callable[[Any], None] | None = None    # ... with the transfer results
        self.scheduled: dict[str, list[int]] = {}    # request -> tokens scheduled per step

    def add(self, req_id: str, prompt: list[int], max_tokens: int = 2) -> Request:
        req = Request(request_id=req_id, prompt_token_ids=prompt,
                      sampling_params=SamplingParams(max_tokens=max_tokens, ignore_eos=True),
                      pooling_params=None, block_hasher=self._hasher)
        self.scheduler.add_request(req)
        return req

    def blocks(self, req_id: str) -> list[int]:
        return list(self.scheduler.kv_cache_manager.get_block_ids(req_id)[0])

    def page(self, block: int) -> bytes:
        """The bytes of one KV block, every layer in turn."""
        return b"".join(t[block].view(torch.uint8).numpy().tobytes() for t in self.kv.values())

    def _forward(self, out: Any) -> ModelRunnerOutput:
        """Write random KV for every token the step computes; sample token 7
        for a request whose prompt is then complete."""
        ids, sampled = [], []
        for req_id, n in out.num_scheduled_tokens.items():
            req = self.scheduler.requests[req_id]
            self.scheduled.setdefault(req_id, []).append(n)
            blocks = self.blocks(req_id)
            end = req.num_computed_tokens     # already advanced by schedule()
            for pos in range(end - n, end):
                for t in self.kv.values():
                    slot = t[blocks[pos // TOKENS], :, pos % TOKENS].view(torch.uint8)
                    slot.copy_(torch.from_numpy(self._rng.integers(
                        0, 256, slot.shape, dtype=np.uint8)))
            ids.append(req_id)
            done = end >= req.num_tokens
            sampled.append([7] if done else [])
        return ModelRunnerOutput(req_ids=ids, sampled_token_ids=sampled)

    def step(self) -> ModelRunnerOutput:
        """One engine step, the connector calls in the order of vLLM's model runner."""
        out = self.scheduler.schedule()
        meta = out.kv_connector_metadata
        self.worker.handle_preemptions(meta)
        self.worker.bind_connector_metadata(meta)
        if self.before_load is not None:
            self.before_load(meta)
        if out.has_sync_kv_loads:
            self.worker.start_load_kv(None)     # the connector takes no forward context
        result = self._forward(out)
        if not out.has_sync_kv_loads:
            self.worker.start_load_kv(None)     # the connector takes no forward context
        self.worker.wait_for_save()
        got = self.worker.get_transfer_results(out.finished_req_ids)
        if self.on_results is not None:
            self.on_results(got)
        result.kv_connector_output = KVConnectorOutput(
            finished_sending=got.finished_sending or None,
            finished_recving=got.finished_recving or None,
            failed_recving=got.failed_recving,
            invalid_block_ids=self.worker.get_block_ids_with_load_errors(),
            kv_connector_worker_meta=self.worker.build_connector_worker_meta())
        self.worker.clear_connector_metadata()
        self.scheduler.update_from_output(out, result)
        return result

    def run(self, until: Callable[[], bool], timeout: float = 60) -> None:
        """Step until ``until()``, letting the engine's threads work between steps."""
        deadline = time.monotonic() + timeout
        while not until():
            assert time.monotonic() < deadline, "the engine never got there"
            self.step()
            time.sleep(0.002)

    def idle(self) -> bool:
        """No request left and no transfer in flight."""
        sched = self.scheduler
        conn = sched.connector
        assert isinstance(conn, OffloadingConnector)
        worker = self.worker.connector_worker
        assert worker is not None and worker.worker is not None
        return (not sched.requests and not conn.has_pending_push_work()
                and not worker._load_jobs and not worker.worker._transfers)

    def files(self) -> list[Path]:
        return sorted(p for p in self.root.rglob("*.bin"))


@contextlib.contextmanager
def engine(tmp_path: Path) -> Iterator[Engine]:
    with contextlib.ExitStack() as stack:
        yield Engine(tmp_path, stack)


def first_request(e: Engine, prompt: list[int]) -> tuple[list[int], list[bytes]]:
    """Run request "a" to its end and until its blocks are stored; the block
    ids and bytes of its prompt's full blocks, as its forward pass left them."""
    e.add("a", prompt)
    seen: list[tuple[list[int], list[bytes]]] = []

    def finished() -> bool:
        req = e.scheduler.requests.get("a")
        if req is not None and req.num_computed_tokens >= PREFIX and not seen:
            blocks = e.blocks("a")[: PREFIX // TOKENS]
            seen.append((blocks, [e.page(b) for b in blocks]))
        return req is None

    e.run(finished)
    e.run(e.idle)
    return seen[0]


def forget(e: Engine) -> None:
    """Drop the GPU prefix cache and zero every KV block: from now on a
    block holds the prefix's bytes only if a load put them there."""
    assert e.scheduler.reset_prefix_cache()
    for t in e.kv.values():
        t.view(torch.uint8).zero_()


def test_a_second_request_loads_the_first_ones_blocks_byte_exact(tmp_path: Path) -> None:
    prompt = list(range(1, PREFIX + 1))
    with engine(tmp_path) as e:
        a_blocks, pages = first_request(e, [*prompt, 200, 201])
        assert len(e.files()) == PREFIX // TOKENS // CHUNK     # 2 files of 2 blocks
        assert len(set(pages)) == len(pages)
        forget(e)
        e.add("b", [*prompt, 300, 301, 302, 303, 304])
        e.run(lambda: "b" in e.scheduled)
        assert e.scheduled["b"][0] == 5          # the prefix came from the files
        b_blocks = e.blocks("b")[: PREFIX // TOKENS]
        assert not set(b_blocks) & set(a_blocks), (a_blocks, b_blocks)
        for i, b in enumerate(b_blocks):
            assert e.page(b) == pages[i], f"block {i} of the prefix (block id {b})"
        e.run(lambda: "b" not in e.scheduler.requests)
        e.run(e.idle)
    called = {name for name, call in e.calls.items() if call.called}
    assert called >= set(SCHEDULER_CALLS[:4]), called
    assert called & {"request_finished", "request_finished_all_groups"}


def test_a_file_cut_between_lookup_and_load_fails_the_load_and_the_prefix_is_recomputed(
        tmp_path: Path) -> None:
    prompt = list(range(1, PREFIX + 1))
    with engine(tmp_path) as e:
        first_request(e, [*prompt, 200, 201])
        forget(e)
        zero = b"\0" * (len(LAYERS) * 2 * TOKENS * HEADS * HEAD * 2)
        cut: list[Path] = []
        failed: list[bool] = []

        def cut_second_file(meta: Any) -> None:      # after the lookup, before the load
            if meta.load_jobs and not cut:
                cut.append(e.files()[1])
                with open(cut[0], "r+b") as f:
                    f.truncate(cut[0].stat().st_size // 2)

        def nothing_written(got: Any) -> None:
            if "b" in got.failed_recving:
                failed.append(all(e.page(b) == zero for b in e.blocks("b")))

        e.before_load, e.on_results = cut_second_file, nothing_written
        e.add("b", [*prompt, 300, 301, 302, 303, 304])
        e.run(lambda: "b" in e.scheduled)
        assert cut and failed == [True]        # reported once; no byte reached a block
        assert sum(e.scheduled["b"]) == PREFIX + 5 and e.scheduled["b"][0] == PREFIX + 5
        e.run(lambda: "b" not in e.scheduler.requests)
        e.run(e.idle)
        forget(e)      # a third request: the cut file misses (and is dropped)
        e.add("c", [*prompt, 400, 401])
        e.run(lambda: "c" in e.scheduled)
        assert e.scheduled["c"][0] >= PREFIX // 2 + 2
        e.run(lambda: "c" not in e.scheduler.requests)
        e.run(e.idle)
        assert cut[0].stat().st_size == e.files()[0].stat().st_size   # stored again


def test_a_server_started_over_the_same_root_loads_what_the_first_one_stored(
        tmp_path: Path) -> None:
    prompt = list(range(1, PREFIX + 1))
    with engine(tmp_path) as e:
        _, pages = first_request(e, [*prompt, 200, 201])
    (tmp_path / "model").rename(tmp_path / "model-1")
    with engine(tmp_path) as e2:
        e2.add("b", [*prompt, 300, 301])
        e2.run(lambda: "b" in e2.scheduled)
        assert e2.scheduled["b"][0] == 2
        assert [e2.page(b) for b in e2.blocks("b")[: PREFIX // TOKENS]] == pages
        e2.run(lambda: "b" not in e2.scheduler.requests)
        e2.run(e2.idle)
