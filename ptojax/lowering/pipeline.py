"""The pass manager: named passes from a traced kernel to its Block graph, dumps, and verification.

``lower(fn, *args)`` runs ``trace`` → ``tensor`` → ``tile`` → ``partition`` and returns a
:class:`Lowering` holding every level. Each level is a jaxpr JAX evaluates, so ``verify`` runs every
level on the same inputs and compares it with the level before (PyPTO's pass verification): exact for
integers and booleans, a per-dtype tolerance for floats.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Mapping

import jax
import numpy as np

from .._jax import ClosedJaxpr
from ..errors import PtoArgumentError, PtoDtypeError, PtoUnsupportedError, PtoVerifyError
from . import text
from .memory import ASCEND_CORE, CoreMemory
from .partition import Options, Program, to_block_level
from .symbolic import Symbolic, evaluate_at_sizes, level_error, symbolic_arguments
from .tensor import to_tensor_level
from .tiling import to_tile_level

LEVELS = ("traced", "tensor", "tile", "block")

# Float tolerances (rtol, atol) between consecutive levels: tiling re-associates sums (K chains,
# fused reductions), so one level may differ from the last by a few rounding steps.
TOLERANCE = {np.dtype(np.float32): (1e-4, 1e-5), np.dtype(np.float16): (4e-3, 1e-3),
             np.dtype(jax.numpy.bfloat16): (3.2e-2, 1e-2)}


@dataclasses.dataclass(frozen=True, eq=False)
class Lowering:
    """Every level of a lowered kernel; flat inputs and outputs (see ``in_tree`` / ``out_tree``)."""

    traced: ClosedJaxpr
    tensor: ClosedJaxpr
    _tile: ClosedJaxpr | None
    _block: ClosedJaxpr | None
    _programs: tuple[Program, ...]
    in_tree: object
    out_tree: object
    symbolic: tuple[Symbolic, ...] = ()      # arguments with jax.export symbolic dims: no tile level yet

    def _needs_sizes(self, level: str):
        if self.symbolic and level not in ("traced", "tensor"):
            raise level_error(level, self.symbolic)

    @property
    def tile(self) -> ClosedJaxpr:
        """The Tile level (concrete sizes only)."""
        self._needs_sizes("tile")
        return self._tile

    @property
    def block(self) -> ClosedJaxpr:
        """The Block level (concrete sizes only)."""
        self._needs_sizes("block")
        return self._block

    @property
    def programs(self) -> tuple[Program, ...]:
        """The Block level's programs (concrete sizes only)."""
        self._needs_sizes("block")
        return self._programs

    def level(self, name: str) -> ClosedJaxpr:
        """The closed jaxpr of one level: ``traced``, ``tensor``, ``tile`` or ``block``."""
        if name not in LEVELS:
            raise PtoArgumentError(f"pto lowering: level {name!r} is not one of {LEVELS}")
        self._needs_sizes(name)
        return getattr(self, name)

    def as_text(self, level: str = "block") -> str:
        """A readable dump of one level: ``tensor``, ``tile``, ``block``, ``traced``, or any level a
        backend registered in :data:`TEXT` (the Ascend backend adds ``pto``)."""
        if level not in TEXT:
            raise PtoArgumentError(f"pto lowering: no text for level {level!r}; available: {sorted(TEXT)}")
        self._needs_sizes(level)
        return TEXT[level](self)

    def evaluate(self, level: str, *args):
        """Run one level on (pytree) arguments as one ``jax.jit`` computation, each op's result rounded to
        its dtype (XLA's excess precision off: a bf16 product summed in f32 is the rounded product, as on
        the cores); returns the kernel's (pytree) outputs. A symbolic lowering runs at the sizes of ``args``."""
        flat, tree = jax.tree.flatten(args)
        self.check_signature("pto lowering", flat, tree)
        closed = self.level(level)
        run = jax.jit(functools.partial(jax.core.eval_jaxpr, closed.jaxpr, closed.consts))
        outs = (evaluate_at_sizes(closed, flat) if self.symbolic
                else run.lower(*flat).compile({"xla_allow_excess_precision": False})(*flat))
        return jax.tree.unflatten(self.out_tree, outs)

    def check_signature(self, who: str, flat, tree):
        """Raise :class:`PtoArgumentError` (message from ``who``) where flat arguments ``flat`` of pytree
        ``tree`` do not have the lowered structure (the message shows both as dtype[shape] pytrees) or a
        leaf has another dtype or shape than the lowered one (a symbolic dim takes any size)."""
        if tree != self.in_tree:
            given = jax.tree.unflatten(tree, [f"{np.result_type(x).name}{list(np.shape(x))}" for x in flat])
            want = jax.tree.unflatten(self.in_tree, [f"{v.aval.dtype.name}{list(v.aval.shape)}"
                                                     for v in self.traced.jaxpr.invars])
            raise PtoArgumentError(f"{who}: arguments {str(given).replace(chr(39), '')} do not match the lowered "
                                   f"signature {str(want).replace(chr(39), '')}")
        wrong = []
        for i, (x, v) in enumerate(zip(flat, self.traced.jaxpr.invars)):
            shape, dtype = tuple(np.shape(x)), jax.dtypes.canonicalize_dtype(np.result_type(x))
            want = tuple(v.aval.shape)
            if dtype != v.aval.dtype or len(shape) != len(want) or any(
                    isinstance(w, int) and w != d for d, w in zip(shape, want)):      # a symbolic dim: any size
                wrong.append(f"argument {i} is {dtype.name}{list(shape)}, lowered for "
                             f"{np.dtype(v.aval.dtype).name}{[str(d) for d in want]}".replace("'", ""))
        if wrong:
            raise PtoArgumentError(f"{who}: {'; '.join(wrong)}; lower again for other shapes and dtypes")

    def verify(self, *args) -> dict[str, float]:
        """Evaluate every level on ``args`` (a symbolic lowering: ``traced`` and ``tensor``, at the sizes
        of ``args``); raise :class:`PtoVerifyError` where one differs from the level before. Returns the
        largest relative difference per level."""
        previous = None
        report = {}
        for name in LEVELS[:2] if self.symbolic else LEVELS:
            outs = [np.asarray(o) for o in jax.tree.leaves(self.evaluate(name, *args))]
            if previous is not None:
                report[name] = max([_compare(name, i, p, o) for i, (p, o) in enumerate(zip(previous, outs))], default=0.0)
            previous = outs
        return report


