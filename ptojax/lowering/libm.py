"""float32 elementary functions that PTO has no instruction for, built from the ones it has.

The Tensor level translates ``jnp.log1p``, ``expm1``, ``exp2``, ``sin``, ``cos``, ``tan``, ``arctan``,
``arctan2``, ``arcsin``, ``arccos``, ``sinh``, ``cosh``, ``arcsinh``, ``arccosh``, ``arctanh``, ``cbrt`` and
``jax.scipy.special.erf`` / ``erfc`` (so the exact ``jax.nn.gelu``) into these sequences of vector
instructions, as a math library does on hardware without them. Each takes and returns float32 tensors
(the translation computes float16 / bfloat16 in float32 and rounds once). Accuracy, in float32 ulp from
the correctly rounded result (``tests/test_translations.py`` and ``tests/test_lowering.py`` check each,
on 10**5 arguments per range):

* ``log1p``, ``expm1``: within 2 ulp, also where ``|x| << 1``.
* ``erf``: within 8 ulp (near 3.93, where it rounds to 1); ``erfc``: within 8 ulp wherever the result is a
  normal float.
* ``sin``, ``cos`` within 3 ulp, ``tan`` 4, for ``|x| <`` :data:`TRIG_RANGE` (2**20: RoPE angles past
  a million positions); past it the argument reduction loses accuracy, growing with ``|x|``.
* ``atan``, ``atan2``, ``asinh``, ``acosh``, ``atanh``: within 3 ulp, ``asin`` and ``acos`` 4; ``cbrt`` 1 ulp;
  ``cosh`` 4 ulp, ``sinh`` 8 ulp (signed zeros, infinities and NaN as C's).
* ``exp2``: ``exp(x * ln 2)``, as XLA computes it; :func:`power_of_two` (float32 ``2.0 ** y`` within
  ``jnp.ldexp``, which scales by it): exact where ``y`` is an integer, else within 1 ulp.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from .. import ops

F32 = np.float32


def log1p(x):
    """Goldberg's ``log(u) * x / (u - 1)``, u = 1 + x: accurate where ``log(1 + x)`` loses ``x``."""
    u = ops.add(x, F32(1))
    r = ops.mul(ops.log(u), ops.div(x, ops.sub(u, F32(1))))
    r = ops.where(ops.eq(u, F32(1)), x, r)
    return ops.where(ops.eq(x, F32(np.inf)), x, r)


def expm1(x):
    """Kahan's ``(u - 1) * x / log(u)``, u = exp(x): accurate where ``exp(x) - 1`` loses ``x``."""
    u = ops.exp(x)
    m = ops.sub(u, F32(1))
    r = ops.mul(ops.div(m, ops.log(u)), x)             # (not (m * x) / log(u): that overflows near exp's limit)
    r = ops.where(ops.eq(m, F32(-1)), m, r)
    r = ops.where(ops.eq(u, F32(np.inf)), u, r)
    return ops.where(ops.eq(u, F32(1)), x, r)


def exp2(x):
    return ops.exp(ops.mul(x, F32(np.log(2))))


def power_of_two(y):
    """``2 ** y`` in float32 as ``2 ** h * (exp(f ln 2) * 2 ** (n - h))`` for ``n = floor(y)``, ``f = y - n``,
    ``h = floor(n / 2)``: each power of two an ``exp`` (within a few ulp) rounded to its power
    (:func:`_nearest_power_of_two`), so an integral ``y`` is exact (``exp(0)`` is 1) and the product
    rounds once; no half overflows or underflows where the result does not."""
    clamped = ops.clip(y, F32(-300), F32(130))    # past these every result is 0 or inf (NaN stays: its fraction)
    n = ops.cast(ops.cast(clamped, np.int32, rounding="floor"), np.float32)
    half = ops.cast(ops.cast(ops.mul(n, F32(0.5)), np.int32, rounding="floor"), np.float32)
    low, high = (_nearest_power_of_two(ops.exp(ops.mul(k, F32(np.log(2))))) for k in (half, ops.sub(n, half)))
    fraction = ops.exp(ops.mul(ops.sub(clamped, n), F32(np.log(2))))
    return ops.mul(ops.mul(low, fraction), high)


def _nearest_power_of_two(v):
    """``v`` (positive, within a few percent of a power of two, below ``2 ** 104``) rounded to that power:
    Veltkamp's split to one significant bit, ``t - (t - v)`` for ``t = v (2 ** 23 + 1)``."""
    t = ops.mul(v, F32(2 ** 23 + 1))
    return ops.sub(t, ops.sub(t, v))


