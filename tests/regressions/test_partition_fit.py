"""Regressions: the partition's fit check, a reduction's scalar epilogue, and tile override errors.

* The partition checked a fused group against its own count of live tiles (``memory.footprint``),
  which does not see a composite's work tiles: four f32 inputs and ~10 elementwise ops under
  ``vec=(16, 1024)`` split into programs it said fit (``exp+mul+tanh`` at 131072 B) and ``compile()``
  refused one (329728 B of UB as ptoas plans it). The partition now also asks the backend's plan
  (``partition.PLANNERS``: the Ascend layer registers the count ``check_fit`` makes), splits until
  every piece fits, and an op whose tiles overfill the UB even alone (``tanh`` at 16 x 1024 f32)
  computes each tile in pieces (two of 8 rows) on the grid you chose.
* ``jnp.sum(...) // 512`` under one label: the integer floor division's ~40 scalar ops were 4 more
  single-task programs in a chain (6 programs, 9 tasks, 24.66 us vs 2, 5, 8.56 us for the sum) — a
  one-point reduction grid and the 0-d grids after it did not count as the same tiles, and the host
  scalars of the divisor (its sign) between them parted the groups. They now join the sum's program.
* A capacity error from a ``tiles`` pass option blamed ``pj.tile``; it now names the option and label.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend.isel import liveness
from ptojax.lowering.memory import ASCEND_CORE


def _big(a, b, c, d):
    with pj.tile(vec=(16, 1024)), jax.named_scope("F"):
        u = jnp.exp(a) * b
        v = c * d + 1.0
        w = jnp.tanh(u) + v * a
        return w * u - v


def test_partition_fit_agrees_with_the_real_plan_and_the_kernel_compiles():
    rng = np.random.default_rng(0)
    args = [rng.uniform(-1, 1, (32, 1024)).astype(np.float32) for _ in range(4)]
    compiled = pj.kernel(_big).lower(*args).compile()          # PtoCapacityError before
    plans = {name: liveness.ub_plan(t) for name, t in liveness.functions(compiled.code.pto()).items()}
    assert max(plans.values()) <= ASCEND_CORE.ub, plans
    for program in compiled.lowering.programs:                  # the footprint printed is the plan's
        assert dict(program.footprint)["vec"] <= ASCEND_CORE.ub
    np.testing.assert_allclose(np.asarray(compiled(*args)), np.asarray(jax.jit(_big)(*args)), rtol=2e-5, atol=2e-5)


def test_an_op_whose_tile_overfills_the_ub_alone_runs_each_tile_in_pieces():
    def tanh(x):
        with pj.tile(vec=(16, 1024)), jax.named_scope("T"):
            return jnp.tanh(x)

    x = np.random.default_rng(1).uniform(-3, 3, (64, 1024)).astype(np.float32)
    compiled = pj.kernel(tanh).lower(x).compile()
    (program,) = compiled.lowering.programs
    assert "2 pieces" in program.note and compiled.profile().tasks == 4      # the grid you chose
    np.testing.assert_allclose(np.asarray(compiled(x)), np.asarray(jax.jit(tanh)(x)), rtol=2e-6, atol=1e-6)


def _count(x):
    with pj.tile(vec=(16, 64)), jax.named_scope("Count"):
        return jnp.sum((x > 0).astype(jnp.int32))


def _count_div(x):
    with pj.tile(vec=(16, 64)), jax.named_scope("Count"):
        return jnp.sum((x > 0).astype(jnp.int32)) // 512


def _count_mod(x):
    with pj.tile(vec=(16, 64)), jax.named_scope("Count"):
        return jnp.sum(x) % 3.0 - jnp.max(x) // -7


@pytest.mark.parametrize("fn", [_count_div, _count_mod])
def test_a_reductions_scalar_epilogue_joins_its_program(fn):
    x = np.round(np.random.default_rng(2).uniform(-5, 5, (64, 64)) * 4).astype(np.float32) / 4   # exact sums
    plain = pj.kernel(_count).lower(x).compile()
    compiled = pj.kernel(fn).lower(x).compile()
    assert len(compiled.lowering.programs) <= len(plain.lowering.programs) + 1       # 6 before (2 for the sum)
    assert compiled.profile().tasks <= plain.profile().tasks + 1                     # 9 before (5)
    np.testing.assert_allclose(np.asarray(compiled(x)), np.asarray(jax.jit(fn)(x)), rtol=1e-6, atol=1e-5)


def _two_labels(x, w):
    with pj.tile(cube=(64, 64, 64)), jax.named_scope("Up"):
        y = pj.ops.matmul(x, w)
    with pj.tile(vec=(32, 64)), jax.named_scope("Act"):
        return y * 2.0


@pytest.mark.parametrize("tiles, message", [
    ({"Up": {"cube": (512, 512, 512)}}, r"^pto pass options: tiles\['Up'\]: cube tile \(m=512, k=512, n=512\) needs "
                                        r"262144 bytes of L0A"),
    ({"Act": {"vec": (8192, 64)}}, r"^pto pass options: tiles\['Act'\]: vec tile \(8192, 64\) holds 524288 elements"),
    ({"Act": {"vec": (2, "x")}}, r"^pto pass options: tiles\['Act'\]: vec tile must be a tuple of ints"),
])
def test_tile_override_errors_name_the_option_and_label(tiles, message):
    x, w = np.ones((256, 128), np.float16), np.ones((128, 256), np.float16)
    with pytest.raises(pj.PtoError, match=message) as err:
        pj.kernel(_two_labels, options={"tiles": tiles}).lower(x, w)
    assert "pj.tile" not in str(err.value)
    if "cube" in str(tiles) or "8192" in str(tiles):
        assert isinstance(err.value, pj.PtoCapacityError)
