"""Tile-level primitives: the PTO-ISA-style ops the lowering expands tensor ops into.

A tile is a JAX array whose shape is its valid shape (static); the buffer it lives in is the
``loc`` of the ``tload``/``tmov`` that made it (``vec`` = UB, ``mat`` = L1, ``left``/``right`` =
L0A/L0B, ``acc`` = L0C). Data moves between GM tensors and tiles through ``tload``/``tstore`` over a
:class:`Window` (an affine map from loop indices to GM offsets, like a Pallas BlockSpec), or through
``mgather``/``mscatter`` (or a user-defined :data:`GM_READERS` op) for indexed rows. Compute ops
``pto.t<op>`` apply the tensor op's semantics to tiles, so every Tile-level jaxpr evaluates to the
same numbers as the Tensor-level one.
"""
from __future__ import annotations

import dataclasses
from functools import partial

import jax.numpy as jnp
from jax import lax

from .._jax import Primitive, mlir, xla
from ..errors import PtoShapeError, op_error
from ._base import OPS, shaped

LOCATIONS = ("vec", "mat", "left", "right", "acc")


@dataclasses.dataclass(frozen=True)
class Window:
    """Which part of a GM tensor a tile covers: per GM dim, ``base + stride * indices[index]``
    (``index`` -1: no loop index) and the tile's extent ``shape``."""

    shape: tuple[int, ...]
    index: tuple[int, ...]
    stride: tuple[int, ...]
    base: tuple[int, ...]

    def offsets(self, indices):
        return [b if i < 0 else b + s * indices[i] for i, s, b in zip(self.index, self.stride, self.base)]

    def __str__(self):
        dims = []
        for n, i, s, b in zip(self.shape, self.index, self.stride, self.base):
            start = str(b) if i < 0 else (f"{s}*i{i}" + (f"+{b}" if b else ""))
            dims.append(f"{start}:+{n}")
        return "[" + ", ".join(dims) + "]"


TILE_OPS: dict[str, Primitive] = {}


def _primitive(name, abstract, reference, multiple_results=False):
    prim = Primitive(f"pto.{name}")
    prim.multiple_results = multiple_results
    prim.def_impl(partial(xla.apply_primitive, prim))
    prim.def_abstract_eval(abstract)
    mlir.register_lowering(prim, mlir.lower_fun(reference, multiple_results=multiple_results))
    TILE_OPS[name] = prim
    return prim


def _offsets(indices, window):
    return [jnp.asarray(o, jnp.int32) for o in window.offsets(indices)]


# --------------------------------------------------------------------------------- memory movement
tload_p = _primitive(
    "tload",
    lambda gm, *indices, window, loc: shaped(window.shape, gm.dtype),
    lambda gm, *indices, window, loc: lax.dynamic_slice(gm, _offsets(indices, window), window.shape))
tstore_p = _primitive(
    "tstore",
    lambda gm, tile, *indices, window: shaped(gm.shape, gm.dtype),
    lambda gm, tile, *indices, window: lax.dynamic_update_slice(gm, tile.astype(gm.dtype), _offsets(indices, window)))
tmov_p = _primitive("tmov", lambda tile, *, loc: shaped(tile.shape, tile.dtype), lambda tile, *, loc: tile)


def tload(gm, indices, window: Window, loc: str = "vec"):
    return tload_p.bind(gm, *indices, window=window, loc=loc)


def tstore(gm, tile, indices, window: Window):
    return tstore_p.bind(gm, tile, *indices, window=window)


def tmov(tile, loc: str):
    return tmov_p.bind(tile, loc=loc)


# -------------------------------------------------------------------------- indexed rows (MGATHER)
mgather_p = _primitive(
    "mgather",
    lambda gm, idx, *, axis: OPS["gather"].primitive.abstract_eval(gm, idx, axis=axis)[0],
    lambda gm, idx, *, axis: OPS["gather"].reference(gm, idx, axis=axis))


def _mscatter_reference(gm, idx, rows, *, axis, accumulate, unique=False):
    op = OPS["index_add" if accumulate else "scatter_update"]
    return op.reference(gm, idx, rows, axis=axis)


