"""Instructions as a NumPy line or two of host code, where that is their semantics bit for bit.

Host code (``hostcode.py``) prints a compute instruction as a call of its NumPy semantics
(``semantics.py``). An instruction whose semantics is one NumPy operation, or a few in the semantics'
order, prints as those operations instead, writing its destination tile: float and integer
arithmetic and math, comparisons, selects, broadcasts, casts to floats, matmuls (transposed,
K-chained, int8 where every sum is exact) and float sums / maxima / minima. A form applies only where
it is the semantics exactly — the operands' dtypes, their logical shapes (the ``shapes`` attribute)
against the tiles' regions, and their layout: float operands are copies of the regions, as the
interpreter reads them, computed into fresh arrays (NumPy's vector loops pick a NaN + NaN's payload by
position). ``tests/test_hostcode.py`` checks each against the semantics and the interpreter.
"""
from __future__ import annotations

import math
import re

import numpy as np

from . import asm
from .interpreter import semantic_params
from .semantics import ACCUMULATOR, BF16, BOOL, EXACT_F32_TERMS, F16, F32, FLOAT, I8, I32, INT

# Instructions whose float32 semantics is exactly this NumPy ufunc. On float16 / bfloat16 their
# semantics is the ufunc on the operands widened to float32, rounded once to the destination's dtype
# (NumPy's own float16 loops are not that: they pick other NaN payloads).
_UFUNCS = {"tadd": "add", "tsub": "subtract", "tmul": "multiply", "tdiv": "divide", "tmax": "maximum",
           "tmin": "minimum", "tsqrt": "sqrt", "ttanh": "tanh", "tround": "rint", "tabs": "absolute",
           "tneg": "negative"}
_INTEGER_UFUNCS = {"tadd", "tsub", "tmul", "tmax", "tmin", "tabs", "tneg"}   # on integers too: they wrap alike
# Float instructions whose semantics is this NumPy expression of their float32 operands ({0}, {1}, ...:
# the semantics' own steps, in its order; float64 where the semantics computes in double), rounded once
# to the destination's dtype.
_EXPRESSIONS = {
    "texp": "_np.exp({0}.astype(_np.float64))", "tlog": "_np.log({0}.astype(_np.float64))",
    "tpow": "_np.power({0}.astype(_np.float64), {1}.astype(_np.float64))",
    "trsqrt": "_np.float64(1) / _np.sqrt({0}.astype(_np.float64))", "trecip": "_np.float32(1) / {0}",
    "tsigmoid": "_np.float32(1) / (_np.float32(1) + _np.exp(-{0}))",
    "tsilu": "_np.multiply({0}, _np.float32(1) / (_np.float32(1) + _np.exp(-{0})))",
    "trelu": "_np.maximum({0}, _np.float32(0))", "tclip": "_np.minimum(_np.maximum({0}, {1}), {2})",
}
_ARITY = {name: len(set(re.findall(r"\{\d\}", text))) for name, text in _EXPRESSIONS.items()}
_REDUCE = {"tsum": "add", "tamax": "maximum", "tamin": "minimum"}     # float semantics: the ufunc's reduce
_COMPARE = {"teq": "equal", "tne": "not_equal", "tlt": "less", "tle": "less_equal", "tgt": "greater",
            "tge": "greater_equal"}


def _squeezed(shape) -> tuple:
    """``shape`` without its leading 1s: shapes equal so broadcast alike, right-aligned."""
    shape = tuple(shape)
    while shape and shape[0] == 1:
        shape = shape[1:]
    return shape


def _broadcasts_to(regions, out) -> bool:
    """Whether tile regions ``regions`` broadcast to ``out``'s region."""
    try:
        return np.broadcast_shapes(*regions) == (out.v_row, out.v_col)
    except ValueError:
        return False


