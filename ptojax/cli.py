"""The ``ptojax`` command line: ``demo``, ``lower``, ``profile``, ``diff``, ``ops``."""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import sys
from pathlib import Path

from .errors import PtoError


class UsageError(Exception):
    """A mistake in the command line or in the files it names: ``ptojax: MESSAGE`` and exit status 2."""


def _ops(args) -> int:
    from .primitives import catalogue

    entries = catalogue()
    families = sorted({op.family for _, op in entries})
    if args.family and args.family not in families:
        raise UsageError(f"no op family {args.family!r}; the families: {', '.join(families)}")
    width = max(len(name) for name, _ in entries)
    print(f"{'op':<{width}}  {'family':<11}  {'grad':<4}  dtypes")
    for name, op in entries:
        if args.family and op.family != args.family:
            continue
        dtypes = ", ".join(d.name for d in op.dtypes)
        print(f"{name:<{width}}  {op.family:<11}  {'yes' if op.differentiable else 'no':<4}  {dtypes}")
    return 0


def _check(got, want) -> str:
    import jax
    import numpy as np

    from .lowering.pipeline import TOLERANCE

    worst = 0.0
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        rtol, atol = TOLERANCE.get(np.dtype(np.asarray(w).dtype), (0, 0))
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        if g.shape != w.shape:
            return f"FAIL shape {g.shape} != {w.shape}"
        if not np.allclose(g, w, rtol=2 * rtol, atol=2 * atol, equal_nan=True):
            return f"FAIL max err {np.max(np.abs(g - w)):.3g}"
        worst = max(worst, float(np.max(np.abs(g - w), initial=0.0)))
    return "ok (exact)" if worst == 0 else f"ok ({worst:.1e})"


def _demo(args) -> int:
    import jax

    from . import kernel
    from .demo import DEMOS

    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"--out {args.out}: {err.strerror} (a folder for the traces and swimlanes)") from None
    rows, failed, plots = [], 0, _plots()
    for i, (name, fn, make_args) in enumerate(DEMOS, 1):
        print(f"[{i}/{len(DEMOS)}] {name}: lowering, compiling, running on the simulated {args.target} ...", flush=True)
        inputs = make_args()
        compiled = kernel(fn, target=args.target).lower(*inputs).compile()
        got, trace = compiled.run(*inputs)
        check = _check(got, jax.jit(fn)(*inputs))
        failed += check.startswith("FAIL")
        profile = trace.profile()
        profile.save(out / f"{name}.trace.json")
        if plots:
            profile.swimlane(out / f"{name}.swimlane.png")
        rows.append((name, check, profile.makespan_us, profile.lower_bound_us, profile.tasks))
    print()
    print(f"{'kernel':<16} {'check vs XLA':<16} {'makespan us':>12} {'lower bound us':>15} {'tasks':>6}")
    for name, check, makespan, bound, tasks in rows:
        print(f"{name:<16} {check:<16} {makespan:>12.2f} {bound:>15.2f} {tasks:>6}")
    print(f"\ntraces (Chrome / Perfetto JSON) {'and swimlanes ' if plots else ''}written to {out.resolve()}"
          + ("" if plots else " (no swimlane images: they need matplotlib, pip install 'ptojax[plot]')"))
    return 1 if failed else 0


def _load(spec: str):
    """The function FUNC of FILE:FUNC (split at the last colon: FILE may hold one), FILE imported as
    ``python FILE`` runs it: its folder first on ``sys.path``, for the modules beside it."""
    path, _, name = spec.rpartition(":")
    if not path or not name.isidentifier():
        raise UsageError(f"expected FILE:FUNC, got {spec!r}")
    module_name = Path(path).stem
    if module_name in sys.modules:                  # (json.py must not replace the json module)
        module_name += "__ptojax_kernel"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None:
        raise UsageError(f"cannot load {path!r} (not a Python file)")
    module = importlib.util.module_from_spec(module_spec)
    folder = str(Path(path).resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    sys.modules[module_spec.name] = module          # as an import does (dataclasses look their module up)
    try:
        module_spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 - whatever the file raises (SyntaxError, ImportError, ...)
        del sys.modules[module_spec.name]
        raise UsageError(f"cannot import {path}: {type(err).__name__}: {err}") from None
    if not hasattr(module, name):
        raise UsageError(f"{path} has no function {name!r}")
    fn = getattr(module, name)
    if not callable(fn):
        raise UsageError(f"{path}: {name!r} is {fn!r} ({type(fn).__name__}), not a function")
    return fn


SHORT_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "i8": "int8", "i32": "int32"}
DEFAULT_DTYPE = "float32"


