"""Every JAX extension API ptojax touches, in one place (``jax.extend`` has no stability promise)."""
from jax._src import callback as _callback
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


def host_call_lowering(ctx, host, *operands):
    """Lower a call of ``host(*arrays) -> tuple of arrays`` (pure, results of ``ctx.avals_out``) as
    ``jax.pure_callback``'s lowering does, minus its copy of every operand into a new ``jax.Array``:
    ``host`` gets XLA's read-only NumPy arrays (a 300 MB KV cache would otherwise be copied per call)."""
    sharding = _callback._callback_op_sharding(ctx.module_context.axis_context, None, ctx.avals_out)
    results, _, _ = _callback.emit_python_callback(ctx, host, None, list(operands), ctx.avals_in, ctx.avals_out,
                                                   has_side_effect=False, returns_token=False, sharding=sharding)
    return results


__all__ = [
    "ClosedJaxpr", "Jaxpr", "Literal", "Primitive", "ShapedArray", "Var", "ad", "batching", "host_call_lowering",
    "jaxprs_in_params", "mlir", "source_summary", "xla",
]
