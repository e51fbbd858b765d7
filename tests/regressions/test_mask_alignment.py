"""Regression: compare masks of f32 rows wider than 256 columns, not a multiple of 256, did not build.

A2/A3 pack a compare's mask a bit per element: ``cols / 8`` bytes per row. Selection padded a mask
row only up to 32 bytes (``max(32, cols)``), so ``jnp.where`` on rows of 1000 f32 got a ``ui8`` mask
tile of 125 columns (264 -> 33, 520 -> 65, the staged argmax / argmin over rows of 5000 -> 511 ...).
ptoas took the text, but pto-isa's ``Tile`` static_asserts a row-major row of a multiple of 32 bytes
(include/pto/common/pto_tile.hpp: "Rows must be 32 bytes align"), so g++ refused ptoas's C++: the
kernel could neither be built for the NPU nor cross-checked. A mask row is now padded to a multiple
of 32 bytes (its valid columns stay ``cols / 8``).
"""
import re

import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend import crosscheck as xc
from vendor_tools import MISSING, PTO_ISA_ROOT, PTOAS, REASON, needed

RNG = np.random.default_rng(0)


def _where(v):
    return jnp.where(v > 0, v, v * 0.5)


KERNELS = {
    "where x1000": (_where, RNG.standard_normal((16, 1000)).astype(np.float32)),
    "where x264": (_where, RNG.standard_normal((16, 264)).astype(np.float32)),
    "where x520": (_where, RNG.standard_normal((8, 520)).astype(np.float32)),
    "argmax x5000": (lambda v: jnp.argmax(v, axis=-1), RNG.standard_normal((4, 5000)).astype(np.float32)),
    "argmin x5000": (lambda v: jnp.argmin(v, axis=-1), RNG.standard_normal((4, 5000)).astype(np.float32)),
}
_MASK = re.compile(r"dtype=ui8, rows=(\d+), cols=(\d+), v_row=\d+, v_col=(\d+)")


@pytest.mark.parametrize("name", list(KERNELS))
def test_mask_rows_are_a_multiple_of_32_bytes(name):
    fn, x = KERNELS[name]
    compiled = pj.kernel(fn).lower(x).compile()
    masks = set(_MASK.findall(compiled.code.pto("a3")))
    assert masks, "no ui8 mask tile"
    for _, cols, valid in masks:
        assert int(cols) % 32 == 0 and int(valid) <= int(cols), masks
    np.testing.assert_array_equal(np.asarray(compiled(x)), np.asarray(fn(jnp.asarray(x))))


@needed
def test_the_masks_build_and_agree_in_the_vendor_simulator(monkeypatch):
    """ptoas's C++ of every program builds against pto-isa and runs in its CPU simulator, bit for
    bit as the engine (the g++ static_assert before). Skipped without the vendor tools, except in CI."""
    if MISSING:
        pytest.fail(REASON + " (in CI the vendor tools are required)")
    monkeypatch.setenv("PTOAS", PTOAS)
    monkeypatch.setenv("PTO_ISA_ROOT", PTO_ISA_ROOT)
    jobs = [job for fn, x in KERNELS.values() for job in xc.jobs_of(pj.kernel(fn).lower(x).compile().code)]
    results = xc.run(jobs)
    bad = [(r.function, r.status, (r.sim_error or r.engine_error or "")[-300:]) for r in results if not r.ok]
    assert not bad, bad

