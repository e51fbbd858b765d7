"""float32 ``tmatmul`` = a sequential chain of correctly rounded fused multiply-adds, checked against
exact rational arithmetic (``fractions.Fraction``) rounded to float32 by hand, on adversarial operands:
wide exponent ranges, cancellations, results on and just beside float32 rounding ties (where rounding
twice, in float64 then float32, goes wrong), overflow that the addend brings back, inf and NaN. Both
paths are checked: the backend's own fused multiply-add where the probe finds one, and the float64
round-to-odd emulation. Exact results in the float32 subnormal range are avoided: XLA:CPU flushes
them to zero (see tests/test_fpenv.py)."""
from fractions import Fraction

import jax
import numpy as np
import pytest

from ptojax.ascend import tile_semantics as T

F32 = np.float32
TINY = Fraction(2) ** -126
RNG = np.random.default_rng(11)


def round_f32(x: Fraction) -> np.float32:
    """``x`` rounded to nearest float32, ties to even; overflow to inf (no subnormal results here)."""
    if x == 0:
        return F32(0.0)
    sign, x = (-1 if x < 0 else 1), abs(x)
    assert x >= TINY, f"test case with a subnormal result {float(x)!r}"
    e = x.numerator.bit_length() - x.denominator.bit_length()       # 2**e <= x < 2**(e+1)
    e -= Fraction(2) ** e > x
    scaled = x / Fraction(2) ** (e - 23)                              # 2**23 <= scaled < 2**24
    n, rem = divmod(scaled.numerator, scaled.denominator)
    half = Fraction(rem, scaled.denominator) - Fraction(1, 2)
    n += half > 0 or (half == 0 and n % 2 == 1)
    v = Fraction(n) * Fraction(2) ** (e - 23)
    return F32(sign * np.inf) if v >= Fraction(2) ** 128 else F32(sign * float(v))


def fma_exact(a, b, c) -> np.float32:
    """IEEE-754 ``fma(a, b, c)`` in float32 from the exact rational ``a*b + c``."""
    a, b, c = F32(a), F32(b), F32(c)
    if not (np.isfinite(a) and np.isfinite(b) and np.isfinite(c)):
        with np.errstate(all="ignore"):                 # inf/NaN: the exact float64 product decides
            return F32(np.float64(a) * np.float64(b) + np.float64(c))
    x = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    if x == 0 and a * b == 0 and c == 0:                # a sum of zeros: -0 only for (-0) + (-0)
        return F32(-0.0) if np.signbit(a) != np.signbit(b) and np.signbit(c) else F32(0.0)
    return round_f32(x)


def chain_exact(a, b):
    """The simulator's loop: ``acc = 0; acc = fma(a[i, k], b[k, j], acc)`` for k in order."""
    out = np.zeros((a.shape[0], b.shape[1]), F32)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            acc = F32(0.0)
            for k in range(a.shape[1]):
                acc = fma_exact(a[i, k], b[k, j], acc)
            out[i, j] = acc
    return out


def same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype == F32
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    bad = np.flatnonzero((got.view(np.uint32) != want.view(np.uint32)) & ~nan)
    assert bad.size == 0, f"{bad.size} of {got.size} differ, first at {bad[:5]}: got {got.flat[bad[:5]]}, " \
                          f"want {want.flat[bad[:5]]}"


def wide(shape, lo=-30, hi=30):
    """Normal float32 values with exponents spread over [lo, hi)."""
    return (RNG.standard_normal(shape) * np.exp2(RNG.integers(lo, hi, shape))).astype(F32)