def _horner(coefficients, t):
    """``c[0] t^n + c[1] t^(n-1) + ... + c[n]``, highest power first."""
    p = F32(coefficients[0])
    for c in coefficients[1:]:
        p = ops.add(ops.mul(p, t), F32(c))
    return p


# erf(x) = x P(x²) / Q(x²) on x clamped to [-4, 4] (erf is ±1 in float32 past it): the rational
# approximation Eigen and XLA use for float32.
_ERF_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
          -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)
_ERF_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
          -1.42647390514189e-02)


def erf(x):
    x = ops.clip(x, F32(-4), F32(4))
    x2 = ops.mul(x, x)
    return ops.mul(x, ops.div(_horner(_ERF_P, x2), _horner(_ERF_Q, x2)))    # (x P(x²) is subnormal for tiny x)


# erfc(a) exp(a²) for a in [0.5, 10.1] as a polynomial in t = 1 / (1 + a): a least-squares fit of
# degree 10 (highest power first), within 4 ulp in float32 arithmetic.
_ERFC_H = (-1.247637391090393, 4.4210896492004395, -5.994089126586914, 3.083061695098877, 0.7950952053070068,
           -1.3490279912948608, -0.09591518342494965, 0.25121474266052246, 0.5672188401222229, 0.5640264749526978,
           3.7089318993821507e-06)
_ERFC_SMALL = F32(0.5)     # below it, 1 - erf(x) loses nothing: erf(x) < 0.53
_ERFC_ZERO = F32(10.1)     # erfc past it is 0 in float32 (below the smallest subnormal)


def _square(a):
    """``a * a`` as ``hi + lo`` exactly (Dekker: ``a`` split into two 12-bit halves)."""
    c = ops.mul(a, F32(4097))
    ah = ops.sub(c, ops.sub(c, a))
    al = ops.sub(a, ah)
    hi = ops.mul(a, a)
    lo = ops.add(ops.add(ops.sub(ops.mul(ah, ah), hi), ops.mul(ops.mul(ah, al), F32(2))), ops.mul(al, al))
    return hi, lo


def erfc(x):
    """``1 - erf(x)`` for ``|x| < 0.5``; else ``exp(-a²) h(a)`` (a = |x|, with ``a²`` exact in two floats:
    its rounding would cost ``a² 2**-24`` of relative error), reflected as ``2 - erfc(a)`` for x < 0."""
    a = ops.minimum(ops.abs(x), _ERFC_ZERO)
    h = _horner(_ERFC_H, ops.reciprocal(ops.add(a, F32(1))))
    hi, lo = _square(a)
    tail = ops.mul(ops.mul(ops.exp(ops.neg(hi)), ops.sub(F32(1), lo)), h)
    far = ops.where(ops.lt(x, F32(0)), ops.sub(F32(2), tail), tail)
    return ops.where(ops.lt(ops.abs(x), _ERFC_SMALL), ops.sub(F32(1), erf(x)), far)


# --------------------------------------------------------------------------------------- sin, cos, tan
TRIG_RANGE = 2.0 ** 20
_HALF_PI = Fraction(int("1921FB54442D18469898CC51701B839A252049C1", 16), 16 ** 39)   # π/2 to 156 bits


def _split(value: Fraction, bits: int, parts: int) -> tuple:
    """``value`` as ``parts`` floats: all but the last of ``bits`` significant bits (so that ``q * part``
    is exact in float32 for ``|q| < 2**(24 - bits)``), the last the float32 nearest to what is left."""
    out = []
    for _ in range(parts - 1):
        exponent = value.numerator.bit_length() - value.denominator.bit_length()
        scale = Fraction(2) ** (bits - 1 - exponent)
        part = Fraction(int(value * scale)) / scale                 # truncated to its top bits
        out.append(F32(float(part)))
        value -= part
    return (*out, F32(float(value)))


_HALF_PI_PARTS = _split(_HALF_PI, 12, 4)      # exact products with the 12-bit halves of a quadrant below 2**24
_Q_HALF = F32(2.0 ** 12)
_SIN = (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)                  # Cephes' sinf / cosf on
_COS = (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2)    # [-π/4, π/4]
_TINY = F32(2.0 ** -12)      # sin(x) and tan(x) round to x below it


def _reduced(x):
    """``(r, q)``: ``x = r + q π/2``, ``|r| <= π/4``, ``q`` integral (Cody and Waite's reduction, with
    ``q`` split into a multiple of 2**12 and the rest so that each product with a part is exact)."""
    q = ops.round(ops.mul(x, F32(2 / np.pi)))
    high = ops.mul(ops.round(ops.mul(q, F32(1 / _Q_HALF))), _Q_HALF)
    low = ops.sub(q, high)
    r = x
    for part in _HALF_PI_PARTS:
        r = ops.sub(ops.sub(r, ops.mul(high, part)), ops.mul(low, part))
    return r, q


