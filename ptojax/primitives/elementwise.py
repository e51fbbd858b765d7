"""Elementwise ops: arithmetic, activations, comparisons, logic, ``where`` and ``clip``.

Operands are tensors or Python scalars and broadcast by NumPy rules. Tensor operands must share one
dtype (no implicit promotion, as on the vector unit); a scalar takes the tensor's dtype. Float
transcendentals compute in float32 and round once to fp16/bf16.
"""
from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
from jax import lax

from .._jax import ad, batching
from ..errors import PtoArgumentError, op_error
from . import cast as _cast
from . import layout, reduce
from ._base import (ANY, BOOL, FLOAT, INT, NUMERIC, broadcast_shapes, check_dtype, check_same_dtype,
                    define, is_scalar, jvp_from_reference, jvp_zero, operands, shaped, tensor, upcast)


def _abstract(name, dtypes, out_dtype=None, params=()):
    def abstract(*xs, **given):
        if set(given) != set(params):       # (pj.tiles.compute passes a user's keywords)
            raise TypeError(f"pto.{name} takes the parameters {list(params)}, got {sorted(given)}")
        for x in xs:
            check_dtype(name, "operand", x, dtypes)
        dtype = check_same_dtype(name, *xs)
        return shaped(broadcast_shapes(name, *(x.shape for x in xs)), out_dtype or dtype)
    return abstract


def batch_broadcasting(prim):
    """vmap rule for ops that broadcast their operands: batch at the front, ranks aligned."""

    def rule(args, dims, **params):
        rank = max(a.ndim - (d is not None) for a, d in zip(args, dims))
        return prim.bind(*[layout.batch_front(a, d, rank) for a, d in zip(args, dims)], **params), 0

    batching.primitive_batchers[prim] = rule


def _to_out(g, *xs):
    """Broadcast a tangent to the op's output shape."""
    return layout.expand(g, broadcast_shapes("expand", *(x.shape for x in xs)))


def _shape(x):
    return (x.aval if ad.is_undefined_primal(x) else x).shape


def _transpose(prim, *rules):
    """Transpose rule from one ``rule(ct, *args)`` per argument (``None``: never linear there)."""

    def transpose(ct, *args, **params):
        if type(ct) is ad.Zero:
            return [None] * len(args)
        return [reduce.unbroadcast(rule(ct, *args, **params), _shape(x))
                if rule is not None and ad.is_undefined_primal(x) else None
                for rule, x in zip(rules, args)]

    ad.primitive_transposes[prim] = transpose


def _define(name, dtypes, reference, out_dtype=None, differentiable=True, params=()):
    prim = define(name, "elementwise", abstract=_abstract(name, dtypes, out_dtype, params), reference=reference,
                  dtypes=dtypes, differentiable=differentiable)
    batch_broadcasting(prim)
    return prim


def _public(prim, name, doc, arity):
    """The public op of ``prim``: ``op(x)``, or ``op(x, y)`` (more operands refused by name)."""
    if arity == 1:
        def op(x):
            return prim.bind(tensor(name, x))
    else:
        def op(x, y, *more):
            if more:
                raise op_error(PtoArgumentError, name, f"takes 2 operands, got {2 + len(more)}")
            return prim.bind(*operands(name, x, y))
        op.__signature__ = inspect.Signature([inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                                              for p in "xy"])
    op.__name__, op.__qualname__, op.__doc__ = name, name, doc
    return op


# ------------------------------------------------------------------------------------------- binary
add_p = _define("add", NUMERIC, jnp.add)
sub_p = _define("sub", NUMERIC, jnp.subtract)
mul_p = _define("mul", NUMERIC, jnp.multiply)
div_p = _define("div", FLOAT, upcast(jnp.divide))
maximum_p = _define("maximum", NUMERIC, jnp.maximum)
minimum_p = _define("minimum", NUMERIC, jnp.minimum)
pow_p = _define("pow", FLOAT, upcast(jnp.power))


def _broadcasting(fn):
    """A ``lax`` op (equal shapes) on operands broadcast by NumPy rules, as the ops take them."""
    return lambda *xs: fn(*jnp.broadcast_arrays(*xs))


_rem = upcast(_broadcasting(lax.rem))         # lax.rem, not jnp.fmod: that gives 0 for an integer x % 0
fmod_p = _define("fmod", NUMERIC, _rem)

