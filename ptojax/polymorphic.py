"""``pj.kernel(fn, polymorphic_shapes=...)``: one compile serves every size of a symbolic row count.

The shapes are ``jax.export``'s specs (``"m, 64"``; constraints in its form, ``"m >= 16"``,
``"mod(m, 16) == 0"``). The kernel is lowered at two template sizes, which tell the dims that follow
the row count from static dims that equal a template by coincidence; the first is compiled to a dynamic PTO-AS
module (:mod:`ptojax.ascend.dynamic`: ``?`` views, ``%dyn_m: index``, tiles with dynamic valid rows); a
call binds the symbol from the argument shapes, checks the constraints, and runs the ``ceil(m/T)``
blocks each program needs on the engine, the last one the tail. One symbol, the leading dim of every
argument that has it; eager calls.
"""
from __future__ import annotations

import dataclasses
import re

import jax
import numpy as np

from .ascend import compile_kernel
from .ascend.dynamic import DynamicKernel, TemplateMismatch, row_vars
from .ascend.targets import target as get_target
from .errors import PtoArgumentError, PtoUnsupportedError
from .lowering.symbolic import template_text

_TEMPLATES = (512, 768, 1280, 2304, 1024, 1536, 3072)   # template row counts: multiples of the usual row tiles


def _specs(kernel, args):
    flat, tree = jax.tree.flatten(args)
    shapes = kernel.options.polymorphic_shapes
    if len(shapes) != len(args):
        raise PtoArgumentError(f"pj.kernel '{kernel.name}': polymorphic_shapes has {len(shapes)} entries for "
                               f"{len(args)} arguments (None for an argument of static shape)")
    try:
        specs = jax.export.symbolic_args_specs(args, shapes, constraints=kernel.options.polymorphic_constraints)
    except ValueError as err:           # jax.export's parser: a static dim the argument does not have
        why = str(err)
        match = re.search(r"in dimension (\d+): (different size \d+ for known dimension)", why)
        why = f"{match.group(2)} {match.group(1)}" if match else why
        given = ", ".join(f"{np.dtype(x.dtype).name}{list(np.shape(x))}" for x in flat)
        raise PtoArgumentError(f"pj.kernel '{kernel.name}': arguments ({given}) do not have the polymorphic shapes "
                               f"({', '.join(map(repr, shapes))}): {why}") from None
    return flat, tree, jax.tree.leaves(specs)


def _symbol(name, specs) -> str:
    symbols = set()
    for i, s in enumerate(specs):
        for axis, d in enumerate(s.shape):
            if isinstance(d, int):
                continue
            if axis != 0 or not str(d).isidentifier():
                raise PtoUnsupportedError(f"pj.kernel '{name}': argument {i} has the symbolic dim {d} at axis {axis}; "
                                          "the tile level takes one symbol as the leading (row) dim")
            symbols.add(str(d))
    if len(symbols) != 1:
        raise PtoUnsupportedError(f"pj.kernel '{name}': polymorphic_shapes name {sorted(symbols) or 'no symbol'}; "
                                  "the tile level takes exactly one symbolic row count")
    return symbols.pop()


