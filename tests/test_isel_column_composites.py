"""Row composites over a last axis of one element (``isel/composite.py``, ``isel/quant.py``).

An ``R×1`` tile (a value per row) is held column-major, which the row reductions (``trowsum``,
``trowmax``) and row expansions do not read: ptoas rejected softmax, rms_norm, layer_norm and
quantize of such a tile ("expects src to use the row_major blayout"). Over one element the row
reductions are the identity, and a weight of the one column is a single value (or one per element).

Each kernel's real PTO-AS is accepted by ``ptoas`` (A3 and A5, level2 and level3, when the binary is
present) and, executed by the real-text engine, equals the same lowering run by XLA and plain JAX.
"""
from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import fuzz
import ptojax as pj
from ptojax.ascend.ptoas import find_ptoas

T = pj.tiles
ops = pj.ops
DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
ROWS = (1, 3, 8, 16, 64)


def _tiled(fn, tile):
    if tile is None:
        return fn

    def kernel(*args):
        with pj.tile(vec=tile):
            return fn(*args)
    return kernel


def _check(fn, args, tile=None, plain=None):
    """``fn`` realized to real PTO-AS that ptoas accepts and whose engine run equals XLA's run of the
    same lowering and ``plain`` (default: ``fn`` under ``jax.jit``)."""
    kernel = _tiled(fn, tile)
    lowered = pj.kernel(kernel, backend="sim").lower(*args)
    compiled = lowered.compile()
    if find_ptoas() or os.environ.get("CI") == "true":
        for arch in ("a3", "a5"):
            for level in ("level2", "level3"):
                compiled.ptoas(arch, level)             # a PtoasError names the program, line and message
    got = jax.tree.leaves(compiled(*args))
    xla = pj.kernel(kernel, backend="xla")
    want = jax.tree.leaves(pj.Lowered(xla, lowered.lowering, lowered.avals).compile()(*args))
    ref = jax.tree.leaves(jax.jit(plain or fn)(*args))
    assert len(got) == len(want) == len(ref)
    for i, (g, w, r) in enumerate(zip(got, want, ref)):
        fuzz.assert_same(g, w, f"output {i} vs XLA")
        fuzz.assert_same(g, r, f"output {i} vs jax")


def _x(shape, dtype, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) * 3).astype(DTYPES[dtype])


OPS = {
    "rms_norm": (lambda x: ops.rms_norm(x), 0),
    "rms_norm_gamma": (lambda x, g: ops.rms_norm(x, g, eps=1e-5), 1),
    "layer_norm": (lambda x: ops.layer_norm(x), 0),
    "layer_norm_gamma_beta": (lambda x, g, b: ops.layer_norm(x, g, b), 2),
    "quantize": (lambda x: ops.quantize(x), 0),
    "quantize_f16_scale": (lambda x: ops.quantize(x, scale_dtype=jnp.float16), 0),
    "softmax": (lambda x: ops.softmax(x, axis=-1), 0),
}


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_tensor_op_on_a_column_tile(op, dtype, rows):
    fn, weights = OPS[op]
    args = [_x((rows, 1), dtype)] + [_x((1,), dtype, seed=1 + i) for i in range(weights)]
    _check(fn, args, tile=(rows, 1))


@pytest.mark.parametrize("shape, tile", [((8, 1), None), ((64, 1), (8, 1)), ((2, 8, 1), None),
                                         ((4, 3, 1), (2, 3, 1))])
@pytest.mark.parametrize("op", OPS)
def test_tensor_op_on_column_tiles_of_a_larger_tensor(op, shape, tile):
    fn, weights = OPS[op]
    args = [_x(shape, "float32")] + [_x((1,), "float32", seed=1 + i) for i in range(weights)]
    _check(fn, args, tile=tile)


@pytest.mark.parametrize("gshape", [(1, 1), (8, 1)])
@pytest.mark.parametrize("norm", ["rms_norm", "layer_norm"])
def test_norm_weights_of_a_column(norm, gshape):
    """A weight broadcast to the column (``(1, 1)``) and one per element (``(8, 1)``, elementwise)."""
    fn = {"rms_norm": lambda x, g: ops.rms_norm(x, g), "layer_norm": lambda x, g: ops.layer_norm(x, g, g)}[norm]
    _check(fn, [_x((8, 1), "float32"), _x(gshape, "float32", seed=1)], tile=(8, 1))


@pytest.mark.parametrize("tile", [None, (4, 4)])
@pytest.mark.parametrize("norm", ["rms_norm", "layer_norm"])
def test_norm_weight_of_the_input_shape(norm, tile):
    """A weight with the input's own shape is elementwise (it was read as its first row)."""
    fn = {"rms_norm": lambda x, g: ops.rms_norm(x, g), "layer_norm": lambda x, g: ops.layer_norm(x, g, g)}[norm]
    _check(fn, [_x((8, 4), "float32"), _x((8, 4), "float32", seed=1)], tile=tile)


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e-30, 3.0], np.float32).reshape(8, 1)


@pytest.mark.parametrize("op", ["rms_norm", "rms_norm_gamma", "layer_norm", "layer_norm_gamma_beta", "softmax"])
def test_special_values_on_a_column(op):
    fn, weights = OPS[op]
    _check(fn, [SPECIAL] + [_x((1,), "float32", seed=1 + i) for i in range(weights)], tile=(8, 1))


@pytest.mark.parametrize("cols", [1, 4])
def test_quantize_zero_and_tiny_rows(cols):
    """A row of -0.0 quantizes to 0 with scale +0 (``tabs(-0)`` is -0: 127 / amax was -inf, q 127)."""
    x = np.array([0.0, -0.0, 1e-30, -1e-30, 5.0, -5.0, 127.0, 0.49], np.float32).reshape(8, 1).repeat(cols, 1)
    for fn, _ in (OPS["quantize"], OPS["quantize_f16_scale"]):
        _check(fn, [x], tile=(8, cols))


def _hand_softmax(x):
    w = T.window(x.shape)
    return T.grid(lambda i, ins, outs: [T.store(outs[0], T.compute("softmax", T.load(ins[0], i, w), axes=(1,)), i, w)],
                  (1, 1), x, jax.ShapeDtypeStruct(x.shape, x.dtype))


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_tiles_softmax_of_a_column(dtype, rows):
    _check(_hand_softmax, [_x((rows, 1), dtype)], plain=lambda x: jax.nn.softmax(x.astype(jnp.float32), axis=1)
           .astype(x.dtype))


def test_tiles_softmax_of_a_column_special_values():
    _check(_hand_softmax, [SPECIAL], plain=lambda x: jax.nn.softmax(x, axis=1))
