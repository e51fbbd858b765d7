"""DeepSeek-V3.2-Exp sparse attention (DSA) on ptojax: the Indexer Prolog, the Lightning Indexer with
top-k and sparse attention, as plain-JAX references (:mod:`.reference`) and ptojax kernels
(:mod:`.kernels`) with CANN's ``lightning_indexer_prolog`` / ``quant_lightning_indexer`` interfaces.

Tests: ``tests/test_deepseek.py``; benchmark at the seed article's shape: ``benchmarks/deepseek_v32.py``.
"""
from . import kernels, reference  # noqa: F401
