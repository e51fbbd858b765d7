"""Shared pieces of pj.nn: the kernel cache, default tiles, dtype helpers."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .. import ops
from ..errors import PtoArgumentError, PtoDtypeError, PtoShapeError
from ..kernel import BACKENDS, Kernel, kernel
from ..lowering import tile
from ..lowering.memory import ASCEND_CORE
from ..primitives._base import is_number_scalar

F32 = jnp.float32
FLOATS = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(jnp.bfloat16))


def check_backend(op: str, backend: str) -> str:
    if backend not in BACKENDS:
        raise PtoArgumentError(f"pj.nn.{op}: backend {backend!r} is not one of {BACKENDS}")
    return backend


def check_static(op: str, name: str, value, kind: str = "number"):
    """``value``, refused by name where traced (under jit, grad or vmap): it is baked into the kernels."""
    if isinstance(value, jax.core.Tracer):
        raise PtoArgumentError(f"pj.nn.{op}: {name} must be a Python or NumPy {kind} (static, not "
                               f"differentiable); got a traced {value.aval.str_short()} value — close over it or use "
                               "functools.partial")
    return value


def check_eps(op: str, eps) -> float:
    """``eps`` as a float: a non-negative finite Python or NumPy number, static (baked into the kernels)."""
    check_static(op, "eps", eps)
    if not is_number_scalar(eps) or isinstance(eps, (bool, np.bool_)) or not (np.isfinite(eps) and eps >= 0):
        raise PtoArgumentError(f"pj.nn.{op}: eps must be a non-negative finite number, got {eps!r}")
    return float(eps)


def check_axis(op: str, axis, ndim: int) -> int:
    """``axis`` (one int, static) as a non-negative axis of a rank-``ndim`` input."""
    check_static(op, "axis", axis, "int")
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, (bool, np.bool_)):
        raise PtoArgumentError(f"pj.nn.{op}: axis must be one int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise PtoArgumentError(f"pj.nn.{op}: axis {axis} is out of range for a rank-{ndim} input")
    return int(axis) % ndim


def dtype_of(op: str, name: str, a) -> np.dtype:
    """``a``'s dtype as JAX takes it (NumPy's float64 is float32 unless ``jax_enable_x64``); a list or
    scalar is refused, as jnp functions refuse lists: no silent dtype choice."""
    if not hasattr(a, "dtype"):
        raise PtoDtypeError(f"pj.nn.{op}: {name} is a {type(a).__name__}, not an array; pass jnp.asarray(...) "
                            "of float32, float16 or bfloat16")
    return np.dtype(jax.dtypes.canonicalize_dtype(a.dtype))


def check_float(op: str, **arrays):
    dtypes = {name: dtype_of(op, name, a) for name, a in arrays.items()}
    for name, d in dtypes.items():
        if d not in FLOATS:
            raise PtoDtypeError(f"pj.nn.{op}: {name} has dtype {d.name}; expected float32, float16 or bfloat16")
    if len(set(dtypes.values())) > 1:
        raise PtoDtypeError(f"pj.nn.{op}: operands must share a dtype, got "
                            + ", ".join(f"{n}={d.name}" for n, d in dtypes.items()))


_KERNELS: dict = {}


def make(name: str, fn, backend: str, **static) -> Kernel:
    """One ``pj.kernel`` per (op, backend, static parameters): its compile cache lives as long as the
    process. Tiles per task are ``"auto"`` (the cost model's fastest count): at (1024, 256) the
    norms' and softmaxes' predicted makespans halve against one tile per task."""
    key = (name, backend, tuple(sorted(static.items())))
    if key not in _KERNELS:
        k = kernel(functools.partial(fn, **static) if static else fn, backend=backend,
                   options={"tiles_per_block": "auto"})
        k.name = name
        _KERNELS[key] = k
    return _KERNELS[key]


# ------------------------------------------------------------------------------------------- tiles
# Vector tiles: the last dim times the itemsize is a multiple of 32 bytes wherever a tile splits it;
# about 8 KiB of fp32 per tile so that a fused program's few live tiles stay well inside the 192 KiB UB.
# Cube tiles: multiples of the 16x16x16 fractal, m*k and k*n operands under L0A/L0B's 64 KiB and the
# fp32 m*n accumulator under L0C's 128 KiB.
TILE_BYTES = 8 * 1024
EW_COLS = 64          # elementwise column block: 64 x {2, 4} bytes, 32-byte aligned
COL_REDUCE = 16       # column block of a reduction over rows: 16 x 4 bytes (rows taken whole)
WIDE_COLS = 2048      # column block of a row wider than a tile (a vocabulary's logits): 8 KiB of fp32


def is_symbolic(d) -> bool:
    """Whether the dim ``d`` is a ``jax.export`` symbolic expression (a batch or sequence length known only
    at run time): a tile is then chosen from the static dims, or a safe default."""
    return not isinstance(d, (int, np.integer))


def check_static_dims(op: str, **arrays):
    """Refuse, naming ``op`` and the dim, a symbolic size where the op's tiles or constants need it known
    at trace time: ``name=(array, axes)``."""
    for name, (a, axes) in arrays.items():
        for axis in axes:
            d = np.shape(a)[axis]
            if is_symbolic(d):
                raise PtoShapeError(f"pj.nn.{op}: {name} {tuple(np.shape(a))} has the symbolic dim {d} at axis "
                                    f"{axis % np.ndim(a)}; its tiles are sized by it, so it must be static (only "
                                    "the leading batch / sequence dims may be symbolic)")


def ew_tile(rows_hint: int = 32):
    """An elementwise vector tile (rows, 64 cols)."""
    return (max(1, min(rows_hint, TILE_BYTES // (EW_COLS * 4))), EW_COLS)


def row_tile(d: int):
    """A row-wise (softmax / norm) tile: whole rows of ``d`` elements, as many rows as fit ~8 KiB of fp32;
    rows wider than a tile holds (``max_cols``) go in :data:`WIDE_COLS`-column blocks (a row loop over
    them inside one program per row)."""
    if d > ASCEND_CORE.max_cols:
        return (1, WIDE_COLS)
    return (max(1, min(64, TILE_BYTES // (max(1, d) * 4))), d)


def col_reduce_tile():
    """Tile of a reduction over rows: the reduced rows stay whole, 16 fp32 columns (64 bytes) per tile."""
    return (1, COL_REDUCE)


def cube_tile(m: int, k: int, n: int, itemsize: int = 4):
    """(m, k, n), multiples of 16, clipped up to the problem, fitting L0A/L0B (64 KiB) and L0C (128 KiB).
    A dim known only at run time (a ``jax.export`` symbolic batch or sequence) takes the cap: a tile may
    pass the problem (the cube pads a tail tile)."""
    def fit(x, cap):
        return cap if is_symbolic(x) else min(cap, max(16, -(-x // 16) * 16))
    tm, tk, tn = fit(m, 128), fit(k, 128 if itemsize <= 2 else 64), fit(n, 128)
    assert tm * tk * itemsize <= 64 * 1024 and tk * tn * itemsize <= 64 * 1024 and tm * tn * 4 <= 128 * 1024
    return (tm, tk, tn)


def matmul_f32(a, b, **kw):
    """``pj.ops.matmul`` accumulating in float32 under the default cube tile for its shape."""
    m = a.shape[-1] if kw.get("transpose_a") else a.shape[-2]
    k = a.shape[-2] if kw.get("transpose_a") else a.shape[-1]
    n = b.shape[-2] if kw.get("transpose_b") else b.shape[-1]
    with tile(cube=cube_tile(m, k, n, np.dtype(a.dtype).itemsize)):
        return ops.matmul(a, b, out_dtype=F32, **kw)
