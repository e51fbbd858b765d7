"""A jaxpr evaluated on NumPy arrays, for the primitives whose NumPy result is XLA's bit for bit.

The eager engine runs each instruction's ``jax.numpy`` semantics (:mod:`~ptojax.ascend.tile_semantics`).
Traced once to a jaxpr (no XLA compile), an instruction made only of exactly rounded IEEE
arithmetic, comparisons, selects, exact conversions, data movement, integer shifts and remainders
and integer sums, maxima and minima runs here on NumPy; :func:`evaluable` says whether a jaxpr is
such. Transcendentals, float reductions, loops, integer division and float-to-int conversions are not
evaluable: XLA runs those.
"""
from __future__ import annotations

import numpy as np

from .._jax import Literal


def _broadcast(x, shape, broadcast_dimensions, **_):
    kept = [1] * len(shape)
    for axis, size in zip(broadcast_dimensions, np.shape(x)):
        kept[axis] = size
    return np.broadcast_to(np.reshape(x, kept), shape)


def _iota(dtype, shape, dimension, **_):
    line = np.arange(shape[dimension], dtype=dtype).reshape([-1 if a == dimension else 1 for a in range(len(shape))])
    return np.broadcast_to(line, shape)


def _pad(x, value, padding_config):
    return np.pad(x, [(lo, hi) for lo, hi, _ in padding_config], constant_values=value)


def _slice(x, start_indices, limit_indices, strides):
    return x[tuple(slice(a, b, s) for a, b, s in zip(start_indices, limit_indices, strides or [1] * x.ndim))]


def _rem(a, b):
    """XLA's ``rem``: C's ``fmod`` for floats; for integers truncated, ``x rem 0 = x`` (and ``rem -1`` 0)."""
    if np.asarray(a).dtype.kind == "f":
        return np.fmod(a, b)
    odd = (b == 0) | (b == -1) if np.asarray(b).dtype.kind == "i" else b == 0
    return np.where(b == 0, a, np.where(odd, 0, np.fmod(a, np.where(odd, 1, b))))


def _shift(kind: str):
    """XLA's shifts: a count of at least the width (or negative) shifts everything out (an
    arithmetic right shift leaves the sign)."""
    def shift(x, s):
        x, s = np.asarray(x), np.asarray(s)
        bits, unsigned = x.dtype.itemsize * 8, np.dtype(f"u{x.dtype.itemsize}")
        out = (s.astype(np.int64) < 0) | (s.astype(np.int64) >= bits)
        n = np.where(out, 0, s).astype(unsigned)
        if kind == "left":
            return np.where(out, 0, (x.view(unsigned) << n).view(x.dtype))
        if kind == "logical":
            return np.where(out, 0, (x.view(unsigned) >> n).view(x.dtype))
        signed = x.view(np.dtype(f"i{x.dtype.itemsize}"))         # the top bit is the sign, unsigned too
        return np.where(out, np.where(signed < 0, -1, 0).astype(signed.dtype), signed >> n.astype(signed.dtype)
                        ).view(x.dtype)
    return shift


_FLOAT, _INT, _ANY = "f", "iub", "fiub"
# primitive name -> (NumPy function of (operands..., **params), operand dtype kinds it is exact for)
RULES = {
    "add": (np.add, _ANY), "sub": (np.subtract, _ANY), "mul": (lambda a, b, **_: np.multiply(a, b), _ANY),
    "neg": (np.negative, _ANY), "abs": (np.abs, _FLOAT), "square": (np.square, _FLOAT),
    "div": (np.divide, _FLOAT), "rem": (_rem, "fiu"), "sqrt": (np.sqrt, _FLOAT),
    "floor": (np.floor, _FLOAT), "ceil": (np.ceil, _FLOAT), "is_finite": (np.isfinite, _FLOAT),
    "eq": (np.equal, _ANY), "ne": (np.not_equal, _ANY), "lt": (np.less, _ANY), "le": (np.less_equal, _ANY),
    "gt": (np.greater, _ANY), "ge": (np.greater_equal, _ANY),
    "and": (np.bitwise_and, _INT), "or": (np.bitwise_or, _INT), "xor": (np.bitwise_xor, _INT),
    "not": (np.invert, _INT),
    "shift_left": (_shift("left"), "iu"), "shift_right_logical": (_shift("logical"), "iu"),
    "shift_right_arithmetic": (_shift("arithmetic"), "iu"),
    "reduce_sum": (lambda x, axes: np.sum(x, axis=tuple(axes), dtype=x.dtype), "iu"),   # modular: any order
    "reduce_max": (lambda x, axes: np.max(x, axis=tuple(axes)), _INT),
    "reduce_min": (lambda x, axes: np.min(x, axis=tuple(axes)), _INT),
    "select_n": (lambda p, *cases: np.where(p, cases[1], cases[0]) if len(cases) == 2 else np.choose(p, cases), _ANY),
    "convert_element_type": (lambda x, new_dtype, **_: np.asarray(x).astype(new_dtype), _ANY),
    "bitcast_convert_type": (lambda x, new_dtype: np.ascontiguousarray(x).view(new_dtype), _ANY),
    "broadcast_in_dim": (_broadcast, _ANY),
    "reshape": (lambda x, new_sizes, **_: np.reshape(x, new_sizes), _ANY),
    "squeeze": (lambda x, dimensions: np.squeeze(x, axis=tuple(dimensions)), _ANY),
    "transpose": (lambda x, permutation: np.transpose(x, permutation), _ANY),
    "slice": (_slice, _ANY),
    "concatenate": (lambda *xs, dimension: np.concatenate(xs, axis=dimension), _ANY),
    "pad": (_pad, _ANY), "iota": (_iota, _ANY),
    "copy": (lambda x: x, _ANY), "copy_p": (lambda x: x, _ANY),
    "optimization_barrier": (lambda *xs: list(xs), _ANY),
}


