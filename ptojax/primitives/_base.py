"""Shared machinery of the op catalogue: dtype classes, argument checks, the op registry.

An op is one JAX primitive named ``pto.<name>`` with: an abstract-eval shape/dtype rule that raises
ptojax errors, a reference implementation written in ``jax.numpy``/``lax`` (the eager path and the
MLIR lowering both use it), a batching rule and, where the math is differentiable, JVP and transpose
rules. :func:`define` creates the primitive and records it in :data:`OPS`.
"""
from __future__ import annotations

import dataclasses
from functools import partial
from typing import Callable

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from .._jax import Primitive, ShapedArray, ad, mlir, xla
from ..errors import PtoArgumentError, PtoDtypeError, op_error
from . import dims

F32 = np.dtype(np.float32)
F16 = np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)
I8 = np.dtype(np.int8)
I32 = np.dtype(np.int32)
BOOL = np.dtype(np.bool_)

FLOAT = (F32, F16, BF16)
INT = (I8, I32)
NUMERIC = FLOAT + INT
ANY = NUMERIC + (BOOL,)


@dataclasses.dataclass(frozen=True)
class Op:
    """One entry of the op catalogue."""

    name: str
    family: str
    primitive: Primitive
    reference: Callable
    differentiable: bool
    dtypes: tuple[np.dtype, ...]


OPS: dict[str, Op] = {}
ALIASES: dict[str, str] = {}    # a pj.ops function binding another op's primitive -> that op's name


def catalogue() -> list[tuple[str, Op]]:
    """The user's ops by family and name: each :data:`OPS` entry, and each alias with its op's entry."""
    entries = [*OPS.items(), *((alias, OPS[name]) for alias, name in ALIASES.items())]
    return sorted(entries, key=lambda e: (e[1].family, e[0]))


def define(name: str, family: str, *, abstract: Callable, reference: Callable, dtypes=ANY,
           multiple_results: bool = False, differentiable: bool = True, catalogue: bool = True) -> Primitive:
    """Create the primitive ``pto.<name>`` and register it in :data:`OPS` (``catalogue=False``: an op
    the lowering makes, not the user's: left out of it)."""
    prim = Primitive(f"pto.{name}")
    prim.multiple_results = multiple_results
    prim.def_impl(partial(xla.apply_primitive, prim))
    prim.def_abstract_eval(abstract)
    mlir.register_lowering(prim, mlir.lower_fun(reference, multiple_results=multiple_results))
    if catalogue:
        OPS[name] = Op(name, family, prim, reference, differentiable, tuple(dtypes))
    return prim


# ------------------------------------------------------------------------------------------ dtypes
def dtype_name(dtype) -> str:
    return np.dtype(dtype).name


def names(dtypes) -> str:
    return ", ".join(dtype_name(d) for d in dtypes)


def flag(op: str, name: str, value) -> bool:
    """A boolean parameter ``name`` of ``op``: True or False (a string such as ``"False"`` is truthy)."""
    if not isinstance(value, (bool, np.bool_)):
        raise op_error(PtoArgumentError, op, f"{name} must be True or False, got {value!r}")
    return bool(value)


def canonical_dtype(op: str, dtype) -> np.dtype:
    """``dtype`` as a NumPy dtype ptojax supports, or a :class:`PtoDtypeError`."""
    if dtype is None:                       # (NumPy reads None as float64)
        raise op_error(PtoDtypeError, op, f"None is not a dtype; supported: {names(ANY)}")
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise op_error(PtoDtypeError, op, f"{dtype!r} is not a dtype; supported: {names(ANY)}") from None
    if dt not in ANY:
        raise op_error(PtoDtypeError, op, f"dtype {dt.name} is not supported; supported: {names(ANY)}{_hint(dt)}")
    return dt


def _hint(dtype) -> str:
    """Where an unsupported dtype usually comes from, when the user never wrote it."""
    if np.dtype(dtype) in (np.dtype(np.int16), np.dtype(np.uint16)):
        return (" (16-bit integers come from the bits of float16 / bfloat16: jnp.frexp, ldexp, signbit, copysign "
                "and bit casts of those work on float32; cast to float32 first)")
    return ""