def _sin_cos(r):
    z = ops.mul(r, r)
    s = ops.add(ops.mul(ops.mul(_horner(_SIN, z), z), r), r)
    c = ops.add(ops.sub(ops.mul(ops.mul(_horner(_COS, z), z), z), ops.mul(z, F32(0.5))), F32(1))
    return s, c


def _quadrant(q):
    """``(odd, negative)`` for quadrant ``q``: whether ``q mod 4`` is 1 or 3, and whether it is 2 or 3,
    from ``f = q/4 - round(q/4)``: 0, 1/4, ±1/2, -1/4 for q mod 4 = 0, 1, 2, 3."""
    quarter = ops.mul(q, F32(0.25))
    f = ops.sub(quarter, ops.round(quarter))
    return ops.eq(ops.abs(f), F32(0.25)), ops.logical_or(ops.lt(f, F32(0)), ops.eq(f, F32(0.5)))


def _signed(negative, v):
    return ops.where(negative, ops.neg(v), v)


def sin(x):
    r, q = _reduced(x)
    s, c = _sin_cos(r)
    odd, negative = _quadrant(q)
    return ops.where(ops.lt(ops.abs(x), _TINY), x, _signed(negative, ops.where(odd, c, s)))


def cos(x):
    r, q = _reduced(x)
    s, c = _sin_cos(r)
    odd, negative = _quadrant(ops.add(q, F32(1)))     # cos(x) = sin(x + π/2)
    return _signed(negative, ops.where(odd, c, s))


def tan(x):
    r, q = _reduced(x)
    s, c = _sin_cos(r)
    odd, _ = _quadrant(q)
    t = ops.where(odd, ops.neg(ops.div(c, s)), ops.div(s, c))     # tan(r + π/2) = -cot(r)
    return ops.where(ops.lt(ops.abs(x), _TINY), x, t)


# -------------------------------------------------------------------------- inverse and hyperbolic
_LN2 = F32(np.log(2))
_PI = F32(np.pi)
_ATAN = (8.05374449538e-2, -1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1)   # Cephes' atanf
_TAN_3PI_8, _TAN_PI_8 = F32(2.414213562373095), F32(0.4142135623730950)


def _odd(x, r):
    """An odd function's value ``r`` at ``|x|`` given ``x``'s sign; ``x`` itself at ±0 (keeps -0.0)."""
    return ops.where(ops.lt(x, F32(0)), ops.neg(r), ops.where(ops.eq(x, F32(0)), x, r))


def atan(x):
    """Cephes' reduction: ``|x| > tan(3π/8)``: ``π/2 - atan(1/|x|)``; ``> tan(π/8)``: ``π/4 +
    atan((|x| - 1) / (|x| + 1))``; then an odd polynomial on ``|t| <= tan(π/8)``."""
    a = ops.abs(x)
    big, mid = ops.gt(a, _TAN_3PI_8), ops.gt(a, _TAN_PI_8)
    t = ops.where(big, ops.neg(ops.reciprocal(ops.where(big, a, F32(1)))),      # no zero divisor
                  ops.where(mid, ops.div(ops.sub(a, F32(1)), ops.add(a, F32(1))), a))
    base = ops.where(big, F32(np.pi / 2), ops.mul(ops.cast(mid, np.float32), F32(np.pi / 4)))
    z = ops.mul(t, t)
    r = ops.add(base, ops.add(ops.mul(ops.mul(_horner(_ATAN, z), z), t), t))
    return _odd(x, r)


def _negative(v):
    """``v`` < 0 or -0.0 (its reciprocal is -inf)."""
    return ops.logical_or(ops.lt(v, F32(0)), ops.lt(ops.reciprocal(v), F32(0)))


def _first_quadrant(ay, ax):
    """``atan2(ay, ax)`` for ``ay, ax >= 0``: ``atan`` of the smaller over the larger (``π/2 - `` it past
    the diagonal), 0 at 0 / 0 and π/4 at inf / inf; no divisor is zero (pto-isa's simulator asserts)."""
    steep = ops.gt(ay, ax)
    larger = ops.where(steep, ay, ax)
    a = atan(ops.div(ops.where(steep, ax, ay), ops.where(ops.eq(larger, F32(0)), F32(1), larger)))
    a = ops.where(steep, ops.sub(F32(np.pi / 2), a), a)
    a = ops.where(ops.logical_and(ops.eq(ax, F32(0)), ops.eq(ay, F32(0))), F32(0), a)
    return ops.where(ops.logical_and(ops.eq(ax, F32(np.inf)), ops.eq(ay, F32(np.inf))), F32(np.pi / 4), a)