# ``unique``: the kernel's indices never repeat (a ``scatter_update`` with ``unique_indices``), so the
# instances of one call write disjoint rows and need no order between them (the runtime's concern only).
mscatter_p = _primitive("mscatter", lambda gm, idx, rows, *, axis, accumulate, unique=False: shaped(gm.shape, gm.dtype),
                        _mscatter_reference)

# Tile ops that read a GM tensor (their first operand) as indexed rows into a tile: primitive -> the
# buffer of the result (``vec`` = UB on a vector core, ``mat``/``left``/``right`` = L1/L0 on a cube
# core). They read the whole tensor as far as dependencies go, like ``mgather``; codegen, the memory
# planner, fusion, the ``pj.tiles`` checker and the runtime's region analysis consult this table.
GM_READERS: dict[Primitive, str] = {mgather_p: "vec"}


def reads_gm(prim) -> bool:
    """Whether tile primitive ``prim`` reads its first operand, a GM tensor, as indexed rows."""
    return prim in GM_READERS


# ------------------------------------------------------------------------------- deinterleave
DEINTERLEAVE_STEPS = (2, 4)     # the strides of PTO's mask-pattern gather (P0101 / P1010, P0001 ... P1000)


def _tdeinterleave_abstract(tile, *, step, offset):
    if step not in DEINTERLEAVE_STEPS or not 0 <= offset < step or tile.shape[-1] % step:
        raise op_error(PtoShapeError, "tdeinterleave", f"columns {offset}::{step} of a {list(tile.shape)} tile: the "
                       f"step is one of {DEINTERLEAVE_STEPS}, the offset below it, and it divides the columns")
    return shaped(tuple(tile.shape[:-1]) + (tile.shape[-1] // step,), tile.dtype)


def _tdeinterleave_reference(tile, *, step, offset):
    return tile[..., offset::step]


# The columns ``offset::step`` of a tile: one of the streams interleaved along its rows (a RoPE's pairs).
tdeinterleave_p = _primitive("tdeinterleave", _tdeinterleave_abstract, _tdeinterleave_reference)


def _tinterleave_abstract(*tiles):
    if len(tiles) not in DEINTERLEAVE_STEPS or len({(t.shape, t.dtype) for t in tiles}) != 1:
        raise op_error(PtoShapeError, "tinterleave", f"{len(tiles)} tiles {[list(t.shape) for t in tiles]}: it "
                       f"interleaves {' or '.join(map(str, DEINTERLEAVE_STEPS))} tiles of one shape and dtype")
    return shaped(tuple(tiles[0].shape[:-1]) + (tiles[0].shape[-1] * len(tiles),), tiles[0].dtype)


def _tinterleave_reference(*tiles):
    return jnp.stack(tiles, -1).reshape(*tiles[0].shape[:-1], -1)


# Tiles interleaved along their rows: column ``j * k + p`` of the result is column ``j`` of tile ``p``
# (``jnp.stack(pieces, -1)`` reshaped to rows of ``k * n``: a RoPE's rotated pairs written back).
tinterleave_p = _primitive("tinterleave", _tinterleave_abstract, _tinterleave_reference)


# ------------------------------------------------------------------------------------------ compute
# PTO-ISA mnemonics where one instruction implements the op; other ops keep their tensor name.
MNEMONIC = {"add": "tadd", "sub": "tsub", "mul": "tmul", "div": "tdiv", "maximum": "tmax", "minimum": "tmin",
            "pow": "tpow", "exp": "texp", "log": "tlog", "sqrt": "tsqrt", "rsqrt": "trsqrt", "reciprocal": "trecip",
            "abs": "tabs", "neg": "tneg", "relu": "trelu", "cast": "tcvt", "where": "tsel", "transpose": "ttrans",
            "concat": "tconcat", "expand": "texpand", "gather": "tgather", "sort": "tsort", "quantize": "tquant",
            "dequantize": "tdequant", "matmul": "tmatmul", "merge_topk": "tmrgsort", "bitwise_and": "tand",
            "bitwise_or": "tor", "bitwise_xor": "txor", "bitwise_not": "tnot", "shift_left": "tshl",
            "shift_right": "tshr", "fmod": "tfmod"}


def _mirror(tensor_op):
    """The tile primitive applying ``tensor_op``'s semantics to tiles."""
    op = OPS[tensor_op]
    name = MNEMONIC.get(tensor_op, "t" + tensor_op)
    return _primitive(name, lambda *avals, **params: op.primitive.abstract_eval(*avals, **params)[0],
                      op.reference, op.primitive.multiple_results)


COMPUTE = {name: _mirror(name) for name in OPS if name not in ("matmul", "bitcast")}   # (a bitcast: a GM view)


def _tmatmul_acc_abstract(acc, a, b, *, transpose_a, transpose_b):
    """``acc`` plus ``a @ b``: the product's shape and accumulator dtype (matmul's rules) are ``acc``'s."""
    product = OPS["matmul"].primitive.abstract_eval(a, b, out_dtype=acc.dtype, transpose_a=transpose_a,
                                                    transpose_b=transpose_b)[0]
    if (product.shape, product.dtype) != (acc.shape, acc.dtype):
        raise op_error(PtoShapeError, "tmatmul_acc", f"the accumulator is {acc.dtype.name}{list(acc.shape)} but "
                       f"a {a.dtype.name}{list(a.shape)} @ b {b.dtype.name}{list(b.shape)} is "
                       f"{product.dtype.name}{list(product.shape)}")
    return shaped(acc.shape, acc.dtype)


def _tmatmul_acc_reference(acc, a, b, *, transpose_a, transpose_b):
    return acc + OPS["matmul"].reference(a, b, out_dtype=acc.dtype, transpose_a=transpose_a, transpose_b=transpose_b)


tmatmul_p = _mirror("matmul")
tmatmul_acc_p = _primitive("tmatmul_acc", _tmatmul_acc_abstract, _tmatmul_acc_reference)


def _tcumsum_carry_abstract(tile, carry, *, reverse):
    want = tuple(tile.shape[:-1]) + (1,)
    if not tile.shape or tuple(carry.shape) != want:
        raise op_error(PtoShapeError, "tcumsum_carry", f"a {list(tile.shape)} tile with a {list(carry.shape)} carry: "
                       f"the carry is a column of its rows, {list(want)}")
    return shaped(tile.shape, tile.dtype), shaped(carry.shape, carry.dtype)


def _tcumsum_carry_reference(tile, carry, *, reverse):
    wide = tile.astype(carry.dtype)
    both = jnp.concatenate([wide, carry] if reverse else [carry, wide], axis=-1)
    scanned = lax.cumsum(both, both.ndim - 1, reverse=reverse)
    inner = scanned[..., :-1] if reverse else scanned[..., 1:]
    return inner.astype(tile.dtype), scanned[..., :1] if reverse else scanned[..., -1:]


# A cumsum along a tile's rows that starts from ``carry`` (each row's sum before the tile, in the dtype the
# scan adds in): (the tile's scan rounded to its dtype, each row's sum through the tile) — a long row's
# column chunks scanned in turn by one program (``reverse``: from the row's end).
tcumsum_carry_p = _primitive("tcumsum_carry", _tcumsum_carry_abstract, _tcumsum_carry_reference, multiple_results=True)


def _tci_reference(index, *, size, step, base):
    return base + step * index + jnp.arange(size, dtype=jnp.int32)


# PTO's TCI: the int32 tile ``start + j`` with ``start = base + step * index`` (``index`` a grid index):
# the tile of a symbolic-size ``pto.iota`` at its place in the sequence.
tci_p = _primitive("tci", lambda index, *, size, step, base: shaped((size,), jnp.int32), _tci_reference)


def compute(name, *args, **params):
    """Bind the tile twin of tensor op ``name``."""
    return COMPUTE[name].bind(*args, **params)


# ------------------------------------------------------------------------------- user-defined ops
USER_OPS_CHANGED = [0]      # times a user-defined op was defined or removed: a kernel's cache key reads it


def define_compute(name, abstract, reference, multiple_results=False, reads_gm: str | None = None):
    """A user-defined tile primitive ``pto.<name>`` in :data:`TILE_OPS` (``pj.tiles.register_op``);
    ``reads_gm``: the result's buffer when its first operand is a GM tensor (:data:`GM_READERS`)."""
    prim = _primitive(name, abstract, reference, multiple_results)
    if reads_gm is not None:
        GM_READERS[prim] = reads_gm
    USER_OPS_CHANGED[0] += 1
    return prim


def undefine_compute(name):
    GM_READERS.pop(TILE_OPS.pop(name, None), None)
    USER_OPS_CHANGED[0] += 1
