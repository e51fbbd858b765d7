"""Dynamic rows by provenance: a dim that equals the row tile or a template size by coincidence stays static.

A ``polymorphic_shapes`` kernel's dynamic PTO-AS module gives ``v_row=?`` (a row vector of the block's
results: ``v_col=?``) to the tiles that hold the block's rows. Which tiles those are follows the rows
from the loads and stores of the row windows, along the operand dims each instruction keeps: a ``1x64``
bias broadcast down the rows of a ``64``-row tile got ``v_col=?`` because its 64 columns equal the row
tile, and the tail block's load of it failed ("window [1, 64] and valid region [1, 5] hold different
numbers of elements"). These kernels — a column count equal to the row tile or to a template size, a
static leading dim equal to the row tile, a ``(64, 64)`` weight beside ``64``-row tiles, a matmul with
``K`` equal to the row tile, a gather bound equal to the template rows — run at every size, eagerly and
under ``jax.jit``, with plain JAX's numbers, and ``ptoas`` accepts their dynamic modules.
"""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

O = pj.ops
SIZES = (1, 5, 64, 65, 130)
HI = jax.lax.Precision.HIGHEST


def _rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _bias_tanh(x, b):
    """The report's kernel: ``b`` (64) broadcast down the rows of 64-row tiles, twice."""
    with pj.tile(vec=(64, 64)):
        return jnp.tanh(jnp.exp(x * 0.5) + b) * b


def _width_of_the_template(x, b):
    """512 columns, the first template's row count (the templates are then 768 and 1280)."""
    with pj.tile(vec=(16, 512)):
        return x * b + 1.0


def _leading_dim_of_the_row_tile(x, c):
    """A static (64, 64) operand, 64 the row tile: a row of it and a column of it broadcast."""
    with pj.tile(vec=(64, 64)):
        return x * c[3] + c[:, 5]


def _weight_summed_over_its_rows(x, w):
    with pj.tile(vec=(64, 64)):
        return x * 2.0 + jnp.sum(w, axis=0)


def _weight_maxed_along_its_rows(x, w):
    with pj.tile(vec=(64, 64)):
        return x + jnp.max(w, axis=1)


def _weight_matmul(x, w, b):
    """A (64, 64) weight beside 64-row tiles, a 64-wide bias in the vector epilogue."""
    with pj.tile(vec=(64, 64), cube=(64, 64, 64)):
        return jnp.tanh(O.matmul(x * 0.5, w) + b)


def _matmul_k_of_the_row_tile(x, w):
    """K = 64, the row tile."""
    with pj.tile(cube=(64, 64, 32)):
        return O.matmul(x, w)


def _softmax_with_bias(x, b):
    with pj.tile(vec=(64, 64)):
        return jax.nn.softmax(x + b, axis=-1) * b


def _row_sums_beside_a_bias(x, b):
    """Row sums (a 1x64 row of the block's results: ``v_col=?``) beside a 64-wide bias that stays static."""
    with pj.tile(vec=(64, 64)):
        return jnp.sum(x * b, axis=-1) + 1.0


def _gather_from_a_table_of_the_template_rows(idx, t):
    """A static intermediate table of 512 rows, the template's: its gather bound stays 512."""
    with pj.tile(vec=(8, 64)):
        table = jnp.concatenate([t, t * 2.0])
        return jnp.take(table, idx, axis=0, mode="fill", fill_value=0.0) + 1.0


def _matmul_reference(x, w):
    return jnp.matmul(x, w, precision=HI)


def _weight_matmul_reference(x, w, b):
    return jnp.tanh(jnp.matmul(x * 0.5, w, precision=HI) + b)


def _indices(shape, seed):
    return np.random.default_rng(seed).integers(0, 600, shape).astype(np.int32)


