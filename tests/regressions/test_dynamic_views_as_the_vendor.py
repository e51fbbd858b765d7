"""Regression from running polymorphic kernels' dynamic PTO-AS in pto-isa's CPU simulator.

A NaN-aware row max (softmax, ``x - max(x)``) views the block's R x 1 column of row results as a 1 x R
row (``treshape``) to compare and select. The dynamic module gave that view ``v_col=?``, but PTOAS gives a
view's ``?`` dim its source's valid dim of the same place (the column's one column): the row was valid
(1, 1), ``tcmp`` / ``tsel`` touched one element, and a block of fewer valid rows than its tile computed
wrong numbers on the vendor (row 0 right) while the engine, modelling the moved valid region, agreed with
NumPy. Such a view is now ``(?, ?)`` with ``pto.set_validshape``, which the engine and the replay read.

A last-axis sum of a rank-3 ``[m, 8, 16]`` value regroups its column of row sums with ``ttrans``; the
dynamic text gave a source ``(?, ?)`` and its destination ``(?, 1)`` (``(?, 1)`` into ``(?, 8)`` for the
pieces), and pto-isa's ``TTRANS`` refused to compile (its types' valid dims must mirror); so did every f16
row max on an 8-row tile (its NaN check transposes). A transpose's source and destination are ``(?, ?)``
now, with their subsets, allocated with both valid operands.
"""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend import cpusim, engine
from ptojax.ascend import crosscheck as xc
from ptojax.lowering import ir
from vendor_tools import needed, tools  # noqa: F401 - tools: autouse fixture

KERNELS = {      # name: (the body, the shape of a row, the tile, the dtype)
    "softmax": (lambda x: jax.nn.softmax(x, axis=-1) * 2.0, (64,), (16, 64), np.float32),
    "x - max": (lambda x: x - jnp.max(x, -1, keepdims=True), (64,), (16, 64), np.float32),
    "argmax": (lambda x: jnp.argmax(x, -1).astype(jnp.int32), (64,), (16, 64), np.float32),
    "rms norm": (lambda x: x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6), (64,), (16, 64), np.float32),
    "rank-3 sum": (lambda x: jnp.sum(x, -1), (8, 16), (8, 8, 16), np.float32),
    "f16 x - max, 8 rows": (lambda x: x - jnp.max(x, -1, keepdims=True), (64,), (8, 64), np.float16),
}
ROWS = (1, 7, 33)


def _one_call(body, row, tile, dtype):
    def fn(x):
        with pj.tile(vec=tile):
            return body(x)
    spec = ", ".join(["m"] + [str(d) for d in row])
    dyn = pj.kernel(fn, polymorphic_shapes=(spec,)).compiled_for(np.zeros((16,) + row, dtype)).dynamic
    (call,) = [e for e in dyn.lowering.block.jaxpr.eqns if e.primitive is ir.block_call_p]
    (part,) = call.params["spec"].parts
    return dyn, call, dyn.names[(part.program.name, tuple(part.shape))], part


@needed
def test_the_dynamic_module_computes_as_the_vendor_at_every_row_count():
    jobs, wants, engines = [], [], []
    for name, (body, row, tile, dtype) in KERNELS.items():
        dyn, call, fn, part = _one_call(body, row, tile, dtype)
        text = xc.single(dyn.text, fn)
        for m in ROWS:
            x = np.random.default_rng(m).standard_normal((m,) + row).astype(dtype)
            known = dict(zip(dyn.lowering.block.jaxpr.invars, [x]))
            known.update(zip(dyn.lowering.block.jaxpr.constvars, dyn.lowering.block.consts))
            (out,) = call.outvars
            args = [np.asarray(known[v]) for v in call.invars] + [np.zeros(dyn.shape(out, m), out.aval.dtype)]
            ran = [a.copy() for a in args] + [m]
            blocks = int(np.prod(dyn.grid(part, m)))
            for b in range(blocks):
                engine.run(dyn.module, fn, ran, b)
            jobs.append((text, fn, args + [np.array(m, np.int32)], blocks))
            wants.append((name, m, np.asarray(jax.jit(body)(x))))
            engines.append(ran[len(args) - 1])
    for (name, m, want), ran, sim in zip(wants, engines, cpusim.run_modules(jobs)):
        np.testing.assert_array_equal(sim[-2], ran, err_msg=f"{name} at {m} rows: the simulator and the engine")
        np.testing.assert_allclose(sim[-2].reshape(want.shape), want, rtol=2e-6, atol=2e-6,
                                   err_msg=f"{name} at {m} rows")


def test_a_column_viewed_as_a_row_says_its_valid_region():
    dyn, *_ = _one_call(*KERNELS["x - max"])
    assert "pto.set_validshape" in dyn.text
    moved = [line for line in dyn.text.splitlines() if "pto.treshape" in line and "cols=1," in line.split("->")[0]]
    assert moved and all("v_row=?, v_col=?" in line.split("->")[1] for line in moved)


def test_set_validshape_is_taken_only_right_after_its_treshape():
    dyn, *_ = _one_call(*KERNELS["x - max"])
    lines = dyn.text.splitlines()
    at = next(i for i, line in enumerate(lines) if "pto.set_validshape" in line)
    lines.insert(at, "    %dyn_stray = arith.constant 3 : index")
    with pytest.raises(pj.PtoError, match="pto.set_validshape of %\\w+: the engine takes it right after the "
                                          "pto.treshape that makes it"):
        engine.parse("\n".join(lines))


def test_a_transposes_source_and_destination_mirror_their_valid_dims():
    dyn, *_ = _one_call(*KERNELS["rank-3 sum"])
    trans = [line for line in dyn.text.splitlines() if "pto.ttrans" in line]
    assert trans
    for line in trans:
        types = re.findall(r"v_row=(\w+|\?), v_col=(\w+|\?)", line)
        (src_row, src_col), (dst_row, dst_col) = types[0], types[-1]
        assert (src_row, src_col) == (dst_col, dst_row), line
