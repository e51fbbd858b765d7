"""float16 and bfloat16 as bits, for native code: widening to float32 and rounding from it.

Numba compiles no float16 arithmetic on the CPU and knows no bfloat16, so native code holds both as
their uint16 bits and converts with these functions, bit for bit as NumPy (float16) and ml_dtypes
(bfloat16) do: widening is exact (NaN payloads kept); rounding is to nearest, ties to even, past the
largest finite value to infinity; float16 keeps a NaN's top payload bits (a quiet bit if none is
left), bfloat16 makes every NaN the quiet NaN of its sign. float16 converts with the CPU's own
instructions where it has them (x86's F16C, ARM's): IEEE's conversions, which quiet a signalling NaN,
so NaNs take NumPy's bits instead. ``tests/test_native.py`` checks every variant against NumPy and
ml_dtypes on every float16 / bfloat16 value and on float32 values around every rounding boundary.
"""
from __future__ import annotations

import platform

import llvmlite.binding
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
def _nan_f16(bits):
    """The float16 NaN (sign aside) NumPy makes of float32 NaN ``bits``: its top payload bits, or 1."""
    payload = (bits & uint32(0x7fffff)) >> uint32(13)
    return uint32(0x7c00) | payload | (uint32(1) if payload == uint32(0) else uint32(0))


@njit(inline="always")
def widen_f16_bits(h):
    """float16 bits -> float32 (exact), in integer arithmetic. Branch-free, so that loops of it vectorize."""
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
def narrow_f16_bits(value):
    """float32 -> float16 bits, rounded to nearest even, in integer arithmetic. Branch-free."""
    bits = _as_u32(value)
    sign = (bits >> uint32(16)) & uint32(0x8000)
    magnitude = bits & uint32(0x7fffffff)
    normal = (magnitude + uint32(0xc8000fff) + ((magnitude >> uint32(13)) & uint32(1))) >> uint32(13)
    tiny = _as_u32(_as_f32(magnitude) + float32(0.5)) - uint32(0x3f000000)   # below 2**-14: the add rounds
    half = tiny if magnitude < uint32(0x38800000) else normal
    half = uint32(0x7c00) if magnitude >= uint32(0x477ff000) else half
    half = _nan_f16(magnitude) if magnitude > uint32(0x7f800000) else half
    return uint16(half | sign)


@intrinsic
def _widen_f16_cpu(typingctx, bits):
    """:func:`widen_f16_cpu` in 32-bit integer operations (Numba's own integer arithmetic widens to 64
    bits, which halves the lanes of a vectorized loop)."""
    def codegen(context, builder, sig, args):
        i32 = ir.IntType(32)
        h = builder.zext(args[0], i32)
        cpu = builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())
        sign = builder.shl(builder.and_(h, i32(0x8000)), i32(16))
        payload = builder.shl(builder.and_(h, i32(0x3ff)), i32(13))
        nan = builder.bitcast(builder.or_(builder.or_(sign, payload), i32(0x7f800000)), ir.FloatType())
        is_nan = builder.icmp_unsigned(">", builder.and_(h, i32(0x7fff)), i32(0x7c00))
        return builder.select(is_nan, nan, cpu)
    return types.float32(types.uint16), codegen


@intrinsic
def _narrow_f16_cpu(typingctx, value):
    """:func:`narrow_f16_cpu` in 32-bit integer operations: NaNs as ``_nan_f16`` makes them."""
    def codegen(context, builder, sig, args):
        i32 = ir.IntType(32)
        bits = builder.bitcast(args[0], i32)
        payload = builder.lshr(builder.and_(bits, i32(0x7fffff)), i32(13))
        empty = builder.zext(builder.icmp_unsigned("==", payload, i32(0)), i32)
        sign = builder.and_(builder.lshr(bits, i32(16)), i32(0x8000))
        nan = builder.or_(builder.or_(sign, payload), builder.or_(empty, i32(0x7c00)))
        cpu = builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))
        is_nan = builder.fcmp_unordered("uno", args[0], args[0])
        return builder.select(is_nan, builder.trunc(nan, ir.IntType(16)), cpu)
    return types.uint16(types.float32), codegen


@njit(inline="always")
def widen_f16_cpu(h):
    """float16 bits -> float32 by the CPU, a NaN's payload kept as NumPy keeps it (unquieted)."""
    return _widen_f16_cpu(h)


@njit(inline="always")
def narrow_f16_cpu(value):
    """float32 -> float16 bits by the CPU, a NaN's payload kept as NumPy keeps it."""
    return _narrow_f16_cpu(value)


def _cpu_converts_f16() -> bool:
    machine = platform.machine().lower()
    return machine in ("aarch64", "arm64") or (machine in ("x86_64", "amd64")
                                               and llvmlite.binding.get_host_cpu_features().get("f16c", False))


widen_f16, narrow_f16 = (widen_f16_cpu, narrow_f16_cpu) if _cpu_converts_f16() else (widen_f16_bits, narrow_f16_bits)


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


__all__ = ["narrow_bf16", "narrow_f16", "narrow_f16_bits", "narrow_f16_cpu", "widen_bf16", "widen_f16", "widen_f16_bits",
           "widen_f16_cpu"]
