"""Generate ``docs/api.md`` — every public name of ptojax with its signature and a one-line description.

The descriptions come from the docstrings: the first paragraph of a function's or method's docstring
(joined to one line, cut after its first sentence when it is long), a class's whole docstring. A public
name without a docstring is an error: the script lists every such name and exits with status 2, so a
new function cannot reach the docs undocumented.

What is listed: ``ptojax.__all__``; ``ptojax.ops.__all__`` (with each op's family from the catalogue);
``ptojax.nn.__all__``; ``ptojax.report.__all__``; and the public methods and properties of the classes a
user meets: ``Kernel``, ``Lowered``, ``Compiled`` (``pj.kernel``), ``Lowering`` (``pj.lower``),
``Trace`` and ``Profile`` (``Compiled.run`` / ``profile``) and ``Diff`` (``pj.report.diff``).

Not pdoc, Sphinx autodoc or mkdocstrings: they build a site (HTML, or Markdown through a site
generator), while this is one Markdown page that GitHub shows as it is and ``--check`` compares in a
test, with each op's family taken from ptojax's own op catalogue, which those tools do not know.

Usage::

    python tools/gen_api.py            # writes docs/api.md
    python tools/gen_api.py --check    # exits 1 when docs/api.md differs from what would be written
"""
from __future__ import annotations

import argparse
import dataclasses
import inspect
import re
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import ptojax as pj  # noqa: E402
from ptojax.lowering import Lowering  # noqa: E402
from ptojax.mpmd import Profile, Trace  # noqa: E402
from ptojax.primitives import OPS  # noqa: E402
from ptojax.report import Diff  # noqa: E402

OUT = ROOT / "docs" / "api.md"
CLASSES = [pj.Kernel, pj.Lowered, pj.Compiled, Lowering, Trace, Profile, Diff]
LONG = 160          # a summary longer than this is cut after its first sentence


class MissingDocs(Exception):
    pass


_missing: list[str] = []


def doc(obj, qualname: str, whole: bool = False) -> str:
    """The summary of ``obj``'s docstring on one line (``whole``: every paragraph, joined)."""
    text = obj.__doc__ if isinstance(obj, property) else inspect.getdoc(obj)
    if isinstance(obj, property) and text:
        text = inspect.cleandoc(text)
    if dataclasses.is_dataclass(obj) and text and text.startswith(obj.__name__ + "("):
        text = None                                  # the docstring dataclasses invents, not a description
    if not text or not text.strip():
        _missing.append(qualname)
        return "**(no docstring)**"
    paragraphs = [" ".join(line.strip() for line in p.splitlines()) for p in re.split(r"\n\s*\n", text.strip())]
    if whole:
        return " ".join(p for p in paragraphs if not p.endswith("::"))
    line = paragraphs[0]
    if len(line) > LONG:
        m = re.search(r"(?<=[a-z0-9`)\]])\. (?=[A-Z`(*])", line[40:])
        if m:
            line = line[:40 + m.start() + 1]
    return line


def markdown(text: str) -> str:
    """Sphinx roles to Markdown code: ``:class:`~ptojax.mpmd.Trace``` -> ```Trace```."""
    return re.sub(r":(?:func|class|meth|mod|data|attr):`~?([^`]+)`",
                  lambda m: "`" + (m.group(1).rsplit(".", 1)[-1] if m.group(0).count("~") else m.group(1)) + "`", text)


def _default(value) -> str:
    if isinstance(value, type):
        mod = value.__module__.replace("jax.numpy", "jnp").replace("numpy", "np")
        return f"{mod}.{value.__name__}" if mod != "builtins" else value.__name__
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
        return value.__name__
    text = re.sub(r" at 0x[0-9a-f]+", "", repr(value))
    return text if len(text) <= 40 else type(value).__name__ + "(...)"


