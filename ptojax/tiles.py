"""``pj.tiles``: the Tile level written by hand, mixed freely with tensor-level code in one kernel.

``pj.tiles.grid(body, grid=(2, 2), inputs=(x, y), outputs=jax.ShapeDtypeStruct(...))`` binds one
``pto.tile_grid`` eqn — the same IR the tile pass builds from tensor ops — so partition, PTO-AS codegen,
the interpreter, the cost model and the swimlane treat hand-written tiles and lowered ones alike; the
Tensor and Tile passes pass it through unchanged. ``body(index, ins, outs)`` runs once per grid point:
``index`` holds the grid indices (int32 scalars), ``ins`` / ``outs`` the GM tensors, and it returns the
updated ``outs`` (the results of :func:`store`)::

    def body(index, ins, outs):
        w = pj.tiles.window((32, 32))                    # offset = index * (32, 32)
        a = pj.tiles.load(ins[0], index, w)
        b = pj.tiles.load(ins[1], index, w)
        y = pj.tiles.add(pj.tiles.mul(a, 2.0), b)        # or pj.tiles.compute("add", ...), or jnp on tiles
        return [pj.tiles.store(outs[0], y, index, w)]

A :func:`window` is an affine map from loop indices to GM offsets (``base + stride * index``), like a
Pallas BlockSpec. Inside the body, ``jnp``/``lax`` and ``pj.ops`` calls on tiles become their tile twins
(``pto.tadd``, ...); the cube path is :func:`load` with ``loc="mat"``, :func:`mov` to ``"left"`` /
``"right"``, :func:`matmul` / :func:`matmul_acc` (a K chain in a ``lax.fori_loop``) into ``acc``, then
:func:`store`. The body is checked when it is traced: windows inside their tensors for every index
the grid and its loops reach, tiles matching their windows, operands in the buffers their
instructions read (``left``/``right`` for the cube, ``vec`` for the vector unit). Capacity is checked by
the partition pass (each program's peak footprint per buffer), as for lowered tiles.

:func:`register_op` defines a new tile instruction ``pto.<name>`` in one call: its abstract eval and
jnp reference (lowering, XLA backend, ``verify``), its NumPy semantics (the simulator), its cost (cost
model) and its ISA table entry. With ``reads_gm=True`` the op's first operand is a GM tensor it
reads as indexed rows straight into a tile in buffer ``loc`` (``"mat"``: L1 of a cube core, for a
matmul to read; ``"vec"``: UB): a custom DMA such as a gather of top-k rows into the cube's input.
"""
from __future__ import annotations

import contextlib
from typing import Callable, Sequence

import jax
import numpy as np

from ._jax import NEEDS_VALUE, ClosedJaxpr, Literal, ShapedArray
from .ascend import asm
from .ascend import cost as _cost
from .ascend import isa as _isa
from .ascend import tile_semantics as _tile_semantics
from .errors import PtoArgumentError, PtoDtypeError, PtoShapeError, PtoUnsupportedError, op_error
from .lowering import ir
from .lowering.origin import blame, raised_at
from .lowering.tensor import to_tensor_level
from .lowering.walk import CONTROL, body_of, by_rule, control, counted_loop, is_const, retrace
from .primitives import OPS
from .primitives import tile as T
from .primitives._base import normalize_axes, normalize_axis, operands
from .primitives.tile import LOCATIONS, Window

KINDS = ("vector", "cube")
_MOVES = {("mat", "left"), ("mat", "right"), ("acc", "vec"), ("acc", "mat"), ("vec", "vec")}
_GM_OPS = (T.tload_p, T.tstore_p, T.mscatter_p)    # and the GM readers (T.GM_READERS)
_BY_DATA = tuple(T.COMPUTE[op] for op in ("gather", "scatter_update", "index_add"))    # in-tile indexed rows
_BUFFERS = {"vec": "UB", "mat": "L1", "left": "L0A", "right": "L0B"}   # where a GM-reading op may load
_LOAD_LOCS = ("vec", "mat")     # where tload may write on A2/A3 (ptoas a3: "tload dst to use loc=vec or loc=mat")
CUSTOM: dict[str, dict] = {}        # name -> what register_op was given (its primitive, pipe, ...)


def _shape(what, value, allow_zero=False):
    if isinstance(value, (int, np.integer)):
        value = (value,)
    if isinstance(value, Sequence) and any(jax.export.is_symbolic_dim(v) for v in value):
        raise PtoUnsupportedError(f"pj.tiles: {what} must be static, got {tuple(value)!r}: a hand-written grid has "
                                  "concrete shapes, so its kernel takes no symbolic dimension (jax.export, "
                                  "polymorphic_shapes); write it with jnp / pj.ops ops and pj.tile hints instead")
    try:
        shape = tuple(int(v) for v in value)
        exact = all(float(v) == s for v, s in zip(value, shape))
    except (TypeError, ValueError, OverflowError):
        exact = False
    if not exact or any(s < (0 if allow_zero else 1) for s in shape):
        raise PtoArgumentError(f"pj.tiles: {what} must be a tuple of {'non-negative' if allow_zero else 'positive'} "
                               f"ints, got {value!r}")
    return shape


# ------------------------------------------------------------------------------------------ windows
def window(shape, block=None, *, index=None, base=None, stride=None) -> Window:
    """A tile's window on a GM tensor: per dim, ``offset = base + stride * indices[index]``.

    ``shape`` is the tile's extent. By default dim ``d`` follows loop index ``d`` with stride ``block``
    (default ``shape``: consecutive tiles) and base 0; ``index[d] = None`` fixes dim ``d`` at ``base[d]``.
    The indices are those passed to :func:`load` / :func:`store`: the grid's, then any loop counters.
    """
    shape = _shape("window shape", shape)
    rank = len(shape)
    if block is not None and stride is not None:
        raise PtoArgumentError("pj.tiles.window: give block or stride, not both (block is the stride)")
    stride = shape if block is None and stride is None else _shape("window stride", stride if block is None else block,
                                                                   allow_zero=True)
    index = tuple(range(rank)) if index is None else tuple(-1 if i is None else i for i in index)
    base = (0,) * rank if base is None else _shape("window base", base, allow_zero=True)
    for what, value in (("stride", stride), ("index", index), ("base", base)):
        if len(value) != rank:
            raise PtoArgumentError(f"pj.tiles.window: {what} {value} has {len(value)} entries for a rank-{rank} "
                                   f"window {shape}")
    if any(not isinstance(i, (int, np.integer)) or i < -1 for i in index):
        raise PtoArgumentError(f"pj.tiles.window: index {index} must hold loop positions (ints >= 0) or None")
    stride = tuple(0 if i < 0 else s for i, s in zip(index, stride))
    return Window(shape, tuple(int(i) for i in index), stride, base)


