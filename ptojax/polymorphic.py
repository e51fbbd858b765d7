"""``pj.kernel(fn, polymorphic_shapes=...)``: one compile serves every size of a symbolic row count.

The shapes are ``jax.export``'s specs (``"m, 64"``; constraints in its form, ``"m >= 16"``,
``"mod(m, 16) == 0"``). The kernel is lowered at two template sizes, which tell the dims that follow
the row count from static dims that equal a template by coincidence; the first is compiled to a dynamic PTO-AS
module (:mod:`ptojax.ascend.dynamic`: ``?`` views, ``%dyn_m: index``, tiles with dynamic valid rows); a
call binds the symbol from the argument shapes, checks the constraints, and runs the ``ceil(m/T)``
blocks each program needs as tasks of the MPMD runtime, the last one the tail (``run``, ``profile``,
``report`` as a static kernel's, at the size the arguments bind). One symbol, the leading dim of every
argument that has it; under ``jax.jit`` (a trace per shape, the one compile) the call inlines the
dynamic module's replay (:meth:`PolymorphicCompiled.replay`), or where data steers its tasks runs on the
host runtime through a callback. ``jax.export`` of a ``sim`` kernel with a symbolic row count, and a symbolic
``lower``, compile the same way from the traced specs (:func:`compile_specs`, :func:`export_function`).
"""
from __future__ import annotations

import dataclasses
import re

import jax
import numpy as np
from jax.custom_derivatives import SymbolicZero

from ._jax import jaxprs_in_params
from .ascend import compile_kernel
from .ascend.dynamic import DynamicKernel, row_vars
from .ascend.targets import target as get_target
from .errors import PtoArgumentError, PtoUnsupportedError, no_derivative
from .execute import canonical_arguments, execute_dynamic
from .lowering.symbolic import run_time_sizes, template_text

_TEMPLATES = (512, 768, 1280, 2304, 1024, 1536, 3072, 2560)   # template row counts: multiples of the usual row tiles


def specs_of(kernel, args):
    """``(flat args, tree, flat symbolic specs)`` of ``args`` under ``kernel``'s ``polymorphic_shapes``;
    an error naming a shape that does not fit its argument or a malformed constraint."""
    flat, tree = jax.tree.flatten(args)
    shapes = kernel.options.polymorphic_shapes
    if len(shapes) != len(args):
        raise PtoArgumentError(f"pj.kernel '{kernel.name}': polymorphic_shapes has {len(shapes)} entries for "
                               f"{len(args)} arguments (None for an argument of static shape)")
    for i, (arg, spec) in enumerate(zip(args, shapes)):
        rank = _rank(spec)
        if rank is not None and hasattr(arg, "shape") and rank != np.ndim(arg):
            raise PtoArgumentError(f"pj.kernel '{kernel.name}': polymorphic shape {spec!r} has {rank} "
                                   f"dim{'s' * (rank != 1)} for argument {i} of shape {list(np.shape(arg))}")
    constraints = kernel.options.polymorphic_constraints
    symbols = {name for spec in shapes if isinstance(spec, str) for name in re.findall(r"[A-Za-z_]\w*", spec)}
    for c in constraints:               # jax.export reads a malformed one as a malformed shape
        if not re.fullmatch(r"\s*[^<>=\s][^<>=]*(>=|<=|==)\s*[^<>=\s][^<>=]*", c):
            raise PtoArgumentError(f"pj.kernel '{kernel.name}': polymorphic constraint {c!r} is not "
                                   "'<expr> >= <expr>' (or <=, ==)")
        unknown = set(re.findall(r"[A-Za-z_]\w*", c)) - symbols - {"mod", "floordiv", "max", "min", "non_negative"}
        if unknown:
            raise PtoArgumentError(f"pj.kernel '{kernel.name}': polymorphic constraint {c!r} names "
                                   f"{', '.join(sorted(unknown))}, not a symbol of the polymorphic shapes "
                                   f"({', '.join(map(repr, shapes))})")
    try:
        specs = jax.export.symbolic_args_specs(args, shapes, constraints=constraints)
    except ValueError as err:           # jax.export's parser: a static dim the argument does not have
        why = str(err)
        match = re.search(r"in dimension (\d+): (different size \d+ for known dimension)", why)
        why = f"{match.group(2)} {match.group(1)}" if match else why
        given = ", ".join(f"{np.dtype(x.dtype).name}{list(np.shape(x))}" for x in flat)
        raise PtoArgumentError(f"pj.kernel '{kernel.name}': arguments ({given}) do not have the polymorphic shapes "
                               f"({', '.join(map(repr, shapes))}): {why}") from None
    leaves = jax.tree.leaves(specs)
    dim = next((d for s in leaves for d in s.shape if not isinstance(d, int)), None)
    try:
        if dim is not None:
            dim >= 1                    # noqa: B015 - a decision: jax.export checks the constraints together
    except ValueError as err:           # ("Unsatisfiable constraint: m <= 4")
        raise PtoArgumentError(f"pj.kernel '{kernel.name}': polymorphic_constraints {list(constraints)} admit no "
                               f"size: {err}") from None
    return flat, tree, leaves