def atan2(y, x):
    """The first quadrant's angle of ``|y|, |x|`` moved to ``x``'s side and given ``y``'s sign; zeros and
    infinities as C's ``atan2`` (±0 / -0 is ±π, inf / inf is π/4)."""
    a = _first_quadrant(ops.abs(y), ops.abs(x))
    a = ops.where(_negative(x), ops.sub(_PI, a), a)
    return ops.where(_negative(y), ops.neg(a), a)


def _cos_of_asin(x):
    """``sqrt(1 - x²)`` as ``sqrt((1 - x)(1 + x))``: +0 at ±1, NaN past them."""
    return ops.sqrt(ops.mul(ops.sub(F32(1), x), ops.add(F32(1), x)))


def asin(x):
    """``atan2(|x|, sqrt(1 - x²))`` given ``x``'s sign (±0 stays itself: no ``1 / x`` to tell -0)."""
    return _odd(x, _first_quadrant(ops.abs(x), _cos_of_asin(x)))


def acos(x):
    """``atan2(sqrt(1 - x²), |x|)``, ``π -`` it for negative x (at ±0 both are π/2)."""
    a = _first_quadrant(_cos_of_asin(x), ops.abs(x))
    return ops.where(ops.lt(x, F32(0)), ops.sub(_PI, a), a)


def _half_exp(a):
    """``exp(a) / 2`` as ``exp(a/2) / 2 * exp(a/2)``: finite wherever the result is (``exp(a)`` alone
    overflows first) and without ``exp(a - ln 2)``'s rounding of the argument (a·2**-24 relative)."""
    h = ops.exp(ops.mul(a, F32(0.5)))
    return ops.mul(ops.mul(h, F32(0.5)), h)


def sinh(x):
    """``(e - 1/e) / 2`` through ``expm1`` below 1 (no cancellation), ``e/2 - 1/(2e)`` above."""
    a = ops.abs(x)
    m = expm1(a)
    small = ops.mul(ops.add(m, ops.div(m, ops.add(m, F32(1)))), F32(0.5))
    large = ops.sub(_half_exp(a), ops.mul(ops.exp(ops.neg(a)), F32(0.5)))
    r = ops.where(ops.lt(a, F32(1)), small, large)
    return _odd(x, r)


def cosh(x):
    a = ops.abs(x)
    return ops.add(_half_exp(a), ops.mul(ops.exp(ops.neg(a)), F32(0.5)))


def asinh(x):
    """``log1p(a + a² / (1 + sqrt(1 + a²)))`` (a = |x|), ``log(a) + ln 2`` once ``a²`` would overflow."""
    a = ops.abs(x)
    a2 = ops.mul(a, a)
    r = log1p(ops.add(a, ops.div(a2, ops.add(F32(1), ops.sqrt(ops.add(F32(1), a2))))))
    r = ops.where(ops.gt(a, F32(2.0 ** 12)), ops.add(ops.log(a), _LN2), r)
    return _odd(x, r)


def acosh(x):
    """``log1p(t + sqrt(2t + t²))`` (t = x - 1: exact near 1), ``log(x) + ln 2`` for large x; NaN below 1."""
    t = ops.sub(x, F32(1))
    r = log1p(ops.add(t, ops.sqrt(ops.add(ops.mul(t, F32(2)), ops.mul(t, t)))))
    r = ops.where(ops.gt(x, F32(2.0 ** 12)), ops.add(ops.log(x), _LN2), r)
    return ops.where(ops.lt(x, F32(1)), F32(np.nan), r)


def atanh(x):
    """``log1p(2x / (1 - x)) / 2``: ±inf at ±1, NaN past it."""
    a = ops.abs(x)
    r = ops.mul(log1p(ops.div(ops.mul(a, F32(2)), ops.sub(F32(1), a))), F32(0.5))
    r = ops.where(ops.gt(a, F32(1)), F32(np.nan), r)
    return _odd(x, r)


def cbrt(x):
    """``exp(log|x| / 3)`` with one Newton step ``r - (r - |x| / r²) / 3`` (no r³: it would underflow for
    subnormal x), signed; zeros, infinities and NaN are their own."""
    a = ops.abs(x)
    own = ops.logical_or(ops.eq(a, F32(0)), ops.eq(a, F32(np.inf)))
    a = ops.where(own, F32(1), a)                # no zero divisor r² (pto-isa's simulator asserts)
    r = ops.exp(ops.mul(ops.log(a), F32(1 / 3)))
    r = ops.sub(r, ops.mul(ops.sub(r, ops.div(a, ops.mul(r, r))), F32(1 / 3)))
    r = ops.where(ops.lt(x, F32(0)), ops.neg(r), r)
    return ops.where(own, x, r)
