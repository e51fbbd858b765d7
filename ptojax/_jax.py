"""Every JAX extension API ptojax touches, in one place (``jax.extend`` has no stability promise).

The ``jax.extend.core`` names are taken from ``jax._src.core``, the module that defines them (the
same objects, tests/test_imports.py): importing ``jax.extend`` imports every part of it, Pallas
included, which costs ``import ptojax`` tens of milliseconds."""
import contextlib

import jax
import numpy as np
from jax._src import callback as _callback
from jax._src import sharding_impls as _sharding
from jax._src import source_info_util as _source_info
from jax._src.lax.lax import _convert_element_type
from jax._src.core import (ClosedJaxpr, Jaxpr, Literal, ManualAxisType, Primitive, Var, get_cur_mesh_sharding,
                           jaxpr_as_fun, jaxprs_in_params)
from jax._src.lib.mlir import ir
from jax._src.lib.mlir.dialects import hlo
from jax.core import ShapedArray
from jax.interpreters import ad, batching, mlir, xla
from jax.sharding import PartitionSpec as P


def frames(source_info) -> list:
    """The Python frames that traced an eqn, innermost first: ``(file name, function name, line)``
    each, and whether JAX counts the file as the user's (not JAX's own)."""
    tb = source_info.traceback
    return [(f.file_name, f.function_name, f.line_num, _source_info.is_user_filename(f.file_name))
            for f in (tb.frames if tb is not None else ())]


@contextlib.contextmanager
def traced_at(traceback):
    """Within: eqns traced carry ``traceback`` (an eqn's ``source_info.traceback``: the Python frames
    that traced the eqn they stand for) instead of the live stack's; nothing changes for None."""
    context = _source_info._source_info_context
    before = context.context
    if traceback is not None:
        context.context = before.replace(traceback=traceback)
    try:
        yield
    finally:
        context.context = before


def result_aval(shape, dtype, args, weak_type: bool = False) -> ShapedArray:
    """The aval of a call's result: inside ``jax.shard_map``, varying along every manual mesh axis one of
    the call's argument avals ``args`` varies along (no such axis: a plain aval)."""
    varying = frozenset().union(*(a.mat.varying for a in args))
    if not varying:
        return ShapedArray(shape, dtype, weak_type)
    return ShapedArray(shape, dtype, weak_type, sharding=get_cur_mesh_sharding(P(*[None] * len(shape))),
                       manual_axis_type=ManualAxisType(varying=varying))


def vary_alike(*xs) -> tuple:
    """Inside ``jax.shard_map``: ``xs`` each cast to vary along every manual mesh axis one of them varies
    along, as ``jnp``'s binary ops cast their operands (then a ``jax.custom_vjp``'s cotangents, which vary
    as its kernels' results do, match the primals; the cast's transpose sums a replicated weight's)."""
    varying = [jax.typeof(x).mat.varying for x in xs]
    every = frozenset().union(*varying)
    return tuple(jax.lax.pcast(x, tuple(sorted(every - v)), to="varying") for x, v in zip(xs, varying))


def weak_32(x):
    """A weakly typed 64-bit value (a Python number under ``jax_enable_x64``) as its weakly typed 32-bit
    twin: it still gives way to the other operand's dtype (``f16 * 2.5`` stays float16)."""
    dtype = {"f": np.float32, "i": np.int32, "u": np.uint32, "c": np.complex64}[np.dtype(x.dtype).kind]
    return _convert_element_type(x, np.dtype(dtype), weak_type=True)


# JAX's errors of a trace that needed a traced value (Python ``if`` / ``int`` / ``range`` / ``np.asarray`` of it,
# a boolean mask's index: a shape that data decides)
NEEDS_VALUE = (jax.errors.ConcretizationTypeError, jax.errors.TracerIntegerConversionError,
               jax.errors.TracerArrayConversionError, jax.errors.NonConcreteBooleanIndexError)


def weak(x):
    """``x`` weakly typed (a result computed from Python numbers only, as ``jax.jit`` returns it)."""
    return _convert_element_type(x, x.dtype, weak_type=True)


def per_device(ctx):
    """A lowering context whose avals vary along no manual mesh axis: a call's lowering re-traces its
    function per device, where ``jax.shard_map``'s mesh is not current (a varying aval needs it)."""
    plain = lambda avals: [ShapedArray(a.shape, a.dtype, a.weak_type) for a in avals]  # noqa: E731
    return ctx.replace(avals_in=plain(ctx.avals_in), avals_out=plain(ctx.avals_out))


def dims_32(ctx):
    """A lowering context whose dimension variables (``jax.export``'s symbolic sizes: 64-bit under
    ``jax_enable_x64``) are 32-bit, as a body traced with 64-bit values off computes its shapes."""
    i32 = ir.RankedTensorType.get([], ir.IntegerType.get_signless(32))
    return ctx.replace(dim_var_values=[v if v.type == i32 else hlo.convert(i32, v)
                                       for v in ctx.dim_var_values])


def lowered_devices(ctx) -> int:
    """The devices the computation being lowered runs on (a ``jax.shard_map``'s mesh, a sharded
    ``jax.jit``'s devices, ``jax.pmap``'s replicas)."""
    axis = ctx.module_context.axis_context
    if isinstance(axis, _sharding.ShardingContext):
        return axis.num_devices
    if isinstance(axis, _sharding.SPMDAxisContext):
        return axis.mesh.size
    return getattr(getattr(axis, "axis_env", None), "nreps", 1)


def host_call_lowering(ctx, host, *operands):
    """Lower a call of ``host(*arrays) -> tuple of arrays`` (pure, results of ``ctx.avals_out``) as
    ``jax.pure_callback``'s lowering does, minus its copy of every operand into a new ``jax.Array``:
    ``host`` gets XLA's read-only NumPy arrays (a 300 MB KV cache would otherwise be copied per call)."""
    sharding = _callback._callback_op_sharding(ctx.module_context.axis_context, None, ctx.avals_out)
    results, _, _ = _callback.emit_python_callback(ctx, host, None, list(operands), ctx.avals_in, ctx.avals_out,
                                                   has_side_effect=False, returns_token=False, sharding=sharding)
    return results


__all__ = [
    "ClosedJaxpr", "Jaxpr", "NEEDS_VALUE", "dims_32", "Literal", "Primitive", "ShapedArray", "Var", "ad", "batching",
    "frames", "host_call_lowering", "jaxpr_as_fun", "jaxprs_in_params", "lowered_devices", "mlir", "per_device",
    "result_aval", "vary_alike", "weak", "weak_32", "xla",
]