def _compare(level, index, before, after) -> float:
    dtype = np.dtype(after.dtype)
    if dtype not in TOLERANCE:
        if not np.array_equal(before, after):
            bad = int(np.sum(before != after))
            raise PtoVerifyError(f"pto verify: level '{level}' output {index} ({dtype.name}{list(after.shape)}) differs "
                                 f"from the level before in {bad} element(s); integer results must match exactly")
        return 0.0
    rtol, atol = TOLERANCE[dtype]
    a, b = before.astype(np.float64), after.astype(np.float64)
    same_nan = np.isnan(a) == np.isnan(b)
    with np.errstate(invalid="ignore"):          # inf - inf: infinities are compared below
        err = np.abs(a - b)
    finite = np.isfinite(a) & np.isfinite(b)
    bad = ~same_nan | (finite & (err > atol + rtol * np.abs(a))) | (~finite & ~np.isnan(a) & (a != b))
    if bad.any():
        i = np.unravel_index(np.argmax(bad), bad.shape)
        raise PtoVerifyError(f"pto verify: level '{level}' output {index} ({dtype.name}{list(after.shape)}) differs from "
                             f"the level before at {tuple(int(j) for j in i)}: {b[i]} vs {a[i]} "
                             f"(rtol {rtol}, atol {atol}); {int(bad.sum())} element(s) out of tolerance")
    rel = err[finite] / (np.abs(a[finite]) + atol) if finite.any() else np.zeros(0)
    return float(rel.max(initial=0.0))


# Text of each level; backends add their own (``pto``) when they are imported.
TEXT: dict[str, Callable[[Lowering], str]] = {
    "traced": lambda low: str(low.traced),
    "tensor": lambda low: text.tensor_text(low.tensor),
    "tile": lambda low: text.tile_text(low.tile),
    "block": lambda low: text.block_text(low.block, low.programs),
}

PASSES: tuple[tuple[str, Callable], ...] = (
    ("tensor", lambda closed, memory, options: to_tensor_level(closed)),
    ("tile", lambda closed, memory, options: to_tile_level(closed, memory, options.tiles, {
        "tiles_per_block": options.tiles_per_block, "row_loops": options.row_loops})),
    ("partition", lambda closed, memory, options: to_block_level(closed, memory, options)),
)


