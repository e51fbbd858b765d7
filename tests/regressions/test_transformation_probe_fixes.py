"""Regressions from a probe of ptojax under JAX's transformations.

- A ``backend="sim"`` kernel that runs in a host callback (its schedule reads data, or
  ``interpret=True``) hung for ever inside ``jax.shard_map`` over several devices: the engine's own XLA
  work (a matmul's ``_mmad``) waited for devices that were waiting for the callback. It is a clear
  error at lowering now.
- ``jax.vmap`` of a kernel gathering or scattering in a batched form other than the few matched
  (``take_along_axis`` with only one operand batched, ``a[i, j]`` and ``a.at[i, j].set / add`` with
  batched indices) was refused: a gather or scatter with batch dims now indexes them by iotas.
- ``jax.lax.psum`` / ``axis_index`` in a kernel's body under ``jax.shard_map`` failed with a bare
  ``AssertionError`` from inside JAX, or a ``NameError``; ``jax.debug.print`` / ``callback`` had no
  hint; ``checkpoint_name`` (``ad_checkpoint``'s ``name``, an identity) was refused.
"""
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.ad_checkpoint import checkpoint_name

import ptojax as pj

_MESH = """
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
import numpy as np, jax, jax.numpy as jnp
import ptojax as pj
from jax.sharding import Mesh, PartitionSpec as P
mesh = Mesh(np.array(jax.devices()), ("d",))
x = np.random.default_rng(0).normal(size=(128, 128)).astype(np.float32)
w = np.random.default_rng(1).normal(size=(128, 64)).astype(np.float32)

def run(f, args, in_specs, out_spec):
    try:
        jax.jit(jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_spec))(*args)
    except pj.PtoUnsupportedError as err:
        print("REFUSED", err)
    else:
        print("RAN")
"""


def _in_mesh(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", _MESH + textwrap.dedent(code)], capture_output=True, text=True,
                            timeout=240, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_a_host_callback_kernel_inside_a_multi_device_shard_map_is_refused_not_hung():
    out = _in_mesh("""
        steered = pj.kernel(lambda a, b, p: jax.lax.cond(p > 0, lambda: a @ b, lambda: (a @ b) * 2.0))
        run(steered, (x, w, np.int32(1)), (P("d"), P(), P()), P("d"))
        run(pj.kernel(lambda a, b: jax.nn.softmax(a @ b, -1), interpret=True), (x, w), (P("d"), P()), P("d"))
        replayed = pj.kernel(lambda a, b: jax.nn.softmax(a @ b, -1))
        got = jax.jit(jax.shard_map(replayed, mesh=mesh, in_specs=(P("d"), P()), out_specs=P("d")))(x, w)
        print("REPLAY", bool(np.allclose(got, jax.nn.softmax(x @ w, -1), rtol=1e-4, atol=1e-5)))
        """)
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == ["REFUSED", "REFUSED", "REPLAY"], out
    assert "4 devices" in lines[0] and "argument 2 'p'" in lines[0] and "interpret=True" in lines[1], out
    assert lines[2] == "REPLAY True", out


def test_collectives_in_a_kernels_body_are_clear_refusals():
    out = _in_mesh("""
        run(pj.kernel(lambda a: jax.lax.psum(a, "d")), (x,), (P("d"),), P())
        run(pj.kernel(lambda a: a + jax.lax.axis_index("d").astype(jnp.float32)), (x,), (P("d"),), P("d"))
        """)
    lines = out.splitlines()
    assert len(lines) == 2 and all(line.startswith("REFUSED") for line in lines), out
    assert "psum" in lines[0] and "axis_index" in lines[1], out
    assert all("outside the kernel" in line for line in lines), out


def test_checkpoint_name_is_an_identity_and_debug_calls_are_refused_clearly():
    x = np.linspace(-2, 2, 64 * 32, dtype=np.float32).reshape(64, 32)
    f = lambda a: jnp.tanh(checkpoint_name(a * 2.0, "h")) * 3.0      # noqa: E731
    np.testing.assert_allclose(np.asarray(pj.kernel(f)(x)), np.asarray(jax.jit(f)(x)), rtol=1e-5)
    for g in (lambda a: jax.debug.print("{}", a.sum()) or a * 2.0,
              lambda a: jax.debug.callback(lambda v: None, a) or a * 2.0):
        with pytest.raises(pj.PtoUnsupportedError, match="calls back to Python.*outside it"):
            pj.kernel(g)(x)


_TAKE_ALONG = lambda a, i: jnp.take_along_axis(a, i, axis=1)      # noqa: E731
_POINT = lambda a, i: a[i, i + 3]                                  # noqa: E731
_RNG = np.random.default_rng(3)
_X, _XB = _RNG.normal(size=(64, 128)).astype(np.float32), _RNG.normal(size=(3, 64, 128)).astype(np.float32)
_I, _IB = _RNG.integers(0, 128, (64, 8)).astype(np.int32), _RNG.integers(0, 128, (3, 64, 8)).astype(np.int32)
_R, _RB = _RNG.integers(0, 64, (8,)).astype(np.int32), _RNG.integers(0, 64, (3, 8)).astype(np.int32)


@pytest.mark.parametrize("name, f, axes, args", [
    ("take_along table", _TAKE_ALONG, (0, None), (_XB, _I)),
    ("take_along indices", _TAKE_ALONG, (None, 0), (_X, _IB)),
    ("x[i, i+3] indices", _POINT, (None, 0), (_X, _RB)),
    ("x[i, i+3] both", _POINT, (0, 0), (_XB, _RB)),
    ("x.at[i, i+1].set indices", lambda a, i: a.at[i, i + 1].set(1.0), (None, 0), (_X, _RB)),
    ("x.at[i, i+1].add both", lambda a, i: a.at[i, i + 1].add(1.0), (0, 0), (_XB, _RB)),
])
def test_vmap_of_gathers_and_scatters_in_any_batched_form(name, f, axes, args):
    batched = jax.vmap(pj.kernel(f), in_axes=axes)
    want = np.asarray(jax.jit(jax.vmap(f, in_axes=axes))(*args))
    np.testing.assert_array_equal(np.asarray(batched(*args)), want, err_msg=name)
    np.testing.assert_array_equal(np.asarray(jax.jit(batched)(*args)), want, err_msg=name)
