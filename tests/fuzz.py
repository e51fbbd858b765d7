"""Random kernels for property tests: a hypothesis strategy over chains of ``pj.ops`` and a builder.

A kernel *spec* is plain data (dicts, tuples, ints, strings), so a failing one can be written out as a
regression file (``tests/regressions/*.py``) and rebuilt with :func:`build`::

    spec = {"seed": 3, "inputs": [((7, 33), "float16", ("uniform", -2, 2)), ...],
            "steps": [("exp", {}, {"vec": (2, 16)}), ("matmul", {"w": 1, ...}, {"cube": (16, 32, 16)}), ...]}
    fn, args = build(spec)          # fn: a Python function of pj.ops under pj.tile; args: NumPy inputs

The strategy :func:`kernels` draws 1-10 ops from the catalogue (elementwise unary / binary with scalars
and broadcasting tensors, compares and where, cast, sum/amax/amin/argmax over an axis, matmul with a
legal cube tile, reshape/transpose/expand/concat/view, gather/topk), shapes with size-1, prime and
non-dividing sizes, vector tiles whose last dim is 32-byte aligned for every dtype the op touches,
and float32/float16/bfloat16/int8/int32 (and bool from compares) wherever the op accepts them.

It tracks an abstract state (shape, dtype, a magnitude bound and whether the value is still
bit-exact across backends) so that the kernels stay well defined and comparable:

* log/sqrt/rsqrt/reciprocal/pow/div take ``abs(x) + 1`` (or ``abs(x)``), exp takes ``clip(x, -3, 3)``;
* results of re-associating or transcendental ops (sum, float matmul, exp, ...) may differ by a few
  ulps between backends; after one, the chain avoids discontinuous ops (compares, argmax, topk
  indices, casts to int, round) and, below float32, ops that cancel (add/sub, sums), which would turn
  an ulp into an arbitrary relative error.
"""
from __future__ import annotations

import dataclasses
import math
import os
import re

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

import ptojax as pj
from ptojax.ascend.ptoas import find_ptoas

O = pj.ops
F32, F16, BF16 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
I8, I32, BOOL = np.dtype(np.int8), np.dtype(np.int32), np.dtype(np.bool_)
FLOATS = (F32, F16, BF16)
INTS = (I8, I32)
NUMERIC = FLOATS + INTS
DTYPES = {d.name: d for d in NUMERIC + (BOOL,)}

SIZES = (1, 2, 3, 5, 7, 8, 13, 16, 17, 24, 31, 32, 33, 40)   # size-1, primes, non-dividing
MAX_ELEMS = 512
UNARY_FLOAT = ("exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh", "sigmoid", "silu", "gelu", "pow", "round")
UNARY_NUMERIC = ("abs", "neg", "relu", "clip")
BINARY = ("add", "sub", "mul", "maximum", "minimum")
BITWISE = ("bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right")
COMPARES = ("gt", "lt", "ge", "le", "eq", "ne")
EXACT_UNARY = ("round",)            # discontinuous: only on bit-exact values
APPROX_UNARY = ("exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh", "sigmoid", "silu", "gelu", "pow")


# ------------------------------------------------------------------------------------------- build
def make_input(shape, dtype, kind, seed):
    """A deterministic input: ``kind`` is ("uniform", lo, hi), ("ints", lo, hi) or ("bool",)."""
    rng = np.random.default_rng(seed)
    dtype = DTYPES[dtype]
    if kind[0] == "bool":
        return rng.random(shape) < 0.5
    if kind[0] == "ints":
        return rng.integers(kind[1], kind[2], size=shape).astype(dtype)
    # multiples of 1/64: exact in every float dtype, so inputs do not depend on rounding
    return (np.round(rng.uniform(kind[1], kind[2], size=shape) * 64) / 64).astype(dtype)


def _scope(tile):
    if not tile:
        import contextlib
        return contextlib.nullcontext()
    return pj.tile(**tile)


def _pos(x, shift=1.0):
    return O.add(O.abs(x), shift)