def _host_consts(traced: ClosedJaxpr, name: str) -> ClosedJaxpr:
    """``traced`` with the arrays ``fn`` closes over as NumPy constants of their values now, as a NumPy
    array closed over is (a ``jax.Array`` stayed an array that no pass tiles); a value traced by an
    enclosing transformation has no value to fold, which the error says."""
    consts = []
    for v, c in zip(traced.jaxpr.constvars, traced.consts):
        if isinstance(c, jax.core.Tracer):
            raise PtoArgumentError(f"pj.kernel '{name}': the function closes over a {v.aval.str_short()} value "
                                   "traced by an enclosing transformation (jax.jit, jax.grad, jax.vmap); pass it "
                                   "to the kernel as an argument")
        consts.append(np.asarray(c) if isinstance(c, jax.Array) else _frozen(c))
    return ClosedJaxpr(traced.jaxpr, consts)


def _frozen(c):
    """A NumPy constant as it was when traced (a read-only copy): every call of the compile sees those
    values, eager and jitted alike, however the caller changes the array later (as ``jax.jit``)."""
    if not isinstance(c, np.ndarray):
        return c
    c = np.array(c, copy=True)
    c.flags.writeable = False
    return c


def lower(fn: Callable, *args, options: Mapping | None = None, memory: CoreMemory = ASCEND_CORE) -> Lowering:
    """Trace ``fn`` on ``args`` (arrays or ``jax.ShapeDtypeStruct``s, in pytrees) and run every pass.

    A kernel is one core's program: it is traced outside any mesh, also inside ``jax.shard_map`` (where
    ``jnp`` would write ``reshard`` of the manual axes into it)."""
    if not callable(fn):
        raise PtoArgumentError(f"pto lower: the kernel must be callable (a function), got {fn!r}")
    if not isinstance(memory, CoreMemory):
        raise PtoArgumentError(f"pto lower: memory must be a CoreMemory (ptojax.lowering.memory: the core's buffers, "
                               f"ASCEND_CORE by default), got {memory!r}")
    with jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh((), ())):
        return _lower(fn, args, options, memory)


def _lower(fn, args, options, memory) -> Lowering:
    flat, in_tree = jax.tree.flatten(args)
    for i, x in enumerate(flat):
        if np.dtype(x.dtype).itemsize == 8 and np.dtype(x.dtype).kind in "fiu" and not getattr(x, "weak_type", False):
            raise PtoDtypeError(f"pto lower: argument leaf {i} is {np.dtype(x.dtype).name}{list(np.shape(x))}; the "
                                "cores have no 64-bit types: pass it as float32 / int32")
    with jax.enable_x64(False):         # the kernel's own values (iotas, loop counters, constants) in 32 bits
        return _lower_32(fn, flat, in_tree, options, memory)


def _lower_32(fn, flat, in_tree, options, memory) -> Lowering:
    avals = [jax.ShapeDtypeStruct(np.shape(x), x.dtype, weak_type=getattr(x, "weak_type", False)) for x in flat]
    out_tree = []

    def flat_fn(*xs):
        out = fn(*jax.tree.unflatten(in_tree, xs))
        leaves, tree = jax.tree.flatten(out)
        out_tree.append(tree)
        return leaves

    try:
        traced = jax.make_jaxpr(flat_fn)(*avals)
    except AssertionError as err:      # jax.lax.psum over shard_map's axes of a value traced without them
        if "ManualAxisType" not in str(err):
            raise
        raise PtoUnsupportedError("pto lower: a collective over jax.shard_map's mesh axes (jax.lax.psum, pmax, "
                                  "all_gather, ...) in the kernel's body: a kernel is one core's program; apply it "
                                  "outside the kernel (inside jax.shard_map, around the pj.kernel call)") from None
    traced = _host_consts(traced, getattr(fn, "__name__", "kernel"))
    pass_options = Options.make(options)
    symbolic = symbolic_arguments(traced)
    if symbolic:            # the tile level counts tiles from concrete sizes: stop at the tensor level
        tensor = to_tensor_level(traced)
        return Lowering(traced, tensor, None, None, (), in_tree, out_tree[0], symbolic)
    levels = {"traced": traced}
    current = traced
    for name, run in PASSES:
        current = run(current, memory, pass_options)
        if name == "partition":
            current, programs = current
        levels[name] = current
    return Lowering(traced, levels["tensor"], levels["tile"], levels["partition"], programs, in_tree, out_tree[0])