add = _public(add_p, "add", "``x + y``; integers wrap on overflow.", 2)
sub = _public(sub_p, "sub", "``x - y``; integers wrap on overflow.", 2)
mul = _public(mul_p, "mul", "``x * y``; integers wrap on overflow.", 2)
div = _public(div_p, "div", "``x / y`` for floating-point operands.", 2)
maximum = _public(maximum_p, "maximum", "Elementwise maximum; NaN propagates.", 2)
minimum = _public(minimum_p, "minimum", "Elementwise minimum; NaN propagates.", 2)
pow = _public(pow_p, "pow", "``x ** y`` for floating-point operands.", 2)  # noqa: A001 - PyPTO's name
fmod = _public(fmod_p, "fmod", "C's ``fmod``: the remainder of ``x / y`` truncated, with the sign of ``x`` "
               "(``lax.rem``; exact). Integers: ``x`` where ``y`` is 0, 0 for ``INT_MIN`` by -1 (as XLA).", 2)


def _extremum_weight(a, b, ans):
    """1 where ``a`` is the extremum, 1/2 where ``a`` ties with ``b``, else 0 (as lax.max's JVP)."""
    wa = _cast.cast(eq(a, ans), ans.dtype)
    wb = _cast.cast(eq(b, ans), ans.dtype)
    return div(wa, add(mul(wa, wb), 1.0))


def _safe_log(x):
    return where(eq(x, 0.0), 0.0, log(where(eq(x, 0.0), 1.0, x)))


ad.defjvp(add_p, lambda g, x, y: _to_out(g, x, y), lambda g, x, y: _to_out(g, x, y))
ad.defjvp(sub_p, lambda g, x, y: _to_out(g, x, y), lambda g, x, y: neg(_to_out(g, x, y)))
ad.defjvp(mul_p, lambda g, x, y: mul(g, y), lambda g, x, y: mul(x, g))
ad.defjvp2(div_p, lambda g, ans, x, y: _to_out(div(g, y), ans),
           lambda g, ans, x, y: neg(mul(g, div(ans, y))))
ad.defjvp2(maximum_p, lambda g, ans, x, y: mul(g, _extremum_weight(x, y, ans)),
           lambda g, ans, x, y: mul(g, _extremum_weight(y, x, ans)))
ad.defjvp2(minimum_p, lambda g, ans, x, y: mul(g, _extremum_weight(x, y, ans)),
           lambda g, ans, x, y: mul(g, _extremum_weight(y, x, ans)))
ad.defjvp2(pow_p, lambda g, ans, x, y: mul(g, mul(y, pow(x, sub(y, 1.0)))),
           lambda g, ans, x, y: mul(g, mul(_safe_log(x), ans)))

jvp_from_reference(fmod_p, _rem)

_transpose(add_p, lambda ct, x, y: ct, lambda ct, x, y: ct)
_transpose(sub_p, lambda ct, x, y: ct, lambda ct, x, y: neg(ct))
_transpose(mul_p, lambda ct, x, y: mul(ct, y), lambda ct, x, y: mul(x, ct))
_transpose(div_p, lambda ct, x, y: div(ct, y), None)


# -------------------------------------------------------------------------------------------- unary
def _gelu_reference(x, *, approximate):
    return jax.nn.gelu(x, approximate=approximate)


exp_p = _define("exp", FLOAT, upcast(jnp.exp))
log_p = _define("log", FLOAT, upcast(jnp.log))
sqrt_p = _define("sqrt", FLOAT, upcast(jnp.sqrt))
rsqrt_p = _define("rsqrt", FLOAT, upcast(lax.rsqrt))
reciprocal_p = _define("reciprocal", FLOAT, upcast(lambda x: 1.0 / x))
tanh_p = _define("tanh", FLOAT, upcast(jnp.tanh))
sigmoid_p = _define("sigmoid", FLOAT, upcast(lax.logistic))
silu_p = _define("silu", FLOAT, upcast(lambda x: x * lax.logistic(x)))
gelu_p = _define("gelu", FLOAT, upcast(_gelu_reference), params=("approximate",))
abs_p = _define("abs", NUMERIC, jnp.abs)
neg_p = _define("neg", NUMERIC, jnp.negative)
relu_p = _define("relu", NUMERIC, lambda x: jnp.maximum(x, jnp.zeros((), x.dtype)))
round_p = _define("round", FLOAT, jnp.round)

exp = _public(exp_p, "exp", "``e ** x``.", 1)
log = _public(log_p, "log", "Natural logarithm.", 1)
sqrt = _public(sqrt_p, "sqrt", "Square root.", 1)
rsqrt = _public(rsqrt_p, "rsqrt", "``1 / sqrt(x)``.", 1)
reciprocal = _public(reciprocal_p, "reciprocal", "``1 / x``.", 1)
tanh = _public(tanh_p, "tanh", "Hyperbolic tangent.", 1)
sigmoid = _public(sigmoid_p, "sigmoid", "``1 / (1 + exp(-x))``.", 1)
silu = _public(silu_p, "silu", "``x * sigmoid(x)`` (swish).", 1)
abs = _public(abs_p, "abs", "Absolute value; int8 -128 stays -128 (two's complement).", 1)  # noqa: A001
neg = _public(neg_p, "neg", "``-x``.", 1)
relu = _public(relu_p, "relu", "``max(x, 0)``.", 1)
round = _public(round_p, "round", "Round to the nearest integer, ties to even.", 1)  # noqa: A001