_IGNORED = ("sharding", "out_sharding", "accuracy")    # parameters that do not change an exact result


def _exact_conversion(src: np.dtype, dst: np.dtype) -> bool:
    """Conversions NumPy rounds once, as XLA does: not float -> int (rounding and saturation are
    XLA's choice), not into a 2-byte float from float64 or from integers (XLA may go through float32)."""
    if dst.kind in _INT or dst.kind == "b":
        return src.kind != "f"
    if dst.itemsize == 2:
        return src.kind == "b" or (src.kind == "f" and src.itemsize <= 4)
    return src.kind in "fb" or src.itemsize <= 4


_ROUNDING = ("add", "sub", "mul", "div", "square", "sqrt")    # float results XLA may fuse (x*y+z as an fma)


def _rounds(name, dtypes, params) -> bool:
    """Whether ``eqn`` rounds a float result: inside a jitted function XLA compiles as one, such an
    operation may be fused with the next (an fma, f16 kept wider) where NumPy rounds each."""
    if name == "convert_element_type":
        dst = np.dtype(params["new_dtype"])
        return dst.kind == "f" and (dtypes[0].kind in _INT or dtypes[0].itemsize > dst.itemsize)
    return name in _ROUNDING and dtypes[0].kind == "f"


def _exact(eqn, inner: bool) -> bool:
    """Whether NumPy computes ``eqn`` as XLA does, bit for bit (``inner``: inside a jitted function)."""
    name, params = eqn.primitive.name, eqn.params
    if name in ("jit", "pjit"):
        return evaluable(params["jaxpr"].jaxpr, inner=True)
    if name not in RULES:
        return False
    kinds = RULES[name][1]
    dtypes = [np.dtype(v.aval.dtype) for v in eqn.invars] or [np.dtype(v.aval.dtype) for v in eqn.outvars]
    if name == "select_n":
        dtypes = dtypes[1:]
    if not all(d.kind in kinds for d in dtypes) or inner and _rounds(name, dtypes, params):
        return False
    if name == "convert_element_type":
        return _exact_conversion(dtypes[0], np.dtype(params["new_dtype"]))
    if name == "bitcast_convert_type":
        return dtypes[0].itemsize == np.dtype(params["new_dtype"]).itemsize
    if name == "reshape":
        return params.get("dimensions") is None
    if name == "pad":
        return all(lo >= 0 and hi >= 0 and not interior for lo, hi, interior in params["padding_config"])
    if name == "mul":
        return params.get("out_dtype") is None
    if name == "sqrt":
        return params.get("accuracy") is None
    return True


def evaluable(jaxpr, inner: bool = False) -> bool:
    """Every equation of ``jaxpr`` (and of the jaxprs it calls) is one NumPy computes as XLA does
    when the semantics run operation by operation (a called jitted function: as XLA compiles it)."""
    return all(_exact(eqn, inner) for eqn in jaxpr.eqns)


def evaluator(jaxpr, consts):
    """The outputs of an :func:`evaluable` ``jaxpr`` as a function of NumPy ``args`` (cast to its
    input dtypes), its equations looked up once."""
    slots: dict = {}                                 # variable -> its slot in the environment list

    def slot(v):
        return slots.setdefault(v, len(slots))

    fixed = [(slot(v), np.asarray(c)) for v, c in zip(jaxpr.constvars, consts)]
    inputs = [(slot(v), np.dtype(v.aval.dtype)) for v in jaxpr.invars]

    def reader(v):
        if isinstance(v, Literal):
            value = np.asarray(v.val, v.aval.dtype)
            return lambda env: value
        i = slot(v)
        return lambda env: env[i]

    steps = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in ("jit", "pjit"):
            inner = eqn.params["jaxpr"]
            fn, multiple = evaluator(inner.jaxpr, inner.consts), True
            call = lambda ins, fn=fn: fn(ins)  # noqa: E731
        else:
            params = {k: v for k, v in eqn.params.items() if k not in _IGNORED}
            rule, multiple = RULES[eqn.primitive.name][0], eqn.primitive.multiple_results
            call = lambda ins, rule=rule, params=params: rule(*ins, **params)  # noqa: E731
        steps.append(([reader(v) for v in eqn.invars], call, multiple,
                      [(slot(v), np.dtype(v.aval.dtype)) for v in eqn.outvars]))
    outputs = [reader(v) for v in jaxpr.outvars]
    size = len(slots)

    def run(args) -> list:
        env = [None] * size
        for i, c in fixed:
            env[i] = c
        for (i, dt), a in zip(inputs, args):
            env[i] = np.asarray(a, dt)
        with np.errstate(all="ignore"):              # IEEE results (inf, nan) as XLA gives them
            for ins, call, multiple, outs in steps:
                res = call([r(env) for r in ins])
                for (i, dt), out in zip(outs, res if multiple else (res,)):
                    out = np.asarray(out)
                    env[i] = out if out.dtype == dt else out.astype(dt)
        return [r(env) for r in outputs]
    return run
