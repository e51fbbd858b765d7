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

Kernels of several block calls (an f16 norm at 16 rows, then a row max at 8; a matmul, then softmax) run
call by call, the simulator on the engine's arguments to each function.
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

W = np.random.default_rng(5).standard_normal((64, 32)).astype(np.float32)


def _norm_then_max(x):          # two block calls of 16 and 8 rows, f16
    with pj.tile(vec=(16, 64)):
        y = x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6)
    with pj.tile(vec=(8, 64)):
        return y * jnp.max(y, -1, keepdims=True)


def _matmul_then_softmax(x):
    with pj.tile(cube=(16, 64, 32)):
        s = pj.ops.matmul(x, W)
    with pj.tile(vec=(16, 32)):
        return jax.nn.softmax(s, axis=-1)


KERNELS = {      # name: (the body, the shape of a row, the tile (None: the body's own), the dtype)
    "softmax": (lambda x: jax.nn.softmax(x, axis=-1) * 2.0, (64,), (16, 64), np.float32),
    "x - max": (lambda x: x - jnp.max(x, -1, keepdims=True), (64,), (16, 64), np.float32),
    "argmax": (lambda x: jnp.argmax(x, -1).astype(jnp.int32), (64,), (16, 64), np.float32),
    "rms norm": (lambda x: x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6), (64,), (16, 64), np.float32),
    "rank-3 sum": (lambda x: jnp.sum(x, -1), (8, 16), (8, 8, 16), np.float32),
    "f16 x - max, 8 rows": (lambda x: x - jnp.max(x, -1, keepdims=True), (64,), (8, 64), np.float16),
    "f16 rank-3 sum": (lambda x: jnp.sum(x, -1), (8, 16), (8, 8, 16), np.float16),
    "f16 norm, then x * max": (_norm_then_max, (64,), None, np.float16),
    "matmul, then softmax": (_matmul_then_softmax, (64,), None, np.float32),
}
ROWS = (1, 7, 33)
TOLERANCE = {np.float32: 1e-5, np.float16: 2e-3}


def _dynamic(body, row, tile, dtype):
    def fn(x):
        with pj.tile(vec=tile):
            return body(x)
    spec = ", ".join(["m"] + [str(d) for d in row])
    return pj.kernel(body if tile is None else fn, polymorphic_shapes=(spec,)).compiled_for(
        np.zeros((16,) + row, dtype)).dynamic


def _chain(dyn, x, m, jobs, engines):
    """The block calls of ``dyn`` at ``m`` rows run in order on the engine (GM arrays threaded from call
    to call); per function called, the simulator's job on the same arguments (``jobs``) and the
    arguments after the engine ran it (``engines``). Returns the kernel's results."""
    block = dyn.lowering.block
    env = dict(zip(block.jaxpr.invars, [x]))
    env.update(zip(block.jaxpr.constvars, map(np.asarray, block.consts)))
    for eqn in block.jaxpr.eqns:
        ins = [np.asarray(env[v]) for v in eqn.invars]
        if eqn.primitive is not ir.block_call_p:                # a reshape between calls
            env[eqn.outvars[0]] = ins[0].reshape(dyn.shape(eqn.outvars[0], m))
            continue
        spec = eqn.params["spec"]
        args = [a.copy() for a in ins] + [ins[o.alias].copy() if o.alias is not None else
                                          np.full(dyn.shape(v, m), o.fill, v.aval.dtype)
                                          for o, v in zip(spec.outputs, eqn.outvars)]
        for part in spec.parts:
            fn = dyn.names[(part.program.name, tuple(part.shape))]
            blocks = int(np.prod(dyn.grid(part, m)))
            jobs.append((xc.single(dyn.text, fn), fn, [a.copy() for a in args] + [np.array(m, np.int32)], blocks))
            for b in range(blocks):
                engine.run(dyn.module, fn, args + [m], b)
            engines.append([a.copy() for a in args])
        env.update(zip(eqn.outvars, args[len(ins):]))
    return [env[v] for v in block.jaxpr.outvars]


@needed
def test_the_dynamic_module_computes_as_the_vendor_at_every_row_count():
    jobs, engines, checks = [], [], []
    for name, (body, row, tile, dtype) in KERNELS.items():
        dyn = _dynamic(body, row, tile, dtype)
        for m in ROWS:
            x = np.random.default_rng(m).standard_normal((m,) + row).astype(dtype)
            first = len(jobs)
            (got,) = _chain(dyn, x, m, jobs, engines)
            checks.append((name, m, first, len(jobs)))
            want = np.asarray(jax.jit(body if tile is None else lambda x: body(x))(x))
            np.testing.assert_allclose(np.asarray(got, np.float32).reshape(want.shape), want.astype(np.float32),
                                       rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype], err_msg=f"{name} at {m} rows")
    sims = cpusim.run_modules(jobs)
    for name, m, first, last in checks:
        for (_, fn, *_), ran, sim in zip(jobs[first:last], engines[first:last], sims[first:last]):
            for k, (a, b) in enumerate(zip(sim, ran)):
                np.testing.assert_array_equal(a, b, err_msg=f"{name} at {m} rows, {fn} argument {k}: the "
                                                            "simulator and the engine")


def test_a_column_viewed_as_a_row_says_its_valid_region():
    dyn = _dynamic(*KERNELS["x - max"])
    assert "pto.set_validshape" in dyn.text
    moved = [line for line in dyn.text.splitlines() if "pto.treshape" in line and "cols=1," in line.split("->")[0]]
    assert moved and all("v_row=?, v_col=?" in line.split("->")[1] for line in moved)


def test_set_validshape_is_taken_only_right_after_its_treshape():
    dyn = _dynamic(*KERNELS["x - max"])
    lines = dyn.text.splitlines()
    at = next(i for i, line in enumerate(lines) if "pto.set_validshape" in line)
    lines.insert(at, "    %dyn_stray = arith.constant 3 : index")
    with pytest.raises(pj.PtoError, match="pto.set_validshape of %\\w+: the engine takes it right after the "
                                          "pto.treshape that makes it"):
        engine.parse("\n".join(lines))


def test_a_transposes_source_and_destination_mirror_their_valid_dims():
    dyn = _dynamic(*KERNELS["rank-3 sum"])
    trans = [line for line in dyn.text.splitlines() if "pto.ttrans" in line]
    assert trans
    for line in trans:
        types = re.findall(r"v_row=(\w+|\?), v_col=(\w+|\?)", line)
        (src_row, src_col), (dst_row, dst_col) = types[0], types[-1]
        assert (src_row, src_col) == (dst_col, dst_row), line
