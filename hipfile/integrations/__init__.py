"""Integrations of the package with serving frameworks.

Each integration lives in its own subpackage and imports its framework only
when that subpackage is imported: :mod:`hipfile.integrations.vllm` (vLLM's
KV-cache offloading, ``pip install 'hipfile[vllm]'``).
"""
