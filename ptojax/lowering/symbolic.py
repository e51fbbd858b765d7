"""Kernels traced with ``jax.export`` symbolic dimensions: which arguments carry them, and the error
a level that needs concrete sizes raises.

The Tensor level takes symbols (every op's shape rule computes with them, :mod:`ptojax.primitives.dims`);
the Tile level and below count tiles from concrete sizes, so a symbolic lowering stops after the
Tensor level, and asking for a lower level is a :class:`~ptojax.errors.PtoUnsupportedError` naming the
level, the argument and its symbolic dimension. A kernel compiled for a symbolic row count is lowered
at a template size instead (:mod:`ptojax.polymorphic`); :func:`template_text` prints its levels with
the symbol.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import re

import jax
import numpy as np

from .._jax import ClosedJaxpr
from ..errors import PtoUnsupportedError
from ..primitives import dims, indexing


@dataclasses.dataclass(frozen=True)
class Symbolic:
    """One argument with symbolic dimensions: its flat position, ``dtype[shape]`` text and symbols."""

    index: int
    aval: str
    symbols: tuple[str, ...]

    def __str__(self):
        return f"argument {self.index} is {self.aval} (symbolic {', '.join(self.symbols)})"


def _aval_text(aval) -> str:
    return f"{np.dtype(aval.dtype).name}[{','.join(map(str, aval.shape))}]"


def symbolic_arguments(closed: ClosedJaxpr) -> tuple[Symbolic, ...]:
    """The flat arguments of a traced kernel whose shapes hold ``jax.export`` symbolic dimensions."""
    return tuple(Symbolic(i, _aval_text(v.aval), tuple(str(d) for d in dims.symbolic(v.aval.shape)))
                 for i, v in enumerate(closed.jaxpr.invars) if dims.symbolic(v.aval.shape))


def level_error(level: str, args: tuple[Symbolic, ...]) -> PtoUnsupportedError:
    """The error of a ``level`` that cannot take the symbolic dimensions of ``args`` yet."""
    return PtoUnsupportedError(
        f"pto lowering: the {level} level needs concrete sizes, but {'; '.join(map(str, args))}; "
        "the tensor level and backend='xla' take symbolic dimensions (jax.export), lower with concrete "
        "shapes for the tile, block and pto levels, or through pj.kernel (its lower and polymorphic_shapes "
        "compile a symbolic row count)")


def evaluate_at_sizes(closed: ClosedJaxpr, args) -> list:
    """Run a jaxpr whose inputs have symbolic shapes on concrete ``args``: exported with those shapes,
    then called (``jax.export`` binds the symbols to the sizes of ``args`` and checks they agree)."""
    specs = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in closed.jaxpr.invars]
    run = jax.jit(lambda *xs: jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *xs))
    return jax.export.export(run)(*specs).call(*args)


_HIDE = str.maketrans("0123456789", "".join(map(chr, range(0xE000, 0xE00A))))   # digits no rule reads
_SHOW = {v: k for k, v in _HIDE.items()}


def _static_sizes(text: str, size: int, twin: str) -> str:
    """``text`` with the dims equal to ``size`` and the grid and call counts that ``twin`` (the dump at a
    second row count) has unchanged at their place hidden from the rules: static, not the rows."""
    lines, others = text.split("\n"), twin.split("\n")
    if len(lines) != len(others):
        return text
    out = []
    for line, other in zip(lines, others):
        a, b = re.split(r"(\d+)", line), re.split(r"(\d+)", other)
        if len(a) == len(b) and a[::2] == b[::2]:
            line = "".join(x.translate(_HIDE) if k % 2 and x == y and (_rows(int(x), size) or re.search(
                r"(grid |parts=|> x)$", a[k - 1])) else x for k, (x, y) in enumerate(zip(a, b)))
        out.append(line)
    return "\n".join(out)


def _rows(n: int, size: int) -> int:
    """``k`` where ``n`` is ``k`` times the template row count ``size`` (k >= 1), else 0."""
    return n // size if n >= size and n % size == 0 else 0


def template_text(text: str, size: int, symbol: str, twin: str | None = None) -> str:
    """A Tile- or Block-level dump of a kernel lowered at the template row count ``size``, written with
    the ``symbol``: ``f32[m,64]`` (``f32[4*m,64]`` for ``4 * size`` rows), a grid of ``ceil(m/T)`` row
    blocks where it tiles ``size`` rows by ``T``, windows ``[T*i0:+min(T, m-T*i0), ...]`` (the last
    block is the tail), block calls of ``ceil(m/T)`` (times the other axes') instances. ``twin``, the
    dump at a second row count, keeps what equals ``size`` (or a multiple or count of it) by coincidence
    but does not follow the rows static."""
    if twin is not None:
        text = _static_sizes(text, size, twin)
    lines = text.split("\n")
    rows: dict = {}            # program name -> its row tile

    def sym(k: int) -> str:
        return symbol if k == 1 else f"{k}*{symbol}"

    def tile_after(n):
        for line in lines[n + 1:]:
            if re.match(r"\s*(part \d+:|program |%\S+ = tile_grid)", line) and line is not lines[n]:
                break
            m = re.search(r"window=\[(\d+)\*i0:\+\1\b", line)
            if m:
                return int(m.group(1))
        return None

    out, rowbufs = [], {}
    for n, line in enumerate(lines):
        m = re.match(r"program (\S+) ", line)
        if m:
            rows[m.group(1)] = tile_after(n)
        for key in ("grid ", "parts="):
            g = re.search(rf"{key}(\d+)((?:x\d+)*)", line)
            t = (tile_after(n + 1 if key == "parts=" else n)) if g else None     # a header: its first part
            if g and t and _rows(int(g.group(1)) * t, size):
                line = line[:g.start()] + f"{key}ceil({sym(_rows(int(g.group(1)) * t, size))}/{t}){g.group(2)}" \
                    + line[g.end():]
        line = re.sub(r"(\b[a-z]+\d*\[|new_shape=\()(\d+)([,\])])",
                      lambda d: d.group(1) + (sym(k) if (k := _rows(int(d.group(2)), size)) else d.group(2))
                      + d.group(3), line)
        rowbufs = {} if line.startswith("program ") else rowbufs
        rowbufs.update(re.findall(rf"(%\d+):[a-z]+\d*\[((?:\d+\*)?{symbol})[,\]]", line))
        buffer = re.search(r"\]\((%\d+)", line)
        if buffer and buffer.group(1) in rowbufs:          # a window of a buffer with the rows: the tail
            line = re.sub(r"\[(\d+)\*i0:\+\1\b", lambda w: f"[{w.group(1)}*i0:+min({w.group(1)}, "
                                                         f"{rowbufs[buffer.group(1)]}-{w.group(1)}*i0)", line)
        out.append(line)
    text = "\n".join(out)

    def calls(m):
        lead, name, core, count = m.group(1), m.group(2), m.group(3), int(m.group(4))
        t, k = rows.get(name), int(lead.split("*")[0]) if lead and "*" in lead else 1
        if not t or (k * size) % t or count % (k * size // t):
            return m.group(0)
        rest = count // (k * size // t)
        return f"{name}<{core}> x{'' if rest == 1 else f'{rest}*'}ceil({sym(k)}/{t})"
    return re.sub(rf"(?:[a-z]+\d*\[((?:\d+\*)?{symbol})[,\]][^=]*= )?\bblock_call\[([\w+#.-]+)<(\w+)> x(\d+)",
                  lambda m: m.group(0)[:m.start(2) - m.start(0)] + calls(m), text).translate(_SHOW)


_RUN_TIME_SIZES = contextvars.ContextVar("run_time_sizes", default=frozenset())


@contextlib.contextmanager
def run_time_sizes(*sizes):
    """Within: a dim of one of ``sizes`` (a polymorphic compile's template row count) stands for a size
    known at run time, as a symbolic dim does: an iota along it is computed on the cores, and a constant
    of that size is not folded."""
    token = _RUN_TIME_SIZES.set(frozenset(sizes))
    try:
        yield
    finally:
        _RUN_TIME_SIZES.reset(token)


def templated() -> bool:
    """Whether a polymorphic compile is lowering at a template row count (:func:`run_time_sizes`)."""
    return bool(_RUN_TIME_SIZES.get())


def at_run_time(n) -> bool:
    """Whether a dim ``n`` is known only at run time: symbolic, or a template row count."""
    return not isinstance(n, int) or n in _RUN_TIME_SIZES.get()


def arange(n, dims=()):
    """``0, 1, ..., n-1`` (int32): a constant, or computed on the cores (``pto.iota``) where ``n`` or one of
    ``dims`` (the dims ``n`` counts the positions of) is known only at run time."""
    if at_run_time(n) or any(map(at_run_time, dims)):
        return indexing.iota(n)
    return np.arange(n, dtype=np.int32)