def _apply(name, p, x, args, extra):
    """One step of a spec: the new current value (extra outputs are appended to ``extra``)."""
    y = args[p["y"]] if "y" in p else None
    if name == "exp":
        return O.exp(O.clip(x, -3.0, 3.0))
    if name == "log":
        return O.log(_pos(x))
    if name == "sqrt":
        return O.sqrt(O.abs(x))
    if name in ("rsqrt", "reciprocal"):
        return getattr(O, name)(_pos(x))
    if name == "pow":
        return O.pow(_pos(x), p["e"])
    if name == "gelu":
        return O.gelu(x, approximate=p["approximate"])
    if name in ("tanh", "sigmoid", "silu", "round", "abs", "neg", "relu"):
        return getattr(O, name)(x)
    if name == "clip":
        return O.clip(x, p["lo"], p["hi"])
    if name == "bitwise_not":
        return O.bitwise_not(x)
    if name in BINARY or name in COMPARES or name in BITWISE or name in ("div", "fmod"):
        other = p["scalar"] if y is None else y
        if name == "div" or name == "fmod" and x.dtype in FLOATS:
            other = _pos(other) if y is not None else other
        a, b = (other, x) if p.get("swap") else (x, other)
        return getattr(O, name)(a, b)
    if name == "where":
        cond = O.gt(x, p["threshold"])
        return O.where(cond, x, y)
    if name == "not":
        return O.logical_not(x)
    if name in ("and", "or"):
        return getattr(O, "logical_" + name)(x, y)
    if name == "select":                                   # bool x picks between a tensor and a scalar
        return O.where(x, y, np.asarray(p["scalar"], y.dtype))
    if name == "cast":
        return O.cast(x, DTYPES[p["dtype"]], rounding=p["rounding"], saturate=p["saturate"])
    if name in ("sum", "amax", "amin", "argmax"):
        return getattr(O, name)(x, p["axis"], keepdims=p["keepdims"]) if name != "argmax" else \
            O.argmax(x, p["axis"], keepdims=p["keepdims"])
    if name == "matmul":
        bias = args[p["bias"]] if p.get("bias") is not None else None
        out_dtype = DTYPES[p["out_dtype"]] if p.get("out_dtype") else None
        return O.matmul(x, y, out_dtype=out_dtype, transpose_a=p["transpose_a"], transpose_b=p["transpose_b"],
                        bias=bias)
    if name == "reshape":
        return O.reshape(x, p["shape"])
    if name == "permute":
        return O.permute(x, p["dims"])
    if name == "expand":
        return O.expand(x, p["shape"])
    if name == "concat":
        parts = [x, x if y is None else y]
        return O.concat(parts[::-1] if p.get("swap") else parts, p["axis"])
    if name == "view":
        return O.view(x, p["shape"], p["offsets"], valid_shape=p["valid_shape"])
    if name == "gather":
        return O.gather(x, y, p["axis"])
    if name == "topk":
        values, indices = O.topk(x, p["k"], p["axis"], largest=p["largest"])
        if p["indices"]:
            extra.append(indices)
        return values
    raise KeyError(name)


def build(spec):
    """``(fn, args)``: the kernel of ``spec`` (pj.ops under pj.tile) and its NumPy inputs."""
    args = [make_input(tuple(s), d, k, spec["seed"] * 1000 + i) for i, (s, d, k) in enumerate(spec["inputs"])]

    def kernel(*xs):
        x, extra = xs[0], []
        for name, params, tile in spec["steps"]:
            with _scope(tile):
                x = _apply(name, params, x, xs, extra)
        return (x, *extra) if extra else x

    kernel.__name__ = f"fuzz_{spec['seed']}"
    return kernel, args


def describe(spec) -> str:
    """One line per step (for failure messages)."""
    ins = ", ".join(f"{d}{list(s)}" for s, d, _ in spec["inputs"])
    steps = "\n".join(f"  {n} {p} {t or ''}" for n, p, t in spec["steps"])
    return f"inputs: {ins}\n{steps}"


# --------------------------------------------------------------------------------------- strategy
@dataclasses.dataclass
class _State:
    shape: tuple
    dtype: np.dtype
    exact: bool = True          # bit-identical on every backend so far
    mag: float = 2.0            # bound on |x|
    approx_ops: int = 0


