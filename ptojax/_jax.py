"""Every JAX extension API ptojax touches, in one place (``jax.extend`` has no stability promise)."""
from jax.core import ShapedArray
from jax.extend.core import ClosedJaxpr, Jaxpr, Literal, Primitive, Var, jaxprs_in_params
from jax.interpreters import ad, batching, mlir, xla

__all__ = [
    "ClosedJaxpr", "Jaxpr", "Literal", "Primitive", "ShapedArray", "Var", "ad", "batching",
    "jaxprs_in_params", "mlir", "xla",
]