def _check_window(op, ref, indices, w: Window):
    if not isinstance(w, Window):
        raise PtoArgumentError(f"pj.tiles.{op}: expected a window (pj.tiles.window(...)), got {w!r}")
    if np.ndim(ref) != len(w.shape):
        raise PtoShapeError(f"pj.tiles.{op}: window {w} is rank {len(w.shape)} but the GM tensor is "
                            f"{np.shape(ref)}")
    used = [i for i in w.index if i >= 0]
    if used and max(used) >= len(indices):
        raise PtoArgumentError(f"pj.tiles.{op}: window {w} uses loop index i{max(used)} but only {len(indices)} "
                               "indices were given")
    for d, (size, n) in enumerate(zip(w.shape, np.shape(ref))):
        if size > n:
            raise PtoShapeError(f"pj.tiles.{op}: window {w} is {size} wide in dim {d}; the GM tensor "
                                f"{tuple(np.shape(ref))} has {n}")


# --------------------------------------------------------------------------------- data movement
def _load_loc_error(loc) -> str:
    """Why ``tload`` cannot write buffer ``loc`` on A2/A3, and what to write instead."""
    if loc in ("left", "right"):
        return (f"tload into loc={loc!r} ({_BUFFERS[loc]}) is not a data path on A2/A3 (ptojax's targets 'a2'/'a3'; "
                "ptoas --pto-arch=a3 rejects it), whose tload writes loc='vec' (UB) or loc='mat' (L1) only; load "
                f"the matmul operand with loc='mat' and move it with pj.tiles.mov(tile, {loc!r})")
    return f"loc {loc!r} is not a tload destination on A2/A3; one of 'vec' (UB) or 'mat' (L1)"


def load(ref, index, window: Window, loc: str = "vec"):
    """``tload``: the tile of GM tensor ``ref`` at ``window`` for loop ``index`` into buffer ``loc``
    (``vec`` = UB on a vector core; ``mat`` = L1 on a cube core). A2/A3 (ptojax's targets ``a2``/``a3``,
    ``ptoas --pto-arch=a3``) has no GM -> L0A/L0B path: load a matmul operand into ``mat`` and
    :func:`mov` it to ``left``/``right``."""
    if loc not in _LOAD_LOCS:
        raise PtoArgumentError(f"pj.tiles.load: {_load_loc_error(loc)}")
    index = list(index)
    _check_window("load", ref, index, window)
    return T.tload(ref, index, window, loc)


def store(ref, tile, index, window: Window):
    """``tstore``: write ``tile`` into GM tensor ``ref`` at ``window``; returns the updated ``ref``."""
    index = list(index)
    _check_window("store", ref, index, window)
    if tuple(np.shape(tile)) != tuple(window.shape):
        raise PtoShapeError(f"pj.tiles.store: tile {tuple(np.shape(tile))} does not match window {window} "
                            f"(shape {window.shape})")
    if np.dtype(tile.dtype) != np.dtype(ref.dtype):
        raise PtoArgumentError(f"pj.tiles.store: tile dtype {np.dtype(tile.dtype).name} differs from the GM "
                               f"tensor's {np.dtype(ref.dtype).name}; convert it with pj.tiles.cast")
    return T.tstore(ref, tile, index, window)


def mov(tile, loc: str):
    """``tmov``: move a tile between local buffers (``mat`` -> ``left``/``right``, ``acc`` -> ``vec``)."""
    if loc not in LOCATIONS:
        raise PtoArgumentError(f"pj.tiles.mov: loc {loc!r} is not one of {LOCATIONS}")
    return T.tmov(tile, loc)


# ------------------------------------------------------------------------------------------ compute
_DEFAULTS = {"gelu": {"approximate": True}}      # the tile ops' parameters that pj.ops gives defaults


def compute(name: str, *args, **params):
    """The tile instruction of tensor op ``name`` (``"add"``, ``"exp"``, ``"sum"``, ...) or of a
    registered op; Python scalars take the dtype of the first tile."""
    if name in CUSTOM:
        return _bind_custom(name, CUSTOM[name]["primitive"], args, params)
    if name not in T.COMPUTE:
        known = sorted(set(T.COMPUTE) | set(CUSTOM))
        raise PtoArgumentError(f"pj.tiles.compute: unknown tile op {name!r}; known: {', '.join(known)}")
    prim = T.COMPUTE[name]
    op = prim.name[len("pto."):]
    args = operands(op, *args)
    params = {**_DEFAULTS.get(name, {}), **params}
    ndim = np.ndim(args[0])
    if "axes" in params:
        params["axes"] = normalize_axes(op, params["axes"], ndim)        # as pj.ops does
    if isinstance(params.get("axis"), (int, np.integer)):
        params["axis"] = normalize_axis(op, params["axis"], ndim)
    try:
        return prim.bind(*args, **params)
    except TypeError as e:           # a missing or unknown parameter of the abstract eval
        if isinstance(params.get("axis"), int) and "axes" not in params:         # pj.ops.softmax(x, axis=-1)
            with contextlib.suppress(TypeError):
                return prim.bind(*args, **{k: v for k, v in params.items() if k != "axis"}, axes=(params["axis"],))
        raise op_error(PtoArgumentError, op, f"parameters {sorted(params)} do not fit pj.ops.{name}'s: {e}") from None


def _elementwise(name):
    def op(*args):
        return compute(name, *args)
    op.__name__ = name
    op.__doc__ = f"The tile form of ``pj.ops.{name}`` (``{T.COMPUTE[name].name}``)."
    return op


add, sub, mul, div = (_elementwise(n) for n in ("add", "sub", "mul", "div"))
maximum, minimum, pow = (_elementwise(n) for n in ("maximum", "minimum", "pow"))  # noqa: A001
exp, log, sqrt, rsqrt, reciprocal = (_elementwise(n) for n in ("exp", "log", "sqrt", "rsqrt", "reciprocal"))
abs, neg, relu, tanh, sigmoid, silu = (_elementwise(n) for n in ("abs", "neg", "relu", "tanh", "sigmoid", "silu"))  # noqa: A001
where = _elementwise("where")


def cast(tile, dtype, *, rounding: str = "rint", saturate: bool = True):
    """``tcvt``: convert a tile's dtype; an ``acc`` tile converts on its way out of L0C (the FIXPIPE),
    float32 to float16 or bfloat16 only, with the defaults (nearest even, saturating)."""
    return compute("cast", tile, dtype=np.dtype(dtype), rounding=rounding, saturate=saturate)


def _reduce(name, axis):
    def op(tile, keepdims: bool = True):
        return compute(name, tile, axes=(np.ndim(tile) + axis,), keepdims=keepdims)
    return op


rowsum, rowmax, rowmin = (_reduce(n, -1) for n in ("sum", "amax", "amin"))
colsum, colmax, colmin = (_reduce(n, -2) for n in ("sum", "amax", "amin"))
rowsum.__doc__ = "Sum over the last axis (PTO's TROWSUM); keepdims by default."