class _Builder:
    def __init__(self, draw):
        self.draw = draw
        self.inputs = []
        self.steps = []

    def add_input(self, shape, dtype, kind=None):
        dtype = np.dtype(dtype)
        if kind is None:
            if dtype == BOOL:
                kind = ("bool",)
            elif dtype == I8:
                kind = ("ints", -128, 128)
            elif dtype == I32:
                kind = ("ints", -1000, 1000)
            else:
                kind = ("uniform", -2.0, 2.0)
        self.inputs.append((tuple(int(s) for s in shape), dtype.name, kind))
        return len(self.inputs) - 1

    # -- tiles
    def vec_tile(self, shape, dtypes):
        if self.draw(st.integers(0, 9)) == 0 or not shape:
            return None
        sizes = [np.dtype(d).itemsize for d in dtypes if np.dtype(d) != BOOL] or [4]
        align = 32 // min(sizes)
        rank = self.draw(st.integers(1, min(len(shape), 3)))
        lead = [self.draw(st.sampled_from((1, 2, 3, 4, 8, 16))) for _ in range(rank - 1)]
        last = align * self.draw(st.integers(1, 4))
        return {"vec": tuple(lead) + (last,)}

    def cube_tile(self, dtype):
        ks = (32, 64) if np.dtype(dtype) == I8 else (16, 32, 48, 64)
        m = self.draw(st.sampled_from((16, 32, 48, 64)))
        n = self.draw(st.sampled_from((16, 32, 48, 64)))
        return {"cube": (m, self.draw(st.sampled_from(ks)), n)}

    def shape(self, rank=None, max_elems=MAX_ELEMS):
        rank = rank or self.draw(st.integers(1, 3))
        dims = []
        for _ in range(rank):
            cap = max(1, max_elems // max(1, math.prod(dims)))
            dims.append(self.draw(st.sampled_from([s for s in SIZES if s <= cap] or [1])))
        return tuple(dims)

    def broadcast_variant(self, shape):
        """A shape that broadcasts with ``shape`` to ``shape`` (or to one extra leading dim)."""
        kind = self.draw(st.sampled_from(("same", "ones", "suffix", "lead")))
        if kind == "ones":
            return tuple(1 if self.draw(st.booleans()) else n for n in shape)
        if kind == "suffix" and shape:
            return shape[self.draw(st.integers(0, len(shape) - 1)):]
        if kind == "lead" and len(shape) < 4 and math.prod(shape) * 3 <= MAX_ELEMS:
            return (self.draw(st.sampled_from((2, 3))),) + shape
        return shape

    def step(self, name, params, tile):
        self.steps.append((name, params, tile))


def _float_ok(s: _State):
    return s.exact or (s.dtype == F32 and s.approx_ops < 3 and s.mag <= 64)


def _choices(s: _State):
    rank, dt = len(s.shape), s.dtype
    out = []
    if dt == BOOL:
        out += ["not", "and", "select", "cast"]
    else:
        if dt in FLOATS:
            out += ["unary_float"] if _float_ok(s) else []
            out += ["clip", "abs", "neg", "relu", "scalar", "maximum_t"]
            if s.exact or dt == F32:
                out += ["binary_t", "div"]
        else:
            out += ["clip", "abs", "neg", "relu", "scalar", "binary_t", "maximum_t", "bitwise"]
        if s.exact:
            out += ["compare", "where", "cast", "fmod"]
        elif dt in FLOATS:
            out += ["cast_float"]
        if rank:
            out += ["amax"]
            if s.exact:
                out += ["argmax"]
            if dt in INTS or _float_ok(s) and (s.exact or dt == F32):
                out += ["sum"]
            out += ["topk"]
        if rank >= 2 and dt in (F32, F16, BF16, I8) and (dt == I8 and s.exact or dt != I8 and _float_ok(s)
                                                         and s.mag <= 1e3):
            out += ["matmul"]
    if rank:
        out += ["reshape", "permute", "expand", "concat", "view", "gather"]
    return out


def _draw_step(b: _Builder, s: _State) -> _State:
    draw = b.draw
    kind = draw(st.sampled_from(_choices(s)))
    shape, dt = s.shape, s.dtype
    new = dataclasses.replace(s)
    scalar_f = draw(st.sampled_from((-2.0, -1.5, -0.5, 0.25, 0.5, 1.0, 2.0)))
    scalar_i = draw(st.integers(-5, 5))

    def approx(mag):
        new.exact, new.mag, new.approx_ops = False, mag, s.approx_ops + 1

    if kind == "unary_float":
        name = draw(st.sampled_from(UNARY_FLOAT if s.exact else APPROX_UNARY))
        params = {}
        if name == "pow":
            params["e"] = draw(st.sampled_from((0.5, 2.0, 1.5)))
        if name == "gelu":
            params["approximate"] = draw(st.booleans())
        b.step(name, params, b.vec_tile(shape, [dt]))
        mag = {"exp": 21.0, "log": math.log1p(s.mag) + 1, "sqrt": math.sqrt(s.mag) + 1, "rsqrt": 1.0,
               "reciprocal": 1.0, "tanh": 1.0, "sigmoid": 1.0, "silu": s.mag + 1, "gelu": s.mag + 1,
               "round": s.mag + 1}.get(name, (s.mag + 1) ** params.get("e", 1) + 1)
        if name == "round":
            new.mag = mag
        else:
            approx(mag)
    elif kind in ("clip", "abs", "neg", "relu"):
        params = {}
        if kind == "clip":
            lo = scalar_f if dt in FLOATS else scalar_i
            params = {"lo": lo, "hi": lo + (1.5 if dt in FLOATS else 3)}
        b.step(kind, params, b.vec_tile(shape, [dt]))
    elif kind == "scalar":
        names = BINARY if s.exact or dt in INTS or dt == F32 else ("mul", "maximum", "minimum")
        name = draw(st.sampled_from(names))
        scalar = scalar_f if dt in FLOATS else scalar_i
        if not s.exact and name == "mul":
            scalar = draw(st.sampled_from((-1.0, 0.5, 2.0)))
        b.step(name, {"scalar": scalar, "swap": draw(st.booleans())}, b.vec_tile(shape, [dt]))
        new.mag = s.mag * 2 + 2 if name == "mul" else s.mag + 2
    elif kind in ("binary_t", "maximum_t", "div"):
        if kind == "div":
            name = "div"
        elif kind == "maximum_t":
            name = draw(st.sampled_from(("maximum", "minimum")))
        else:
            name = draw(st.sampled_from(BINARY))
        yshape = b.broadcast_variant(shape)
        y = b.add_input(yshape, dt)
        out_shape = tuple(np.broadcast_shapes(shape, yshape))
        b.step(name, {"y": y, "swap": draw(st.booleans())}, b.vec_tile(out_shape, [dt]))
        new.shape = out_shape
        new.mag = s.mag * 2 + 2 if name == "mul" else s.mag + 2
        if name == "div":
            approx(s.mag + 2)
    elif kind in ("fmod", "bitwise"):       # exact ops: fmod by a nonzero float or any int (x % 0 is x)
        name = "fmod" if kind == "fmod" else draw(st.sampled_from(BITWISE + ("bitwise_not",)))
        if name == "bitwise_not":
            b.step(name, {}, b.vec_tile(shape, [dt]))
        elif draw(st.booleans()):
            scalar = draw(st.sampled_from((0.5, 1.5, -2.0))) if dt in FLOATS else draw(st.integers(-9, 9))
            if name.startswith("shift"):
                scalar = draw(st.integers(0, 8 * dt.itemsize - 1))
            b.step(name, {"scalar": scalar, "swap": False}, b.vec_tile(shape, [dt]))
        else:
            yshape = b.broadcast_variant(shape)
            kind_y = ("ints", -2, 8 * dt.itemsize + 2) if name.startswith("shift") else None
            y = b.add_input(yshape, dt, kind_y)
            new.shape = tuple(np.broadcast_shapes(shape, yshape))
            b.step(name, {"y": y, "swap": name != "fmod" and draw(st.booleans())}, b.vec_tile(new.shape, [dt]))
        if name != "fmod":
            new.mag = float(np.iinfo(dt).max) + 1
    elif kind == "compare":
        name = draw(st.sampled_from(COMPARES))
        if draw(st.booleans()):
            params = {"scalar": scalar_f if dt in FLOATS else scalar_i, "swap": draw(st.booleans())}
            out_shape = shape
        else:
            yshape = b.broadcast_variant(shape)
            params = {"y": b.add_input(yshape, dt), "swap": draw(st.booleans())}
            out_shape = tuple(np.broadcast_shapes(shape, yshape))
        b.step(name, params, b.vec_tile(out_shape, [dt]))
        new.shape, new.dtype, new.mag = out_shape, BOOL, 1.0
    elif kind == "where":
        yshape = b.broadcast_variant(shape)
        y = b.add_input(yshape, dt)
        out_shape = tuple(np.broadcast_shapes(shape, yshape))
        b.step("where", {"y": y, "threshold": scalar_f if dt in FLOATS else scalar_i}, b.vec_tile(out_shape, [dt]))
        new.shape, new.mag = out_shape, max(s.mag, 2.0 if dt in FLOATS else 1000.0)
    elif kind == "not":
        b.step("not", {}, b.vec_tile(shape, [BOOL]))
    elif kind == "and":
        y = b.add_input(b.broadcast_variant(shape), BOOL)
        out_shape = tuple(np.broadcast_shapes(shape, b.inputs[y][0]))
        b.step(draw(st.sampled_from(("and", "or"))), {"y": y}, b.vec_tile(out_shape, [BOOL]))
        new.shape = out_shape
    elif kind == "select":
        ydt = draw(st.sampled_from(NUMERIC))
        y = b.add_input(shape, ydt)
        sc = scalar_f if ydt in FLOATS else scalar_i
        b.step("select", {"y": y, "scalar": sc}, b.vec_tile(shape, [ydt]))
        new.dtype, new.mag = ydt, (2.0 if ydt in FLOATS else 1000.0)
        if ydt == I8:
            new.mag = 128.0
    elif kind in ("cast", "cast_float"):
        targets = [d for d in (FLOATS if kind == "cast_float" else NUMERIC) if d != dt]
        to = draw(st.sampled_from(targets))
        rounding = draw(st.sampled_from(("rint", "round", "floor", "ceil", "trunc"))) \
            if dt in FLOATS and to in INTS else "rint"
        saturate = draw(st.booleans())
        b.step("cast", {"dtype": to.name, "rounding": rounding, "saturate": saturate}, b.vec_tile(shape, [dt, to]))
        new.dtype = to
        if to in INTS:
            new.mag = float(np.iinfo(to).max) + 1
        elif dt == BOOL:
            new.mag = 1.0
        elif to == F16 and s.mag > 6e4 or to == BF16 and s.mag > 1e4 and dt in INTS:
            new.mag = max(s.mag, 7e4)
        if to != F32 and not s.exact:
            new.approx_ops += 1
    elif kind in ("sum", "amax", "argmax"):
        name = draw(st.sampled_from(("amax", "amin"))) if kind == "amax" else kind
        axis = draw(st.integers(-len(shape), len(shape) - 1))
        keepdims = draw(st.booleans())                      # rank 1 without keepdims: a 0-d result
        out_shape = list(shape)
        if keepdims:
            out_shape[axis] = 1
        else:
            del out_shape[axis]
        out_dt = I32 if name == "argmax" else dt
        b.step(name, {"axis": axis, "keepdims": keepdims}, b.vec_tile(tuple(out_shape) or shape, [dt, out_dt]))
        new.shape, new.dtype = tuple(out_shape), out_dt
        if name == "argmax":
            new.mag = float(shape[axis])
        elif name == "sum":
            if dt in FLOATS:
                approx(s.mag * shape[axis])
            else:
                new.mag = s.mag * shape[axis]
    elif kind == "topk":
        axis = draw(st.integers(-len(shape), len(shape) - 1))
        k = draw(st.integers(1, min(shape[axis], 8)))
        indices = s.exact and draw(st.booleans())
        b.step("topk", {"k": k, "axis": axis, "largest": draw(st.booleans()), "indices": indices},
               b.vec_tile(shape, [dt, I32]))
        out_shape = list(shape)
        out_shape[axis] = k
        new.shape = tuple(out_shape)
    elif kind == "matmul":
        ta, tb = draw(st.booleans()), draw(st.booleans())
        m, k = (shape[-1], shape[-2]) if ta else (shape[-2], shape[-1])
        n = draw(st.sampled_from((1, 5, 16, 17, 24, 33)))
        batch = shape[:-2]
        wshape = (n, k) if tb else (k, n)
        if batch and draw(st.booleans()):
            wshape = batch[-1:] + wshape if draw(st.booleans()) else (1,) + wshape
        if math.prod(wshape) > MAX_ELEMS * 2:
            wshape = (n, k) if tb else (k, n)
        w = b.add_input(wshape, dt)
        acc = I32 if dt == I8 else F32
        outs = {I8: (None,), F32: (None,), F16: (None, "float16"), BF16: (None, "bfloat16")}[dt]
        out_name = draw(st.sampled_from(outs))
        bias = b.add_input((n,), acc, ("uniform", -2.0, 2.0) if acc == F32 else ("ints", -1000, 1000)) \
            if draw(st.booleans()) else None
        b.step("matmul", {"y": w, "bias": bias, "out_dtype": out_name, "transpose_a": ta, "transpose_b": tb},
               b.cube_tile(dt))
        new.shape = tuple(np.broadcast_shapes(batch, tuple(wshape[:-2]))) + (m, n)
        new.dtype = DTYPES[out_name] if out_name else acc
        if dt == I8:
            new.mag = 128 * 128 * k + 1000
        else:
            approx(s.mag * 2 * k + 2)
    elif kind == "reshape":
        total = math.prod(shape)
        how = draw(st.sampled_from(("flatten", "merge", "split", "lead1")))
        if how == "merge" and len(shape) >= 2:
            i = draw(st.integers(0, len(shape) - 2))
            target = shape[:i] + (shape[i] * shape[i + 1],) + shape[i + 2:]
        elif how == "split":
            i = draw(st.integers(0, len(shape) - 1))
            divisors = [d for d in range(1, shape[i] + 1) if shape[i] % d == 0]
            d = draw(st.sampled_from(divisors))
            target = shape[:i] + (d, shape[i] // d) + shape[i + 1:]
        elif how == "lead1" and len(shape) < 4:
            target = (1,) + shape
        else:
            target = (total,)
        if len(target) > 4:
            target = (total,)
        if draw(st.booleans()) and target.count(1) < len(target):
            j = draw(st.sampled_from([i for i, t in enumerate(target) if t != 1] or [0]))
            spec_shape = tuple(-1 if i == j else t for i, t in enumerate(target))
        else:
            spec_shape = target
        b.step("reshape", {"shape": spec_shape}, b.vec_tile(target, [dt]))
        new.shape = tuple(target)
    elif kind == "permute":
        dims = tuple(draw(st.permutations(range(len(shape)))))
        out_shape = tuple(shape[d] for d in dims)
        b.step("permute", {"dims": dims}, b.vec_tile(out_shape, [dt]))
        new.shape = out_shape
    elif kind == "expand":
        target = tuple(draw(st.sampled_from((2, 3, 5))) if n == 1 and draw(st.booleans()) else n for n in shape)
        if (target == shape or draw(st.booleans())) and len(shape) < 4:
            target = (draw(st.sampled_from((2, 3))),) + target
        if math.prod(target) > MAX_ELEMS * 2:
            target = shape
        b.step("expand", {"shape": target}, b.vec_tile(target, [dt]))
        new.shape = target
    elif kind == "concat":
        axis = draw(st.integers(-len(shape), len(shape) - 1))
        params = {"axis": axis, "swap": draw(st.booleans())}
        other = list(shape)
        if draw(st.integers(0, 3)):
            other[axis] = draw(st.sampled_from((1, 2, 7, 16)))
            params["y"] = b.add_input(tuple(other), dt)
        out_shape = list(shape)
        out_shape[axis] += other[axis]
        b.step("concat", params, b.vec_tile(tuple(out_shape), [dt]))
        new.shape = tuple(out_shape)
        if "y" in params:
            new.mag = max(s.mag, {I8: 128.0, I32: 1000.0}.get(dt, 2.0)) if dt != BOOL else 1.0
    elif kind == "view":
        out, offs, valid = [], [], []
        for n in shape:
            v = draw(st.integers(1, n))
            o = draw(st.integers(0, n - v))
            out.append(v + draw(st.sampled_from((0, 0, 1, 3))))
            offs.append(o)
            valid.append(v)
        b.step("view", {"shape": tuple(out), "offsets": tuple(offs), "valid_shape": tuple(valid)},
               b.vec_tile(tuple(out), [dt]))
        new.shape = tuple(out)
    elif kind == "gather":
        axis = draw(st.integers(-len(shape), len(shape) - 1))
        count = draw(st.sampled_from((1, 2, 3, 5, 8)))
        idx = b.add_input((count,), I32, ("ints", -1, shape[axis] + 1))   # -1 and n: out of range -> zeros
        b.step("gather", {"y": idx, "axis": axis}, b.vec_tile(shape, [dt, I32]))
        out_shape = list(shape)
        out_shape[axis] = count
        new.shape = tuple(out_shape)
    else:  # pragma: no cover
        raise AssertionError(kind)
    return new


@st.composite
def kernels(draw, max_ops=10):
    """A kernel spec (see :func:`build`): 1..``max_ops`` ops over one to a few inputs."""
    b = _Builder(draw)
    dtype = draw(st.sampled_from(NUMERIC))
    shape = b.shape()
    b.add_input(shape, dtype)
    state = _State(shape, dtype, mag={I8: 128.0, I32: 1000.0}.get(dtype, 2.0))
    for _ in range(draw(st.integers(1, max_ops))):
        state = _draw_step(b, state)
        if math.prod(state.shape) > 4 * MAX_ELEMS:
            break
    seed = draw(st.integers(0, 2**16))
    return {"seed": seed, "inputs": b.inputs, "steps": b.steps}


# ---------------------------------------------------------------------------------------- compare
def tolerance(dtype):
    from ptojax.lowering.pipeline import TOLERANCE
    rtol, atol = TOLERANCE.get(np.dtype(dtype), (0.0, 0.0))
    return 2 * rtol, 2 * atol


def assert_same(got, want, where=""):
    """Exact for integers and bools; 2x the per-level float tolerance; NaN and inf where they are."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (where, got.shape, got.dtype, want.shape, want.dtype)
    rtol, atol = tolerance(want.dtype)
    if rtol == 0 and atol == 0:
        np.testing.assert_array_equal(got, want, err_msg=where)
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"{where}: NaN positions")
    fin = np.isfinite(w) & np.isfinite(g)
    np.testing.assert_array_equal(g[~fin & ~np.isnan(w)], w[~fin & ~np.isnan(w)], err_msg=f"{where}: infinities")
    np.testing.assert_allclose(g[fin], w[fin], rtol=rtol, atol=atol, err_msg=where)


SELF_MOVE = re.compile(r"pto\.tmov ins\((%\w+) [^\n]*\) outs\(\1 ")   # a tmov whose source is its destination


def check(spec):
    """The fuzz property for one spec: sim == xla, every lowering level verifies, and Huawei's ptoas
    accepts the kernel's PTO-AS (wherever ptoas is found, and always in CI)."""
    import jax

    fn, args = build(spec)
    sim = pj.kernel(fn, backend="sim")
    lowered = sim.lower(*args)                      # pj.lower(fn, *args), as a kernel stages it: the real
    lowered.lowering.verify(*args)                  # text is selected there, so a gap fails there
    compiled = lowered.compile()
    moved = SELF_MOVE.search(compiled.as_text("pto"))
    assert moved is None, f"a tile moved onto itself (an instruction that does nothing): {moved.group(0)}"
    if find_ptoas() or os.environ.get("CI") == "true":
        compiled.ptoas()                            # a PtoasError names the program, line and message
    got = jax.tree.leaves(compiled(*args))          # the real text runs: a gap fails the call too
    xla = pj.kernel(fn, backend="xla")              # the same lowering, run by XLA (one trace, not two)
    want = jax.tree.leaves(pj.Lowered(xla, lowered.lowering, lowered.avals).compile()(*args))
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_same(g, w, f"output {i}")


def check_real_text(fn, args, archs=("a3", "a5"), levels=("level2", "level3")):
    """``fn``'s PTO-AS accepted by ptoas for each arch and level (where ptoas is found) and its run equal
    to ``jax.jit(fn)`` (:func:`assert_same`)."""
    import jax

    compiled = pj.kernel(fn).lower(*args).compile()
    if find_ptoas():
        for arch in archs:
            for level in levels:
                compiled.ptoas(arch, level)         # a PtoasError names the program, line and message
    got, _ = compiled.run(*args)
    want = jax.jit(fn)(*args)
    for i, (g, w) in enumerate(zip(jax.tree.leaves(got), jax.tree.leaves(want))):
        assert_same(g, w, f"output {i}")


def regression_source(spec, error: str) -> str:
    """A regression test file for a failing spec (run by tests/test_fuzz.py)."""
    lines = error.strip().splitlines()[:12]
    comment = "\n".join("# " + line for line in lines)
    return (f'"""Fuzz regression (found by benchmarks/fuzz_campaign.py)."""\n{comment}\n\n'
            f"SPEC = {spec!r}\n")
