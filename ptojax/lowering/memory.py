"""What the lowering must know of a core's local memory: buffer capacities, alignment, fractals.

Atlas A2 and A3 dies have the same per-core memories (docs/design.md's target table); the Ascend backend's
targets carry these numbers and add clocks and rates on top.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .._jax import Var
from ..primitives import tile as T

KIB = 1024


@dataclasses.dataclass(frozen=True)
class CoreMemory:
    """Capacities in bytes of the per-core buffers, and the layout rules tiles must follow."""

    ub: int = 192 * KIB            # unified buffer of one AIV (vector core)
    l1: int = 512 * KIB            # L1 of one AIC (cube core)
    l0a: int = 64 * KIB            # left matrix operand
    l0b: int = 64 * KIB            # right matrix operand
    l0c: int = 128 * KIB           # accumulator
    align: int = 32                # bytes: UB/L1 rows are 32-byte aligned
    fractal: int = 16              # cube fractal edge for fp16/bf16/fp32 (M, N; and K for 2-byte types)
    max_cols: int = 4095
    max_rows: int = 8192
    tile_bytes: int = 32 * KIB     # a default vector tile's size (pj.kernel halves it where a program's
    #                                instructions overfill the UB)

    def fractal_k(self, dtype) -> int:
        """The K edge of the cube fractal: 32 for 1-byte operands (16x32x16 for int8), else 16."""
        return 32 if np.dtype(dtype).itemsize == 1 else self.fractal

    def buffer(self, loc: str) -> int:
        return {"vec": self.ub, "mat": self.l1, "left": self.l0a, "right": self.l0b, "acc": self.l0c}[loc]


ASCEND_CORE = CoreMemory()


def aligned_bytes(shape, dtype, align: int) -> int:
    """Bytes a tile occupies when each row is padded to ``align`` bytes."""
    shape = tuple(shape) or (1,)
    row = -(-shape[-1] * np.dtype(dtype).itemsize // align) * align
    return int(np.prod(shape[:-1], dtype=np.int64)) * row


def _location(eqn) -> str:
    if eqn.primitive in (T.tload_p, T.tmov_p):
        return eqn.params["loc"]
    if eqn.primitive in (T.tmatmul_p, T.tmatmul_acc_p):
        return "acc"
    return T.GM_READERS.get(eqn.primitive, "vec")


# Float ops whose selection reads each source before it writes the result: codegen writes the result
# over a source tile of its type that dies there.
IN_PLACE = frozenset(T.COMPUTE[n] for n in ("add", "sub", "mul", "div", "maximum", "minimum", "exp", "log", "sqrt",
                                            "rsqrt", "reciprocal", "abs", "neg", "relu"))


def _dying_source(eqn, i: int, live: dict, last_use: dict):
    """The live source tile of ``eqn`` (the ``i``-th eqn) that its result is written over, if any: one of
    the result's type and buffer whose last use this is."""
    if eqn.primitive not in IN_PLACE or np.dtype(eqn.outvars[0].aval.dtype).kind != "f":
        return None
    out = eqn.outvars[0].aval
    return next((v for v in eqn.invars if isinstance(v, Var) and v in live and last_use.get(v) == i
                 and (v.aval.shape, v.aval.dtype) == (out.shape, out.dtype) and live[v][0] == _location(eqn)), None)


ROW_REDUCTIONS = frozenset(T.COMPUTE[n] for n in ("sum", "prod", "amax", "amin", "argmax", "argmin"))


def _row_tmp(eqn) -> bool:
    """Whether ``eqn`` is a reduction along its tile's rows (more than one column)."""
    if eqn.primitive not in ROW_REDUCTIONS:
        return False
    shape = eqn.invars[0].aval.shape
    return len(shape) > 0 and shape[-1] > 1 and len(shape) - 1 in [a % len(shape) for a in eqn.params["axes"]]


def footprint(jaxpr, memory: CoreMemory) -> dict[str, int]:
    """Peak bytes of live tiles per buffer location over a block body, in its eqn order.

    A tile is live from the eqn that makes it to its last use; a loop body's own peak counts while
    the loop runs; a row reduction adds its tmp tile (as large as its source) while it runs. GM
    tensors (the body's parameters, ``tstore``/``mscatter`` results and loop carries of them) take
    no local memory, ``tmatmul_acc`` accumulates in its operand's buffer and an elementwise float op
    writes over a source tile of its type that dies there (as codegen does).
    """
    gm = {v for v in jaxpr.invars if v.aval.shape}
    last_use = {}
    for i, eqn in enumerate(jaxpr.eqns):
        last_use.update((v, i) for v in eqn.invars if isinstance(v, Var))
    last_use.update((v, len(jaxpr.eqns)) for v in jaxpr.outvars if isinstance(v, Var))
    live: dict = {}
    peak: dict[str, int] = {}
    for i, eqn in enumerate(jaxpr.eqns):
        totals: dict[str, int] = {}
        for key, value in eqn.params.items():
            if key.endswith("jaxpr") and value is not None:
                for loc, b in footprint(getattr(value, "jaxpr", value), memory).items():
                    totals[loc] = max(totals.get(loc, 0), b)
        if eqn.primitive in (T.tstore_p, T.mscatter_p):
            gm.update(eqn.outvars)
        elif eqn.primitive.name == "scan":          # carries of GM tensors stay GM
            first = eqn.params["num_consts"]
            gm.update(o for o, i in zip(eqn.outvars, eqn.invars[first:]) if isinstance(i, Var) and i in gm)
        source = _dying_source(eqn, i, live, last_use)
        if source is not None:
            live[eqn.outvars[0]] = live.pop(source)
        elif eqn.primitive is not T.tmatmul_acc_p:    # in-place accumulate
            live.update((v, (_location(eqn), aligned_bytes(v.aval.shape, v.aval.dtype, memory.align)))
                        for v in eqn.outvars if v.aval.shape and v not in gm)
        for loc, b in live.values():
            totals[loc] = totals.get(loc, 0) + b
        if _row_tmp(eqn):                           # TROWSUM & co. take a tmp tile as large as their source
            x = eqn.invars[0].aval
            totals["vec"] = totals.get("vec", 0) + aligned_bytes(x.shape, x.dtype, memory.align)
        for loc, b in totals.items():
            peak[loc] = max(peak.get(loc, 0), b)
        for v in [v for v in live if last_use.get(v, -1) <= i]:
            del live[v]
    return peak