def matmul(a, b, *, out_dtype=None, transpose_a: bool = False, transpose_b: bool = False, bias=None):
    """``tmatmul``: ``a`` (a ``left`` tile) @ ``b`` (a ``right`` tile) into an ``acc`` tile (float32, or
    int32 for int8 operands)."""
    acc = np.dtype(np.int32) if np.dtype(a.dtype) == np.int8 else np.dtype(np.float32)
    out_dtype = acc if out_dtype is None else np.dtype(out_dtype)
    if out_dtype != acc:
        raise PtoDtypeError(f"pj.tiles.matmul: out_dtype {out_dtype.name}: the cube accumulates "
                            f"{np.dtype(a.dtype).name} products in {acc.name}; convert the acc tile with "
                            "pj.tiles.cast before the store")
    return T.tmatmul_p.bind(a, b, *([] if bias is None else [bias]), out_dtype=out_dtype, transpose_a=transpose_a,
                            transpose_b=transpose_b)


def matmul_acc(acc, a, b, *, transpose_a: bool = False, transpose_b: bool = False):
    """``tmatmul_acc``: ``acc + a @ b`` in the accumulator."""
    return T.tmatmul_acc_p.bind(acc, a, b, transpose_a=transpose_a, transpose_b=transpose_b)


# ----------------------------------------------------------------------------- body translation
def _to_tile_ops(closed: ClosedJaxpr, grid_name: str) -> ClosedJaxpr:
    """``jnp``/``lax``/``pj.ops`` eqns on tiles → their tile twins; tile and scalar eqns unchanged; a
    constant tile the body builds (``jnp.ones``, ``full_like``: folded to an array) filled by ``texpands``."""
    foreign = _foreign(closed.jaxpr)
    if not foreign:
        return closed
    tensor = to_tensor_level(closed)

    def splat(x):
        if not is_const(x) or not np.shape(x):
            return x
        flat = np.asarray(x).reshape(-1)
        bits = flat.view(f"u{flat.dtype.itemsize}")
        if bits.size and (bits != bits[0]).any():
            raise PtoUnsupportedError(
                f"pj.tiles.grid '{grid_name}': the body makes a constant {flat.dtype.name}{list(np.shape(x))} tile of "
                f"{np.unique(bits).size} different values; a tile instruction fills a tile with one value "
                "(texpands): pass the constant as an input (a GM tensor) and load it")
        return T.COMPUTE["expand"].bind(flat[0], shape=tuple(np.shape(x)))

    def rule(eqn, invals, stack):
        with blame(eqn, live=False):                 # errors name the user's call and line
            return translate(eqn, invals, stack)

    def translate(eqn, invals, stack):
        invals = [splat(x) for x in invals]
        name = eqn.primitive.name
        if name in CONTROL:
            return control(eqn, invals, stack, by_rule(rule))
        op = name[len("pto."):]
        shaped = any(v.aval.shape for v in eqn.outvars) or any(np.shape(x) for x in invals)
        if op == "matmul" and OPS[op].primitive is eqn.primitive and shaped:
            # a @ b of fp16 / bf16 tiles: accumulated in float32, converted on the way out (the FIXPIPE)
            p = dict(eqn.params, out_dtype=None)
            out = matmul(*invals[:2], bias=invals[2] if len(invals) > 2 else None, **p)
            if np.dtype(out.dtype) != np.dtype(eqn.params["out_dtype"]):
                out = cast(out, eqn.params["out_dtype"])
        elif op in OPS and OPS[op].primitive is eqn.primitive and shaped:
            out = T.COMPUTE[op].bind(*invals, **eqn.params)
        else:
            out = eqn.primitive.bind(*invals, **eqn.params)
        return list(out) if eqn.primitive.multiple_results else [out]

    return retrace(tensor, rule)


def _foreign(jaxpr) -> bool:
    tile_prims = set(T.TILE_OPS.values())
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in CONTROL:
            if any(_foreign(body_of(v)[0]) for k, v in eqn.params.items() if k.endswith("jaxpr") and v is not None):
                return True
        elif eqn.primitive not in tile_prims and any(v.aval.shape for v in eqn.outvars):
            return True
    return False


# --------------------------------------------------------------------------------------- checking
def _vector_work(prim) -> bool:
    """Whether tile op ``prim`` runs on a vector unit: every built-in op but ``cast`` (the FIXPIPE's
    conversion out of L0C), and a registered op on the ``VECTOR`` pipe."""
    custom = CUSTOM.get(prim.name[len("pto."):])
    if custom is not None and custom["primitive"] is prim:
        return custom["pipe"] == "VECTOR"
    return prim is not T.COMPUTE["cast"]