# name: (kernel, polymorphic shapes, its arguments at m rows, reference (None: the kernel's function), tolerance)
CASES = {
    "width_of_the_template": (_width_of_the_template, ("m, 512", None),
                              lambda m: [_rand((m, 512), m), _rand((512,), 1)], None, 1e-5),
    "leading_dim_of_the_row_tile": (_leading_dim_of_the_row_tile, ("m, 64", None),
                                    lambda m: [_rand((m, 64), m), _rand((64, 64), 1)], None, 1e-5),
    "weight_summed_over_its_rows": (_weight_summed_over_its_rows, ("m, 64", None),
                                    lambda m: [_rand((m, 64), m), _rand((64, 64), 1)], None, 1e-5),
    "weight_maxed_along_its_rows": (_weight_maxed_along_its_rows, ("m, 64", None),
                                    lambda m: [_rand((m, 64), m), _rand((64, 64), 1)], None, 1e-5),
    "weight_matmul": (_weight_matmul, ("m, 64", None, None),
                      lambda m: [_rand((m, 64), m), _rand((64, 64), 1), _rand((64,), 2)],
                      _weight_matmul_reference, 1e-4),
    "matmul_k_of_the_row_tile": (_matmul_k_of_the_row_tile, ("m, 64", None),
                                 lambda m: [_rand((m, 64), m), _rand((64, 32), 1)], _matmul_reference, 1e-4),
    "softmax_with_bias": (_softmax_with_bias, ("m, 64", None),
                          lambda m: [_rand((m, 64), m), _rand((64,), 1)], None, 1e-5),
    "row_sums_beside_a_bias": (_row_sums_beside_a_bias, ("m, 64", None),
                               lambda m: [_rand((m, 64), m), _rand((64,), 1)], None, 1e-5),
    "gather_from_a_table_of_the_template_rows": (_gather_from_a_table_of_the_template_rows, ("m", None),
                                                 lambda m: [_indices((m,), m), _rand((256, 64), 1)], None, 1e-6),
}


def _check_every_size(kernel, fn, make, reference, tol):
    for m in SIZES:
        args = make(m)
        want = np.asarray(jax.jit(reference or fn)(*args))
        for run in (kernel, jax.jit(kernel)):
            got = np.asarray(run(*args))
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f"m = {m}")
    assert kernel.compiles == 1


def _check_the_module(compiled):
    """Every tile a static window fills keeps its static valid rows and columns (it holds none of the
    block's rows; a row of a tile that holds them, a ``pto.subset``, has its ``?``), and ``ptoas`` accepts
    the dynamic module."""
    text = compiled.as_text("pto")
    assert "v_row=?" in text
    subsets = set(re.findall(r"(%\w+) = pto\.subset ", text))
    loads = re.findall(r"pto\.tload ins\(%\w+ : !pto\.partition_tensor_view<([^>]*)>\) outs\((%\w+) : ([^)]*)\)",
                       text)
    assert loads
    for window, tile, type_ in loads:
        assert ("?" in window) == ("?" in type_) or tile in subsets, (window, tile, type_)
    cpp = compiled.ptoas()
    for fn, tile in compiled.dynamic.rows.items():
        if tile is not None:                        # each function with dynamic rows takes m (an int32)
            assert re.search(rf"AICORE void {fn}\([^)]*int32_t v\d+\)", cpp), fn


def test_a_bias_as_wide_as_the_row_tile_stays_static():
    """The report's kernel at 1, 5, 64, 65 and 130 rows: the (1, 64) bias tiles keep their 64 columns."""
    kernel = pj.kernel(_bias_tanh, polymorphic_shapes=("m, 64", "64"))
    b = _rand((64,), 1)
    _check_every_size(kernel, _bias_tanh, lambda m: [_rand((m, 64), m), b], None, 1e-5)
    compiled = kernel.compiled_for(_rand((5, 64), 0), b)
    assert compiled.dynamic.rows == {"mul_exp_add_tanh_mul": 64}
    text = compiled.as_text("pto")
    bias = re.findall(r"pto\.tcolexpand(?:add|mul) ins\(%\w+, (%\w+) :", text)
    assert len(bias) == 2
    for tile in bias:
        alloc = re.search(rf"{tile} = pto\.alloc_tile (.*)$", text, re.M).group(1)
        assert alloc.startswith(": ") and "rows=1, cols=64, v_row=1, v_col=64" in alloc, alloc
    _check_the_module(compiled)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_coincidence_with_the_row_tile_or_template_stays_static(name):
    fn, shapes, make, reference, tol = CASES[name]
    kernel = pj.kernel(fn, polymorphic_shapes=shapes)
    _check_every_size(kernel, fn, make, reference, tol)
    _check_the_module(kernel.compiled_for(*make(5)))