class InlineForms:
    """The host-code writer's inline forms (a mixin): :meth:`inline` is an instruction's line, or None.
    The writer provides ``tiles`` (SSA name -> ``TileBuf``), ``var(name)`` (an SSA name's expression),
    ``const(value, stem)`` (a namespace constant's name), ``ns`` (the namespace), ``shape(dims)`` (a tile
    value's shape as an expression) and ``assign(name, value)`` (the line writing a value to a tile).
    Tiles may carry leading axes (lane code's lanes): transposes swap the last two axes, and :meth:`axes`
    says where a tile's axes are."""

    nan_layout = True    # float operands of elementwise arithmetic copied, as the interpreter reads them

    def set_tile(self, stmt: asm.Instr, value: str, in_place: bool = False, reuse=()) -> str:
        """The line that writes expression ``value`` to the instruction's destination tile (its valid
        region: the assignment casts and broadcasts); ``in_place``: ``value`` is a ufunc call that may
        write the tile itself (``out=``), as integer arithmetic and comparisons do; ``reuse``: operand
        tiles of the destination's region and dtype that ufunc call ``value`` could write instead."""
        if in_place:
            return f"{value[:-1]}, out={self.var(stmt.outs[0].name)})"
        return self.assign(stmt.outs[0].name, value)

    def axes(self, axes: tuple) -> tuple:
        """Reduction ``axes`` of a tile value (of the logical shape) as axes of the tile expression."""
        return axes

    def inline(self, name, stmt: asm.Instr) -> str | None:
        """Instruction ``stmt`` (semantics ``name``) as one line of NumPy, or None."""
        for form in (self.ufunc, self.compare, self.where, self.expand, self.matmul, self.cast, self.reduce):
            line = form(name, stmt)
            if line is not None:
                return line
        return None

    def regions_broadcast(self, stmt: asm.Instr) -> bool:
        """Whether the instruction's tile operands broadcast as their regions do: each logical shape
        (the ``shapes`` attribute) is its region's but for leading 1s, or all are one shape over regions
        of one shape and size (nothing broadcasts: an elementwise result is the same either way)."""
        shapes, tiles = stmt.attr("shapes"), [self.tiles[o.name] for o in stmt.ins if o.name in self.tiles]
        if not shapes:
            return True
        regions = [(t.v_row, t.v_col) for t in tiles]
        return len(shapes) == len(tiles) and (
            all(_squeezed(s) == _squeezed(r) for s, r in zip(shapes, regions))
            or (len(set(map(tuple, shapes))) == 1 and len(set(regions)) == 1
                and math.prod(shapes[0]) == math.prod(regions[0])))

    def dtype_of(self, operand):
        """An operand's dtype where it is a tile or a constant, else None."""
        tile, expr = self.tiles.get(operand.name), self.var(operand.name)
        if tile is not None:
            return tile.np_dtype
        return self.ns[expr].dtype if expr.startswith("_C") else None

    def operands(self, stmt: asm.Instr, ins, dtype, out, widen=True, copy=True) -> list | None:
        """Expressions of operands ``ins`` (tiles or constants, all of ``dtype``) whose regions broadcast
        to ``out``'s as their logical shapes do, None where any is not so: float16 / bfloat16 tiles widened
        to float32 as the semantics does (if ``widen``), others copied as the interpreter reads them (if
        ``copy``: NumPy's loops follow the layout, and with them the payload of a NaN + NaN)."""
        if dtype is None or not self.regions_broadcast(stmt):
            return None
        widen, args, shapes = widen and dtype in (F16, BF16), [], []
        for o in ins:
            if self.dtype_of(o) != dtype:
                return None
            expr = self.var(o.name)
            if o.name in self.tiles:
                shapes.append((self.tiles[o.name].v_row, self.tiles[o.name].v_col))
                args.append(f"{expr}.astype(_np.float32)" if widen else f"{expr}.copy()" if copy else expr)
            else:
                args.append(self.const(self.ns[expr].astype(F32), "C") if widen else expr)
        return args if _broadcasts_to(shapes, out) else None

    def ufunc(self, name, stmt: asm.Instr) -> str | None:
        """The instruction as one NumPy ufunc (or the few of ``_EXPRESSIONS``), where that is its semantics
        bit for bit: operands (tiles or constants) of the destination's dtype whose regions broadcast to
        its region. Integers (``_INTEGER_UFUNCS``) in place; floats on copies (float16 / bfloat16 widened
        to float32), the fresh result assigned to the tile (which rounds as ``astype`` does)."""
        out = self.tiles.get(stmt.outs[0].name)
        arity = getattr(np, _UFUNCS[name]).nin if name in _UFUNCS else _ARITY.get(name)
        dtypes = FLOAT + INT if name in _INTEGER_UFUNCS else FLOAT
        if arity != len(stmt.ins) or len(stmt.outs) != 1 or out is None or semantic_params(stmt) \
                or out.np_dtype not in dtypes:
            return None
        args = self.operands(stmt, stmt.ins, out.np_dtype, out, copy=out.np_dtype not in INT and self.nan_layout)
        if args is None:
            return None
        if name in _EXPRESSIONS:
            return self.set_tile(stmt, _EXPRESSIONS[name].format(*args))
        if out.np_dtype in INT:                         # integers: no NaN, in place
            return self.set_tile(stmt, f"_np.{_UFUNCS[name]}({', '.join(args)})", in_place=True)
        reuse = [o.name for o in stmt.ins if o.name in self.tiles
                 and (self.tiles[o.name].v_row, self.tiles[o.name].v_col) == (out.v_row, out.v_col)]
        return self.set_tile(stmt, f"_np.{_UFUNCS[name]}({', '.join(args)})", reuse=reuse)

    def compare(self, name, stmt: asm.Instr) -> str | None:
        """A comparison of two operands of one dtype as its semantics' ufunc (float16 / bfloat16
        widened) into a bool tile."""
        out = self.tiles.get(stmt.outs[0].name)
        if name not in _COMPARE or len(stmt.ins) != 2 or len(stmt.outs) != 1 or out is None or out.np_dtype != BOOL:
            return None
        args = self.operands(stmt, stmt.ins, self.dtype_of(stmt.ins[0]), out, copy=False)   # no arithmetic
        return None if args is None else self.set_tile(stmt, f"_np.{_COMPARE[name]}({', '.join(args)})", in_place=True)

    def where(self, name, stmt: asm.Instr) -> str | None:
        """``tsel`` of a tile condition and values of the destination's dtype: ``np.where``."""
        out = self.tiles.get(stmt.outs[0].name)
        if name != "tsel" or len(stmt.ins) != 3 or len(stmt.outs) != 1 or out is None \
                or stmt.ins[0].name not in self.tiles:
            return None
        cond = self.tiles[stmt.ins[0].name]
        values = self.operands(stmt, stmt.ins[1:], out.np_dtype, out, widen=False, copy=False)
        if values is None or not _broadcasts_to([(cond.v_row, cond.v_col), (out.v_row, out.v_col)], out):
            return None
        return self.set_tile(stmt, f"_np.where({self.var(stmt.ins[0].name)}, {', '.join(values)})")

    def expand(self, name, stmt: asm.Instr) -> str | None:
        """``texpand`` of a tile whose region broadcasts to the destination's as its logical shape does to
        the ``shape`` attribute: the assignment."""
        out, src, shapes = self.tiles.get(stmt.outs[0].name), self.tiles.get(stmt.ins[0].name), stmt.attr("shapes")
        if name != "texpand" or len(stmt.ins) != 1 or out is None or src is None:
            return None
        shape, logical = tuple(semantic_params(stmt).get("shape", ())), tuple(shapes[0]) if shapes else None
        try:                                            # np.broadcast_to(logical, shape) is valid
            valid = logical is None or len(logical) <= len(shape) and np.broadcast_shapes(logical, shape) == shape
        except ValueError:
            valid = False
        if not valid or _squeezed(shape) != _squeezed((out.v_row, out.v_col)) \
                or (logical and _squeezed(logical) != _squeezed((src.v_row, src.v_col))):   # it broadcasts
            return None
        value = self.operands(stmt, stmt.ins, out.np_dtype, out, widen=False, copy=False)
        return None if value is None else self.set_tile(stmt, value[0])

    def matmul(self, name, stmt: asm.Instr) -> str | None:
        """A ``tmatmul`` without bias, or a ``tmatmul_acc``, as the semantics' own steps: both tiles
        (transposed as asked) widened to float32, one BLAS product (int8 ones where every partial sum is
        exact: K <= 1024), then rounded to the destination's dtype by the assignment, or added to the
        float32 / int32 accumulator. Logical shapes may add leading 1s to the tiles' matrices (a batch of
        one: the same BLAS call)."""
        params, shapes, acc = semantic_params(stmt), stmt.attr("shapes"), name == "tmatmul_acc"
        if name not in ("tmatmul", "tmatmul_acc") or len(stmt.ins) != 2 + acc \
                or set(params) != {"transpose_a", "transpose_b", *(() if acc else ("out_dtype",))}:
            return None
        out, *ins = (self.tiles.get(o.name) for o in (stmt.outs[0], *stmt.ins))
        if out is None or None in ins or ins[-2].np_dtype != ins[-1].np_dtype:
            return None
        a, b, accumulator = ins[-2], ins[-1], ACCUMULATOR.get(ins[-1].np_dtype)
        if accumulator is None or out.np_dtype != (accumulator if acc else params["out_dtype"]):
            return None
        if acc and (ins[0].np_dtype != accumulator or (ins[0].v_row, ins[0].v_col) != (out.v_row, out.v_col)):
            return None
        if shapes and (len(shapes) != len(ins) or not all(        # a batch of one of the tiles' matrices
                len(s) >= 2 and math.prod(s[:-2]) == 1 and tuple(s[-2:]) == (t.v_row, t.v_col)
                for s, t in zip(shapes, ins))):
            return None
        (m, k), (k2, n) = ((a.v_col, a.v_row) if params["transpose_a"] else (a.v_row, a.v_col),
                           (b.v_col, b.v_row) if params["transpose_b"] else (b.v_row, b.v_col))
        if k != k2 or (m, n) != (out.v_row, out.v_col) or (a.np_dtype == I8 and k > EXACT_F32_TERMS):
            return None
        *first, lhs, rhs = (self.var(o.name) for o in stmt.ins)
        lhs, rhs = (x + ".swapaxes(-1, -2)" * t for x, t in ((lhs, params["transpose_a"]), (rhs, params["transpose_b"])))
        product = f"_np.matmul({lhs}.astype(_np.float32), {rhs}.astype(_np.float32))"
        if not acc:
            return self.set_tile(stmt, product)
        if accumulator == I32:                          # integers: no NaN, in place
            return self.set_tile(stmt, f"_np.add({first[0]}, {product}.astype(_np.int32))", in_place=True)
        return self.set_tile(stmt, f"_np.add({first[0]}{'.copy()' * self.nan_layout}, {product})")

    def cast(self, name, stmt: asm.Instr) -> str | None:
        """A ``tcvt`` to a float dtype from a float or an integer one as its semantics' steps: the
        assignment converts (float16 and bfloat16 to each other through float32, which holds both exactly)."""
        if name != "tcvt" or not self.regions_broadcast(stmt):
            return None
        src, out = self.tiles.get(stmt.ins[0].name), self.tiles.get(stmt.outs[0].name)
        if src is None or out is None or src.np_dtype not in FLOAT + INT or out.np_dtype not in FLOAT \
                or (src.v_row, src.v_col) != (out.v_row, out.v_col):
            return None
        value = self.var(stmt.ins[0].name)
        if {src.np_dtype, out.np_dtype} == {F16, BF16}:
            value += ".astype(_np.float32)"
        return self.set_tile(stmt, value)

    def reduce(self, name, stmt: asm.Instr) -> str | None:
        """A float ``tsum`` / ``tamax`` / ``tamin`` as its semantics' steps: the tile as a C-ordered float32
        array (as the interpreter reads it), the ufunc's reduce (``tsum``: the reduced axes moved last and
        flattened, the last of their float32 prefix sums: left to right), the assignment rounding to the
        tile's dtype."""
        if name not in _REDUCE or len(stmt.ins) != 1 or len(stmt.outs) != 1:
            return None
        src, out = self.tiles.get(stmt.ins[0].name), self.tiles.get(stmt.outs[0].name)
        if src is None or out is None or src.np_dtype not in FLOAT or out.np_dtype != src.np_dtype:
            return None
        params, shapes = semantic_params(stmt), stmt.attr("shapes") or ((src.v_row, src.v_col),)
        if set(params) != {"axes", "keepdims"} or math.prod(shapes[0]) != src.v_row * src.v_col:
            return None
        axes, keepdims = tuple(params["axes"]), bool(params["keepdims"])
        try:
            result = np.add.reduce(np.zeros(shapes[0], F32), axis=axes, keepdims=keepdims).shape
        except (ValueError, TypeError, IndexError):     # the semantics call reports it as the interpreter does
            return None
        if math.prod(result) != out.v_row * out.v_col:
            return None
        x = self.var(stmt.ins[0].name)
        if src.np_dtype != F32:
            x = f"{x}.astype(_np.float32)"
        elif name != "tsum":
            x = f"_np.ascontiguousarray({x})"
        if tuple(shapes[0]) != (src.v_row, src.v_col):
            x += f".reshape({self.shape(shapes[0])})"
        if name == "tsum":
            shape = tuple(shapes[0])
            axes = tuple(sorted(a % len(shape) for a in axes))
            if not all(shape[a] for a in axes):
                return None
            kept = tuple(shape[a] for a in range(len(shape)) if a not in axes)
            if axes != tuple(range(len(kept), len(shape))):         # the reduced axes last, in order
                x = f"_np.moveaxis({x}, {self.axes(axes)}, {tuple(range(-len(axes), 0))})"
            if len(axes) > 1:
                x += f".reshape({self.shape(kept + (-1,))})"
            value = f"_np.cumsum({x}, axis=-1, dtype=_np.float32)[..., -1]"
            if result != kept:
                value += f".reshape({self.shape(result)})"
        else:
            value = f"_np.{_REDUCE[name]}.reduce({x}, axis={self.axes(axes)}, keepdims={keepdims})"
        if result != (out.v_row, out.v_col):
            value = f"_np.reshape({value}, {self.shape((out.v_row, out.v_col))})"
        return self.set_tile(stmt, value)


__all__ = ["InlineForms"]
