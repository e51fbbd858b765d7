"""``pj.kernel``: a JAX function compiled to Ascend PTO code, as one ``pto_call`` primitive.

``pto_call`` holds a :class:`Compiled` kernel (hashable by identity; compiled once per argument
shapes, target and options) and every rule:

* abstract eval — the kernel's output avals;
* lowering — backend ``"sim"``: the replay of the kernel's real PTO-AS text (:mod:`ptojax.ascend.replay`)
  inlined into the caller's XLA computation (no host callback; composes with ``vmap``, ``grad``,
  ``shard_map``), or, where data steers the schedule (runtime lengths, trip counts the host reads, MoE counts read
  back), a host callback that runs the PTO programs through the MPMD runtime; backend ``"xla"``: the
  Tensor-level jaxpr inlined, a reference that runs on any JAX platform;
* batching — the kernel is re-traced under ``jax.vmap`` so the batch axis becomes an outer tile loop
  inside one program (one ``pto_call``, not a loop of calls);
* no JVP — differentiate through ``jax.custom_vjp`` with forward and backward kernels.

Staged like ``jax.jit``: ``f.lower(*args)`` → :class:`Lowered` (``as_text(level)``), ``.compile()`` →
:class:`Compiled` (callable, ``profile``), with a cache so equal shapes never compile twice.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import threading
import weakref
from typing import Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from . import ascend
from ._jax import (NEEDS_VALUE, Literal, Primitive, ad, batching, dims_32, host_call_lowering, lowered_devices, mlir,
                   per_device, result_aval, weak, xla)
from .ascend import ptoas as _ptoas
from .ascend.targets import target as get_target
from .errors import PtoArgumentError, PtoCapacityError, PtoError, PtoUnsupportedError, no_derivative
from .execute import canonical_arguments, execute_flat, is_weak, replay_function, steering
from .lowering import walk
from .lowering.pipeline import TEXT, Lowering, lower
from .primitives.tile import USER_OPS_CHANGED

BACKENDS = ("sim", "xla")
EXECUTORS = ("simulated", "threads")


@dataclasses.dataclass(frozen=True)
class Options:
    """How a kernel compiles and runs (hashable: it keys the compile cache)."""

    target: str = "a3"
    backend: str = "sim"
    executor: str = "simulated"
    workers: int = 4
    passes: tuple = ()              # pass options, e.g. (("tiles_per_block", (("DEFAULT", 1), ("V1", 4))),),
                                    # (("tiles", (("Score", (("vec", (64, 256)),)),)),)
    donate_argnums: tuple = ()      # positional arguments the kernel may update in place
    static_argnums: tuple = ()      # positional arguments that are Python values the trace reads (one kernel each)
    polymorphic_shapes: tuple = ()  # jax.export shape specs, one per argument: one compile for every size
    polymorphic_constraints: tuple = ()
    interpret: bool = False         # under jax.jit too: the interpreter in a host callback, not the replay

    def __post_init__(self):
        get_target(self.target)
        if self.backend not in BACKENDS:
            raise PtoArgumentError(f"pj.kernel: backend {self.backend!r} is not one of {BACKENDS}")
        if self.executor not in EXECUTORS:
            raise PtoArgumentError(f"pj.kernel: executor {self.executor!r} is not one of {EXECUTORS}")

    @property
    def pass_options(self) -> dict:
        """The pass options (their frozen per-label tables, which the partition's ``Options.make`` reads)."""
        return dict(self.passes)

    @property
    def written_passes(self) -> dict:
        """The pass options as a user writes them: mappings and lists (what a report or summary shows)."""
        return _thawed(self.passes) if self.passes else {}


def _freeze(options: Mapping | None) -> tuple:
    if not options:
        return ()
    if not isinstance(options, Mapping):
        raise PtoArgumentError(f"pj.kernel: options must be a mapping of pass options (tiles, tiles_per_block, "
                               f"row_loops), got {options!r}")
    return tuple(sorted((k, _frozen(v)) for k, v in options.items()))


def _frozen(v):
    """Nested mappings → sorted tuples of pairs, lists → tuples (hashable; JSON lists become tuples)."""
    if isinstance(v, Mapping):
        return tuple(sorted((k, _frozen(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_frozen(x) for x in v)
    return v


def _thawed(v):
    """:func:`_frozen` undone: tuples of (name, value) pairs → mappings, other tuples → lists."""
    if isinstance(v, tuple) and v and all(isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str) for x in v):
        return {k: _thawed(x) for k, x in v}
    if isinstance(v, tuple):
        return [_thawed(x) for x in v]
    return v


MIN_TILE_BYTES = 2 * 1024      # the smallest default vector tile lower() halves down to


def _dtype(x) -> np.dtype:
    return np.dtype(x.dtype) if hasattr(x, "dtype") else np.asarray(x).dtype


def _aval(x) -> tuple:
    """(shape, dtype, weakly typed) of an argument: a Python number's type gives way to an array's."""
    return tuple(np.shape(x)), _dtype(x), is_weak(x)


def _spec(aval) -> jax.ShapeDtypeStruct:
    shape, dtype, weak = aval
    return jax.ShapeDtypeStruct(shape, dtype, weak_type=weak)


def _avals(flat):
    return tuple(_aval(x) for x in flat)


def _debug_values(name: str, outs) -> None:
    """``jax_debug_nans`` / ``jax_debug_infs`` on an eager call's results, as ``jax.jit`` checks its own."""
    for flag, bad, what in (("jax_debug_nans", np.isnan, "nan"), ("jax_debug_infs", np.isinf, "inf")):
        if getattr(jax.config, flag) and any(jnp.issubdtype(x.dtype, jnp.floating) and bad(np.asarray(x)).any()
                                             for x in outs):
            raise FloatingPointError(f"invalid value ({what}) encountered in pj.kernel '{name}' ({flag})")


def _tracing_config() -> tuple:
    """The JAX settings that change what tracing ``fn`` accepts or makes: part of the cache key, as in
    ``jax.jit``'s (a kernel compiled under rank promotion 'allow' must raise under 'raise'); and the
    user's tile ops as registered (one removed and registered again under its name computes anew)."""
    return (jax.config.jax_numpy_rank_promotion, jax.config.jax_numpy_dtype_promotion, jax.config.jax_enable_x64,
            USER_OPS_CHANGED[0])


def _aval_text(aval) -> str:
    shape, dtype, weak = aval
    return f"{dtype.name}{list(shape)}{' (a Python number)' * weak}"


def _arg_names(fn, count: int) -> tuple:
    """The names of ``fn``'s first ``count`` positional parameters ('' past them, or for ``*args``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        params = ()
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return tuple(names[i] if i < len(names) else "" for i in range(count))


def _positional(fn, name: str, args: tuple, kwargs: dict) -> tuple:
    """(``fn``'s arguments as positional ones, the positions among them of the defaults that fill a gap
    before a keyword argument): keyword arguments placed by ``fn``'s signature (keyword-only parameters
    have no place and are an error naming them). A default stays a Python value, as under ``jax.jit``
    (``act="relu"`` is no kernel argument; ``alpha=0.5`` may steer Python code): the caller fixes them
    in the function (:meth:`Kernel._placed`)."""
    if not kwargs:
        return args, {}
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError as e:
        raise PtoArgumentError(f"pj.kernel '{name}': {e}") from None
    except ValueError:
        raise PtoArgumentError(f"pj.kernel '{name}': keyword arguments {sorted(kwargs)} need a function with a "
                               "signature; pass them by position") from None
    given = set(bound.arguments)
    if bound.kwargs:                # a keyword after a skipped default: the defaults fill the gap
        bound.apply_defaults()
    if bound.kwargs:
        raise PtoArgumentError(f"pj.kernel '{name}': arguments {sorted(bound.kwargs)} can only be passed by keyword "
                               "here (keyword-only parameters, or ones a functools.partial binds by keyword), which "
                               "pj.kernel does not support; make them positional parameters, or fix their values "
                               "in the function (a closure, or a partial the call does not override)")
    fixed = {i: value for i, (key, value) in enumerate(bound.arguments.items()) if key not in given}
    return bound.args, fixed


def _static(name: str, fn, i: int, value):
    """The value of static argument ``i``: hashable (it keys the kernel made for it)."""
    try:
        hash(value)
    except TypeError:
        arg = _arg_names(fn, i + 1)[i] or f"argument {i}"
        raise PtoArgumentError(f"pj.kernel '{name}': static argument '{arg}' must be hashable (it keys the kernel "
                               f"made for its value, as under jax.jit), got {type(value).__name__} "
                               f"{value!r:.60}") from None
    return value


def _without(options: Options, fixed: dict) -> Options:
    """``options`` for the kernel of ``fn`` with the arguments at the positions of ``fixed`` bound: no static
    arguments left, donations and polymorphic shapes at the remaining arguments' positions."""
    def moved(i):
        return i - sum(j < i for j in fixed)
    return dataclasses.replace(options, static_argnums=(),
                               donate_argnums=tuple(moved(i) for i in options.donate_argnums if i not in fixed),
                               polymorphic_shapes=tuple(s for i, s in enumerate(options.polymorphic_shapes)
                                                        if i not in fixed))


def _fixing(fn, fixed: dict, count: int, static: dict):
    """``fn`` of ``count`` positional arguments less those at the positions of ``fixed``, which it passes
    as their values (defaults; ``static``: those of static arguments)."""
    params = list(inspect.signature(fn).parameters.values())

    @functools.wraps(fn)
    def with_defaults(*args):
        rest = iter(args)
        return fn(*[fixed[i] if i in fixed else next(rest) for i in range(count)])

    with_defaults.__signature__ = inspect.Signature([p for i, p in enumerate(params[:count]) if i not in fixed])
    with_defaults.call_form = (fn, tuple(sorted(fixed)), count, static)     # how a call of ``fn`` maps onto it
    return with_defaults


def _leaf_labels(in_tree, arg_names) -> list:
    """Each flat argument as the user names it: ``argument 1 'start'``, ``argument 0 'params'['w']``."""
    args = jax.tree.unflatten(in_tree, list(range(in_tree.num_leaves)))
    labels = [""] * in_tree.num_leaves
    for path, leaf in jax.tree_util.tree_flatten_with_path(args)[0]:
        i = path[0].idx
        name = f" '{arg_names[i]}'" if arg_names[i] else ""
        labels[leaf] = f"argument {i}{name}{jax.tree_util.keystr(path[1:])}"
    return labels


_TRACER = r"\w*Tracer\([^)]*\)|Traced<[^>]*>(with<[^>]*>)?"     # how JAX prints a tracer in its messages


def _traced_value_error(name: str, fn, args, tree, err) -> PtoArgumentError:
    """JAX's error of a trace that needed an argument's value, naming the argument as the user does."""
    which = re.search(r"argument xs\[(\d+)\]", str(err))
    labels = _leaf_labels(tree, _arg_names(fn, len(args)))
    source = f" from {labels[int(which.group(1))]}" if which else ""
    lines = str(err).split("\n")
    if isinstance(err, jax.errors.ConcretizationTypeError):
        detail = lines[1].strip() if len(lines) > 1 else ""
    elif not isinstance(err, jax.errors.JAXTypeError):       # JAX's TypeError / IndexError: its first line
        detail = re.sub(_TRACER, "a traced value", lines[0]).strip()
    else:
        detail = ""
    detail = "" if not detail or detail.startswith("The error occurred") else f": {detail}"
    remedy = (f"pass a value the trace needs (an axis, a shape, a branch) with functools.partial({name}, ...) or "
              "close over it")
    if isinstance(err, jax.errors.NonConcreteBooleanIndexError):      # x[mask]: as many elements as the data says
        remedy = ("a boolean mask's selection has as many elements as the data says: keep the shape with "
                  "jnp.where(mask, x, fill) (x.at[mask].set(v): jnp.where(mask, v, x)), or jnp.nonzero(mask, "
                  "size=n, fill_value=...) and an index")
    return PtoArgumentError(
        f"pj.kernel '{name}': tracing needs the value of a traced argument{source} ({type(err).__name__}"
        f"{detail}); a kernel's arguments are traced as under jax.jit: {remedy}")


def _structure(arg) -> str:
    """A pytree of descriptions as the user wrote it, without quotes."""
    return str(arg).replace("'", "")


def _describe(avals):
    return "(" + ", ".join(_aval_text(a) for a in avals) + ")"


# --------------------------------------------------------------------------------------- the stages
@dataclasses.dataclass(frozen=True, eq=False)
class Lowered:
    """A kernel traced and lowered for one signature: every level's text; ``compile()``."""

    kernel: "Kernel"
    lowering: Lowering
    avals: tuple
    code: ascend.AscendKernel | None = None          # backend "sim": the compiled programs, their text fits

    def __deepcopy__(self, memo):
        return self         # frozen: a copy would be the same

    def as_text(self, level: str = "block") -> str:
        """``tensor``, ``tile``, ``block`` or ``pto`` (the real PTO-AS module of every block program).
        Lowered with a ``jax.export`` symbolic row count,
        ``tile``, ``block`` and ``pto`` are the polymorphic compile's (``ceil(m/32)`` grids, the dynamic
        PTO-AS module), as ``pj.kernel(..., polymorphic_shapes=...)`` prints them."""
        if self.lowering.symbolic and level in ("tile", "block", "pto"):
            return self._polymorphic.as_text(level)
        return self.lowering.as_text(level)

    @property
    def _polymorphic(self):
        """The polymorphic compile of the symbolic specs (cached on the kernel, with ``polymorphic_shapes``' compiles)."""
        return self.kernel._polymorphic_specs(self.lowering.in_tree, [_spec(a) for a in self.avals])

    def compile(self):
        """Compile the PTO programs (once per signature; cached on the kernel, where a lowering of the same
        signature whose trace changed -- a global the function reads, a tile -- compiles anew and takes
        the cached one's place): a :class:`Compiled`. Lowered
        with a ``jax.export`` symbolic row count (``backend="sim"``), the polymorphic compile
        (:class:`~ptojax.polymorphic.PolymorphicCompiled`, as ``polymorphic_shapes`` makes): callable at
        every row count, ``profile(m=...)``, ``report``."""
        if self.lowering.symbolic and self.kernel.options.backend == "sim":
            return self._polymorphic
        return self.kernel._compile(self, retraced=True)


@dataclasses.dataclass(frozen=True, eq=False)
class Compiled:
    """A kernel compiled for one signature: call it (under ``jax.jit`` too) or ``profile`` it."""

    name: str
    lowering: Lowering
    options: Options
    avals: tuple
    code: ascend.AscendKernel | None
    plans: dict = dataclasses.field(default_factory=dict, repr=False)   # replayable plans (execute)
    arg_names: tuple = ()                                               # the kernel's parameter names
    fn: Callable | None = dataclasses.field(default=None, repr=False)   # the kernel's function (keywords)

    def __repr__(self):
        return f"{self.name}{_describe(self.avals)}@{self.options.target}/{self.options.backend}"

    def __deepcopy__(self, memo):
        return self         # frozen (its plans only memoise): a copy would be the same

    def _check(self, flat, tree):
        if tree != self.lowering.in_tree:
            given = jax.tree.unflatten(tree, [_aval_text(_aval(x)) for x in flat])
            want = jax.tree.unflatten(self.lowering.in_tree, [_aval_text(a) for a in self.avals])
            want = [f"{n}: {_structure(a)}" if n else _structure(a) for n, a in zip(self.arg_names, want)]
            raise PtoArgumentError(
                f"pj.kernel '{self.name}': called with {len(given)} argument{'s' * (len(given) != 1)} "
                f"({', '.join(map(_structure, given))}), compiled for {len(want)}: ({', '.join(want)})")
        avals = _avals(flat)
        if avals != self.avals:
            labels = self._leaf_labels()
            wrong = [f"{labels[i]} is {_aval_text(got)}, compiled for {_aval_text(want)}"
                     for i, (got, want) in enumerate(zip(avals, self.avals)) if got != want]
            raise PtoArgumentError(f"pj.kernel '{self.name}': {'; '.join(wrong)}; call the kernel object itself "
                                   "to compile other shapes and dtypes")

    def _leaf_labels(self) -> list:
        return _leaf_labels(self.lowering.in_tree, self.arg_names)

    def __call__(self, *args, **kwargs):
        form = getattr(self.fn, "call_form", None)
        if form is not None:              # lowered with defaults left in a gap: a call of the same form
            fn, gaps, count, static = form
            if not kwargs and set(gaps) <= set(static) and len(args) == count - len(gaps):
                return self._call(args)         # its own arguments, the static ones left out (as jax.jit's)
            args, fixed = _positional(fn, self.name, args, kwargs)
            if len(args) != count or tuple(fixed) != gaps:
                names = list(inspect.signature(fn).parameters)
                call = ", ".join(names[i] + ("=..." if i > gaps[0] else "") for i in range(count) if i not in gaps)
                defaults = [names[i] for i in gaps if i not in static]
                left = ", ".join(f"{names[i]}={v!r:.40} static" for i, v in static.items()) + ", " * bool(
                    static and defaults) + ", ".join(defaults)
                left += (" left at their defaults" if len(defaults) > 1 else " left at its default") * bool(defaults)
                raise PtoArgumentError(f"pj.kernel '{self.name}': this compile was lowered for calls "
                                       f"{self.name}({call}), {left}; call it the same way, or call the kernel object")
            return self._call(tuple(a for i, a in enumerate(args) if i not in gaps))
        args, fixed = _positional(self.fn, self.name, args, kwargs)
        if fixed:
            raise PtoArgumentError(f"pj.kernel '{self.name}': a keyword argument follows parameters left at their "
                                   f"defaults ({', '.join(map(repr, fixed.values()))}), which this compile takes as "
                                   "arguments; call it as it was compiled, or call the kernel object")
        return self._call(args)

    def _call(self, args: tuple):
        """The call on ``args``, positional as this compile takes them (the kernel object's calls, placed)."""
        flat, tree = jax.tree.flatten(canonical_arguments(args))
        self._check(flat, tree)
        if self.options.backend == "sim" and not any(isinstance(x, jax.core.Tracer) for x in flat):
            # Eager call on concrete arrays: run on the runtime directly (runtime errors keep their type).
            outs, _ = self.run(*jax.tree.unflatten(tree, flat))
            outs = _arrays(self, jax.tree.leaves(outs), flat)
            _debug_values(self.name, outs)
            return jax.tree.unflatten(self.lowering.out_tree, outs)
        outs = pto_call_p.bind(*flat, call=self)
        return jax.tree.unflatten(self.lowering.out_tree, outs)

    def as_text(self, level: str = "pto") -> str:
        """The compiled kernel as a real PTO-AS module (``"pto"``), the C++ Huawei's ``ptoas`` makes of it
        (``"cpp"``), or a lowering level's: ``tensor``, ``tile``, ``block``."""
        if self.code is not None and level == "pto":
            return self.code.pto()
        if self.code is not None and level == "cpp":
            return self.ptoas()
        if level not in TEXT:
            raise PtoArgumentError(f"pj.kernel '{self.name}': no text for level {level!r}; available: "
                                   f"{sorted({*TEXT, 'cpp'} if self.code is not None else TEXT)}")
        return self.lowering.as_text(level)

    def ptoas(self, arch: str = "a3", level: str = "level2", insert_sync: bool = True) -> str:
        """Assemble the kernel's PTO-AS with Huawei's ``ptoas`` (the ``PTOAS`` environment variable or
        ``ptoas`` on PATH) for ``arch`` (``a3``: A2/A3, ``a5``) at ``level`` (ptoas's ``--pto-level``:
        ``level2``, the default, and ``level1`` assemble the text without tile addresses, which ptoas
        places; ``level3`` the text with them) and return its C++; a rejection is a
        :class:`~ptojax.ascend.PtoasError` naming the program, the line and ptoas's message."""
        _ptoas.check_level(level, f"pj.kernel '{self.name}'.ptoas")
        code = self._code()
        if level == "level1":          # the level2 text, assembled by ptoas's level1 (its level2 pipeline)
            text = code.pto(arch, _ptoas.LEVELS[level])
            return _ptoas.assemble(text, arch="a3" if arch == "a2" else arch, level=level, insert_sync=insert_sync)
        return code.cpp(arch, level, insert_sync)

    def run(self, *args, executor: str | None = None, policy: str = "mpmd", compute: bool = True):
        """Execute on the runtime: (outputs as NumPy arrays, :class:`~ptojax.mpmd.Trace`).

        Arrays of ``donate_argnums`` arguments may be overwritten (the kernel updates them in place).
        Every task interprets the kernel's real PTO-AS text (``as_text("pto")``, the module ``ptoas``
        assembles). ``compute=False``: schedule on the cost model without running the task bodies
        (outputs None)."""
        flat, tree = jax.tree.flatten(canonical_arguments(args))
        self._check(flat, tree)
        outs, trace = self._run_flat(flat, executor or self.options.executor, policy, compute)
        if not compute:
            return None, trace
        kept = [a for i, a in enumerate(flat) if isinstance(a, np.ndarray) and i not in self._donated]
        return jax.tree.unflatten(self.lowering.out_tree, _own(outs, kept)), trace

    def _run_flat(self, flat, executor: str, policy: str = "mpmd", compute: bool = True):
        """:meth:`run` on flat arguments of the compiled signature: (flat outputs, trace)."""
        return execute_flat(self.lowering, flat, target=self.options.target, executor=executor, policy=policy,
                            workers=self.options.workers, compiled=self._code(), donated=self._donated,
                            compute=compute, plans=self.plans, source=self.signature)

    @property
    def signature(self) -> tuple:
        """What sets the tasks of this compile's runs (their traces carry it as :attr:`Trace.source`): the
        kernel's name, its argument shapes and dtypes, target and pass options."""
        return self.name, self.avals, self.options.target, self.options.passes

    @functools.cached_property
    def _donated(self) -> frozenset:
        """Flat argument positions of the ``donate_argnums`` arguments."""
        donated, start = set(), 0
        for i, arg in enumerate(self.lowering.in_tree.children()):
            if i in self.options.donate_argnums:
                donated.update(range(start, start + arg.num_leaves))
            start += arg.num_leaves
        return frozenset(donated)

    def profile(self, *args, policy: str = "mpmd", compute: bool = True, **size):
        """A simulated run on the target's cost model: a :class:`~ptojax.mpmd.Profile`
        (``makespan_us``, ``lower_bound_us``, ``label_us``, ``save(path)``, ``swimlane(path)``).

        The timeline depends only on the inputs that steer control flow (lengths, counts), so
        ``compute=False`` gives the same profile without running the task bodies: much faster at
        large shapes (a kernel whose host reads device data still needs ``compute=True``). Without
        arguments (or with ``jax.ShapeDtypeStruct`` ones), the profile of the compiled shapes where no
        argument's value steers the schedule;
        a :class:`~ptojax.errors.PtoArgumentError` names the arguments it needs otherwise. (A size such
        as ``m=`` is for a polymorphic compile; here it is an error naming the compiled shapes.)"""
        return self._profile(args, policy, compute, "profile", size)

    def _profile(self, args, policy, compute, call: str, size: dict):
        if not isinstance(compute, bool):
            raise PtoArgumentError(f"pj.kernel '{self.name}': {call}(compute=...) must be True or False, got "
                                   f"{compute!r}")
        if size:
            raise PtoArgumentError(
                f"pj.kernel '{self.name}': {call}({', '.join(f'{k}={v!r}' for k, v in size.items())}): this compile "
                f"has the concrete shapes {_describe(self.avals)}, no symbolic size to bind; {call} it without "
                "sizes, or lower with symbolic shapes (jax.ShapeDtypeStruct of jax.export.symbolic_shape) for a "
                "polymorphic compile")
        if self.lowering.symbolic:      # backend="xla" (a sim kernel's symbolic compile is polymorphic)
            raise PtoUnsupportedError(
                f"pj.kernel '{self.name}': {call} of a kernel lowered with the symbolic shapes "
                f"{_describe(self.avals)} for backend={self.options.backend!r}: it simulates the PTO programs, "
                "which this compile (for jax.export) does not have; lower with concrete shapes, or with "
                "backend='sim', whose lower(*specs).compile() is the polymorphic compile: "
                f"compiled.{call}({'path, ' * (call == 'report')}m=...)")
        flat, tree = jax.tree.flatten(args)
        if flat and all(isinstance(x, jax.ShapeDtypeStruct) for x in flat):     # shapes: as without arguments
            self._check(flat, tree)
            args = ()
        if not args and self.avals:
            return self._run_flat(self._shapes_only(call), "simulated", policy, compute=False)[1].profile()
        return self.run(*args, executor="simulated", policy=policy, compute=compute)[1].profile()

    def _shapes_only(self, call: str):
        """The compiled signature's shapes, where no argument's value decides the task graph; else the
        error that names the arguments needed (``call``: the method the user called)."""
        why = self._steered_by()
        if why:
            names = [n or f"arg{i}" for i, n in enumerate(self.arg_names)]
            path = ["path"] if call == "report" else []
            raise PtoArgumentError(f"pj.kernel '{self.name}': {call}({', '.join(path)}) without arguments needs a "
                                   f"schedule that the shapes alone decide, but {why}; pass the arguments: "
                                   f"compiled.{call}({', '.join(path + names)})")
        return [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype, _ in self.avals]

    def _steered_by(self) -> str | None:
        """What decides which tasks run, where a value does (runtime lengths, trip counts the host reads, data
        read back)."""
        needed = steering(self.lowering, self.avals, self.options.target, self._code())
        if not needed:
            return None
        if "device data" in needed:
            return "values the kernel computes from its arguments are read on the host and decide which tasks run"
        labels = self._leaf_labels()
        named = [f"{labels[i]} ({_aval_text(self.avals[i])})" for i in sorted(needed)]
        return (f"the value{'s' * (len(named) > 1)} of {' and '.join(named)} decide{'s' * (len(named) == 1)} "
                "which tasks run")

    def report(self, path, *args, policy: str = "mpmd", title: str | None = None, **size):
        """Profile on ``args`` (none: the compiled shapes, where no argument's value steers the
        schedule) and write a self-contained HTML report to ``path`` (swimlane, per-core load, lower bound,
        time per label, idle time, critical path, bubbles, fusion, block graph, every level's text); returns the
        :class:`~ptojax.mpmd.Profile`. See :mod:`ptojax.report`."""
        from . import report
        from .mpmd.trace import output_path

        output_path(path, "pj.kernel(...).report(path, *args)")     # before profiling: report(a, b) forgot it
        profile = self._profile(args, policy, True, "report", size)
        report.write(path, profile, self, title=title)
        return profile

    def _code(self) -> ascend.AscendKernel:
        if self.code is None:
            tgt = get_target(self.options.target)
            object.__setattr__(self, "code", ascend.compile_kernel(self.lowering, tgt.memory, tgt))
        return self.code


class Kernel:
    """What ``pj.kernel`` returns: call it like the function; ``lower`` to stage."""

    def __init__(self, fn: Callable, options: Options):
        self.fn, self.options = fn, options
        inner = fn
        while isinstance(inner, functools.partial):
            inner = inner.func
        self.name = getattr(inner, "__name__", "kernel")
        self._cache: dict = {}
        self._fixed: dict = {}                          # (arguments, positions fixed) -> :meth:`_placed`'s kernel
        self._lock = threading.RLock()                  # one compile per signature, however many threads call
        self.compiles = 0
        functools.update_wrapper(self, fn, updated=())   # not fn's __dict__: a kernel's would replace these

    def __repr__(self):
        return f"pj.kernel({self.name}, target={self.options.target!r}, backend={self.options.backend!r})"

    def __deepcopy__(self, memo):
        return self         # a function of its arguments (its caches only memoise): a copy would be the same

    def lower(self, *args, **kwargs) -> Lowered:
        """Trace and lower for the shapes and dtypes of ``args`` (arrays or ``jax.ShapeDtypeStruct`` s).
        With ``backend="sim"`` the PTO-AS text is selected here too (an op with no real form fails here,
        also under ``jax.jit``), and where a function's instructions need more UB at once than the core
        has, the default vector tiles are halved until it fits (down to :data:`MIN_TILE_BYTES`; tiles you
        chose stay, and the :class:`~ptojax.errors.PtoCapacityError` names the function). Keyword arguments
        are placed by ``fn``'s signature, as ``jax.jit`` does."""
        kernel, args = self._placed(args, kwargs)
        if kernel is not self:
            return kernel.lower(*args)
        flat, tree = jax.tree.flatten(canonical_arguments(args))
        outside = [i for i in self.options.donate_argnums if not 0 <= i < len(args)]
        if outside:
            raise PtoArgumentError(f"pj.kernel '{self.name}': donate_argnums {outside} name no argument of the "
                                   f"{len(args)} given")
        specs = jax.tree.unflatten(tree, [_spec(_aval(x)) for x in flat])
        tgt = get_target(self.options.target)
        memory = tgt.memory
        while True:
            try:
                lowering = lower(self.fn, *specs, options=self.options.pass_options, memory=memory)
            except (TypeError, IndexError) as err:      # JAX's: the trace needs a traced value (a shape too)
                if isinstance(err, PtoError) or not (isinstance(err, NEEDS_VALUE) or re.search(_TRACER, str(err))):
                    raise
                raise _traced_value_error(self.name, self.fn, args, tree, err) from err
            if self.options.backend != "sim" or lowering.symbolic:
                return Lowered(self, lowering, _avals(flat))
            try:                                        # codegen places the tiles, check_fit as ptoas plans them
                code = ascend.compile_kernel(lowering, memory, tgt)
                code.check_fit()
                return Lowered(self, lowering, _avals(flat), code)
            except PtoCapacityError:
                # down to the smallest default tiles, even where a halving leaves the text as it was: a
                # reduction that one halving leaves whole may stage at the next
                if memory.tile_bytes <= MIN_TILE_BYTES:
                    raise
                memory = dataclasses.replace(memory, tile_bytes=memory.tile_bytes // 2)

    def _compile(self, lowered: Lowered, retraced: bool = False) -> Compiled:
        """The cached compile of ``lowered``'s signature, or a new one; ``retraced``: where the cached one
        is of another trace whose Tile level differs, a new one too (``Lowered.compile``)."""
        key = (lowered.lowering.in_tree, lowered.avals, _tracing_config())
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None and not (retraced and cached.lowering is not lowered.lowering
                                           and cached.lowering.as_text("tile") != lowered.lowering.as_text("tile")):
                return cached
            return self._compile_new(key, lowered)

    def _compile_new(self, key, lowered: Lowered) -> Compiled:
        code, replay = None, None
        if self.options.backend == "sim" and lowered.lowering.symbolic:   # jax.export: the dynamic module
            from . import polymorphic
            replay = polymorphic.export_function(self, lowered)
        elif self.options.backend == "sim":
            tgt = get_target(self.options.target)
            code = lowered.code or ascend.compile_kernel(lowered.lowering, tgt.memory, tgt)
        names = _arg_names(self.fn, len(lowered.lowering.in_tree.children()))
        compiled = self._cache[key] = Compiled(self.name, lowered.lowering, self.options, lowered.avals, code,
                                               arg_names=names, fn=self.fn)
        if replay is not None:      # the polymorphic compile's, counted where export_function made it
            _REPLAYS[compiled] = replay
        else:
            self.compiles += 1
        return compiled

    def compiled_for(self, *args, **kwargs) -> Compiled:
        """The :class:`Compiled` kernel for the signature of ``args``, from the cache or compiled now
        (with ``polymorphic_shapes``: one :class:`~ptojax.polymorphic.PolymorphicCompiled` for every size)."""
        kernel, args = self._placed(args, kwargs)
        if kernel is not self:
            return kernel.compiled_for(*args)
        if self.options.polymorphic_shapes:
            args = canonical_arguments(args)
            compiled = self._polymorphic(args)
            compiled.bind(compiled._flat(args))     # sizes and constraints checked here, as a call checks them
            return compiled
        flat, tree = jax.tree.flatten(canonical_arguments(args))
        avals = _avals(flat)
        traced = any(isinstance(x, jax.core.Tracer) for x in flat)
        if any(not isinstance(d, int) for shape, _, _ in avals for d in shape) and not traced:
            return self.lower(*args).compile()      # symbolic specs: the polymorphic compile (sim)
        key = (tree, avals, _tracing_config())
        if key in self._cache:
            return self._cache[key]
        with self._lock:                            # threads racing on a first call: one traces, the rest wait
            return self._cache[key] if key in self._cache else self._compile(self.lower(*args))

    def __call__(self, *args, **kwargs):
        kernel, args = self._placed(args, kwargs)
        compiled = kernel.compiled_for(*args)
        return compiled._call(args) if isinstance(compiled, Compiled) else compiled(*args)

    def _placed(self, args, kwargs):
        """(The kernel to trace, its positional arguments): keyword arguments placed by ``fn``'s signature;
        where one follows parameters left at their defaults (``act="relu"``), a kernel of ``fn`` with those
        fixed (``jax.jit`` passes keywords as keywords), one per such call form."""
        args, fixed = _positional(self.fn, self.name, args, kwargs)
        static = {i: _static(self.name, self.fn, i, args[i]) for i in self.options.static_argnums if i < len(args)}
        if not fixed and not static:
            return self, args
        fixed.update(static)
        key = (len(args), tuple(sorted(fixed)), tuple((i, type(v), v) for i, v in sorted(static.items())))   # 2 != 2.0
        with self._lock:
            if key not in self._fixed:
                self._fixed[key] = Kernel(_fixing(self.fn, fixed, len(args), static), _without(self.options, fixed))
        return self._fixed[key], tuple(a for i, a in enumerate(args) if i not in fixed)

    def _polymorphic(self, args):
        from . import polymorphic

        _, tree, specs = polymorphic.specs_of(self, args)
        if self.options.backend != "sim":
            raise PtoArgumentError(f"pj.kernel '{self.name}': polymorphic_shapes compile the PTO programs "
                                   "(backend='sim'); with backend='xla' use jax.export")
        return self._polymorphic_specs(tree, specs, tuple(self.options.polymorphic_constraints))

    def _polymorphic_specs(self, tree, specs, constraints: tuple | None = None):
        """The polymorphic compile of flat symbolic ``specs`` (``polymorphic_shapes``', or a symbolic
        ``lower``'s: one cache, keyed by shapes, dtypes and constraints); ``constraints`` as the user wrote
        them (for errors; default: the specs' scope's)."""
        from . import polymorphic

        key = (polymorphic.spec_key(tree, specs), _tracing_config())
        with self._lock:
            if key not in self._cache:
                stated = polymorphic.stated_constraints(specs) if constraints is None else constraints
                self._cache[key] = polymorphic.compile_specs(self, tree, specs, stated)
                self.compiles += 1
        return self._cache[key]


def kernel(fn: Callable | None = None, *, target: str = "a3", backend: str = "sim", executor: str = "simulated",
           workers: int = 4, options: Mapping | None = None, donate_argnums=(), static_argnums=(),
           static_argnames=(), polymorphic_shapes=(), polymorphic_constraints=(), interpret: bool = False):
    """Compile ``fn`` (a JAX function of arrays, pytrees allowed) to Ascend PTO code.

    ``target``: "a3" or "a2"; ``backend``: "sim" runs the PTO programs on the simulated chip,
    "xla" runs the Tensor-level jaxpr with XLA; ``executor``: "simulated" (event-driven, cost model
    clock) or "threads"; ``options``: pass options keyed by label (``{"tiles_per_block": {"V1": 4}}``;
    ``"auto"`` for a label or all of them lets the runtime choose from the tile's cost and the machine;
    ``{"tiles": {"Score": {"vec": (64, 256)}, "QMatmul": {"cube": (16, 512, 64)}}}`` — tile shapes that
    override the kernel's ``pj.tile`` for the ops of that label);
    ``donate_argnums``: arguments the kernel may update in place (a paged KV cache), as in ``jax.jit``;
    ``static_argnums`` / ``static_argnames``: arguments that are hashable Python values the trace reads (an
    activation's name, a ``k``), as in ``jax.jit``: a kernel is made for each value;
    ``polymorphic_shapes`` (``jax.export`` specs, ``("m, 64", None)``) and ``polymorphic_constraints``
    (``("mod(m, 16) == 0",)``): one compile, a dynamic PTO module, serves every row count ``m``
    (docs/dynamic_shapes.md); ``interpret=True`` (for debugging): under ``jax.jit`` too, a ``sim``
    kernel runs its PTO-AS text on the interpreter (the runtime, in a host callback) instead of the
    replay — faults name the task, instruction and line; subnormals kept — as eager calls always do.
    Usable as ``@pj.kernel`` or ``@pj.kernel(target="a2")``.
    """
    shapes = _entries("polymorphic_shapes", polymorphic_shapes, (str, type(None)), "a shape spec ('m, 64') or None")
    constraints = _entries("polymorphic_constraints", polymorphic_constraints, str, "a constraint ('mod(m, 16) == 0')")
    if constraints and not shapes:
        raise PtoArgumentError(f"pj.kernel: polymorphic_constraints {list(constraints)} constrain the symbols of "
                               "polymorphic_shapes, and none are given")
    if not _is_int(workers) or workers < 1:
        raise PtoArgumentError(f"pj.kernel: workers must be an int >= 1 (the 'threads' executor's threads), got "
                               f"{workers!r}")
    if not isinstance(interpret, bool):
        raise PtoArgumentError(f"pj.kernel: interpret must be True or False, got {interpret!r}")
    donate = _entries("donate_argnums", donate_argnums, int, "an argument position", one=_is_int(donate_argnums))
    static = _entries("static_argnums", static_argnums, int, "an argument position", one=_is_int(static_argnums))
    names = _entries("static_argnames", static_argnames, str, "a parameter name")

    def make(f):
        f = _callable(f)
        return Kernel(f, Options(target, backend, executor, int(workers), _freeze(options), tuple(map(int, donate)),
                                 tuple(_positions(f, names, static)), shapes, constraints, interpret))
    return make if fn is None else make(fn)


def _positions(fn, names: tuple, numbers: tuple) -> list[int]:
    """The positions of the static arguments: ``numbers`` and those of the parameters ``names`` of ``fn``
    (``static_argnames``); an error naming a name that is no positional parameter, or a number past them
    (where ``fn`` takes no ``*args``)."""
    numbers = sorted({int(i) for i in numbers})
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        if names:
            raise PtoArgumentError(f"pj.kernel: static_argnames {list(names)} need a function with a signature; "
                                   "give static_argnums") from None
        return numbers
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    title = f"{getattr(fn, '__name__', 'the kernel')}{tuple(positional)}"
    missing = [n for n in names if n not in positional]
    if missing:
        raise PtoArgumentError(f"pj.kernel: static_argnames {missing} name no positional parameter of {title}")
    past = [i for i in numbers if not 0 <= i < len(positional)]
    if past and not any(p.kind == p.VAR_POSITIONAL for p in params):
        raise PtoArgumentError(f"pj.kernel: static_argnums {past} name no positional parameter of {title}")
    return sorted({*numbers, *(positional.index(n) for n in names)})


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _entries(name: str, value, kinds, what: str, one: bool = False) -> tuple:
    """``value`` (one entry, a string or ``one``, or a sequence of them) as a tuple whose entries are all
    ``kinds`` (ints: NumPy's too), None as none (as ``jax.jit`` takes it); a :class:`PtoArgumentError`
    naming ``name`` otherwise."""
    if value is None:
        return ()
    entries = (value,) if one or isinstance(value, str) else value
    if kinds is int:
        ok = isinstance(entries, (tuple, list)) and all(map(_is_int, entries))
    else:
        ok = isinstance(entries, (tuple, list)) and all(isinstance(x, kinds) for x in entries)
    if not ok:
        raise PtoArgumentError(f"pj.kernel: {name} takes {what}, or a sequence of them; got {value!r}")
    return tuple(entries)


def _callable(fn):
    if not callable(fn):
        raise PtoArgumentError(f"pj.kernel: the kernel must be callable (a function), got {fn!r}")
    return fn


# ------------------------------------------------------------------------------------- pto_call
pto_call_p = Primitive("pto_call")
pto_call_p.multiple_results = True


@pto_call_p.def_impl
def _impl(*args, call: Compiled):
    """A bind on concrete arrays (an eager ``jax.vmap`` of a kernel): ``sim`` runs on the runtime as an
    eager call does, with no XLA compile; ``xla`` as any primitive."""
    if call.options.backend != "sim":
        return xla.apply_primitive(pto_call_p, *args, call=call)
    outs, _ = call._run_flat(list(canonical_arguments(args)), call.options.executor)   # NumPy views of eager vmap
    return _arrays(call, outs, args)


def _own(outs, inputs) -> list:
    """``outs`` (NumPy arrays), each that shares memory with one of ``inputs`` or an earlier output copied:
    a result passed through, one value returned twice; the caller may write every one alone."""
    owned = []
    for o in outs:
        owned.append(o.copy() if any(np.may_share_memory(o, a) for a in [*inputs, *owned]) else o)
    return owned


def _arrays(call: Compiled, outs, args) -> list:
    """A sim run's NumPy results as the jax.Arrays ``jax.jit`` would return: no XLA compile
    (``jnp.asarray`` compiles a convert), weakly typed where computed from Python numbers only, and
    copied where they share memory with an argument (a result passed through; ``jax.device_put`` keeps
    an aligned NumPy buffer, which the caller may refill)."""
    avals = [v.aval for v in call.lowering.traced.jaxpr.outvars]
    inputs = [a for a in args if isinstance(a, np.ndarray)]
    arrays = _own([np.asarray(o, a.dtype) for o, a in zip(outs, avals)], inputs)
    arrays = jax.device_put(arrays, _placement(call.name, arrays, args))
    return [weak(x) if a.weak_type else x for x, a in zip(arrays, avals)]


def _placement(name: str, outs, args):
    """Where ``jax.jit`` puts the results: on the device of the arguments committed to one (a result
    shaped as a sharded argument sharded as it, the others replicated on its devices); on the default
    device where none is committed. Arguments committed to different devices are refused, as by jit."""
    committed = [a for a in args if isinstance(a, jax.Array) and a.committed]
    if not committed:
        return None
    places = {frozenset(a.sharding.device_set) for a in committed}
    if len(places) > 1:
        raise PtoArgumentError(f"pj.kernel '{name}': arguments committed to different devices "
                               f"({', '.join(sorted(str(sorted(d.id for d in p)) for p in places))}); put them "
                               "on the same device(s), as jax.jit requires")
    devices = sorted(places.pop(), key=lambda d: d.id)
    if len(devices) == 1:
        return jax.sharding.SingleDeviceSharding(devices[0])
    everywhere = jax.sharding.NamedSharding(jax.sharding.Mesh(np.array(devices), ("devices",)),
                                            jax.sharding.PartitionSpec())
    return [next((a.sharding for a in committed if a.shape == o.shape), everywhere) for o in outs]


@pto_call_p.def_abstract_eval
def _abstract(*args, call: Compiled):
    """The results' shapes and dtypes; inside ``jax.shard_map`` they vary along every manual axis an
    argument varies along (a custom_vjp's cotangents must match its primals' axes)."""
    return [result_aval(v.aval.shape, v.aval.dtype, args, v.aval.weak_type) for v in call.lowering.traced.jaxpr.outvars]


def _xla(*args, call: Compiled):
    """The Tensor jaxpr as XLA code, rounded as written (:func:`_as_written`)."""
    tensor = call.lowering.tensor
    return walk.interpret(tensor.jaxpr, tensor.consts, args, _as_written)


def _as_written(eqn, invals, stack):
    """``eqn`` bound with a float constant it adds or subtracts, and the operand of a ``log``, behind an
    optimization barrier: XLA's simplifier folds ``(x + 1) - 1`` to ``x`` and ``log(exp(x))`` to ``x``,
    the roundings that the Tensor level's ``log1p`` / ``expm1`` (and what builds on them) compensate."""
    if eqn.primitive.name in walk.CONTROL:
        return walk.control(eqn, invals, stack, walk.by_rule(_as_written))
    name = eqn.primitive.name
    if name in ("pto.add", "pto.sub"):
        invals = [jax.lax.optimization_barrier(x) if walk.is_const(x) and jnp.issubdtype(np.result_type(x), jnp.floating)
                  else x for x in invals]
    elif name == "pto.log":
        invals = [jax.lax.optimization_barrier(x) for x in invals]
    out = eqn.primitive.bind(*invals, **eqn.params)
    return out if eqn.primitive.multiple_results else [out]


_REPLAYS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # Compiled -> replay function or None


def _replay(call: Compiled):
    """The kernel's replay (:func:`~ptojax.execute.replay_function`), made once; None where data steers
    its schedule (runtime lengths, scalar inputs, MoE counts read back) or ``interpret=True`` asks for
    the interpreter."""
    if call.options.interpret:
        return None
    if call not in _REPLAYS:
        _REPLAYS[call] = replay_function(call.lowering, call.avals, call.options.target, call._code())
    return _REPLAYS[call]


def _lowering(ctx, *args, call: Compiled):
    """``xla``: the Tensor jaxpr inlined. ``sim``: the replay of the kernel's real PTO-AS text inlined
    into the caller's XLA computation, or where data steers its schedule the MPMD runtime in a host
    callback."""
    ctx = dims_32(per_device(ctx))
    with jax.enable_x64(False):         # the kernel's own values are 32-bit whatever the caller's setting
        if call.options.backend != "sim":
            return mlir.lower_fun(functools.partial(_xla, call=call), multiple_results=True)(ctx, *args)
        replay = _replay(call)
        hosted = _hosted_ops(call) if replay is not None and ctx.module_context.lowering_parameters.for_export else []
        if hosted:
            raise PtoUnsupportedError(f"pj.kernel '{call.name}': jax.export serialises a backend='sim' kernel's "
                                      f"replay, but the NumPy semantics of {', '.join(hosted)} (pj.tiles."
                                      "register_op(..., numpy=...)) run in a host callback, which cannot be "
                                      "serialised; register the op without numpy= (its jnp reference runs in "
                                      "the replay) or export with backend='xla'")
        if replay is not None:
            return mlir.lower_fun(replay, multiple_results=True)(ctx, *args)
    why = ("interpret=True runs the interpreter" if call.options.interpret else
           call._steered_by() or "its replay cannot be built: a program the real text cannot express yet, "
           "or a task graph too long to compile as straight-line code, a loop of many trips")
    if ctx.module_context.lowering_parameters.for_export:
        raise PtoUnsupportedError(f"pj.kernel '{call.name}': jax.export serialises a backend='sim' kernel's "
                                  f"replay, but this one runs in a host callback ({why}), which cannot be "
                                  "serialised; export it with backend='xla'")
    devices = lowered_devices(ctx)
    if devices > 1:
        raise PtoUnsupportedError(f"pj.kernel '{call.name}': this backend='sim' kernel runs in a host callback "
                                  f"({why}), whose simulator runs XLA computations of its own: inside a computation "
                                  f"over {devices} devices (jax.shard_map, a sharded jax.jit, jax.pmap) they wait "
                                  "for the devices that wait for the callback, and it would hang; call the kernel "
                                  "outside it, or with backend='xla'")
    return host_call_lowering(ctx, _host(call, ctx.avals_out), *args)


mlir.register_lowering(pto_call_p, _lowering)


def _hosted_ops(call: Compiled) -> list[str]:
    """The user instructions of the kernel's text whose NumPy semantics the replay calls back on the host."""
    from .ascend.tile_semantics import USER

    hosted = [n for n, host in USER.items() if host is not None]
    if not hosted or call.lowering.symbolic:    # a symbolic kernel's replay is its dynamic module's
        return []
    text = call.as_text("pto")
    return sorted(n for n in hosted if re.search(rf"\bpto\.{re.escape(n)}\b", text))


def _host(call: Compiled, avals):
    """The host callback of a jitted kernel whose schedule data steers: runs it on XLA's arrays."""
    dtypes = [np.dtype(a.dtype) for a in avals]

    def host(*flat):   # XLA's arrays, of the compiled signature
        outs, _ = call._run_flat(flat, call.options.executor)
        return tuple(np.asarray(o, d) for o, d in zip(outs, dtypes))

    return host


_BATCHED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
# Compiled -> {in_axes: (the kernel of the vmapped function (its own compile cache), out_axes)}. Weakly
# keyed, like _REPLAYS, so the batched kernels die with the kernel they batch: a value holds the traced
# jaxpr and the options, never the Compiled itself (which would keep its own key alive).


def _batch(args, dims, *, call: Compiled):
    """Re-trace the kernel under vmap: the batch becomes an outer tile loop of one kernel."""
    dims = tuple(dims)
    batched = _BATCHED.setdefault(call, {})
    if dims not in batched:
        traced, name = call.lowering.traced, call.name          # not `call`: no cycle to the key
        options = dataclasses.replace(call.options, donate_argnums=tuple(sorted(call._donated)))   # flat leaves

        def flat_fn(*xs):
            return jax.core.eval_jaxpr(traced.jaxpr, traced.consts, *xs)

        out_axes = [0 if b else None for b in _batched_outputs(traced.jaxpr, dims)]   # eval_jaxpr: a list
        inner = Kernel(jax.vmap(flat_fn, in_axes=dims, out_axes=out_axes), options)
        inner.name = f"vmap({name})"
        batched[dims] = inner, out_axes
    inner, out_axes = batched[dims]
    return pto_call_p.bind(*args, call=inner.compiled_for(*args)), list(out_axes)


def _batched_outputs(jaxpr, dims) -> tuple:
    """Whether each output of ``jaxpr`` depends on an input batched along ``dims`` (None: not batched);
    the others leave ``jax.vmap`` unbatched, as they would from plain JAX."""
    batched = {v for v, d in zip(jaxpr.invars, dims) if d is not None}
    for eqn in jaxpr.eqns:
        if any(not isinstance(v, Literal) and v in batched for v in eqn.invars):
            batched.update(eqn.outvars)
    return tuple(not isinstance(v, Literal) and v in batched for v in jaxpr.outvars)


batching.primitive_batchers[pto_call_p] = _batch


def _no_jvp(primals, tangents, *, call: Compiled):
    """Integer and bool results have zero tangents (as ``jnp.argmax``'s); a float one has no derivative."""
    if any(jnp.issubdtype(v.aval.dtype, jnp.inexact) for v in call.lowering.traced.jaxpr.outvars):
        raise no_derivative(call.name)
    outs = pto_call_p.bind(*primals, call=call)
    return outs, [ad.Zero(jax.typeof(o).to_tangent_aval()) for o in outs]


ad.primitive_jvps[pto_call_p] = _no_jvp

__all__ = ["Compiled", "Kernel", "Lowered", "Options", "kernel", "pto_call_p"]