class _Checker:
    """Walks a body jaxpr: GM tensors used only by loads/stores, windows in bounds for every index the
    grid and its loops reach, operands in the buffers their instructions read."""

    def __init__(self, name, kind, inputs=0, inferred=False):
        self.name, self.kind, self.inputs = name, kind, inputs     # inputs: GM parameters before the outputs
        self.inferred = inferred   # whether the kind was inferred (cube: the body multiplies tiles)
        self.why_cube = (" (it is a cube grid because its body multiplies tiles: a matmul reads tiles loaded "
                         "into 'mat' and moved to 'left' / 'right', pj.tiles.mov)")       # (or reads GM into 'mat')
        self.bounds: dict = {}     # index var -> (lo, hi)
        self.gm: dict = {}         # GM var -> parameter position
        self.loc: dict = {}        # tile var -> buffer location
        self.derived: set = set()  # scalars computed from indices

    def fail(self, message, cls=PtoArgumentError):
        raise cls(f"pj.tiles.grid '{self.name}': {message}")

    def range_of(self, v):
        if isinstance(v, Literal):
            if not np.issubdtype(np.asarray(v.val).dtype, np.integer):
                self.fail(f"a load/store index is {np.asarray(v.val).item()!r}, not an integer: grid indices, fori_loop counters and "
                          "integer constants place windows")
            x = int(np.asarray(v.val))
            return x, x
        if v not in self.bounds:
            self.fail("a load/store index must be a grid index, a fori_loop counter or a constant; express "
                      "offsets through the window (base + stride * index)")
        return self.bounds[v]

    def window(self, eqn, gm, indices):
        w = eqn.params["window"]
        shape = gm.aval.shape
        if any(i >= 0 and self.range_of(indices[i]) is None for i in w.index):
            return                                          # in a loop that runs no trip
        for d, (size, i, s, b) in enumerate(zip(w.shape, w.index, w.stride, w.base)):
            lo, hi = (0, 0) if i < 0 else self.range_of(indices[i])
            first, last = b + s * lo, b + s * hi
            if min(first, last) < 0 or max(first, last) + size > shape[d]:
                op = eqn.primitive.name
                self.fail(f"{op} window {w} reaches [{min(first, last)}, {max(first, last) + size}) in dim {d} of a "
                          f"GM tensor of shape {tuple(shape)}; the window must stay inside it", PtoShapeError)

    def tile(self, v, want=None, what="operand"):
        if isinstance(v, Literal):
            return None
        if v in self.gm:
            self.fail(f"a GM tensor is used as a tile {what}; load a tile from it with pj.tiles.load")
        loc = self.loc.get(v)
        if want is not None and loc not in want and v.aval.shape:
            self.fail(f"{what} is a '{loc}' tile; this instruction reads {' or '.join(want)}")
        return loc

    def run(self, jaxpr):
        for eqn in jaxpr.eqns:
            with blame(eqn, live=False):             # errors name the user's call and line
                self.eqn(eqn)

    def eqn(self, eqn):
        prim, ins, outs = eqn.primitive, eqn.invars, eqn.outvars
        if prim in _GM_OPS or T.reads_gm(prim):
            gm = ins[0]
            if not self.is_gm(gm):
                self.fail(f"{prim.name} needs a GM tensor (one of the grid's inputs or outputs) as its first operand")
        if prim is T.tload_p:
            loc = eqn.params["loc"]
            allowed = ("vec",) if self.kind == "vector" else ("mat",)
            if loc not in _LOAD_LOCS:
                self.fail(_load_loc_error(loc))
            if loc not in allowed:
                self.fail(f"a {self.kind} grid loads into {' or '.join(allowed)}, not '{loc}'" + (
                    self.why_cube if self.kind == "cube" and self.inferred else ""))
            self.window(eqn, ins[0], ins[1:])
            self.loc[outs[0]] = loc
        elif prim is T.tstore_p:
            self.written(ins[0], prim)
            self.tile(ins[1], ("vec",) if self.kind == "vector" else ("acc",), "stored tile")
            self.window(eqn, ins[0], ins[2:])
            self.gm[outs[0]] = self.gm[ins[0]]
        elif prim is T.mscatter_p:
            self.written(ins[0], prim)
            if self.kind != "vector":
                self.fail(f"{prim.name} runs on a vector core")
            for v in ins[1:]:
                self.tile(v, ("vec",))
            self.gm[outs[0]] = self.gm[ins[0]]
        elif T.reads_gm(prim):
            loc = T.GM_READERS[prim]
            kind = "vector" if loc == "vec" else "cube"
            if self.kind != kind:
                self.fail(f"{prim.name} reads GM into '{loc}' ({_BUFFERS[loc]}), which only a {kind} grid has; "
                          f"this grid is kind='{self.kind}'")
            for v in ins[1:]:
                self.tile(v, ("vec",) if kind == "vector" else ("mat",), f"{prim.name}'s tile operand")
            self.loc.update((v, loc) for v in outs)
        elif prim is T.tmov_p:
            src, dst = self.tile(ins[0]), eqn.params["loc"]
            if (src, dst) not in _MOVES:
                self.fail(f"tmov from '{src}' to '{dst}' is not a data path on A2/A3 "
                          f"(mat -> left/right, acc -> vec/mat)")
            self.loc[outs[0]] = dst
        elif prim in (T.tmatmul_p, T.tmatmul_acc_p):
            if self.kind != "cube":
                self.fail(f"{prim.name} needs a cube grid (kind='cube')")
            a, b = (ins[0], ins[1]) if prim is T.tmatmul_p else (ins[1], ins[2])
            if prim is T.tmatmul_acc_p:
                self.tile(ins[0], ("acc",), "accumulator")
            self.tile(a, ("left",), "left operand (pj.tiles.mov(tile, 'left'))")
            self.tile(b, ("right",), "right operand (pj.tiles.mov(tile, 'right'))")
            if prim is T.tmatmul_p and len(ins) == 3:
                self.tile(ins[2], ("mat",), "bias (a 'mat' tile of one row, pj.tiles.load(..., 'mat'))")
                n = outs[0].aval.shape[-1]
                if tuple(ins[2].aval.shape) not in ((n,), (1, n)):
                    self.fail(f"the matmul's bias is a {tuple(ins[2].aval.shape)} tile; the cube adds one row of "
                              f"its N={n} columns from the bias table ((1, {n})): add any other bias in a "
                              "kind='vector' grid after the store", PtoShapeError)
            self.loc[outs[0]] = "acc"
        elif prim.name == "scan":
            self.scan(eqn)
        elif prim.name == "while":
            self.fail("a loop whose trip count is not static (lax.while_loop, or a fori_loop with a traced bound) "
                      "cannot run in a tile body: loop to the largest bound with static bounds and mask, or give "
                      "each trip its own grid point", PtoUnsupportedError)
        elif prim in set(T.TILE_OPS.values()):
            if prim is not T.tci_p and any(self.counted(v) for v in ins):
                self.fail(f"{prim.name} takes a grid index or loop counter (or a value computed from one) as an "
                          "operand; an index places windows only: load the values from a GM tensor (an input "
                          "holding them) instead", PtoUnsupportedError)
            if prim in _BY_DATA:
                self.fail(f"{prim.name} moves tile rows at offsets read from an index tile, which PTOAS cannot "
                          "emit (a pto.subset offset computed from data); gather or scatter the rows in GM "
                          "outside the grid (pj.ops.gather / scatter_update / index_add, or x[idx])",
                          PtoUnsupportedError)
            if prim in (T.COMPUTE["view"], T.COMPUTE["concat"]):
                self.aligned_columns(eqn)
            locs = {self.tile(v) for v in ins if not isinstance(v, Literal) and v.aval.shape}
            cube_side = sorted(locs & {"mat", "left", "right"})
            if prim in (T.COMPUTE["view"], T.COMPUTE["concat"]) and cube_side:
                self.fail(f"{prim.name} takes a window of a '{cube_side[0]}' tile (or joins such tiles), which no "
                          "instruction here does: load each window from GM into its own tile "
                          "(pj.tiles.load(x, index, window, 'mat'), then pj.tiles.mov)", PtoUnsupportedError)
            loc = "acc" if locs == {"acc"} else "vec"
            if loc == "acc" and prim is T.COMPUTE["cast"]:
                self.fixpipe(ins[0].aval.dtype, eqn.params)
            if self.kind == "cube" and (loc != "acc" or _vector_work(prim)):
                self.fail(f"{prim.name} is vector work, which a cube grid has no unit for (it converts its acc "
                          "tiles only, pj.tiles.cast): store the acc tile and continue in a kind='vector' grid",
                          PtoUnsupportedError)
            if self.kind == "vector" and "acc" in locs:
                self.fail(f"{prim.name} reads an acc tile on a vector grid")
            self.loc.update((v, loc) for v in outs)
        elif all(not v.aval.shape for v in [*ins, *outs]) and not any(self.is_gm(v) for v in ins):
            if any(self.counted(v) for v in ins):      # scalar arithmetic on loop counters
                self.derived.update(outs)
        else:
            self.fail(f"'{prim.name}' cannot appear in a tile body; use pj.tiles ops (or jnp/pj.ops on tiles)",
                      PtoUnsupportedError)

    def aligned_columns(self, eqn):
        """A window of a tile (``t[:, a:b]``) or tiles side by side along the last axis: the columns move
        row by row as 32-byte aligned vector operands, so where they start, and how many they are
        unless they are whole rows, take a multiple of 32 bytes."""
        item = eqn.outvars[0].aval.dtype.itemsize
        if eqn.primitive is T.COMPUTE["view"]:
            width, whole = eqn.params["valid_shape"][-1], eqn.invars[0].aval.shape[-1]
            parts = [(eqn.params["offsets"][-1], width if width != whole else 0)]
        elif eqn.params["axis"] % eqn.outvars[0].aval.ndim == eqn.outvars[0].aval.ndim - 1:
            widths = [v.aval.shape[-1] for v in eqn.invars]
            parts = [(sum(widths[:i]), w) for i, w in enumerate(widths)]
        else:
            return
        for start, width in parts:
            if start * item % 32 or width * item % 32:
                self.fail(f"{eqn.primitive.name} moves columns {start}..{start + width} of {item}-byte elements: a "
                          "window of a tile, or tiles side by side, must start and end its columns on multiples of "
                          f"32 bytes ({32 // item} elements), as every vector operand does")

    def scan(self, eqn):
        p = eqn.params
        body = p["jaxpr"].jaxpr
        nc, ncarry = p["num_consts"], p["num_carry"]
        consts, carry = eqn.invars[:nc], eqn.invars[nc:nc + ncarry]
        lower = counted_loop(eqn)
        if lower is None:
            self.fail("only counted loops (lax.fori_loop with static bounds: an int32 counter stepped by one, no xs) "
                      "are supported in a tile body",
                      PtoUnsupportedError)
        for inner, outer in zip(body.invars[:nc], consts):
            self.alias(inner, outer)
        self.bounds[body.invars[nc]] = (lower, lower + p["length"] - 1) if p["length"] else None   # no trip
        for inner, outer in zip(body.invars[nc + 1:nc + ncarry], carry[1:]):
            if self.is_gm(outer):
                self.fail("a GM tensor cannot be a loop carry: store outside the loop, or give each iteration "
                          "its own grid point", PtoUnsupportedError)
            self.alias(inner, outer)
        self.run(body)
        producer = {v: e for e in body.eqns for v in e.outvars}
        for c, out in enumerate(body.outvars[1:ncarry]):
            carried = body.invars[nc + 1 + c]
            made = None if isinstance(out, Literal) else producer.get(out)
            while made is not None and made.primitive is T.tmatmul_acc_p and made.invars[0] is not carried:
                made = producer.get(made.invars[0])          # a chain of accumulations into the carry
            if made is not None and made.primitive.name == "scan":
                self.fail("a fori_loop inside a fori_loop carrying a tile is not supported: one loop carries the "
                          "accumulator (a window steps one dim by one counter), so chain K in one loop",
                          PtoUnsupportedError)
            if out is not carried and not (made is not None and made.primitive is T.tmatmul_acc_p
                                           and made.invars[0] is carried):
                self.fail("a fori_loop carry must be updated in place (pj.tiles.matmul_acc into the accumulator); "
                          "accumulate vector tiles over a Python loop or a grid dimension instead",
                          PtoUnsupportedError)
        for inner, outer in zip(body.outvars[1:ncarry], eqn.outvars[1:ncarry]):
            self.alias(outer, inner)

    def counted(self, v) -> bool:
        """Whether ``v`` is a grid index, a loop counter or a scalar computed from one."""
        return not isinstance(v, Literal) and (v in self.bounds or v in self.derived)

    def fixpipe(self, src, params):
        """A cast of an acc tile is the FIXPIPE's conversion on its way out of L0C: f32 -> f16 / bf16,
        rounding to nearest and saturating, as a matmul's ``out_dtype`` stores it."""
        dst = np.dtype(params["dtype"])
        if dst != np.dtype(src) and not (np.dtype(src) == np.float32 and dst.name in ("float16", "bfloat16")
                                         and params["rounding"] == "rint" and params["saturate"]):
            self.fail(f"pj.tiles.cast of a {np.dtype(src).name} acc tile to {dst.name} (rounding="
                      f"{params['rounding']!r}, saturate={params['saturate']}): the FIXPIPE converts an accumulator "
                      "on its way out of L0C from float32 to float16 or bfloat16 only (rounding='rint', saturate=True); "
                      "store the acc tile as it is and convert it in a kind='vector' grid", PtoUnsupportedError)

    def written(self, gm, prim):
        """A store's GM operand must be an output (``outs[j]``): a grid never writes its inputs."""
        if self.is_gm(gm) and self.gm[gm] < self.inputs:
            self.fail(f"{prim.name} writes into input {self.gm[gm]} (ins[{self.gm[gm]}]); a grid writes only its "
                      "outputs: store into outs[j]")

    def is_gm(self, v):
        return not isinstance(v, Literal) and v in self.gm

    def alias(self, new, old):
        if isinstance(old, Literal):
            return
        for table in (self.bounds, self.gm, self.loc):
            if old in table:
                table[new] = table[old]
        if old in self.derived:
            self.derived.add(new)


