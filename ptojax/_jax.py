"""Every JAX extension API ptojax touches, in one place (``jax.extend`` has no stability promise)."""
from jax._src import source_info_util as _source_info
from jax.core import ShapedArray
from jax.extend.core import ClosedJaxpr, Jaxpr, Literal, Primitive, Var, jaxprs_in_params
from jax.interpreters import ad, batching, mlir, xla


def source_summary(source_info) -> str:
    """``file.py:12 (fn)`` for an eqn's ``source_info``: the user frame that traced it."""
    try:
        return _source_info.summarize(source_info)
    except Exception:  # noqa: BLE001 - a private helper; never let a message builder fail
        return "<unknown source>"


__all__ = [
    "ClosedJaxpr", "Jaxpr", "Literal", "Primitive", "ShapedArray", "Var", "ad", "batching",
    "jaxprs_in_params", "mlir", "source_summary", "xla",
]
