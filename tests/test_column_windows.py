"""A column tile (``R x 1``, one value per row) loaded from a GM window whose rows span several dims —
a ``keepdims`` row sum of a 3-D tensor read back by another program, a unit-dim permutation (now a
reshape) broadcast along its last dim — is read through a 2-D ``rows x cols`` twin view of its tensor
(``isel/cube.py``): pto-isa's ``TLOAD`` into a column-major tile takes the rows from the window's
second-to-last dim alone and aborted (``CheckTileData``) on the ``(32, 4, 1)`` window. Numbers equal
``jax.jit``; ``ptoas`` accepts the text; pto-isa's CPU simulator runs it and agrees bit for bit."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from helpers import F16, F32, rand
from ptojax import ops as O
from ptojax.ascend import crosscheck as xc
from ptojax.ascend.ptoas import assemble
from vendor_tools import needed, tools

pytestmark = needed
_FIXTURES = (tools,)                                   # autouse: pins PTOAS / PTO_ISA_ROOT


def sum_then_scale(x):
    with jax.named_scope("A"):
        s = jnp.sum(x, -1, keepdims=True)
    with jax.named_scope("B"):                          # another program: s comes back from GM as columns
        return x * s


def regrouped(x):
    with pj.tile(vec=(2, 8, 8)):
        return jnp.broadcast_to(O.permute(x, (0, 2, 1)), (2, 8, 4))


def strided_column(x):
    """Column 3 of each row, read back in another program: the window's rows span two dims and its
    column is one of the tensor's 8."""
    with jax.named_scope("A"):
        y = x * 2.0
    with jax.named_scope("B"):
        return y[:, :, 3:4] + x


CASES = {
    "keepdims sum (64, 4, 64)": (sum_then_scale, (64, 4, 64), F32),
    "keepdims sum f16 (6, 5, 32)": (sum_then_scale, (6, 5, 32), F16),
    "unit-dim permute broadcast": (regrouped, (2, 1, 8), F32),
    "strided column": (strided_column, (16, 4, 8), F32),
}


@pytest.mark.parametrize("name", list(CASES))
def test_column_windows_over_several_dims(name):
    fn, shape, dtype = CASES[name]
    x = rand(shape, dtype, seed=0, low=-1, high=1)
    compiled = pj.kernel(fn).lower(x).compile()
    got, want = np.asarray(compiled(x), np.float64), np.asarray(jax.jit(fn)(x), np.float64)
    np.testing.assert_allclose(got, want, rtol=2e-3 if dtype == F16 else 1e-5, atol=1e-4)
    compiled.ptoas()
    assemble(compiled.code.pto(level="level3"), level="level3")
    results = xc.run(list(xc.jobs_of(compiled.code)), seed=0)
    assert results and all(r.status == "exact" for r in results), \
        [(r.function, r.status, (r.sim_error or r.engine_error or "")[:300]) for r in results]


def test_the_load_reads_a_rows_by_cols_view():
    x = rand((64, 4, 64), F32, seed=1)
    text = pj.kernel(sum_then_scale).lower(x).compile().as_text("pto")
    assert "!pto.tensor_view<256x1xf32>" in text
    assert "-> !pto.partition_tensor_view<128x1xf32>" in text
    assert "pto.tload ins(%p8_c : !pto.partition_tensor_view<128x1xf32>)" in text
