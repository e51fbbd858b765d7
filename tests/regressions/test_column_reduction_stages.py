"""Reductions over a leading axis under a ``vec`` tile stage so that a stage's work tiles fit the UB: an
argmin over 250 float32 rows under ``vec=(1, 64)`` or an int32 sum over 384 rows was refused by the UB
check, as a stage could read half the UB whatever the op's work tiles (``tiling.column_stage_bytes``).
And an int8 reduction of a whole (130, 257) array under the default tiles, whose text a first halving of
the default tiles left as it was, lowers at a later halving instead of failing."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from helpers import BF16
from ptojax import ascend
from ptojax.ascend.isel import liveness
from ptojax.ascend.targets import target
from ptojax.lowering.memory import aligned_bytes
from ptojax.lowering.pipeline import lower
from ptojax.lowering.tiling import column_stage_bytes

REDUCTIONS = {"sum": jnp.sum, "prod": jnp.prod, "amax": jnp.max, "amin": jnp.min, "argmax": jnp.argmax,
              "argmin": jnp.argmin}


def _tiled(red, tile):
    def fn(a):
        with pj.tile(vec=tile):
            return red(a, axis=0)
    return fn


@pytest.mark.parametrize("shape, tile, dtype, name", [
    ((250, 64), (1, 64), np.float32, "argmin"), ((384, 64), (1, 64), np.float32, "amin"),
    ((384, 64), (1, 64), np.int32, "sum"), ((700, 64), (2, 64), np.int8, "argmax"),
    ((300, 128), (1, 128), np.float16, "argmin"), ((130, 257), (2, 128), np.int32, "argmin")])
def test_a_leading_axis_reduction_stages_within_the_ub(shape, tile, dtype, name):
    x = np.random.default_rng(0).integers(-100, 100, shape).astype(dtype)
    out = pj.kernel(_tiled(REDUCTIONS[name], tile))(x)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(REDUCTIONS[name](x, axis=0)))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16, np.int32, np.int8])
def test_the_largest_stage_the_work_table_allows_fits_the_ub(dtype):
    """A reduction over as many rows as one stage may read (``column_stage_bytes``, at most half the UB
    under a tile you chose) is one stage whose selected text fits the UB as ptoas plans it."""
    memory = target("a3").memory
    for name, red in REDUCTIONS.items():
        for cols in (64, 512):
            per_row = aligned_bytes((1, cols), np.dtype(dtype), memory.align)
            budget = min(memory.ub // 2, column_stage_bytes(memory, name, dtype))
            rows = min(memory.max_rows, budget // per_row)
            text = ascend.compile_kernel(lower(_tiled(red, (1, cols)), np.zeros((rows, cols), dtype), memory=memory),
                                         memory, target("a3")).pto()
            plans = {f: liveness.ub_plan(body) for f, body in liveness.functions(text).items()}
            assert max(plans.values()) <= memory.ub, (name, np.dtype(dtype).name, rows, plans)


def test_an_int8_whole_array_reduction_lowers_under_the_default_tiles():
    x = np.random.default_rng(1).integers(-100, 100, (130, 257)).astype(np.int8)
    for red in (jnp.max, jnp.min, lambda a: jnp.sum(a, dtype=jnp.int8)):
        np.testing.assert_array_equal(np.asarray(pj.kernel(red)(x)), np.asarray(jax.jit(red)(x)))
