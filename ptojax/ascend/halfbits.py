"""float16 and bfloat16 as bits, for native code: widening to float32 and rounding from it.

Numba compiles no float16 arithmetic on the CPU and knows no bfloat16, so native code holds both as
their uint16 bits and converts with these functions, bit for bit as NumPy (float16) and ml_dtypes
(bfloat16) do: widening is exact (NaN payloads kept); rounding is to nearest, ties to even, past the
largest finite value to infinity; float16 keeps a NaN's top payload bits (a quiet bit if none is
left), bfloat16 makes every NaN the quiet NaN of its sign. ``tests/test_native.py`` checks them
against NumPy and ml_dtypes on every float16 / bfloat16 value and on float32 values around every
rounding boundary.
"""
from __future__ import annotations

from llvmlite import ir
from numba import float32, njit, types, uint16, uint32
from numba.extending import intrinsic


@intrinsic
def _as_f32(typingctx, bits):
    """uint32 bits as the float32 they encode."""
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.uint32), codegen


@intrinsic
def _as_u32(typingctx, value):
    """A float32's bits."""
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.uint32(types.float32), codegen


@njit(inline="always")
def widen_f16(h):
    """float16 bits -> float32 (exact). Branch-free, so that loops of it vectorize."""
    h = uint32(h)
    shifted = (h & uint32(0x7fff)) << uint32(13)
    exponent = shifted & uint32(0x0f800000)
    normal = shifted + uint32(0x38000000)                   # rebias 15 -> 127
    special = normal + uint32(0x38000000)                   # inf, NaN: exponent 255, payload kept
    tiny = _as_f32(normal + uint32(0x00800000)) - float32(6.103515625e-05)   # m * 2**-24, exact
    bits = special if exponent == uint32(0x0f800000) else normal
    bits = _as_u32(tiny) if exponent == uint32(0) else bits
    return _as_f32(bits | ((h & uint32(0x8000)) << uint32(16)))


@njit(inline="always")
def narrow_f16(value):
    """float32 -> float16 bits, rounded to nearest even. Branch-free, so that loops of it vectorize."""
    bits = _as_u32(value)
    sign = (bits >> uint32(16)) & uint32(0x8000)
    magnitude = bits & uint32(0x7fffffff)
    normal = (magnitude + uint32(0xc8000fff) + ((magnitude >> uint32(13)) & uint32(1))) >> uint32(13)
    tiny = _as_u32(_as_f32(magnitude) + float32(0.5)) - uint32(0x3f000000)   # below 2**-14: the add rounds
    payload = (magnitude & uint32(0x7fffff)) >> uint32(13)     # a NaN keeps its top payload bits, or gets one
    nan = uint32(0x7c00) | payload | (uint32(1) if payload == uint32(0) else uint32(0))
    half = tiny if magnitude < uint32(0x38800000) else normal
    half = uint32(0x7c00) if magnitude >= uint32(0x477ff000) else half
    half = nan if magnitude > uint32(0x7f800000) else half
    return uint16(half | sign)


@njit(inline="always")
def widen_bf16(b):
    """bfloat16 bits -> float32 (exact)."""
    return _as_f32(uint32(b) << uint32(16))


@njit(inline="always")
def narrow_bf16(value):
    """float32 -> bfloat16 bits, rounded to nearest even."""
    bits = _as_u32(value)
    if value != value:
        return uint16(((bits >> uint32(16)) & uint32(0x8000)) | uint32(0x7fc0))
    bits = bits + uint32(0x7fff) + ((bits >> uint32(16)) & uint32(1))
    return uint16(bits >> uint32(16))


__all__ = ["narrow_bf16", "narrow_f16", "widen_bf16", "widen_f16"]
