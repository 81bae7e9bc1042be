"""Parts of ``vllm_kv_connector.py``: stand-ins for vLLM's objects and a tiny fake model."""
