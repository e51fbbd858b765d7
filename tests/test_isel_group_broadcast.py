"""Selection of broadcasts whose operand tile is a column with rows repeated in groups under a wider tile.

An N-d broadcast flattened to a 2-D tile: a (1, 13, 1) operand of a (2, 4, 2) tile is the (4, 1) matrix
of rows 0..3 twice, each value across the 2 columns — neither a row / column expansion nor a grouped
copy of rows alone (fuzz seeds 226 and 1085: ``broadcasting [4, 1] to [8, 2] (no real PTO form
yet)``). :func:`ptojax.ascend.isel.broadcast.operand` broadcasts it across its row (``trowexpand``),
then those rows in groups, for every rule that broadcasts a tile operand: arithmetic, compares,
selects, logical and bitwise ops, the composites and ``dequantize``.

A sweep of ops x dtypes x broadcast shapes: each kernel's real PTO-AS is accepted by ``ptoas`` (A3 and
A5, level2 and level3, when the binary is present) and, run by the real-text engine
(``Compiled.run()``), equals ``jax.jit`` of the same function.
"""
import numpy as np
import pytest

import fuzz
import ptojax as pj
from ptojax.ascend.isel.broadcast import across_and_in_groups

O = pj.ops
KINDS = {"float32": ("uniform", -2.0, 2.0), "float16": ("uniform", -2.0, 2.0), "bfloat16": ("uniform", -2.0, 2.0),
         "int8": ("ints", -100, 100), "int32": ("ints", -1000, 1000), "bool": ("bool",)}
# (x shape, y shape, vec tile): y's tile is a column whose rows repeat in groups of the output tile's
SHAPES = {
    "rows 0..3 twice, across 2 columns": ((8, 13, 2), (1, 13, 1), (2, 4, 32)),
    "each row 4 times": ((3, 4, 5), (3, 1, 1), (2, 4, 32)),
    "4-d, rows 0..2 twice": ((2, 4, 3, 5), (2, 1, 3, 1), (1, 2, 3, 32)),
    "16 rows three times": ((3, 32, 3), (1, 32, 1), (3, 16, 32)),
    "both operands broadcast": ((2, 1, 5), (1, 3, 1), (2, 2, 32)),
    "40-wide rows": ((2, 5, 40), (2, 1, 1), (2, 5, 64)),
}
# (fuzz op, dtype, swap): swap puts the broadcast operand first
OPS = [("add", "float32", False), ("add", "bfloat16", False), ("add", "int8", False),
       ("sub", "float16", True), ("sub", "int32", False), ("mul", "int32", False), ("div", "float32", True),
       ("maximum", "float32", False), ("maximum", "int8", False), ("minimum", "float16", False),
       ("fmod", "float32", False), ("fmod", "int8", True), ("fmod", "int32", False),
       ("bitwise_and", "int8", False), ("bitwise_xor", "int32", False), ("shift_left", "int32", True),
       ("gt", "float32", True), ("eq", "int8", False), ("and", "bool", False), ("or", "bool", False),
       ("where", "float32", False), ("where", "int8", False)]
NAMES = list(SHAPES)


def _spec_cases():
    """Each op on the fuzz kernels' shape and on one more, in turn."""
    for i, (op, dtype, swap) in enumerate(OPS):
        for name in dict.fromkeys((NAMES[0], NAMES[1 + i % (len(NAMES) - 1)])):
            xs, ys, tile = SHAPES[name]
            params = {"y": 1} if op in ("and", "or") else {"y": 1, "threshold": 0} if op == "where" else \
                {"y": 1, "swap": swap}
            spec = {"seed": 3, "inputs": [(xs, dtype, KINDS[dtype]), (ys, dtype, KINDS[dtype])],
                    "steps": [(op, params, {"vec": tile})]}
            yield pytest.param(spec, id=f"{op}-{dtype}{'-swapped' if swap else ''}-{name}")


def test_the_shapes_are_columns_in_groups_across_columns():
    assert across_and_in_groups((4, 1), (8, 2)) and across_and_in_groups((16, 1), (48, 3))
    assert not across_and_in_groups((8, 1), (8, 2))         # a column: trowexpand
    assert not across_and_in_groups((1, 1), (8, 2))         # one value
    assert not across_and_in_groups((4, 1), (8, 1))         # a column in groups: broadcast_rows


@pytest.mark.parametrize("spec", list(_spec_cases()))
def test_binary_ops_broadcast_a_column_in_groups(spec):
    fuzz.check_real_text(*fuzz.build(spec))


def _values(shape, dtype, seed, lo=-2.0, hi=2.0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    return (np.round(rng.uniform(lo, hi, shape) * 8) / 8).astype(dtype)


COMPOSITES = {
    "clip by tile bounds, float32": lambda xs, ys: (
        lambda x, lo, hi: O.clip(x, lo, hi),
        [_values(xs, "float32", 0), _values(ys, "float32", 1, -2, 0), _values(ys, "float32", 2, 0, 2)]),
    "clip of the broadcast operand, int32": lambda xs, ys: (
        lambda x, lo: O.clip(lo, x, 1), [_values(xs, "int32", 0, -9, 9), _values(ys, "int32", 1, -9, 0)]),
    "pow by a broadcast exponent": lambda xs, ys: (
        lambda x, e: O.pow(x, e), [_values(xs, "float32", 0, 0.5, 2), _values(ys, "float32", 1)]),
    "dequantize by a broadcast scale": lambda xs, ys: (
        lambda q, scale: O.dequantize(q, scale),
        [_values(xs, "float32", 0, -100, 100).astype(np.int8), _values(ys, "float32", 1, 0.125, 1)]),
    "dequantize of a broadcast q, float16": lambda xs, ys: (
        lambda q, scale: O.dequantize(q, scale, dtype=np.float16),
        [_values(ys, "float32", 0, -100, 100).astype(np.int8), _values(xs, "float16", 1, 0.125, 1)]),
    "where by a broadcast condition": lambda xs, ys: (
        lambda c, x, y: O.where(c, x, y),
        [_values(ys, "bool", 0), _values(xs, "bfloat16", 1), _values(ys, "bfloat16", 2)]),
}


@pytest.mark.parametrize("shape", [NAMES[0], NAMES[2], NAMES[3]])
@pytest.mark.parametrize("case", COMPOSITES)
def test_composites_broadcast_a_column_in_groups(case, shape):
    xs, ys, tile = SHAPES[shape]
    inner, args = COMPOSITES[case](xs, ys)

    def fn(*xs):
        with pj.tile(vec=tile):
            return inner(*xs)
    fuzz.check_real_text(fn, args)
