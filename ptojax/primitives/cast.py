"""``cast``: dtype conversion with explicit rounding and saturation (PyPTO's ``cast`` / PTO's TCVT).

float → int rounds by ``rounding`` (``rint``: ties to even, ``round``: ties away from zero, ``floor``,
``ceil``, ``trunc``); NaN becomes 0. With ``saturate`` (the default) out-of-range values clamp to the
integer range; without it they wrap modulo 2**bits (NaN and ±inf then become 0). float → float and
int → float round to nearest even from the exact integer (int32 → bf16 once, as pto-isa's convert
does: XLA's ``astype`` goes through float32 and can round twice); int → int narrowing saturates or
wraps the same way.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._jax import ad, batching
from ..errors import PtoArgumentError, op_error
from ._base import ANY, BF16, BOOL, F32, FLOAT, I32, INT, canonical_dtype, check_dtype, define, flag, shaped, tensor

ROUNDING = {
    "rint": jnp.round,
    "round": lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO),
    "floor": jnp.floor,
    "ceil": jnp.ceil,
    "trunc": jnp.trunc,
}


def _float_to_int(x, dtype, rounding, saturate):
    r = ROUNDING[rounding](x.astype(F32))
    info = np.iinfo(dtype)
    if saturate:
        # float32 cannot hold 2**31 - 1: clamp below it, then pin the true limits.
        hi = np.float32(info.max if dtype != I32 else 2.0**31 - 128)
        clamped = jnp.clip(r, np.float32(info.min), hi).astype(dtype)
        clamped = jnp.where(r >= np.float32(2.0**31), info.max, clamped) if dtype == I32 else clamped
        return jnp.where(jnp.isnan(r), 0, clamped).astype(dtype)
    # fmod is exact in float32 (r + 2**31 is not: 2**31 - 128 would wrap to -2**31); reduce modulo
    # 2**32 into uint32, and the int32 -> int8 conversion wraps the rest.
    rem = jnp.fmod(r, np.float32(2.0**32))
    rem = jnp.where(jnp.isfinite(rem), rem, 0)
    mag = jnp.abs(rem).astype(np.uint32)
    return jnp.where(rem < 0, -mag, mag).astype(I32).astype(dtype)


def int_to_bfloat16(i):
    """int32 → bfloat16 rounded once to nearest even from the exact value (no double rounding)."""
    neg = i < 0
    mag = jnp.where(neg, -i.astype(jnp.int32), i).astype(jnp.uint32)     # |INT_MIN| = 2**31 as u32
    f = (mag & jnp.uint32(0xFFFFFF00)).astype(F32)                        # exact (<= 24 bits)
    bits = lax.bitcast_convert_type(f, jnp.uint32) | ((mag & 0xFF) != 0).astype(jnp.uint32)  # sticky
    f = jnp.where(mag < 2 ** 24, mag.astype(F32), lax.bitcast_convert_type(bits, F32)).astype(BF16)
    return jnp.where(neg, -f, f)


def _cast_reference(x, *, dtype, rounding, saturate):
    src = x.dtype
    if src == dtype:
        return x
    if dtype == BOOL:
        return x != jnp.zeros((), src)
    if src in FLOAT and dtype in INT:
        return _float_to_int(x, dtype, rounding, saturate)
    if src in INT and dtype in INT and saturate and np.iinfo(dtype).bits < np.iinfo(src).bits:
        info = np.iinfo(dtype)
        return jnp.clip(x, info.min, info.max).astype(dtype)
    if src == BOOL and dtype in FLOAT:
        # XLA rewrites ``convert(pred) * y`` as ``select(pred, y, 0)``: +0.0 where ``0.0 * y`` is -0.0
        # for a negative y (as TCVT then TMUL give, and eager JAX), so 1 / it was +inf for -inf. The
        # barrier hides the convert from that rewrite (every level and the XLA backend run this).
        return lax.optimization_barrier(x.astype(dtype))
    if src == I32 and dtype == BF16:
        return int_to_bfloat16(x)
    return x.astype(dtype)


def _checked(src, dtype, rounding) -> np.dtype:
    """The target dtype of a cast from ``src``, or the error naming what the cast cannot do."""
    dtype = canonical_dtype("cast", dtype)
    if not isinstance(rounding, str) or rounding not in ROUNDING:
        raise op_error(PtoArgumentError, "cast", f"rounding {rounding!r} is not one of {sorted(ROUNDING)}")
    if rounding != "rint" and not (src in FLOAT and dtype in INT):
        raise op_error(PtoArgumentError, "cast", f"rounding {rounding!r} applies to float -> int casts only; "
                       f"{src.name} -> {dtype.name} rounds to nearest even ('rint')")
    return dtype


def _cast_abstract(x, *, dtype, rounding, saturate):
    check_dtype("cast", "operand", x, ANY)
    return shaped(x.shape, _checked(x.dtype, dtype, rounding))


def _cast_jvp(primals, tangents, *, dtype, rounding, saturate):
    (x,), (t,) = primals, tangents
    out = cast_p.bind(x, dtype=dtype, rounding=rounding, saturate=saturate)
    if x.dtype in FLOAT and dtype in FLOAT and type(t) is not ad.Zero:
        return out, cast_p.bind(t, dtype=dtype, rounding=rounding, saturate=saturate)
    return out, ad.Zero(jax.typeof(out).to_tangent_aval())


cast_p = define("cast", "elementwise", abstract=_cast_abstract, reference=_cast_reference)
ad.primitive_jvps[cast_p] = _cast_jvp
ad.primitive_transposes[cast_p] = lambda ct, x, **params: [
    None if type(ct) is ad.Zero else cast(ct, x.aval.dtype)]
batching.defvectorized(cast_p)


def cast(x, dtype, *, rounding: str = "rint", saturate: bool = True):
    """Convert ``x`` to ``dtype``; see the module docstring for rounding and saturation."""
    x = tensor("cast", x)
    dtype = _checked(x.dtype, dtype, rounding)
    if x.dtype == dtype:
        return x
    return cast_p.bind(x, dtype=dtype, rounding=rounding, saturate=flag("cast", "saturate", saturate))