def check_dtype(op: str, what: str, aval, allowed) -> None:
    if aval.dtype not in allowed:
        raise op_error(PtoDtypeError, op, f"{what} has dtype {dtype_name(aval.dtype)} "
                       f"(shape {tuple(aval.shape)}); allowed: {names(allowed)}")


def check_same_dtype(op: str, *avals) -> np.dtype:
    dtypes = {a.dtype for a in avals}
    if len(dtypes) > 1:
        got = ", ".join(f"{dtype_name(a.dtype)}{list(a.shape)}" for a in avals)
        raise op_error(PtoDtypeError, op, f"operands must share one dtype, got {got}; "
                       "convert one with pj.ops.cast")
    return avals[0].dtype


# ---------------------------------------------------------------------------------------- operands
def tensor(op: str, x):
    """``x`` as a JAX array (or tracer) of a supported dtype."""
    if not isinstance(x, jax.Array):
        try:
            if x is None or isinstance(x, (str, bytes)):     # (NumPy reads "a" as a dtype name)
                raise TypeError
            x = jnp.asarray(x)
        except (TypeError, ValueError):
            raise op_error(PtoArgumentError, op, f"operand {x!r} is not an array or a number") from None
    if x.dtype not in ANY:
        raise op_error(PtoDtypeError, op, f"operand of dtype {x.dtype.name} (shape {x.shape}) is not "
                       f"supported; supported: {names(ANY)}{_hint(x.dtype)}")
    return x


def is_scalar(x) -> bool:
    return isinstance(x, (bool, int, float, np.generic)) and not isinstance(x, np.ndarray)


def is_float_scalar(x) -> bool:
    """A Python or NumPy float scalar, ml_dtypes' (``bfloat16``) included."""
    return isinstance(x, float) or (isinstance(x, np.generic) and jnp.issubdtype(x.dtype, jnp.floating))


def is_number_scalar(x) -> bool:
    """A bool, int or float scalar (Python's, NumPy's or ml_dtypes'): no complex, datetime or string."""
    return isinstance(x, (bool, int, np.bool_, np.integer)) or is_float_scalar(x)


def _weak_scalar(x) -> bool:
    """A traced Python number: a 0-d weakly typed JAX value (a jitted function's scalar argument)."""
    return (isinstance(x, (jax.Array, jax.core.Tracer)) and np.ndim(x) == 0
            and getattr(jax.typeof(x), "weak_type", False))


def operands(op: str, *args):
    """Tensors and Python scalars as arrays: a scalar takes the dtype of the first tensor operand (so does
    a Python number traced by ``jax.jit``, a weakly typed 0-d value, beside a tensor).

    A float scalar cannot join an integer or bool tensor, nor an int scalar a bool one (cast
    explicitly); an int scalar must fit the tensor's integer dtype.
    """
    given = [a for a in args if not is_scalar(a)]
    if not given:
        raise op_error(PtoArgumentError, op, f"needs at least one tensor operand, got scalars {args}")
    strong = [a for a in given if not _weak_scalar(a)]
    like = tensor(op, (strong or given)[0])
    out = []
    for a in args:
        if strong and _weak_scalar(a) and a.dtype != like.dtype:
            dt = like.dtype
            if (jnp.issubdtype(a.dtype, jnp.floating) and dt not in FLOAT) or (dt == np.bool_ and a.dtype != np.bool_):
                raise op_error(PtoDtypeError, op, f"a {a.dtype.name} scalar cannot combine with a {dt.name} "
                               "tensor; cast the tensor first")
            out.append(jax.lax.convert_element_type(a, dt))
            continue
        if not is_scalar(a):
            out.append(tensor(op, a))
            continue
        dt = like.dtype
        if not is_number_scalar(a):                                          # complex, datetime64
            raise op_error(PtoDtypeError, op, f"scalar {a!r} of type {type(a).__name__} is not a bool, int or "
                           "float")
        if dt == np.bool_ and not isinstance(a, (bool, np.bool_)):       # (2 was True)
            raise op_error(PtoDtypeError, op, f"scalar {a!r} cannot combine with a bool tensor; cast the "
                           "tensor first")
        if is_float_scalar(a) and dt not in FLOAT:
            raise op_error(PtoDtypeError, op, f"float scalar {a!r} cannot combine with a {dt.name} "
                           "tensor; cast the tensor first")
        if dt in INT and not isinstance(a, (bool, np.bool_)):
            info = np.iinfo(dt)
            if not info.min <= int(a) <= info.max:
                raise op_error(PtoArgumentError, op, f"scalar {a!r} does not fit {dt.name} "
                               f"[{info.min}, {info.max}]")
        out.append(np.asarray(a, dtype=dt))
    return out