@dataclasses.dataclass(eq=False)
class PolymorphicCompiled:
    """A kernel compiled once for a symbolic row count: call it on arrays of any size the constraints allow."""

    name: str
    symbol: str
    specs: list
    in_tree: object
    out_tree: object
    dynamic: DynamicKernel
    constraints: tuple = ()
    twin: DynamicKernel = None       # the same kernel at a second template size (what follows the rows)

    def as_text(self, level: str = "pto") -> str:
        """``pto``: the dynamic PTO-AS module (the text ``ptoas`` assembles and the engine runs);
        ``tile``, ``block``: the template's levels written with the symbol (``grid ceil(m/32)x2``)."""
        if level == "pto":
            return self.dynamic.text
        if level in ("tile", "block"):
            return template_text(self.dynamic.lowering.as_text(level), self.dynamic.size, self.symbol,
                                 self.twin.lowering.as_text(level))
        raise PtoArgumentError(f"pj.kernel '{self.name}': a polymorphic compile prints 'tile', 'block' or 'pto', "
                               f"not {level!r}")

    def ptoas(self, arch: str = "a3", level: str = "level2", insert_sync: bool = True) -> str:
        """The C++ Huawei's ``ptoas`` makes of the dynamic module."""
        from .ascend.ptoas import assemble
        return assemble(self.dynamic.text, arch=arch, level=level, insert_sync=insert_sync)

    def bind(self, flat) -> int:
        """The symbol's value for ``flat`` arguments; :class:`PtoArgumentError` where a size or a
        constraint does not hold."""
        value = None
        for i, (x, spec) in enumerate(zip(flat, self.specs)):
            shape = np.shape(x)
            if len(shape) != len(spec.shape) or np.dtype(x.dtype) != np.dtype(spec.dtype):
                raise PtoArgumentError(f"pj.kernel '{self.name}': argument {i} is {np.dtype(x.dtype).name}"
                                       f"{list(shape)}, compiled for {np.dtype(spec.dtype).name}{list(spec.shape)}")
            for axis, (n, d) in enumerate(zip(shape, spec.shape)):
                if isinstance(d, int):
                    if n != d:
                        raise PtoArgumentError(f"pj.kernel '{self.name}': argument {i} has {n} at axis {axis}, "
                                               f"compiled for {d} ({list(spec.shape)})")
                elif value is None:
                    value = n
                elif n != value:
                    raise PtoArgumentError(f"pj.kernel '{self.name}': {self.symbol} is {value} by an earlier "
                                           f"argument but argument {i} has {n} at axis {axis}")
        if value < 1:
            raise PtoArgumentError(f"pj.kernel '{self.name}': {self.symbol} = {value}; symbolic dims are >= 1")
        scope = next(d for s in self.specs for d in s.shape if not isinstance(d, int)).scope
        broken = [c.debug_str for c in scope._explicit_constraints
                  if not (lambda d: d == 0 if c.cmp.name == "EQ" else d >= 0)(c.diff._evaluate({self.symbol: value}))]
        if broken:     # the user's spelling where jax.export also keeps a normal form
            stated = [c for c in broken if c in self.constraints] or broken
            raise PtoArgumentError(f"pj.kernel '{self.name}': {self.symbol} = {value} violates the constraint "
                                   f"{stated[0]!r}")
        return value

    def __call__(self, *args):
        flat, tree = jax.tree.flatten(args)
        if tree != self.in_tree:
            raise PtoArgumentError(f"pj.kernel '{self.name}': called with {tree}, compiled for {self.in_tree}")
        if any(isinstance(x, jax.core.Tracer) for x in flat):
            raise PtoUnsupportedError(f"pj.kernel '{self.name}': a polymorphic kernel runs on concrete arrays "
                                      "(eager calls); under jax.jit use backend='xla' or concrete shapes")
        m = self.bind(flat)
        outs = self.dynamic.run([np.asarray(x) for x in flat], m)
        return jax.tree.unflatten(self.out_tree, [jax.numpy.asarray(o) for o in outs])


def compile_polymorphic(kernel, args) -> PolymorphicCompiled:
    """Lower ``kernel`` at two template row counts and compile its dynamic module, which both must give
    (no cache: the caller's)."""
    flat, tree, specs = _specs(kernel, args)
    symbol = _symbol(kernel.name, specs)
    symbolic = kernel.lower(*jax.tree.unflatten(tree, specs)).lowering      # the Tensor level, with symbols
    results = [v.aval.shape for v in symbolic.tensor.jaxpr.outvars]
    for i, shape in enumerate(results):
        if any(not isinstance(d, int) and (axis or str(d) != symbol) for axis, d in enumerate(shape)):
            raise PtoUnsupportedError(f"pj.kernel '{kernel.name}': result {i} has the shape "
                                      f"({', '.join(map(str, shape))}); the tile level takes the symbol as the "
                                      "leading dim of a result, or no symbol")
    static = {d for s in specs for d in s.shape if isinstance(d, int)}
    static |= {d for shape in results for d in shape if isinstance(d, int)}
    memory = get_target(kernel.options.target).memory
    sizes = [t for t in _TEMPLATES if t not in static]
    cache: dict = {}

    def lowered(size):
        if size not in cache:
            concrete = [jax.ShapeDtypeStruct(tuple(size if not isinstance(d, int) else d for d in s.shape), s.dtype)
                        for s in specs]
            low = kernel.lower(*jax.tree.unflatten(tree, concrete)).lowering
            cache[size] = (low, compile_kernel(low, memory))
        return cache[size]

    last = None
    for n, size in enumerate(sizes):            # the template and a second size: what follows the rows
        for twin in sizes[n + 1:]:
            (low, compiled), (low2, compiled2) = lowered(size), lowered(twin)
            rows, rows2 = row_vars(kernel.name, (low, size), (low2, twin))
            try:
                dynamic = DynamicKernel(low, compiled, size, rows)
            except TemplateMismatch as err:     # a row tile that does not divide this template: the next one
                last = err
                break
            try:
                other = DynamicKernel(low2, compiled2, twin, rows2)
            except TemplateMismatch as err:
                last = err
                continue
            dynamic.check_twin(kernel.name, other)
            return PolymorphicCompiled(kernel.name, symbol, specs, tree, low.out_tree, dynamic,
                                       tuple(kernel.options.polymorphic_constraints), other)
    raise last or PtoUnsupportedError(f"pj.kernel '{kernel.name}': no two template row counts of {_TEMPLATES} "
                                      f"are free of the static dims {sorted(static)}")


def key(kernel, args) -> tuple:
    """The compile cache key of ``args`` under ``kernel``'s polymorphic shapes: one per symbolic signature."""
    _, tree, specs = _specs(kernel, args)
    return ("polymorphic", tree, tuple((str(s.shape), np.dtype(s.dtype).name) for s in specs))