def _dtype(name: str, spec: str):
    """The dtype of a --shape: a name ptojax supports (``float16``) or its short form (``f16``; not NumPy's
    ``f16``, a 16-byte float)."""
    from .primitives._base import ANY

    dtypes = {d.name: d for d in ANY}
    dtype = dtypes.get(SHORT_DTYPES.get(name, name))
    if dtype is None:
        short = {v: k for k, v in SHORT_DTYPES.items()}
        known = ", ".join(f"{d} ({short[d]})" if d in short else d for d in dtypes)
        raise UsageError(f"--shape {spec!r}: no dtype {name!r}; the dtypes ptojax supports: {known}")
    return dtype


def _shapes(specs):
    """``64x64:float16`` (or ``64x64:f16``) → a ShapeDtypeStruct (a random array of it for ``profile``)."""
    import jax

    out = []
    for spec in specs:
        dims, _, dtype = spec.partition(":")
        try:
            if not dims:
                raise ValueError("no dims")
            shape = tuple(int(d) for d in dims.split("x")) if dims != "scalar" else ()
        except ValueError:
            raise UsageError(f"--shape {spec!r} is not DIMSxDIMS:DTYPE (e.g. 64x64:float16, scalar:int32)") from None
        if any(d < 0 for d in shape):
            raise UsageError(f"--shape {spec!r}: a dimension is negative")
        out.append(jax.ShapeDtypeStruct(shape, _dtype(dtype or DEFAULT_DTYPE, spec)))
    return out


def _outputs(args) -> None:
    """The files ``profile`` writes, checked before the compile and the run: folders that exist, and a
    swimlane ending in .png or .svg."""
    from .errors import PtoArgumentError
    from .mpmd.trace import output_path

    for flag, suffixes in (("html", ()), ("summary", ()), ("trace", ()), ("swimlane", (".png", ".svg"))):
        if getattr(args, flag):
            try:
                output_path(getattr(args, flag), f"--{flag}", suffixes)
            except PtoArgumentError as err:
                raise UsageError(str(err)) from None
    if args.swimlane and not _plots():
        raise UsageError("--swimlane: the swimlane image needs matplotlib (pip install 'ptojax[plot]'); the "
                         "trace (--trace) and the report (--html) do not")