def gelu(x, *, approximate: bool = True):
    """GELU: the tanh approximation by default, the exact erf form with ``approximate=False``."""
    if not isinstance(approximate, bool):               # ("none", torch's exact form, is truthy)
        raise op_error(PtoArgumentError, "gelu", f"approximate must be True (the tanh form) or False (the erf "
                                                 f"form), got {approximate!r}")
    return gelu_p.bind(tensor("gelu", x), approximate=bool(approximate))


ad.defjvp2(exp_p, lambda g, ans, x: mul(g, ans))
ad.defjvp(log_p, lambda g, x: div(g, x))
ad.defjvp2(sqrt_p, lambda g, ans, x: div(g, mul(ans, 2.0)))
ad.defjvp2(rsqrt_p, lambda g, ans, x: mul(g, mul(ans, div(-0.5, x))))
ad.defjvp2(reciprocal_p, lambda g, ans, x: neg(mul(g, mul(ans, ans))))
ad.defjvp2(tanh_p, lambda g, ans, x: mul(g, sub(1.0, mul(ans, ans))))
ad.defjvp2(sigmoid_p, lambda g, ans, x: mul(g, mul(ans, sub(1.0, ans))))
ad.defjvp(silu_p, lambda g, x: mul(g, mul(sigmoid(x), add(1.0, mul(x, sub(1.0, sigmoid(x)))))))
jvp_from_reference(gelu_p, upcast(_gelu_reference))
ad.defjvp(abs_p, lambda g, x: where(ge(x, 0), g, neg(g)))          # at 0: 1, as jnp.abs's
ad.deflinear2(neg_p, lambda ct, x: [neg(ct)])
ad.defjvp(relu_p, lambda g, x: where(gt(x, 0), g, 0))
jvp_zero(round_p)


# ------------------------------------------------------------------------------- compare and logic
eq_p = _define("eq", ANY, jnp.equal, BOOL, differentiable=False)
ne_p = _define("ne", ANY, jnp.not_equal, BOOL, differentiable=False)
lt_p = _define("lt", NUMERIC, jnp.less, BOOL, differentiable=False)
le_p = _define("le", NUMERIC, jnp.less_equal, BOOL, differentiable=False)
gt_p = _define("gt", NUMERIC, jnp.greater, BOOL, differentiable=False)
ge_p = _define("ge", NUMERIC, jnp.greater_equal, BOOL, differentiable=False)
logical_and_p = _define("logical_and", (BOOL,), jnp.logical_and, differentiable=False)
logical_or_p = _define("logical_or", (BOOL,), jnp.logical_or, differentiable=False)
logical_not_p = _define("logical_not", (BOOL,), jnp.logical_not, differentiable=False)
for _p in (eq_p, ne_p, lt_p, le_p, gt_p, ge_p, logical_and_p, logical_or_p, logical_not_p):
    jvp_zero(_p)

eq = _public(eq_p, "eq", "``x == y`` as bool.", 2)
ne = _public(ne_p, "ne", "``x != y`` as bool.", 2)
lt = _public(lt_p, "lt", "``x < y`` as bool.", 2)
le = _public(le_p, "le", "``x <= y`` as bool.", 2)
gt = _public(gt_p, "gt", "``x > y`` as bool.", 2)
ge = _public(ge_p, "ge", "``x >= y`` as bool.", 2)
logical_and = _public(logical_and_p, "logical_and", "Boolean and.", 2)
logical_or = _public(logical_or_p, "logical_or", "Boolean or.", 2)
logical_not = _public(logical_not_p, "logical_not", "Boolean not.", 1)


# ------------------------------------------------------------------------------------------ bitwise
bitwise_and_p = _define("bitwise_and", INT, _broadcasting(lax.bitwise_and), differentiable=False)
bitwise_or_p = _define("bitwise_or", INT, _broadcasting(lax.bitwise_or), differentiable=False)
bitwise_xor_p = _define("bitwise_xor", INT, _broadcasting(lax.bitwise_xor), differentiable=False)
bitwise_not_p = _define("bitwise_not", INT, lax.bitwise_not, differentiable=False)
shift_left_p = _define("shift_left", INT, _broadcasting(lax.shift_left), differentiable=False)
shift_right_p = _define("shift_right", INT, _broadcasting(lax.shift_right_arithmetic), differentiable=False)
for _p in (bitwise_and_p, bitwise_or_p, bitwise_xor_p, bitwise_not_p, shift_left_p, shift_right_p):
    jvp_zero(_p)