# ------------------------------------------------------------------------------------------ grids
def _aval(x, what):
    if isinstance(x, (jax.ShapeDtypeStruct, ShapedArray)):
        return jax.ShapeDtypeStruct(tuple(x.shape), np.dtype(x.dtype))
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return jax.ShapeDtypeStruct(tuple(np.shape(x)), np.dtype(x.dtype))
    raise PtoArgumentError(f"pj.tiles.grid: {what} must be an array or jax.ShapeDtypeStruct, got {x!r}")


def grid(body: Callable, grid, inputs=(), outputs=(), *, kind: str | None = None, label: str = "",
         name: str | None = None, fill=0):
    """Bind a hand-written ``pto.tile_grid``: ``body(index, ins, outs)`` at every point of ``grid``.

    ``inputs``: GM tensors (arrays or tracers); ``outputs``: a ``jax.ShapeDtypeStruct`` (the result is
    one array) or a sequence of them (a tuple), each starting filled with ``fill``. ``kind`` is
    ``"vector"`` or ``"cube"`` (default: cube when the body multiplies matrices or reads GM into L1/L0
    with a registered op); ``label`` names the tasks (default: the innermost ``jax.named_scope``);
    ``name`` the block program (default: the body's name). The body returns the updated outputs, in
    order.
    """
    shape = _shape("grid", grid)
    single_in = not isinstance(inputs, (list, tuple))
    inputs = [inputs] if single_in else list(inputs)
    single_out = not isinstance(outputs, (list, tuple))
    outputs = [outputs] if single_out else list(outputs)
    if not outputs:
        raise PtoArgumentError("pj.tiles.grid: give at least one output (jax.ShapeDtypeStruct)")
    if kind is not None and kind not in KINDS:
        raise PtoArgumentError(f"pj.tiles.grid: kind {kind!r} is not one of {KINDS}")
    name = name or getattr(body, "__name__", "tiles").strip("<>") or "tiles"
    if not isinstance(name, str) or not name.isprintable() or any(c.isspace() for c in name):
        raise PtoArgumentError(f"pj.tiles.grid: name {name!r} must be a string without spaces (it names the program)")
    in_avals = [_aval(x, f"input {i}") for i, x in enumerate(inputs)]
    out_avals = [_aval(o, f"output {i}") for i, o in enumerate(outputs)]
    for j, a in enumerate(out_avals):
        if a.dtype not in asm.NAMES:
            raise PtoDtypeError(f"pj.tiles.grid '{name}': output {j} is {a.dtype.name}, which no tile holds; "
                                f"outputs are one of {', '.join(np.dtype(d).name for d in asm.NAMES)}")
    for j, a in enumerate(out_avals):
        _check_fill(name, fill, j, a.dtype)
    n, m = len(shape), len(inputs)

    def flat(*args):
        index, ins, outs = tuple(args[:n]), list(args[n:n + m]), list(args[n + m:])
        result = body(index, ins, outs)
        result = list(result) if isinstance(result, (list, tuple)) else [result]
        if len(result) != len(outs):
            raise PtoArgumentError(f"pj.tiles.grid '{name}': the body returned {len(result)} value(s) for "
                                   f"{len(outs)} output(s); return the stored outputs, in order")
        for j, (r, a) in enumerate(zip(result, out_avals)):
            if not hasattr(r, "dtype"):
                raise PtoArgumentError(f"pj.tiles.grid '{name}': the body returned {r!r} for output {j}; return "
                                       "pj.tiles.store(outs[j], ...)")
            if tuple(np.shape(r)) != a.shape or np.dtype(r.dtype) != a.dtype:
                raise PtoShapeError(f"pj.tiles.grid '{name}': output {j} is {a.dtype.name}{list(a.shape)} but the "
                                    f"body returned {np.dtype(r.dtype).name}{list(np.shape(r))}; return "
                                    "pj.tiles.store(outs[j], ...)")
        return result

    index_avals = [jax.ShapeDtypeStruct((), np.int32)] * n
    try:
        closed = jax.make_jaxpr(flat)(*index_avals, *in_avals, *out_avals)
    except NEEDS_VALUE as err:                              # Python `if` / `range` / `int` of a traced value
        at = raised_at(err)
        raise PtoArgumentError(
            f"pj.tiles.grid '{name}'{f' at {at}' if at else ''}: the body needs the value of a tile or a grid "
            f"index ({type(err).__name__}); a body is traced once for all grid points, its tiles and indices "
            "without values: choose with pj.tiles.where, loop with a lax.fori_loop of static bounds, or write "
            "a grid per case") from None
    if closed.consts:
        raise PtoArgumentError(f"pj.tiles.grid '{name}': the body closes over arrays "
                               f"{[tuple(np.shape(c)) for c in closed.consts]}; pass GM tensors through inputs= "
                               "and scalars as Python numbers")
    closed = _to_tile_ops(closed, name)
    cube_readers = tuple(p for p, loc in T.GM_READERS.items() if loc != "vec")
    uses_cube = _uses(closed.jaxpr, (T.tmatmul_p, T.tmatmul_acc_p, *cube_readers))
    check = _Checker(name, kind or ("cube" if uses_cube else "vector"), m, inferred=kind is None)
    readers = [p for p in cube_readers if _uses(closed.jaxpr, (p,))]
    if readers and not _uses(closed.jaxpr, (T.tmatmul_p, T.tmatmul_acc_p)):
        check.why_cube = f" (it is a cube grid because {readers[0].name} reads GM into '{T.GM_READERS[readers[0]]}')"
    kind = check.kind
    jaxpr = closed.jaxpr
    check.bounds.update((v, (0, g - 1)) for v, g in zip(jaxpr.invars[:n], shape))
    check.gm.update((v, j) for j, v in enumerate(jaxpr.invars[n:]))
    check.run(jaxpr)
    for j, v in enumerate(jaxpr.outvars):
        if not check.is_gm(v) or check.gm[v] != m + j:
            raise PtoArgumentError(f"pj.tiles.grid '{name}': output {j} must be outs[{j}] as updated by "
                                   "pj.tiles.store (a GM tensor), not a tile or another tensor")
    spec = ir.Grid((ir.Part(closed, shape),), tuple(ir.Output(fill=fill) for _ in outputs), kind, (name,), label)
    outs = ir.tile_grid_p.bind(*inputs, spec=spec)
    return outs[0] if single_out else tuple(outs)