def signature(fn) -> str:
    """``(params)`` without annotations; defaults by name."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return "(...)"
    params = list(sig.parameters.values())
    out, star = [], False
    for p in params:
        if p.name == "self":
            continue
        if p.kind is p.KEYWORD_ONLY and not star:
            out.append("*")
            star = True
        if p.kind is p.VAR_POSITIONAL:
            out.append("*" + p.name)
            star = True
        elif p.kind is p.VAR_KEYWORD:
            out.append("**" + p.name)
        elif p.default is p.empty:
            out.append(p.name)
        else:
            out.append(f"{p.name}={_default(p.default)}")
    return "(" + ", ".join(out) + ")"


def cell(text: str) -> str:
    return markdown(text).replace("|", "\\|")


def module_section(title: str, mod, names, prefix: str, intro: str) -> list[str]:
    lines = [f"## `{title}`", "", intro, "", "| name | signature | description |", "|---|---|---|"]
    for name in names:
        obj = getattr(mod, name)
        qual = f"{prefix}.{name}"
        if isinstance(obj, types.ModuleType):
            lines.append(f"| `{qual}` | module | {cell(doc(obj, qual))} |")
        elif isinstance(obj, str) and name == "__version__":
            lines.append(f"| `{qual}` | `str` | The installed version (`\"0.0.0+source\"` when run from a source tree). |")
        elif isinstance(obj, str):
            lines.append(f"| `{qual}` | `str` | The constant `{obj!r}`. |")
        elif inspect.isclass(obj):
            kind = "exception" if issubclass(obj, BaseException) else "class"
            bases = ", ".join(b.__name__ for b in obj.__bases__ if b is not object)
            sig = f"{kind}({bases})" if kind == "exception" else f"class — see [{name}](#{name.lower()})" \
                if obj in CLASSES else "class"
            lines.append(f"| `{qual}` | {sig} | {cell(doc(obj, qual))} |")
        else:
            lines.append(f"| `{qual}` | `{cell(signature(obj))}` | {cell(doc(obj, qual))} |")
    return lines + [""]


def ops_section() -> list[str]:
    lines = ["## `ptojax.ops`", "",
             "PyPTO's op catalogue: each op is one JAX primitive `pto.<name>` with shape, dtype, batching and "
             "(where `diff.` says yes) JVP/transpose rules. `ptojax ops` prints the accepted dtypes.", "",
             "| op | signature | family | diff. | description |", "|---|---|---|---|---|"]
    for name in pj.ops.__all__:
        fn = getattr(pj.ops, name)
        op = OPS.get(name)
        family = op.family if op else fn.__module__.rsplit(".", 1)[-1]
        diff = ("yes" if op.differentiable else "no") if op else "yes"
        lines.append(f"| `{name}` | `{cell(signature(fn))}` | {family} | {diff} | {cell(doc(fn, 'ptojax.ops.' + name))} |")
    return lines + [""]


def class_section(cls) -> list[str]:
    where = {"ptojax.kernel": "ptojax", "ptojax.lowering.pipeline": "ptojax.lowering",
             "ptojax.mpmd.trace": "ptojax.mpmd", "ptojax.report": "ptojax.report"}.get(cls.__module__, cls.__module__)
    lines = [f"### {cls.__name__}", "", f"`{where}.{cls.__name__}` — {markdown(doc(cls, cls.__name__, whole=True))}", ""]
    if dataclasses.is_dataclass(cls):
        fields = ", ".join(f"`{f.name}`" for f in dataclasses.fields(cls) if not f.name.startswith("_"))
        lines += [f"Fields: {fields}.", ""]
    rows = []
    for name, obj in vars(cls).items():
        if name.startswith("_"):
            continue
        qual = f"{cls.__name__}.{name}"
        if isinstance(obj, property):
            rows.append(f"| `{name}` | property | {cell(doc(obj, qual))} |")
        elif isinstance(obj, (staticmethod, classmethod)):
            rows.append(f"| `{name}` | `{cell(signature(obj.__func__))}` | {cell(doc(obj.__func__, qual))} |")
        elif inspect.isfunction(obj):
            rows.append(f"| `{name}` | `{cell(signature(obj))}` | {cell(doc(obj, qual))} |")
    if "__call__" in vars(cls):
        rows.insert(0, f"| `__call__` | `{cell(signature(cls.__call__))}` | Run the kernel on arrays (under `jax.jit` too). |")
    if rows:
        lines += ["| method | signature | description |", "|---|---|---|", *rows, ""]
    return lines


def generate() -> str:
    _missing.clear()
    lines = ["# API reference", "",
             "<!-- Generated by tools/gen_api.py from the docstrings; do not edit by hand. "
             "Regenerate with `python tools/gen_api.py`; tests/test_docs.py fails when this file is stale. -->", "",
             "`import ptojax as pj`. Contents: [`ptojax`](#ptojax) · [`ptojax.ops`](#ptojaxops) · "
             "[`ptojax.nn`](#ptojaxnn) · [`ptojax.report`](#ptojaxreport) · [classes](#classes)", ""]
    lines += module_section("ptojax", pj, pj.__all__, "pj", "The top level (`ptojax.__all__`).")
    lines += ops_section()
    lines += module_section("ptojax.nn", pj.nn, pj.nn.__all__, "pj.nn",
                            "Training ops: each a `jax.custom_vjp` whose forward and backward are ptojax kernels "
                            "(see [training.md](training.md)).")
    lines += module_section("ptojax.report", pj.report, pj.report.__all__, "pj.report",
                            "The tuning loop: HTML report, saved summaries, diff.")
    lines += ["## Classes", "", "The objects `pj.kernel`, `pj.lower` and a profile hand back.", ""]
    for cls in CLASSES:
        lines += class_section(cls)
    if _missing:
        raise MissingDocs("public names without a docstring: " + ", ".join(_missing))
    return "\n".join(lines).rstrip() + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when docs/api.md is stale (writes nothing)")
    ap.add_argument("--out", type=Path, default=OUT, help="where to write (default docs/api.md)")
    a = ap.parse_args(argv)
    try:
        text = generate()
    except MissingDocs as e:
        print(f"gen_api: {e}", file=sys.stderr)
        return 2
    if a.check:
        if not a.out.exists() or a.out.read_text() != text:
            print(f"gen_api: {a.out} is stale; run `python tools/gen_api.py`", file=sys.stderr)
            return 1
        print(f"gen_api: {a.out} is up to date")
        return 0
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(text)
    print(f"gen_api: wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
