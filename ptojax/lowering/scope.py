"""``pj.tile``: scoped tile shapes, and how the lowering reads them (and labels) back off each eqn.

The configuration travels in ``jax.named_scope``: ``with pj.tile(vec=(32, 32))`` opens the scope
``pto.tile[vec=32x32]``, so every eqn traced inside — ``pj.ops`` and plain ``jnp``/``lax`` alike —
records it in its name stack. The innermost setting of each kind wins. Any other named scope is a
semantic label (PyPTO's ``set_semantic_label``); the innermost one names the op's tasks.
"""
from __future__ import annotations

import contextlib
import dataclasses
import re

import jax
import numpy as np

from ..errors import PtoArgumentError, PtoCapacityError
from .memory import ASCEND_CORE

_MARK = "pto.tile["
_WRAPPER = re.compile(r"^[A-Za-z_]\w*\((.*)\)$")  # jvp(...), transpose(...), vmap(...)
_EINSUM = re.compile(r"^[A-Za-z. ]*(,[A-Za-z. ]*)+(->[A-Za-z. ]*)?$|^[A-Za-z. ]*->[A-Za-z. ]*$")  # the scope
# jnp.einsum opens, named by its spec as written ("ij,jk", "ij, jk -> ik", "ij->ji")


@dataclasses.dataclass(frozen=True)
class TileConfig:
    """The tile shapes in force for an op: ``vec`` (per trailing dim) and ``cube`` (m, k, n)."""

    vec: tuple[int, ...] | None = None
    cube: tuple[int, int, int] | None = None

    def merged(self, inner: "TileConfig") -> "TileConfig":
        return TileConfig(inner.vec or self.vec, inner.cube or self.cube)

    def scope_name(self) -> str:
        parts = [f"{kind}={'x'.join(map(str, shape))}" for kind, shape in (("vec", self.vec), ("cube", self.cube))
                 if shape is not None]
        return f"{_MARK}{','.join(parts)}]"


def _shape(kind, value, rank=None, who="pj.tile"):
    """``value`` as a tile shape; ``who`` names the setting in errors (``pj.tile``, or a pass option)."""
    try:
        exact = all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in value)
    except TypeError:                                 # not iterable
        exact = False
    if not exact or isinstance(value, (str, bytes)):
        raise PtoArgumentError(f"{who}: {kind} tile must be a tuple of ints, got {value!r}")
    shape = tuple(int(v) for v in value)
    if not shape or any(s < 1 for s in shape) or (rank and len(shape) != rank):
        want = f"{rank} positive ints" if rank else "positive ints"
        raise PtoArgumentError(f"{who}: {kind} tile {shape} must be {want}")
    return shape


def check_cube(cube, memory=ASCEND_CORE, who="pj.tile") -> None:
    """Fractal multiples, and L0A/L0B/L0C capacity even for the smallest (int8) operands; ``who`` names
    the setting in errors (``pj.tile``, or the pass option ``tiles[label]`` that gave the tile)."""
    m, k, n = cube
    f = memory.fractal
    if m % f or n % f or k % f:
        raise PtoArgumentError(f"{who}: cube tile (m={m}, k={k}, n={n}) must be multiples of the {f}x{f}x{f} "
                               "fractal (int8 also needs k % 32 == 0)")
    for name, need, cap in (("L0A", m * k, memory.l0a), ("L0B", k * n, memory.l0b),
                            ("L0C", m * n * 4, memory.l0c)):
        if need > cap:
            raise PtoCapacityError(f"{who}: cube tile (m={m}, k={k}, n={n}) needs {need} bytes of {name} even for "
                                   f"int8 operands; {name} holds {cap} bytes")


def check_vec(vec, memory=ASCEND_CORE, who="pj.tile") -> None:
    """Rank, the rows x columns a tile row holds, and UB capacity even for int8 tiles; ``who`` as for
    :func:`check_cube`."""
    if len(vec) > 5:
        raise PtoArgumentError(f"{who}: vec tile {vec} has {len(vec)} dims; at most 5")
    if vec[-1] > memory.max_cols:
        raise PtoArgumentError(f"{who}: vec tile {vec} has a last dim of {vec[-1]} columns; a tile row holds at most "
                               f"{memory.max_cols} (a longer row: tile it in column blocks, which a row loop reads)")
    if len(vec) > 1 and int(np.prod(vec[:-1])) > memory.max_rows:
        raise PtoArgumentError(f"{who}: vec tile {vec} has {int(np.prod(vec[:-1]))} rows (its leading dims "
                               f"multiplied); a tile holds at most {memory.max_rows}")
    if int(np.prod(vec)) > memory.ub:
        raise PtoCapacityError(f"{who}: vec tile {vec} holds {int(np.prod(vec))} elements; even int8 tiles "
                               f"must fit the {memory.ub}-byte UB")


@contextlib.contextmanager
def tile(vec=None, cube=None):
    """Set the vector tile (one size per trailing dim) and/or the cube tile ``(m, k, n)`` for the ops
    traced inside. Outside ``pj.kernel`` it is metadata only; the function still runs as plain JAX.

    Dtype-independent limits are checked here; alignment and capacity for the actual dtypes are
    checked when the kernel is lowered, naming the op's label.
    """
    if vec is None and cube is None:
        raise PtoArgumentError("pj.tile: give vec=(...), cube=(m, k, n) or both")
    config = TileConfig(None if vec is None else _shape("vec", vec), None if cube is None else _shape("cube", cube, 3))
    if config.vec:
        check_vec(config.vec)
    if config.cube:
        check_cube(config.cube)
    with jax.named_scope(config.scope_name()):
        yield config


def _parse(component: str) -> TileConfig:
    body = component[len(_MARK):-1]
    fields = dict(part.split("=") for part in body.split(",") if part)
    return TileConfig(*(tuple(int(v) for v in fields[k].split("x")) if k in fields else None for k in ("vec", "cube")))


def components(name_stack: str) -> list[str]:
    """The scopes of a name stack, outermost first, with transform wrappers (``jvp(...)``) removed."""
    out = []
    for part in str(name_stack).split("/"):
        while (m := _WRAPPER.match(part)) and not part.startswith(_MARK):
            part = m.group(1)
        if part:
            out.append(part)
    return out


def read(name_stack: str) -> tuple[TileConfig, str]:
    """The tile configuration and the semantic label recorded in an eqn's name stack: the innermost
    scope but ``jnp.einsum``'s own (its spec), which labels the op only where no scope encloses it."""
    config, label, spec = TileConfig(), "", ""
    for part in components(name_stack):
        if part.startswith(_MARK):
            config = config.merged(_parse(part))
        elif _EINSUM.match(part):
            spec = part
        else:
            label = part
    return config, label or spec