def triples():
    """(a, b, c) cases: random wide, exact and near ties, cancellations, overflow, specials."""
    n = 400
    a, b, c = [wide(n)], [wide(n)], [wide(n)]
    # c + a*b with a*b = +-2**(e(c)-24) * (1 or 1 -+ 2**-46): exactly on, just below and just above the
    # midpoint between c and its neighbour; rounding s = a*b + c to float64 first lands on the midpoint.
    cs = wide(n, -20, 20)
    ec = np.floor(np.log2(np.abs(cs))).astype(int)
    one_minus, one_plus = F32(1 - 2.0 ** -23), F32(1 + 2.0 ** -23)
    for u, v in ((F32(1), F32(1)), (one_plus, one_minus), (one_minus, one_minus)):
        sign = RNG.choice([-1, 1], n).astype(F32)
        a.append((sign * u * np.exp2(ec - 12)).astype(F32))
        b.append((v * np.exp2(-12.0) * np.ones(n)).astype(F32))
        c.append(cs)
    # cancellation: c = -round(a*b) (+- a few ulps), the result is the product's rounding error
    x, y = wide(n), wide(n)
    p = (x.astype(np.float64) * y).astype(F32)
    a.append(x), b.append(y), c.append((-p * (1 + RNG.integers(-2, 3, n) * 2.0 ** -23)).astype(F32))
    # a*b overflows float32 but the addend brings it back, and sums that round to inf
    big = F32(2.0 ** 64)
    a.append(np.full(4, big)), b.append(np.array([big, big, F32(1.99) * big, big], F32))
    c.append(np.array([-1.5 * 2.0 ** 127, -2.0 ** 127, -3e38, 3e38], F32))
    a.append(np.full(2, F32(2.0 ** 127))), b.append(np.full(2, F32(1.5)))      # ties at the top binade
    c.append(np.array([2.0 ** 103, -2.0 ** 103], F32))
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 3e38], F32)
    grid = np.array(np.meshgrid(specials, specials, specials)).reshape(3, -1)
    a.append(grid[0]), b.append(grid[1]), c.append(grid[2])
    return tuple(np.concatenate(v).astype(F32) for v in (a, b, c))


def test_fma_f32_emulation_is_correctly_rounded():
    a, b, c = triples()
    want = np.array([fma_exact(*t) for t in zip(a, b, c)], F32)
    same_bits(jax.jit(T._fma_f32)(a, b, c), want)
    with np.errstate(all="ignore"):
        naive = (a.astype(np.float64) * b + c).astype(F32)    # float64 then float32: twice rounded
    assert np.any(naive.view(np.uint32) != want.view(np.uint32))  # the cases do hit double rounding


def adversarial_operands(m, k, n):
    """Operands whose fma chains cancel, tie and span exponents: a row of +-1 pairs, wide values."""
    a, b = wide((m, k), -12, 12), wide((k, n), -12, 12)
    a[0, 1::2], b[1::2, :] = a[0, 0::2][: k // 2], -b[0::2, :][: k // 2]   # row 0: pairs that cancel
    q = F32(1 + 2.0 ** -12)
    a[1, :2], b[:2, 0] = (1, q), (-1, q)                      # q*q - 1: fused 2**-11 + 2**-24, else 2**-11
    return a, b


@pytest.mark.parametrize("mkn", [(5, 2, 19), (6, 37, 5), (3, 130, 4)])
def test_tmatmul_f32_is_an_fma_chain(mkn):
    a, b = adversarial_operands(*mkn)
    want = chain_exact(a, b)
    same_bits(T.SEMANTICS["tmatmul"](a, b), want)
    same_bits(jax.jit(T.SEMANTICS["tmatmul"])(a, b), want)
    fused = np.asarray(jax.jit(T._mul_add_chain)(a, b))       # multiply + add: fused or not
    assert np.array_equal(fused.view(np.uint32), want.view(np.uint32)) == \
        T._fuses_multiply_add(jax.default_backend(), False)   # the probe's verdict is the truth here


@pytest.mark.parametrize("mkn", [(5, 2, 19), (6, 37, 5)])
def test_fma_scan_fallback(mkn):
    """The float64 emulation, as used where the backend has no fused multiply-add."""
    a, b = adversarial_operands(*mkn)
    same_bits(jax.jit(T._fma_scan)(a, b), chain_exact(a, b))


def test_probe_runs_inside_a_trace():
    """The probe compiles and runs its own programs also when first asked while a caller is traced."""
    backend = jax.default_backend()
    T._fuses_multiply_add.cache_clear()
    seen = []

    @jax.jit
    def f(x):
        seen.append(T._fuses_multiply_add(backend, False))
        return x + 1

    f(np.zeros(3, F32))
    a, b = adversarial_operands(3, 6, 4)
    fused = np.asarray(jax.jit(T._mul_add_chain)(a, b))
    assert seen == [np.array_equal(fused.view(np.uint32), chain_exact(a, b).view(np.uint32))]
    with jax.disable_jit():               # op by op: nothing is fused, the emulation is used
        assert T._fuses_multiply_add(backend, True) is False
        same_bits(T.SEMANTICS["tmatmul"](a, b), chain_exact(a, b))