def _check_fill(name: str, fill, j: int, dtype) -> None:
    """``fill`` is a number output ``j``'s dtype holds exactly (an integer in range for an integer dtype)."""
    ok = isinstance(fill, (bool, int, float, np.bool_, np.integer, np.floating))
    if ok and dtype == np.bool_:
        ok = fill in (0, 1)
    elif ok and np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        ok = float(fill).is_integer() and info.min <= fill <= info.max
    elif ok and np.isfinite(fill):                      # a finite fill the dtype rounds to infinity
        with np.errstate(over="ignore"):
            ok = bool(np.isfinite(np.asarray(fill).astype(dtype)))
    if not ok:
        raise PtoArgumentError(f"pj.tiles.grid '{name}': fill={fill!r} is not a value of output {j}'s dtype "
                               f"{np.dtype(dtype).name}")


def _uses(jaxpr, prims) -> bool:
    for eqn in jaxpr.eqns:
        if eqn.primitive in prims:
            return True
        for k, v in eqn.params.items():
            if k.endswith("jaxpr") and v is not None and _uses(body_of(v)[0], prims):
                return True
    return False


# ------------------------------------------------------------------------------------ split/merge
def map_tiles(fn: Callable, x, tile, *, out_dtype=None, label: str = "", name: str | None = None):
    """The seed's manual split/merge: split ``x`` into ``tile``-shaped tiles (the shape must divide),
    run ``fn(tile) -> tile`` on each (jnp, pj.ops or pj.tiles ops), merge the results into one tensor."""
    tile = _shape("tile", tile)
    xshape = _shape("x's shape", np.shape(x), allow_zero=True)
    if len(tile) != len(xshape) or any(s % t for s, t in zip(xshape, tile)):
        raise PtoShapeError(f"pj.tiles.map_tiles: tile {tile} must have x's rank and divide its shape {xshape}")
    w = window(tile)
    dtype = np.dtype(out_dtype or x.dtype)

    def body(index, ins, outs):
        y = fn(load(ins[0], index, w))
        return [store(outs[0], y.astype(dtype) if np.dtype(y.dtype) != dtype else y, index, w)]

    grid_shape = tuple(s // t for s, t in zip(xshape, tile))
    return grid(body, grid_shape, [x], jax.ShapeDtypeStruct(xshape, dtype), label=label,
                name=name or getattr(fn, "__name__", "map_tiles").strip("<>"))


# ------------------------------------------------------------------------------------ custom ops
def register_op(name: str, *, reference: Callable, numpy: Callable | None = None, abstract: Callable | None = None,
                cost=None, pipe: str | None = None, dtypes: Sequence = (), multiple_results: bool = False,
                summary: str = "", reads_gm: bool = False, loc: str | None = None) -> Callable:
    """Define tile instruction ``pto.<name>`` (``name`` starts with ``t``) in one call; returns a
    function binding it (also reachable as ``pj.tiles.compute(name, ...)``).

    * ``reference(*tiles, **params)`` (required): the jnp semantics (the XLA backend, ``verify``, the
      tracing of a kernel); the simulator's too where ``numpy`` is not given;
    * ``numpy(*arrays, **params)``: the simulator's semantics (``backend="sim"``: eager calls, and
      ``jax.jit``, whose replay of the PTO-AS text calls it back on the host), run on one grid point
      at a time, on the tiles' valid regions (2-D) as NumPy arrays in the hardware dtypes; an
      exception it raises fails that point's task. Without it the simulator runs ``reference`` on
      those regions (traced and vmapped over the grid points, as the built-in instructions are);
    * ``params``: keyword parameters (bools, ints, finite floats, strings and tuples of them) are
      written into the instruction's PTO-AS line as attributes (``{scale = 0.5 : f64}``) and reach
      ``numpy`` / ``reference`` from there;
    * ``abstract(*avals, **params)``: the output aval (a list of them with ``multiple_results``;
      default: the first operand's shape and dtype), checked against ``jax.eval_shape`` of
      ``reference`` each time the op is called in a body;
    * ``cost``: a function ``cost(ins, outs, target) -> cycles`` of the operand and result
      ``asm.TileBuf``s, a number (cycles per byte of the largest tile), or a tuple of vector pass
      classes (``("MUL", "EXP")``: priced like the built-in vector instructions; the default);
    * ``pipe``: the pipe it occupies (``VECTOR``, the default, ``MTE2``, ...); ``dtypes``: the dtypes
      its first operand may have (default: any), checked when the op is traced.

    ``reference``, ``numpy`` and ``abstract`` must be callables (``numpy`` and ``abstract`` may be left
    out): anything else is a :class:`~ptojax.errors.PtoArgumentError` here, not a task's failure.

    ``reads_gm=True`` makes a GM reader: the first operand is a GM tensor (a grid input or output),
    the others tiles in the grid's load buffer (``vec`` on a vector grid, ``mat`` on a cube grid), and
    the results are tiles in buffer ``loc`` (``"vec"``, the default: UB of a vector core; ``"mat"``:
    L1 of a cube core; ``"left"``/``"right"``: L0A/L0B), which also fixes the core kind. ``numpy`` and
    ``reference`` get the whole GM tensor (read it, never write it); ``abstract`` is required. An L1
    result that instruction selection makes a transposed matmul operand's tile is written there
    transposed (the matmul reads the value the op returns). Its
    default pipe is ``MTE2`` and its default cost ``"gather"`` (priced like ``mgather``: the result's
    bytes at the GM read rate plus one row access per result row; ``"load"``: like ``tload``, without
    the row accesses); a function ``cost`` gets the GM tensor's ``asm.ViewType`` first in ``ins``. The
    result's bytes count as GM traffic, and the runtime treats the op as reading the whole tensor.
    """
    if not isinstance(name, str) or not name.isidentifier() or not name.startswith("t"):
        raise PtoArgumentError(f"pj.tiles.register_op: name {name!r} must be an identifier starting with 't' "
                               "(PTO's tile-instruction naming: pto.tadd, pto.texp, ...)")
    if name in T.TILE_OPS or name in _isa.TABLE:
        raise PtoArgumentError(f"pj.tiles.register_op: 'pto.{name}' already exists")
    for what, fn, required in (("reference", reference, True), ("numpy", numpy, False),
                               ("abstract", abstract, False)):
        if not callable(fn) and (required or fn is not None):
            raise PtoArgumentError(f"pj.tiles.register_op '{name}': {what}={fn!r} is not callable; give a function "
                                   f"{_SIGNATURES[what]}" + ("" if required else " (or leave it out)"))
    if reads_gm:
        loc = "vec" if loc is None else loc
        if loc not in _BUFFERS:
            raise PtoArgumentError(f"pj.tiles.register_op '{name}': loc {loc!r} is not a buffer GM can be read "
                                   f"into; one of {tuple(_BUFFERS)}")
        if abstract is None:
            raise PtoArgumentError(f"pj.tiles.register_op '{name}': a GM reader needs abstract= (the shape and "
                                   "dtype of the tile it produces)")
    elif loc is not None:
        raise PtoArgumentError(f"pj.tiles.register_op '{name}': loc={loc!r} needs reads_gm=True (a compute op's "
                               "result stays in its operands' buffer)")
    pipe = pipe or ("MTE2" if reads_gm else "VECTOR")
    if pipe not in _cost.PIPES:
        raise PtoArgumentError(f"pj.tiles.register_op: pipe {pipe!r} is not one of {_cost.PIPES}")
    try:
        dtypes = tuple(np.dtype(d) for d in dtypes)
        [asm.dtype_name(d) for d in dtypes]
    except (TypeError, KeyError):
        raise PtoArgumentError(f"pj.tiles.register_op: dtypes {dtypes!r} must be dtypes ptojax supports") from None
    cost = cost if cost is not None else "gather" if reads_gm else ("ADD",)
    price = _price(name, cost, pipe, reads_gm)

    def abstract_eval(*avals, **params):
        if abstract is None:
            return ShapedArray(avals[0].shape, avals[0].dtype)
        out = abstract(*avals, **params)
        if isinstance(out, (list, tuple)):
            return [ShapedArray(tuple(o.shape), np.dtype(o.dtype)) for o in out]
        return ShapedArray(tuple(out.shape), np.dtype(out.dtype))

    prim = T.define_compute(name, abstract_eval, reference, multiple_results, reads_gm=loc if reads_gm else None)
    operands_text = f"GM tensor, {'vec' if loc == 'vec' else 'mat'} tiles -> {loc}" if reads_gm else \
        "tiles and scalar immediates -> tiles"
    _isa.register(name, price=price, pipe=pipe, dtypes=dtypes, summary=summary,
                  operands=operands_text)
    _tile_semantics.register(name, reference, numpy)
    CUSTOM[name] = {"primitive": prim, "pipe": pipe, "dtypes": dtypes, "reference": reference,
                    "reads_gm": loc if reads_gm else None, "abstract": abstract_eval,
                    "declared": "abstract=" if abstract else "the default abstract (the first operand's)"}

    def op(*args, **params):
        return _bind_custom(name, prim, args, params)
    op.__name__ = name
    op.primitive = prim
    return op


_SIGNATURES = {"reference": "reference(*tiles, **params) -> tile (jnp)",
               "numpy": "numpy(*arrays, **params) -> array (NumPy)",
               "abstract": "abstract(*avals, **params) -> aval (shape and dtype)"}


def unregister_op(name: str) -> None:
    """Remove a registered op (its primitive stays valid for jaxprs already traced)."""
    if name not in CUSTOM:
        raise PtoArgumentError(f"pj.tiles.unregister_op: {name!r} was not registered")
    del CUSTOM[name]
    T.undefine_compute(name)
    _isa.unregister(name)
    _tile_semantics.unregister(name)
    from .ascend import engine, replay          # what they kept of it (imported where they are used)

    engine.forget(name)
    replay.forget(name)


def _bind_custom(name, prim, args, params):
    """Bind a registered op, its first operand's dtype checked against the op's ``dtypes``."""
    args = operands(name, *args)
    for key, value in params.items():
        if not _attribute(value):
            raise PtoArgumentError(f"pj.tiles.{name}: parameter {key}={value!r} is not a Python number, a string "
                                   "(no quote, backslash or newline) or a tuple of them: parameters are written "
                                   "into the PTO text as attributes")
    dtypes = CUSTOM[name]["dtypes"]
    if dtypes and np.dtype(args[0].dtype) not in dtypes:
        raise PtoDtypeError(f"pj.tiles.{name}: first operand is {np.dtype(args[0].dtype).name}; pto.{name} takes "
                            f"{', '.join(d.name for d in dtypes)}")
    _check_abstract(name, CUSTOM[name], args, params)
    return prim.bind(*args, **params)


def _check_abstract(name, entry, args, params) -> None:
    """The op's abstract (``abstract=`` or the first operand's shape and dtype) agrees with what
    ``reference`` returns (``jax.eval_shape``) for these operands: a disagreement would fail only when a
    task runs (its result written into a tile of the declared type), and XLA would store what it got."""
    avals = [ShapedArray(tuple(np.shape(a)), np.dtype(a.dtype)) for a in args]
    declared = entry["abstract"](*avals, **params)
    try:
        got = jax.eval_shape(lambda *xs: entry["reference"](*xs, **params),
                             *(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals))
    except Exception:        # noqa: BLE001 - a reference that cannot be traced fails where it is run, as before
        return
    declared, got = (list(x) if isinstance(x, (list, tuple)) else [x] for x in (declared, got))

    def text(xs):
        return ", ".join(f"{np.dtype(x.dtype).name}{list(x.shape)}" if hasattr(x, "shape") else repr(x) for x in xs)

    if len(got) != len(declared) or any(not hasattr(g, "shape") or tuple(g.shape) != tuple(d.shape)
                                        or np.dtype(g.dtype) != np.dtype(d.dtype) for g, d in zip(got, declared)):
        ops = text(avals)
        raise PtoArgumentError(f"pj.tiles.{name}: {entry['declared']} declares {text(declared)} for operands "
                               f"({ops}), but reference returns {text(got)}; make pto.{name}'s abstract and "
                               "reference agree")


def _attribute(value) -> bool:
    """Whether ``value`` can be an instruction attribute in the text (and a hashable param)."""
    if isinstance(value, tuple):
        return all(_attribute(v) for v in value)
    if isinstance(value, str):
        return value.isprintable() and not set(value) & {'"', "\\"}
    return isinstance(value, (bool, int, float, np.integer, np.floating))


def _gm_bytes(instr):
    return sum(t.v_row * t.v_col * t.np_dtype.itemsize for t in (o.type for o in instr.outs)
               if isinstance(t, asm.TileBuf))


def _price(name, cost, pipe, reads_gm=False):
    """``price(instr, target, l2_hit) -> (pipe, cycles, flops[, GM bytes in, GM bytes out])`` for cost.CUSTOM."""
    def moved(result, instr):
        return (*result, _gm_bytes(instr), 0) if reads_gm else result

    if isinstance(cost, str):
        if not reads_gm or cost not in ("gather", "load"):
            raise PtoArgumentError(f"pj.tiles.register_op '{name}': cost {cost!r}: 'gather' and 'load' price a GM "
                                   "reader (reads_gm=True); give a function, a cycles-per-byte rate or vector pass "
                                   f"classes from {sorted(_cost.VECTOR_CLASSES)}")

        def price(instr, tgt, l2_hit=1.0):
            _, cycles, nbytes = _cost.gm_read(instr, tgt, rows=cost == "gather", l2_hit=l2_hit)
            return pipe, cycles, 0.0, nbytes, 0
        return price
    if callable(cost):
        def price(instr, tgt, l2_hit=1.0):
            ins = [o.type for o in instr.ins if isinstance(o.type, asm.TileBuf)]
            outs = [o.type for o in instr.outs if isinstance(o.type, asm.TileBuf)]
            views = [o.type for o in instr.ins[:1] if reads_gm and isinstance(o.type, asm.ViewType)]
            cycles = float(cost(views + ins, outs, tgt))
            big = max(ins + outs, key=lambda t: t.v_row * t.v_col, default=None)
            return moved((pipe, cycles, float(big.v_row * big.v_col) if big else 0.0), instr)
        return price
    if isinstance(cost, (int, float, np.integer, np.floating)) and not isinstance(cost, bool):
        rate = float(cost)
        if rate < 0:
            raise PtoArgumentError(f"pj.tiles.register_op: cost rate {cost} must be >= 0 cycles per byte")

        def price(instr, tgt, l2_hit=1.0):
            tiles = [o.type for o in (*instr.ins, *instr.outs) if isinstance(o.type, asm.TileBuf)]
            big = max(tiles, key=lambda t: t.v_row * t.v_col * t.np_dtype.itemsize)
            return moved((pipe, rate * big.v_row * big.v_col * big.np_dtype.itemsize, float(big.v_row * big.v_col)),
                         instr)
        return price
    passes = tuple(cost)
    unknown = [p for p in passes if p.partition(":")[0] not in _cost.VECTOR_CLASSES]
    if unknown or not passes:
        raise PtoArgumentError(f"pj.tiles.register_op: cost {cost!r}: give a function, a cycles-per-byte rate or "
                               f"vector pass classes from {sorted(_cost.VECTOR_CLASSES)}")

    def price(instr, tgt, l2_hit=1.0):
        _, cycles, flops = _cost._vector(instr, tgt, passes)
        return moved((pipe, cycles, flops), instr)
    return price


__all__ = ["CUSTOM", "KINDS", "Window", "abs", "add", "cast", "colmax", "colmin", "colsum", "compute", "div", "exp",
           "grid", "load", "log", "map_tiles", "matmul", "matmul_acc", "maximum", "minimum", "mov", "mul", "neg",
           "pow", "reciprocal", "register_op", "relu", "rowmax", "rowmin", "rowsum", "rsqrt", "sigmoid", "silu", "sqrt",
           "store", "sub", "tanh", "unregister_op", "where", "window"]