# ------------------------------------------------------------------------------------ shapes, axes
def broadcast_shapes(op: str, *shapes) -> tuple:
    """NumPy broadcasting of shapes whose dims may be ``jax.export`` symbols (:mod:`.dims`)."""
    return dims.broadcast_shapes(op, *shapes)


def normalize_axis(op: str, axis: int, ndim: int) -> int:
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise op_error(PtoArgumentError, op, f"axis must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise op_error(PtoArgumentError, op, f"axis {axis} is out of range for a rank-{ndim} operand")
    return int(axis) % ndim


def normalize_axes(op: str, axis, ndim: int) -> tuple[int, ...]:
    """``None`` → every axis; an int or a sequence of ints → sorted, non-negative, unique."""
    if axis is None:
        return tuple(range(ndim))
    if not isinstance(axis, (int, np.integer, tuple, list)):
        raise op_error(PtoArgumentError, op, f"axis must be an int, a sequence of ints or None, got {axis!r}")
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = tuple(sorted(normalize_axis(op, a, ndim) for a in axes))
    if len(set(out)) != len(out):
        raise op_error(PtoArgumentError, op, f"repeated axis in {axis!r}")
    return out


def static_shape(op: str, shape, what: str = "shape", *, symbolic: bool | None = None) -> tuple:
    """``shape`` as a tuple of ints. With ``symbolic`` (the default for ``what == "offsets"``) a
    ``jax.export`` symbolic dim is kept as it is (the offset ``mod(-1, m)`` of ``jnp.roll`` along a
    symbolic axis): the op's abstract rule decides it with :func:`dims.decide`, and its XLA reference
    slices or pads at it as ``lax`` does."""
    keep = what == "offsets" if symbolic is None else symbolic
    try:
        out = tuple(s if keep and dims.is_symbolic(s) else dims.as_int(s) for s in shape)
    except (TypeError, ValueError):
        raise op_error(PtoArgumentError, op, f"{what} must be a sequence of ints, got {shape!r}") from None
    return out


def shaped(shape, dtype) -> ShapedArray:
    return ShapedArray(tuple(shape), np.dtype(dtype))


# ---------------------------------------------------------------------------------- rule helpers
def upcast(fn: Callable) -> Callable:
    """Run a float reference in float32 and round the result back (fp16/bf16 golden precision)."""

    def run(*args, **params):
        dtype = args[0].dtype
        if dtype in (F16, BF16):
            args = [a.astype(F32) if a.dtype == dtype else a for a in args]
            return fn(*args, **params).astype(dtype)
        return fn(*args, **params)

    return run


def jvp_from_reference(prim: Primitive, reference: Callable) -> None:
    """Differentiate a composite op through its reference implementation."""

    def rule(primals, tangents, **params):
        tangents = [ad.instantiate_zeros(t) for t in tangents]
        _, t_out = jax.jvp(partial(reference, **params), tuple(primals), tuple(tangents))
        return prim.bind(*primals, **params), t_out

    ad.primitive_jvps[prim] = rule


def jvp_zero(prim: Primitive) -> None:
    """Outputs that are integers, booleans or piecewise constant: the tangent is zero."""

    def rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        outs = out if prim.multiple_results else [out]
        zeros = [ad.Zero(jax.typeof(o).to_tangent_aval()) for o in outs]
        return out, (zeros if prim.multiple_results else zeros[0])

    ad.primitive_jvps[prim] = rule


def batch_size(args, dims) -> int:
    return next(a.shape[d] for a, d in zip(args, dims) if d is not None)