bitwise_and = _public(bitwise_and_p, "bitwise_and", "``x & y`` on integers.", 2)
bitwise_or = _public(bitwise_or_p, "bitwise_or", "``x | y`` on integers.", 2)
bitwise_xor = _public(bitwise_xor_p, "bitwise_xor", "``x ^ y`` on integers.", 2)
bitwise_not = _public(bitwise_not_p, "bitwise_not", "``~x`` on integers.", 1)


# -------------------------------------------------------------------------------------------- where
def _where_abstract(cond, x, y):
    check_dtype("where", "condition", cond, (BOOL,))
    check_dtype("where", "operand", x, ANY)
    dtype = check_same_dtype("where", x, y)
    return shaped(broadcast_shapes("where", cond.shape, x.shape, y.shape), dtype)


where_p = define("where", "elementwise", abstract=_where_abstract, reference=jnp.where)
batch_broadcasting(where_p)
ad.defjvp(where_p, None, lambda g, c, x, y: where(c, g, 0), lambda g, c, x, y: where(c, 0, g))
_transpose(where_p, None, lambda ct, c, x, y: where(c, ct, 0), lambda ct, c, x, y: where(c, 0, ct))


def where(cond, x, y):
    """``x`` where ``cond`` is true, else ``y`` (broadcast together; two numbers take JAX's dtype for them)."""
    cond = tensor("where", cond)
    if is_scalar(x) and is_scalar(y):         # where(p, 1, 0): the numbers filled out to the condition's shape
        x = layout.expand(jnp.asarray(x, jnp.result_type(x, y)), tuple(cond.shape))
    x, y = operands("where", x, y)
    return where_p.bind(cond, x, y)


# ------------------------------------------------------------------------------------------- shifts
def _shift(prim, name, doc, sign_fills):
    """A shift whose count, unless a constant, is checked before the instruction: the vector unit's
    ``tshl`` / ``tshr`` are C's ``<<`` / ``>>``, which leave a count outside ``[0, 32)`` undefined (x86
    takes it modulo 32), where the op gives XLA's answer. Selection settles a constant count."""
    def op(x, n):
        static = not isinstance(n, jax.core.Tracer)
        x, n = operands(name, x, n)
        if static:
            return prim.bind(x, n)
        bits = 8 * n.dtype.itemsize
        outside = logical_or(lt(n, 0), ge(n, bits))
        if sign_fills:                       # a shift by the width less one fills with the sign
            return prim.bind(x, where(outside, bits - 1, n))
        return where(outside, 0, prim.bind(x, where(outside, 0, n)))
    op.__name__, op.__qualname__, op.__doc__ = name, name, doc
    return op


shift_left = _shift(shift_left_p, "shift_left", "``x << n`` (wrapping); a count outside ``[0, bits)`` gives 0.",
                    sign_fills=False)
shift_right = _shift(shift_right_p, "shift_right", "``x >> n``, arithmetic (the sign fills); a count outside "
                     "``[0, bits)`` gives -1 for negative ``x``, else 0.", sign_fills=True)


# --------------------------------------------------------------------------------------------- clip
def _clip_reference(x, lo, hi):
    return jnp.minimum(jnp.maximum(x, lo), hi)


clip_p = _define("clip", NUMERIC, _clip_reference)


def _clip_weights(ans, x, lo, hi):
    """The weights of ``x``, ``lo`` and ``hi`` in ``clip``'s tangent, as ``jnp.clip``'s (``min(max(x, lo),
    hi)``): a tie splits its share in half, so ``x`` on a bound takes 1/2."""
    m = maximum(x, lo)
    inner = _extremum_weight(m, hi, ans)
    return mul(inner, _extremum_weight(x, lo, m)), mul(inner, _extremum_weight(lo, x, m)), _extremum_weight(hi, m, ans)


ad.defjvp2(clip_p, *(lambda g, ans, x, lo, hi, k=k: mul(_to_out(g, x, lo, hi), _clip_weights(ans, x, lo, hi)[k])
                     for k in range(3)))


def clip(x, min=None, max=None):  # noqa: A002 - PyPTO's names
    """Clamp ``x`` to ``[min, max]`` (scalars or tensors; ``None`` leaves that side open)."""
    x = tensor("clip", x)
    check_dtype("clip", "operand", x, NUMERIC)
    if min is None and max is None:
        raise op_error(PtoArgumentError, "clip", "needs min, max or both")
    floating = x.dtype in FLOAT
    lo = min if min is not None else (-jnp.inf if floating else int(jnp.iinfo(x.dtype).min))
    hi = max if max is not None else (jnp.inf if floating else int(jnp.iinfo(x.dtype).max))
    return clip_p.bind(*operands("clip", x, lo, hi))