def _plots() -> bool:
    """Whether matplotlib, which draws swimlane images, is installed."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _check_arity(fn, specs, spec: str):
    """One --shape per parameter of ``fn`` without a default."""
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    needed = [p for p in positional if p.default is p.empty]
    if not len(needed) <= len(specs) <= len(positional):
        raise UsageError(f"{spec} takes {len(needed)} argument{'s' * (len(needed) != 1)} "
                         f"({', '.join(p.name for p in needed)}), got {len(specs)} --shape")


def _arrays(specs, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for s in specs:
        if np.issubdtype(s.dtype, np.integer):
            out.append(rng.integers(-100, 100, s.shape).astype(s.dtype))
        else:
            out.append(rng.uniform(-1, 1, s.shape).astype(s.dtype))
    return out


def _options(args):
    """Pass options from ``--options FILE`` (JSON, or TOML for a .toml file), or None."""
    if not getattr(args, "options", None):
        return None
    from .report import load_options

    return load_options(args.options)


def _merged(own: dict, given: dict) -> dict:
    """Pass options ``given`` over a kernel's ``own``, label by label where both are tables of labels
    (``--options`` tuning one label keeps the kernel's other labels)."""
    out = dict(own)
    for key, value in given.items():
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = {**out[key], **value} if both else value
    return out


def _compiled(args, fn, inputs, options, lowered: bool = False):
    """``fn`` compiled for ``inputs`` (``lowered``: lowered only, to print a level); a pj.kernel object made
    with ``polymorphic_shapes`` gives its polymorphic compile, the one calling it runs. JAX's TypeError or
    ValueError of the trace (shapes that do not fit the function) is the user's mistake."""
    from .kernel import Kernel, Options, _freeze

    if isinstance(fn, Kernel):       # a pj.kernel object: its own options, --target and --options over them
        own = fn.options
        opts = dataclasses.replace(own, target=args.target or own.target,
                                   passes=_freeze(_merged(own.written_passes, options or {})))
        built = Kernel(fn.fn, opts)
    else:
        built = Kernel(fn, Options(target=args.target or "a3", passes=_freeze(options)))
    try:
        if built.options.polymorphic_shapes:
            return built.compiled_for(*inputs)
        return built.lower(*inputs) if lowered else built.lower(*inputs).compile()
    except (TypeError, ValueError) as err:
        if isinstance(err, PtoError):
            raise
        shapes = " ".join(f"--shape {s}" for s in args.shape) or "no --shape"
        first = str(err).split("\n")[0]
        raise UsageError(f"{args.func} fails to trace with {shapes}: {type(err).__name__}: {first}") from None


def _lower(args) -> int:
    specs = _shapes(args.shape)
    fn = _load(args.func)
    _check_arity(fn, specs, args.func)
    print(_compiled(args, fn, specs, _options(args), lowered=True).as_text(args.level))
    return 0


def _profile(args) -> int:
    from . import report
    from .kernel import _arg_names
    from .polymorphic import PolymorphicCompiled

    _outputs(args)
    specs = _shapes(args.shape)
    fn = _load(args.func)
    _check_arity(fn, specs, args.func)
    options, inputs = _options(args), _arrays(specs)
    print("lowering and compiling ...", file=sys.stderr, flush=True)    # progress: stdout holds the results
    compiled = _compiled(args, fn, inputs, options)
    print("running on the simulated chip ...", file=sys.stderr, flush=True)
    title = args.func.rpartition(":")[2]
    if args.html and isinstance(compiled, PolymorphicCompiled):    # its levels are the polymorphic compile's
        profile = compiled.report(args.html, *inputs, title=title)
    else:
        profile = compiled.profile(*inputs)
        if args.html:
            report.write(args.html, profile, compiled, title=title)
    written = []                        # the files before stdout: a reader that stops early (| head) keeps them
    if args.html:
        written.append(f"HTML report written to {args.html}")
    if args.summary:
        report.save_summary(profile, args.summary, name=args.func, options=compiled.options.written_passes or None)
        written.append(f"profile summary written to {args.summary} (compare two with: ptojax diff A.json B.json)")
    if args.trace:
        profile.save(args.trace)
        written.append(f"Chrome trace written to {args.trace}")
    if args.swimlane:
        profile.swimlane(args.swimlane)
        written.append(f"swimlane written to {args.swimlane}")
    names = _arg_names(fn, len(inputs))
    scalars = [f"{names[i] or f'argument {i}'} = {x}" for i, x in enumerate(inputs) if x.ndim == 0]
    if scalars:
        print("random scalar arguments: " + ", ".join(scalars))
    if profile.tasks:
        print(profile.summary())
    else:
        print(f"{profile.trace.mode}: the kernel runs no tasks on the chip (its outputs are constants or its "
              "inputs, or its loops ran no trips): nothing to profile")
    for line in written:
        print(line)
    return 0


def _diff(args) -> int:
    from .report import diff

    print(diff(args.before, args.after))
    return 0


def _joined_shapes(argv: list) -> list:
    """``--shape -4x64`` as ``--shape=-4x64``: argparse takes a value that starts with '-' for an option
    (its error would be "expected one argument"), where the value's own check names the problem."""
    out = []
    for arg in argv:
        if out and out[-1] == "--shape" and arg.startswith("-") and arg[1:2].isdigit():
            out[-1] = f"--shape={arg}"
        else:
            out.append(arg)
    return out


def main(argv=None) -> int:
    from . import __version__

    parser = argparse.ArgumentParser(prog="ptojax", description="PyPTO's programming model for JAX.")
    parser.add_argument("--version", action="version", version=f"ptojax {__version__}")
    commands = parser.add_subparsers(dest="command")
    demo = commands.add_parser("demo", help="run the demo kernels, check them, write traces and swimlanes")
    demo.add_argument("--out", default="ptojax-demo", help="folder for traces and swimlanes (default: ptojax-demo)")
    demo.add_argument("--target", default="a3", choices=["a2", "a3"])
    demo.set_defaults(run=_demo)
    for name, helptext in (("lower", "print a level of FILE:FUNC lowered for --shape arguments"),
                           ("profile", "run FILE:FUNC on random --shape arguments on the simulated chip")):
        sub = commands.add_parser(name, help=helptext)
        sub.add_argument("func", help="path/to/file.py:function")
        sub.add_argument("--shape", action="append", default=[],
                         help=f"one per argument, DIMSxDIMS:DTYPE, e.g. 64x64:float16 or 64x64:f16, scalar:int32; "
                         f"DTYPE: {', '.join(f'{v} ({k})' for k, v in SHORT_DTYPES.items())} or bool "
                         f"(default {DEFAULT_DTYPE})")
        sub.add_argument("--target", choices=["a2", "a3"],
                         help="the chip (default: a pj.kernel object's own target, else a3)")
        sub.add_argument("--options", help="a file of pass options, JSON or TOML (.toml), e.g. "
                         '{"tiles": {"Score": {"vec": [64, 256]}}, "tiles_per_block": {"QMatmul": 6}}')
        if name == "lower":
            sub.add_argument("--level", default="block", choices=["tensor", "tile", "block", "pto"])
            sub.set_defaults(run=_lower)
        else:
            sub.add_argument("--trace", help="write the Chrome trace JSON here")
            sub.add_argument("--swimlane", help="write the swimlane image here (.png or .svg)")
            sub.add_argument("--html", help="write a self-contained HTML report here (swimlane, bound, labels, graph, levels)")
            sub.add_argument("--summary", help="write the profile summary JSON here (for ptojax diff)")
            sub.set_defaults(run=_profile)
    dif = commands.add_parser("diff", help="compare two profiles: summary JSONs or Chrome traces "
                                           "(as profile --summary / --trace write them)")
    dif.add_argument("before")
    dif.add_argument("after")
    dif.set_defaults(run=_diff)
    ops = commands.add_parser("ops", help="list the op catalogue (pj.ops) with families and dtypes")
    ops.add_argument("--family", help="only this family (elementwise, reduce, matmul, layout, indexing, composite)")
    ops.set_defaults(run=_ops)
    args = parser.parse_args(_joined_shapes(sys.argv[1:] if argv is None else list(argv)))
    if args.command is None:
        parser.print_help()
        return 0
    try:
        code = args.run(args)
        sys.stdout.flush()                              # a closed pipe shows here, not at exit
        return code
    except BrokenPipeError:
        # stdout's reader stopped early (ptojax ops | head): exit quietly as Unix tools do. Python's
        # recipe (the signal module's note on SIGPIPE): point stdout at devnull so the flush at exit
        # cannot fail again; 141 = 128 + SIGPIPE, the status a shell shows for `yes | head`.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except UsageError as err:                           # usage errors: argparse's status 2
        print(f"ptojax: {err}", file=sys.stderr)
        return 2
    except (PtoError, OSError, ValueError) as err:     # the user's input: one line, not a traceback
        print(f"ptojax: {type(err).__name__}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
