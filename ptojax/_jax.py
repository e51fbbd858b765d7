"""Every JAX extension API ptojax touches, in one place (``jax.extend`` has no stability promise).

The ``jax.extend.core`` names are taken from ``jax._src.core``, the module that defines them (the
same objects, tests/test_imports.py): importing ``jax.extend`` imports every part of it, Pallas
included, which costs ``import ptojax`` tens of milliseconds."""
from jax._src import callback as _callback
from jax._src import source_info_util as _source_info
from jax._src.core import ClosedJaxpr, Jaxpr, Literal, Primitive, Var, jaxpr_as_fun, jaxprs_in_params
from jax.core import ShapedArray
from jax.interpreters import ad, batching, mlir, xla


def frames(source_info) -> list:
    """The Python frames that traced an eqn, innermost first: ``(file name, function name, line)``
    each, and whether JAX counts the file as the user's (not JAX's own)."""
    tb = source_info.traceback
    return [(f.file_name, f.function_name, f.line_num, _source_info.is_user_filename(f.file_name))
            for f in (tb.frames if tb is not None else ())]


def host_call_lowering(ctx, host, *operands):
    """Lower a call of ``host(*arrays) -> tuple of arrays`` (pure, results of ``ctx.avals_out``) as
    ``jax.pure_callback``'s lowering does, minus its copy of every operand into a new ``jax.Array``:
    ``host`` gets XLA's read-only NumPy arrays (a 300 MB KV cache would otherwise be copied per call)."""
    sharding = _callback._callback_op_sharding(ctx.module_context.axis_context, None, ctx.avals_out)
    results, _, _ = _callback.emit_python_callback(ctx, host, None, list(operands), ctx.avals_in, ctx.avals_out,
                                                   has_side_effect=False, returns_token=False, sharding=sharding)
    return results


__all__ = [
    "ClosedJaxpr", "Jaxpr", "Literal", "Primitive", "ShapedArray", "Var", "ad", "batching", "frames", "host_call_lowering",
    "jaxpr_as_fun", "jaxprs_in_params", "mlir", "xla",
]