def _rank(spec) -> int | None:
    """The dims of polymorphic shape ``spec`` (``"m, 64,"`` has two); None for one with ``...``, or one
    jax.export's parser refuses (its error follows)."""
    if not isinstance(spec, str) or "..." in spec:
        return None
    try:
        return len(jax.export.symbolic_shape(spec))
    except ValueError:
        return None


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
        raise PtoUnsupportedError(f"pj.kernel '{name}': the symbolic shapes name {sorted(symbols) or 'no symbol'}; "
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
    options: object = None           # the kernel's Options (target, executor, workers)
    tensor: str = ""                 # the Tensor level, with the symbol (jax.export's shapes)
    _replay: object = dataclasses.field(default=None, repr=False)   # replay(): the function, or why not
    _plans: dict = dataclasses.field(default_factory=dict, repr=False)   # eager calls' kept plans, by size

    def as_text(self, level: str = "pto") -> str:
        """``pto``: the dynamic PTO-AS module (the text ``ptoas`` assembles and the engine runs);
        ``tensor``: the Tensor level lowered with the symbol; ``tile``, ``block``: the template's levels
        written with the symbol (``grid ceil(m/32)x2``); ``cpp``: what ``ptoas`` makes of the module. The tasks
        depend on the size: :meth:`profile` at a row count (``m=``, or the symbol's own name) shows them."""
        if level == "pto":
            return self.dynamic.text
        if level == "cpp":
            return self.ptoas()
        if level == "tensor":
            return self.tensor
        if level in ("tile", "block"):
            return template_text(self.dynamic.lowering.as_text(level), self.dynamic.size, self.symbol,
                                 self.twin.lowering.as_text(level))
        raise PtoArgumentError(f"pj.kernel '{self.name}': a polymorphic compile prints 'tensor', 'tile', "
                               f"'block', 'pto' or 'cpp', not {level!r} (its tasks depend on the size: "
                               f"profile({self.symbol}=...) shows them)")

    @property
    def signature(self) -> tuple:
        """The kernel's name, its symbolic argument shapes and dtypes, target and pass options (as
        :attr:`Compiled.signature <ptojax.kernel.Compiled.signature>`, the sizes symbolic)."""
        return (self.name, tuple((tuple(map(str, s.shape)), np.dtype(s.dtype).name) for s in self.specs),
                self.options.target, self.options.passes)

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

    def _flat(self, args) -> list:
        flat, tree = jax.tree.flatten(canonical_arguments(args))
        if tree != self.in_tree:
            def text(tree, leaves):
                args = jax.tree.unflatten(tree, [f"{np.dtype(x.dtype).name}[{', '.join(map(str, x.shape))}]"
                                                 if hasattr(x, "shape") and hasattr(x, "dtype") else type(x).__name__
                                                 for x in leaves])
                return f"{len(args)} argument{'s' * (len(args) != 1)} ({', '.join(map(str, args))})".replace("'", "")
            raise PtoArgumentError(f"pj.kernel '{self.name}': called with {text(tree, flat)}, compiled for "
                                   f"{text(self.in_tree, self.specs)}")
        return flat

    def replay(self):
        """The dynamic module as a shape-polymorphic JAX function
        (:func:`~ptojax.ascend.dynamic_replay.polymorphic_function`), or why it cannot be one (a str:
        argument values or device data decide its tasks, or a function cannot run for a symbolic row
        count). Made once."""
        if self._replay is None:
            self._replay = _replay(self)
        return self._replay

    def __call__(self, *args):
        flat = self._flat(args)
        m = self.bind(flat)
        if any(isinstance(x, jax.core.Tracer) for x in flat):     # jax.jit: this trace's shapes bind m
            return jax.tree.unflatten(self.out_tree, self._traced(m)(*flat))
        outs, _ = self._run_flat(flat, m, self.options.executor)
        return jax.tree.unflatten(self.out_tree, jax.device_put(list(outs)))

    def _traced(self, m: int):
        """The kernel at ``m`` rows as a function of traced arguments: the replay inlined, as a static
        kernel's, or the host callback where data steers; no automatic derivative, as a static kernel."""
        replay = self.replay()

        @jax.custom_jvp
        def call(*flat):
            if callable(replay):
                return [o.astype(s.dtype) for o, s in zip(replay(*flat), self.result_shapes(m))]
            return jax.pure_callback(lambda *xs: self._run_flat(xs, m, self.options.executor)[0],
                                     self.result_shapes(m), *flat, vmap_method="sequential")

        def jvp(primals, tangents):
            """Integer and bool results have zero tangents; a float one has no derivative."""
            shapes = self.result_shapes(m)
            if any(jax.numpy.issubdtype(s.dtype, jax.numpy.inexact) for s in shapes):
                raise no_derivative(self.name)
            outs = call(*primals)
            return outs, [SymbolicZero(jax.typeof(o).to_tangent_aval()) for o in outs]

        call.defjvp(jvp, symbolic_zeros=True)
        return call

    def result_shapes(self, m: int) -> list:
        """The flat results at ``m`` rows, as ``jax.ShapeDtypeStruct`` s."""
        return [jax.ShapeDtypeStruct(self.dynamic.shape(v, m), v.aval.dtype)
                for v in self.dynamic.lowering.block.jaxpr.outvars]

    def _run_flat(self, flat, m: int, executor: str, policy: str = "mpmd", compute: bool = True):
        outs, trace = execute_dynamic(self.dynamic, flat, m, target=self.options.target, executor=executor,
                                      policy=policy, workers=self.options.workers, compute=compute, plans=self._plans)
        dtypes = [s.dtype for s in self.result_shapes(m)]
        return (None if outs is None else [np.asarray(o, d) for o, d in zip(outs, dtypes)]), trace

    def run(self, *args, executor: str | None = None, policy: str = "mpmd", compute: bool = True):
        """Execute on the runtime at the size the arguments bind: (outputs, :class:`~ptojax.mpmd.Trace`),
        as :meth:`~ptojax.kernel.Compiled.run` — the ``ceil(m/T)`` blocks of each program as tasks,
        scheduled by their dependencies on the AIC/AIV cores (``compute=False``: the schedule alone)."""
        flat = self._flat(args)
        outs, trace = self._run_flat(flat, self.bind(flat), executor or self.options.executor, policy, compute)
        return (jax.tree.unflatten(self.out_tree, outs) if compute else None), trace

    def _size(self, call: str, m, sizes: dict) -> tuple:
        """(the keyword the row count was given by, its value or None) from ``m=`` or the symbol's own name
        (``b=4`` for shapes ``"b, 64"``); a :class:`PtoArgumentError` naming the keyword to use for another."""
        for keyword, value in sizes.items():
            if keyword != self.symbol:
                path = "path, " * (call == "report")
                also = "" if self.symbol == "m" else "; m= works too"
                raise PtoArgumentError(
                    f"pj.kernel '{self.name}': {call}({keyword}={value!r}): {call} has no keyword {keyword}=; the "
                    f"size keyword is {self.symbol}=, the symbolic row count of the shapes ({self._shapes()}){also}: "
                    f"compiled.{call}({path}{self.symbol}=...)")
        if self.symbol in sizes:
            if m is not None:
                raise PtoArgumentError(f"pj.kernel '{self.name}': {call}(m={m!r}, {self.symbol}={sizes[self.symbol]!r})"
                                       f": two sizes for the one row count {self.symbol}; pass one of them")
            return self.symbol, sizes[self.symbol]
        return "m", m

    def _shapes(self) -> str:
        return ", ".join(f"{np.dtype(s.dtype).name}[{', '.join(map(str, s.shape))}]" for s in self.specs)

    def _sized(self, args, m, call: str, sizes: dict | None = None) -> tuple:
        """(``args``, True), or (the polymorphic shapes at ``m`` rows, given as ``m=``, the symbol's
        name or ``jax.ShapeDtypeStruct`` arguments of concrete shapes, False); an error naming what is
        needed."""
        keyword, m = self._size(call, m, sizes or {})
        if args and m is not None:
            raise PtoArgumentError(f"pj.kernel '{self.name}': {call} takes arguments or {keyword}=, not both")
        flat = jax.tree.leaves(args)
        shapes_only = bool(flat) and all(isinstance(x, jax.ShapeDtypeStruct) for x in flat)
        if shapes_only and all(isinstance(d, (int, np.integer)) for x in flat for d in x.shape):
            m = self.bind(self._flat(args))      # concrete specs: their size, as m= would give it
        elif args and not shapes_only:
            return args, True
        if m is None:
            symbolic = " (the shapes given are symbolic)" if shapes_only else ""
            raise PtoArgumentError(f"pj.kernel '{self.name}': {call} of a polymorphic kernel needs the size{symbolic}: "
                                   f"pass arguments of the shapes ({self._shapes()}), or {self.symbol} alone: "
                                   f"compiled.{call}({'path, ' * (call == 'report')}{self.symbol}=...)")
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
            raise PtoArgumentError(f"pj.kernel '{self.name}': {call}({keyword}={m!r}): {self.symbol} is a row count, "
                                   "an int >= 1")
        flat = [jax.ShapeDtypeStruct(tuple(m if not isinstance(d, int) else d for d in s.shape), s.dtype)
                for s in self.specs]
        return jax.tree.unflatten(self.in_tree, flat), False

    def profile(self, *args, m: int | None = None, policy: str = "mpmd", compute: bool = True, **size):
        """A simulated run at the size ``args`` bind (or at ``m`` rows, shapes only; the symbol's own name
        works too: ``profile(b=4)`` for shapes ``"b, 64"``; ``jax.ShapeDtypeStruct`` arguments of concrete
        shapes give their size) on the target's cost model: a :class:`~ptojax.mpmd.Profile`, as
        :meth:`~ptojax.kernel.Compiled.profile`."""
        if not isinstance(compute, bool):
            raise PtoArgumentError(f"pj.kernel '{self.name}': profile(compute=...) must be True or False, got "
                                   f"{compute!r}")
        args, given = self._sized(args, m, "profile", size)
        return self.run(*args, executor="simulated", policy=policy, compute=compute and given)[1].profile()

    def report(self, path, *args, m: int | None = None, policy: str = "mpmd", title: str | None = None, **size):
        """:meth:`profile` written as a self-contained HTML report to ``path`` (:mod:`ptojax.report`):
        the timeline views and the levels (:meth:`as_text`, with the symbol); the fusion view and block
        graph are a static compile's (their grids depend on the size); the profile."""
        from . import report
        from .mpmd.trace import output_path
        from .report.build import LEVELS

        output_path(path, "pj.kernel(...).report(path, *args)")     # before profiling: report(a, b) forgot it
        args, given = self._sized(args, m, "report", size)
        profile = self.run(*args, executor="simulated", policy=policy, compute=given)[1].profile()
        report.write(path, profile, title=title or f"{self.name} ({self.symbol} = {self.bind(self._flat(args))})",
                     levels={level: self.as_text(level) for level in LEVELS})
        return profile


_ALONG = ("sum", "prod", "amax", "amin", "argmax", "argmin", "cumsum", "sort", "topk", "softmax", "rms_norm",
          "layer_norm", "quantize", "merge_topk")                      # ops that read every element along their axes
_INDEXED = ("gather", "index_add", "scatter_update")       # ops that move rows at computed indices
_OWN_ROWS = "a polymorphic kernel runs each block of rows on its own and a block reads only its own rows"
_INSTEAD = "or call the kernel without polymorphic_shapes (one compile per row count)"
_JNP = {"amax": "jnp.max", "amin": "jnp.min", "topk": "jax.lax.top_k", "softmax": "jax.nn.softmax",
        "rms_norm": "pj.ops.rms_norm", "layer_norm": "pj.ops.layer_norm", "quantize": "pj.ops.quantize"}


def _symbolic_axes(aval) -> list:
    return [axis for axis, d in enumerate(aval.shape) if not isinstance(d, int)]


def _op_text(eqn) -> str:
    params = " ".join(f"{k}={v}" for k, v in eqn.params.items()
                      if k in ("axes", "axis", "offsets", "shape") or (k.startswith("transpose_") and v))
    operand = eqn.invars[0].aval
    return (f"{eqn.primitive.name}{f'[{params}]' if params else ''} of {np.dtype(operand.dtype).name}"
            f"[{', '.join(map(str, operand.shape))}]")


def _check_row_local(name: str, symbol: str, jaxpr):
    """:class:`PtoUnsupportedError` naming kernel ``name`` and its op, where an op of its Tensor level
    (traced with the symbolic row count) reads rows other than a block's own: a reduction, scan or sort
    along the symbolic rows, a matmul contracting them (``x.T @ x``), a window of them (``x[0:1]``, a
    row slice, ``jnp.roll``), or a gather /
    scatter of whole rows of a row-carrying tensor (``x[idx]``, ``jnp.flip`` along them). Found here,
    the error says so before the template lowerings, which fail on such ops at a template's size (a
    capacity error at 768 rows, PTO-AS windows that are not a block's row tile)."""
    for eqn in jaxpr.eqns:
        for sub in jaxprs_in_params(eqn.params):
            _check_row_local(name, symbol, sub)
        op = eqn.primitive.name.removeprefix("pto.")
        if not eqn.primitive.name.startswith("pto.") or not eqn.invars or not hasattr(eqn.invars[0], "aval"):
            continue
        x = eqn.invars[0].aval
        rows = _symbolic_axes(x)
        if not rows:
            continue
        if op in _ALONG:
            axes = eqn.params.get("axes", (eqn.params.get("axis", x.ndim - 1),))     # a norm: the last
            if op == "merge_topk":                                                 # [..., lists, length]
                axes = (x.ndim - 2, x.ndim - 1)
            along = [a for a in axes if a in rows]
            if along:
                instead = ("merge lists of a static axis ([..., lists, length] with the rows before them)"
                           if op == "merge_topk" else "do it outside the kernel on the kernel's result "
                           f"({_JNP.get(op, 'jnp.' + op)}(y, axis={along[0]}))")
                raise PtoUnsupportedError(
                    f"pj.kernel '{name}': {_op_text(eqn)} runs along the symbolic rows {symbol} (axis {along[0]}), "
                    f"a reduction or scan along the symbolic row axis: it needs every row at once, but "
                    f"{_OWN_ROWS}; {instead}, {_INSTEAD}")
        elif op == "view":
            cut = [a for a in rows if eqn.params["offsets"][a] != 0 or eqn.params["shape"][a] != x.shape[a]]
            if cut:
                a, o = cut[0], eqn.params["offsets"][cut[0]]
                window = f"{o}:{o + eqn.params['shape'][a]}"
                raise PtoUnsupportedError(
                    f"pj.kernel '{name}': {_op_text(eqn)} takes rows {window} of the symbolic rows {symbol} "
                    f"(axis {a}; x[{window}], a shifted row slice or jnp.roll along the rows): it reads rows "
                    f"outside a block's own row tile, but {_OWN_ROWS}; pass those rows as an argument of "
                    f"static shape (sliced outside the kernel), {_INSTEAD}")
        elif op == "matmul" and _contracts(eqn) in rows:
            raise PtoUnsupportedError(
                f"pj.kernel '{name}': {_op_text(eqn)} contracts over the symbolic rows {symbol} (x.T @ x: a sum over "
                f"every row): it needs every row at once, but {_OWN_ROWS}; do it outside the kernel on the kernel's "
                f"result, {_INSTEAD}")
        elif op in _INDEXED and x.ndim > 1 and eqn.params["axis"] in rows:
            raise PtoUnsupportedError(
                f"pj.kernel '{name}': {_op_text(eqn)} moves whole rows of a tensor of the symbolic rows {symbol} "
                f"at computed indices (x[idx], jnp.take, jnp.flip along the rows, a lax.scan over them): it reads "
                f"rows outside a block's own row tile, but {_OWN_ROWS}; index a table of static rows (a gather of a "
                f"static table by indices of {symbol} rows works), {_INSTEAD}")


def _check_row_values(name: str, symbol: str, jaxpr):
    """:class:`PtoUnsupportedError` where the Tensor level computes with the symbolic row count as a value
    (``dim_as_value``): the template lowerings see the value at their sizes, which may agree where the
    programs then compute it wrong at others (``m % 256`` is 0 at 512 and 768 rows)."""
    for eqn in jaxpr.eqns:
        for sub in jaxprs_in_params(eqn.params):
            _check_row_values(name, symbol, sub)
        if eqn.primitive.name == "dim_as_value" and not isinstance(eqn.params["dim"], int):
            raise PtoUnsupportedError(
                f"pj.kernel '{name}': the kernel computes with the symbolic row count as a value "
                f"({eqn.params['dim']}: x * x.shape[0], x.shape[0] % 256, min(x.shape[0], 100)): its programs are "
                f"one for every row count, whose values cannot follow {symbol}; pass the value as an argument "
                f"(a 0-d array), {_INSTEAD}")


def _contracts(eqn) -> int:
    """The axis of a ``pto.matmul``'s first operand that it contracts (K: the last, the one before with
    ``transpose_a``)."""
    return eqn.invars[0].aval.ndim - (2 if eqn.params.get("transpose_a") else 1)


def _scope_constraints(specs) -> tuple:
    """The constraints of the specs' symbolic scope as ``jax.export`` keeps them (with the normal forms it adds)."""
    for s in specs:
        for d in s.shape:
            if not isinstance(d, int):
                return tuple(c.debug_str for c in d.scope._explicit_constraints)
    return ()


def stated_constraints(specs) -> tuple:
    """The constraints of the specs' symbolic scope as the user wrote them: without the
    ``16*floordiv(m, 16) == m`` that ``jax.export`` adds before a ``mod(m, 16) == 0``."""
    scope = _scope_constraints(specs)
    derived = {c for i, c in enumerate(scope[:-1]) if re.fullmatch(r"\d+\*floordiv\(.+\) == .+", c)
               and scope[i + 1].startswith("mod(")}
    return tuple(c for c in scope if c not in derived)


def spec_key(tree, specs) -> tuple:
    """The compile cache key of flat ``specs`` with a symbolic row count: their shapes, dtypes and constraints
    (``polymorphic_shapes``' and a symbolic ``lower``'s share it)."""
    return ("polymorphic", tree, tuple((str(s.shape), np.dtype(s.dtype).name, bool(getattr(s, "weak_type", False)))
                                       for s in specs), _scope_constraints(specs))


def compile_specs(kernel, tree, specs, constraints=()) -> PolymorphicCompiled:
    """Lower ``kernel`` at two template row counts for flat ``jax.ShapeDtypeStruct`` ``specs`` with symbolic
    leading dims and compile its dynamic module, which both must give (no cache: the caller's)."""
    symbol = _symbol(kernel.name, specs)
    symbolic = kernel.lower(*jax.tree.unflatten(tree, specs)).lowering      # the Tensor level, with symbols
    results = [v.aval.shape for v in symbolic.tensor.jaxpr.outvars]
    for i, shape in enumerate(results):
        if any(not isinstance(d, int) and (axis or str(d) != symbol) for axis, d in enumerate(shape)):
            raise PtoUnsupportedError(f"pj.kernel '{kernel.name}': result {i} has the shape "
                                      f"({', '.join(map(str, shape))}); the tile level takes the symbol as the "
                                      "leading dim of a result, or no symbol")
    _check_row_local(kernel.name, symbol, symbolic.tensor.jaxpr)       # the reason a row read fails first
    _check_row_values(kernel.name, symbol, symbolic.tensor.jaxpr)
    static = {d for s in specs for d in s.shape if isinstance(d, int)}
    static |= {d for shape in results for d in shape if isinstance(d, int)}
    inner = {d for eqn in symbolic.tensor.jaxpr.eqns for v in eqn.outvars for d in v.aval.shape if isinstance(d, int)}
    memory = get_target(kernel.options.target).memory
    sizes = [t for t in _TEMPLATES if t not in static]
    cache: dict = {}

    def lowered(size):
        if size not in cache:
            concrete = [jax.ShapeDtypeStruct(tuple(size if not isinstance(d, int) else d for d in s.shape), s.dtype)
                        for s in specs]
            # the rows' iotas and constants: on the cores, as at a symbolic size (not where a static
            # intermediate has the template's size: they fold, both alike)
            with run_time_sizes(*({size} - inner)):
                low = kernel.lower(*jax.tree.unflatten(tree, concrete)).lowering
            cache[size] = (low, compile_kernel(low, memory))
        return cache[size]

    failures = []
    for n, size in enumerate(sizes):            # the template and a second size: what follows the rows
        for twin in sizes[n + 1:]:
            (low, compiled), (low2, compiled2) = lowered(size), lowered(twin)
            try:      # a row tile that does not divide a template gives it tails: the next pair
                rows, rows2 = row_vars(kernel.name, (low, size), (low2, twin))
                dynamic = DynamicKernel(low, compiled, size, rows)
                other = DynamicKernel(low2, compiled2, twin, rows2)
            except PtoUnsupportedError as err:
                failures.append(err)
                continue
            dynamic.check_twin(kernel.name, other)
            return PolymorphicCompiled(kernel.name, symbol, specs, tree, low.out_tree, dynamic, constraints, other,
                                       kernel.options, symbolic.as_text("tensor"))
    if not failures:
        raise PtoUnsupportedError(f"pj.kernel '{kernel.name}': no two template row counts of {_TEMPLATES} "
                                  f"are free of the static dims {sorted(static)}")
    first = failures[0]
    why = str(first).removeprefix("pto dynamic rows: ")
    why = why if why.startswith(f"pj.kernel '{kernel.name}'") else f"pj.kernel '{kernel.name}': {why}"
    same = len({str(err) for err in failures}) == 1
    if not same and (len({re.sub(r"\d+", "#", str(err)) for err in failures}) > 1 or "row tile" in why):
        why += f"; so at every pair of the template row counts {sizes} (a row tile must divide two of them)"
    if "without polymorphic_shapes" not in why:     # the dynamic text cannot follow the rows of this program
        why += f"; the dynamic PTO-AS cannot follow the row count through this program: {_INSTEAD[3:]}"
    raise type(first)(why) from None


def _replay(compiled: PolymorphicCompiled):
    """:meth:`PolymorphicCompiled.replay`: the function, or why not (a str)."""
    from .ascend.dynamic_replay import polymorphic_function
    from .execute import steering

    dk = compiled.dynamic
    avals = [(dk.shape(v, dk.size), np.dtype(v.aval.dtype)) for v in dk.lowering.block.jaxpr.invars]
    needed = steering(dk.lowering, avals, compiled.options.target, dk.compiled)
    if needed:
        what = ("values the kernel computes are read back" if "device data" in needed else
                f"the values of argument{'s' * (len(needed) > 1)} {', '.join(map(str, sorted(needed)))}")
        return f"{what} decide which tasks run"
    try:
        return polymorphic_function(dk, compiled.name)
    except PtoUnsupportedError as err:
        return str(err)


def export_function(kernel, lowered):
    """The replay ``jax.export`` inlines for a ``backend="sim"`` kernel traced with a symbolic row count:
    its dynamic module as a shape-polymorphic JAX function (:meth:`PolymorphicCompiled.replay`), or a
    :class:`PtoUnsupportedError` naming the kernel and why it cannot be one."""
    flat = [jax.ShapeDtypeStruct(shape, dtype, weak_type=weak) for shape, dtype, weak in lowered.avals]
    why = "jax.export with a symbolic row count on backend='sim' replays one dynamic PTO module"
    try:
        replay = kernel._polymorphic_specs(lowered.lowering.in_tree, flat).replay()   # lower().compile()'s
    except PtoUnsupportedError as err:
        replay = str(err)
    if callable(replay):
        return replay
    # the symbols are jax.export's here (no polymorphic_shapes to drop): what else exports
    replay = (replay.replace(_INSTEAD, "or export it at concrete shapes")
              + "; with backend='xla' (pj.kernel's, or the pj.nn op's) it exports for every row count")
    if replay.startswith(f"pj.kernel '{kernel.name}'"):
        raise PtoUnsupportedError(replay)
    raise PtoUnsupportedError(f"pj.kernel '{kernel.name}': {why}, but {replay}")
