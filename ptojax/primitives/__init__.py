"""PyPTO's op catalogue as JAX primitives (``pto.<name>``), with every rule each op needs."""
from . import cast, composite, elementwise, extrema, indexing, layout, matmul, reduce  # noqa: F401  (registers)
from ._base import ALIASES, OPS, Op, catalogue

__all__ = ["ALIASES", "OPS", "Op", "catalogue"]
