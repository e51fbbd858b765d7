"""Cross-check the engine against the vendor: each function of a real PTO-AS module run on random GM
inputs by :mod:`~ptojax.ascend.engine` (``tile_semantics``) and by pto-isa's CPU simulator
(:mod:`~ptojax.ascend.cpusim`), every pointer argument compared afterwards.

Every ``func.func`` is treated as an independent function of its pointer arguments: each one gets a
flat random array of its dtype, long enough for every ``make_tensor_view`` of it (shape and strides
from the text), and runs over its whole grid (``pto.get_block_idx`` = 0 .. blocks-1) on both sides.
Inputs: floats uniform in ``[-2, 2]`` (``[0.25, 2]`` in a function with ``tlog``/``tsqrt``/
``trsqrt``/``tdiv``/``tdivs``/``trecip``, where a negative or tiny operand would only compare NaNs);
integers uniform over ``[-100, 100]`` (``i8``: its whole range; 1 for 0 in a function that divides
integers with ``tdiv``, where the simulator aborts on a zero divisor -- an integer remainder's program
turns its 0 and -1 divisors into 1 before ``tfmod``, so zeros stay), except an integer tensor a
``tgetval`` reads (an index): ``[0, index_high)``.

    >>> from ptojax.ascend import crosscheck
    >>> results = crosscheck.crosscheck(compiled.code)        # an AscendKernel; one g++ compile
    >>> print(crosscheck.table(results))

Functions with bf16 anywhere are skipped: under C++20 the CPU simulator's ``bfloat16_t`` is
``_Float16`` (see :mod:`~ptojax.ascend.cpusim`), so it would compute something else.
"""
from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence

import numpy as np

from . import cpusim, engine
from .asm import DTYPES as _ASM_DTYPES

#: Default float tolerance: (rtol, ulps). An element agrees when ``|e - s| <= rtol * |s|`` or it is
#: within ``ulps`` units in the last place of the simulator's value (NaNs agree with NaNs).
TOLERANCE = {np.dtype(np.float32): (1e-5, 4), np.dtype(np.float16): (1e-3, 2)}
DTYPES = getattr(engine, "DTYPES", _ASM_DTYPES)
POSITIVE_OPS = ("tlog", "tsqrt", "trsqrt", "tdiv", "tdivs", "trecip")
INTEGER_DIVISIONS = ("tdiv", "trowexpanddiv")   # integer operands drawn without 0


@dataclasses.dataclass
class Result:
    """One function on both sides: ``inputs`` (copies), ``engine`` / ``sim`` outputs (every pointer
    argument afterwards) or the error that stopped a side, or ``skipped`` with the reason."""
    function: str
    blocks: int
    kinds: tuple[str, ...]
    inputs: list[np.ndarray]
    engine: list[np.ndarray] | None = None
    sim: list[np.ndarray] | None = None
    engine_error: str | None = None
    sim_error: str | None = None
    skipped: str | None = None

    def errors(self) -> list[dict]:
        """Per pointer argument: ``dtype``, ``exact`` (bit for bit), ``max_abs``, ``max_rel``,
        ``max_ulp`` (units in the last place of the simulator's value; ints: max_abs) and ``ok``."""
        if self.engine is None or self.sim is None:
            return []
        return [compare(e, s) for e, s in zip(self.engine, self.sim)]

    @property
    def status(self) -> str:
        if self.skipped:
            return "skipped"
        if self.engine_error and self.sim_error:
            return "both failed"
        if self.engine_error:
            return "engine failed"
        if self.sim_error:
            return "sim failed"
        errs = self.errors()
        if all(e["exact"] for e in errs):
            return "exact"
        return "agree" if all(e["ok"] for e in errs) else "DIFFER"

    @property
    def ok(self) -> bool:
        return self.status in ("exact", "agree")

    def worst(self) -> dict:
        """The largest ``max_abs`` / ``max_rel`` / ``max_ulp`` over the arguments."""
        errs = self.errors()
        return {k: max((e[k] for e in errs), default=0.0) for k in ("max_abs", "max_rel", "max_ulp")}


def _ulp(x: np.ndarray) -> np.ndarray:
    return np.spacing(np.abs(x).astype(x.dtype)).astype(np.float64)


def compare(e: np.ndarray, s: np.ndarray, tolerance=None) -> dict:
    """How far the engine's ``e`` is from the simulator's ``s`` (same dtype and shape)."""
    tolerance = tolerance or TOLERANCE
    dt = np.dtype(s.dtype)
    exact = e.tobytes() == s.tobytes()
    if dt.kind != "f":
        d = np.abs(e.astype(np.int64) - s.astype(np.int64)) if e.size else np.zeros(0)
        m = float(d.max(initial=0))
        return dict(dtype=dt.name, exact=exact, max_abs=m, max_rel=0.0, max_ulp=m, ok=exact)
    e64, s64 = e.astype(np.float64), s.astype(np.float64)
    nan = np.isnan(e64) | np.isnan(s64)
    both_nan = np.isnan(e64) & np.isnan(s64)
    same = (e64 == s64) | both_nan
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.where(same | nan, 0.0, np.abs(e64 - s64))
        d = np.where(nan & ~both_nan, np.inf, d)
        rel = np.where(d == 0, 0.0, d / np.maximum(np.abs(s64), np.finfo(dt).tiny))
        ulp = np.where(d == 0, 0.0, d / _ulp(s))
    rtol, ulps = tolerance.get(dt, (1e-5, 4))
    ok = bool(np.all((d == 0) | (rel <= rtol) | (ulp <= ulps)))
    return dict(dtype=dt.name, exact=exact, max_abs=float(d.max(initial=0)), max_rel=float(rel.max(initial=0)),
                max_ulp=float(ulp.max(initial=0)), ok=ok)


# ----------------------------------------------------------------------------------- the module text
_FUNC = re.compile(r"^(\s*)func\.func @([\w.$]+)\((.*?)\)", re.M)


def functions(text: str) -> dict[str, str]:
    """``{name: the function's text}`` of a module as selection prints it."""
    out, lines = {}, text.splitlines()
    i = 0
    while i < len(lines):
        m = _FUNC.match(lines[i])
        if not m:
            i += 1
            continue
        indent, j = m.group(1), i + 1
        while j < len(lines) and lines[j] != indent + "}":
            j += 1
        out[m.group(2)] = "\n".join(lines[i:j + 1])
        i = j + 1
    return out


def single(text: str, name: str) -> str:
    """The module ``text`` reduced to function ``name`` (same module attributes)."""
    header = next(line for line in text.splitlines() if line.lstrip().startswith("module"))
    return f"{header}\n{functions(text)[name]}\n}}\n"


def kinds(func_text: str) -> tuple[str, ...]:
    """The instruction kinds of a function: mnemonics, ``tcvt`` with its dtypes and rounding mode,
    ``tcmp``/``tcmps`` with their mode."""
    out = []
    for line in func_text.splitlines():
        m = re.match(r"\s*(?:%\S+ = )?pto\.([\w.]+)", line)
        if not m or m.group(1) in ("alloc_tile", "make_tensor_view", "partition_view", "get_block_idx", "treshape"):
            continue
        op = m.group(1)
        if op == "tcvt":
            dts = re.findall(r"dtype=(\w+)", line)
            rm = re.search(r"round_mode (\w+)", line)
            op = f"tcvt {dts[0]}->{dts[-1]}" + (f" {rm.group(1)}" if rm else "")
        elif op in ("tcmp", "tcmps"):
            cm = re.search(r"cmp_mode (\w+)|cmpMode = #pto<\w+ (\w+)>|cmpMode = (\w+)", line)
            if cm:
                op += f" {next(g for g in cm.groups() if g)}"
        out.append(op)
    return tuple(dict.fromkeys(out))


def pointer_params(func_text: str) -> list[tuple[str, np.dtype, int]]:
    """``(name, dtype, elements)`` of each pointer parameter: enough elements for every
    ``make_tensor_view`` of it (``(n - 1) * stride`` summed, plus one), constants read from the text."""
    m = _FUNC.search(func_text)
    params = re.findall(r"(%[\w.$]+): !pto\.ptr<(\w+)>", m.group(3))
    consts = {k: int(v) for k, v in re.findall(r"(%[\w.$]+) = arith\.constant (-?\d+) : index", func_text)}
    size = {p: 0 for p, _ in params}
    for ptr, shape, strides, vt in re.findall(
            r"pto\.make_tensor_view (%[\w.$]+), shape = \[([^\]]*)\], strides = \[([^\]]*)\].*?"
            r"!pto\.tensor_view<([^>]*)>", func_text):
        dims = [d for d in vt.split("x")[:-1]]
        sts = [s.strip() for s in strides.split(",") if s.strip()]
        try:
            ns = [int(d) for d in dims]
            ss = [consts[s] if s in consts else int(s) for s in sts]
            reach = sum((n - 1) * st for n, st in zip(ns, ss)) + 1 if all(ns) else 0
        except (KeyError, ValueError):
            reach = math.prod(int(d) for d in dims if d.isdigit())
        if ptr in size:
            size[ptr] = max(size[ptr], reach)
    return [(p, np.dtype(DTYPES[dt]), max(size[p], 1)) for p, dt in params]


def _index_params(func_text: str, names) -> set[str]:
    """Pointer parameters whose data reaches a ``tgetval`` (through views, loads, subsets)."""
    stmts = []
    for line in func_text.splitlines():
        used = re.findall(r"%[\w.$]+", line)
        defined = re.match(r"\s*(%[\w.$]+) =", line)
        outs = re.search(r"outs\(([^:]*)", line)
        targets = ([defined.group(1)] if defined else []) + (re.findall(r"%[\w.$]+", outs.group(1)) if outs else [])
        stmts.append((line, set(used), set(targets)))
    found = set()
    for p in names:
        reach, grew = {p}, True
        while grew:
            grew = False
            for line, used, targets in stmts:
                if used & reach and "tstore" not in line and not targets <= reach:
                    reach |= targets
                    grew = True
        if any("pto.tgetval" in line and used & reach for line, used, _ in stmts):
            found.add(p)
    return found


def random_inputs(func_text: str, rng, *, index_high: int = 4, positive: bool | None = None) -> list[np.ndarray]:
    """Flat random arrays for the pointer parameters of a function's text (see the module docstring)."""
    params = pointer_params(func_text)
    if positive is None:
        positive = any(re.search(rf"pto\.{op}\b", func_text) for op in POSITIVE_OPS)
    index = _index_params(func_text, [p for p, dt, _ in params if dt.kind in "iu"])
    divides = any(re.search(rf"pto\.{op}\b", func_text) for op in INTEGER_DIVISIONS)
    out = []
    for name, dt, n in params:
        if dt.kind == "f":
            lo = 0.25 if positive else -2.0
            out.append(rng.uniform(lo, 2.0, n).astype(dt))
        elif dt.kind == "b":
            out.append(rng.integers(0, 2, n).astype(dt))
        elif name in index:
            out.append(rng.integers(0, index_high, n).astype(dt))
        else:                                       # integers (and bf16, which numpy sees as void)
            lo, hi = ((int(np.iinfo(dt).min), int(np.iinfo(dt).max)) if dt.itemsize == 1
                      else (0 if dt.kind == "u" else -100, 100))
            values = rng.integers(lo, hi + 1, n)
            if divides:                             # no zero divisor: the simulator aborts on one
                values = np.where(values == 0, 1, values)
            out.append(values.astype(dt))
    return out


# ------------------------------------------------------------------------------------------ running
Job = tuple[str, str, int]     # (module text, function name, blocks)


def jobs_of(kernel, arch: str = "a3") -> list[Job]:
    """``(text, function, blocks)`` of every program of an :class:`~ptojax.ascend.program.AscendKernel`
    (or of a ``Compiled``: its ``.code``)."""
    kernel = getattr(kernel, "code", kernel)
    text = kernel.pto(arch)
    entries = kernel.entries()             # grid-point functions, then task functions (isel.module)
    names = list(functions(text))
    if names != [name for name, _ in entries]:
        raise ValueError(f"functions {names} in the module for {[name for name, _ in entries]}")
    return [(text, name, blocks) for name, blocks in entries]


def run(jobs: Sequence[Job], *, seed: int = 0, arch: str = "a3", inputs=None, index_high: int = 4,
        sim: bool = True) -> list[Result]:
    """Run every ``(text, function, blocks)`` job in the engine and (all in one g++ compile) in the
    CPU simulator on random inputs (or ``inputs[i]``, one list of arrays per job)."""
    rng = np.random.default_rng(seed)
    results, sim_jobs = [], []
    for j, (text, name, blocks) in enumerate(jobs):
        ftext = functions(text).get(name)
        if ftext is None:
            raise KeyError(f"no function @{name} in the module")
        args = inputs[j] if inputs is not None else random_inputs(ftext, rng, index_high=index_high)
        r = Result(name, blocks, kinds(ftext), [np.array(a) for a in args])
        results.append(r)
        if "bf16" in ftext:
            r.skipped = ("bf16: pto-isa's CPU simulator computes bfloat16_t as _Float16 under C++20 "
                         "(include/pto/cpu/...: no std::bfloat16_t before C++23)")
            continue
        module = single(text, name)
        try:
            r.engine = engine.run_grid(module, name, [np.array(a) for a in args], blocks)
        except Exception as err:   # noqa: BLE001 - reported, not raised
            r.engine_error = f"{type(err).__name__}: {err}"
        if sim:
            sim_jobs.append((r, (module, name, [np.array(a) for a in args], blocks)))
    if sim_jobs:
        _simulate(sim_jobs, arch)
    return results


def _simulate(pending, arch):
    """Run ``(result, job)`` pairs in the CPU simulator with one compile: a job ptoas rejects, one
    g++ rejects (recompiled without it) or one that crashes (the rest run on) gets ``sim_error``."""
    for r, job, err in simulate([job for _, job in pending], arch=arch, results=[r for r, _ in pending]):
        if err is None:
            r.sim = job
        else:
            r.sim_error = err


def simulate(jobs, *, arch: str = "a3", results=None):
    """:func:`cpusim.run_modules` that survives a bad job: yields ``(tag, outputs, None)`` or
    ``(tag, None, error)`` per job (``tag``: ``results[i]`` or the job's index), all the good jobs
    from one g++ compile (one more per round of compile errors, whose jobs are dropped)."""
    import os
    import subprocess
    import tempfile

    tags = list(results) if results is not None else list(range(len(jobs)))
    ptoas, root, cxx = cpusim.find_ptoas(), cpusim.find_pto_isa(), cpusim.find_cxx()
    missing = [what for what, found in [("ptoas (set PTOAS or put it on PATH)", ptoas),
                                        ("pto-isa headers (set PTO_ISA_ROOT)", root),
                                        ("a C++20 compiler (set CXX or install g++)", cxx)] if not found]
    if missing:
        raise cpusim.CpuSimUnavailable("pto-isa CPU simulation needs " + ", ".join(missing))
    done: dict[int, tuple] = {}
    prepared = []                                   # (j, cpp body, call, arrays)
    includes: dict[str, None] = {}
    for j, (text, entry, args, block_num) in enumerate(jobs):
        try:
            cpp = cpusim.assemble(text, arch=arch, level="level2", insert_sync=True, ptoas=ptoas)
            params = cpusim._signature(cpp, entry)
            if len(params) != len(args):
                raise cpusim.CpuSimError(f"@{entry} takes {len(params)} arguments, got {len(args)}")
            arrays = [cpusim._check_arg(entry, i, *param, a) for i, (param, a) in enumerate(zip(params, args))]
        except cpusim.PtoasError as err:
            done[j] = (None, f"{type(err).__name__}: {err}")
            continue
        lines = cpp.splitlines()
        includes.update(dict.fromkeys(line for line in lines if line.startswith("#include")))
        body = "\n".join(line for line in lines if not line.startswith("#include"))
        prepared.append((j, body, cpusim._call(j, entry, params, arrays, block_num), arrays))
    with tempfile.TemporaryDirectory(prefix="ptojax-crosscheck-") as d:
        while prepared:
            src, owner = _source(includes, prepared)
            path = os.path.join(d, "sim.cpp")
            with open(path, "w") as f:
                f.write(src)
            for j, _, _, arrays in prepared:
                for i, a in enumerate(arrays):
                    a.tofile(os.path.join(d, f"{j}_{i}.bin"))
            exe = os.path.join(d, "sim")
            proc = subprocess.run([cxx, *cpusim.CXXFLAGS, f"-I{os.path.join(root, 'include')}", path, "-o", exe],
                                  capture_output=True, text=True, timeout=cpusim.COMPILE_TIMEOUT_S, cwd=d)
            if proc.returncode != 0:
                bad = _compile_culprits(proc.stderr, owner)
                if not bad:                          # cannot tell whose: give up on all of them
                    bad = {j: _tail(proc.stderr) for j, *_ in prepared}
                for j, msg in bad.items():
                    done[j] = (None, f"CpuSimError: compiling the simulation failed:\n{msg}")
                prepared = [p for p in prepared if p[0] not in bad]
                continue
            start = 0
            order = [p[0] for p in prepared]
            while start < len(order):
                try:
                    run = subprocess.run([exe, d, str(order[start])], capture_output=True, text=True, cwd=d,
                                         timeout=cpusim.RUN_TIMEOUT_S,
                                         env={**os.environ, "PTO_CPU_SIM_TRACE_ENABLE": "0"})
                    code, err = run.returncode, run.stderr
                except subprocess.TimeoutExpired as exc:
                    code, err = -9, (exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or "")
                    err += f"\ntimed out after {cpusim.RUN_TIMEOUT_S} s"
                marks = [int(m) for m in re.findall(r"^@@ptojax job (\d+)$", err, re.M)]
                if code == 0:
                    break
                failed = marks[-1] if marks else order[start]
                status = f"exit {code}" if code > 0 else f"signal {-code}"
                done[failed] = (None, f"CpuSimError: the simulated kernel crashed ({status}):\n"
                                      + _tail(re.sub(r"^@@ptojax job \d+\n", "", err, flags=re.M)))
                start = order.index(failed) + 1
            for j, _, _, arrays in prepared:
                if j not in done:
                    done[j] = ([np.fromfile(os.path.join(d, f"{j}_{i}.bin"), a.dtype).reshape(a.shape)
                                for i, a in enumerate(arrays)], None)
            break
    for j, tag in enumerate(tags):
        yield (tag, *done[j])


def _source(includes, prepared):
    """The translation unit, and ``owner[line] = job`` for every line of a job's code."""
    parts, owner = ["".join(i + "\n" for i in includes) + cpusim._PRELUDE], {}
    line = parts[0].count("\n") + 1

    def add(text, j):
        nonlocal line
        n = text.count("\n")
        for k in range(line, line + n + 1):
            owner[k] = j
        parts.append(text)
        line += n

    for j, body, _, _ in prepared:
        add(f"namespace ptojax_k{j} {{\n{body}\n}}  // namespace ptojax_k{j}\n", j)
    add("int main(int argc, char** argv) {\n  pto::cpu_sim::InitializeRuntime();\n"
        "  int start = argc > 2 ? std::atoi(argv[2]) : 0;\n", None)
    for j, _, call, _ in prepared:
        add(f"  if (start <= {j}) {{\n    std::fprintf(stderr, \"@@ptojax job {j}\\n\");\n"
            f"    std::fflush(stderr);\n{call}  }}\n", j)
    add("  return 0;\n}\n", None)
    return "".join(parts), owner


def _compile_culprits(stderr: str, owner) -> dict[int, str]:
    """The jobs g++'s errors point into (``sim.cpp:LINE``, ``required from here`` too)."""
    bad: dict[int, list[str]] = {}
    lines = stderr.splitlines()
    for k, text in enumerate(lines):
        m = re.search(r"sim\.cpp:(\d+):\d+:\s+(required from here|error:)", text)
        if m and owner.get(int(m.group(1))) is not None:
            j = owner[int(m.group(1))]
            msgs = bad.setdefault(j, [])
            if m.group(2) == "error:":
                msgs.append(text.split("error:", 1)[1].strip())
            else:   # the header error this instantiation leads to: the next "error:" line
                nxt = next((t for t in lines[k + 1:] if "error:" in t), "")
                msgs.append(re.sub(r"^.*?/include/", "include/", nxt).strip())
    return {j: "\n".join(dict.fromkeys(m for m in msgs if m)) or "(see g++)" for j, msgs in bad.items()}


def _tail(text: str, n: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


def crosscheck(kernel, name: str | None = None, blocks: int | None = None, **kw) -> list[Result]:
    """Cross-check an :class:`~ptojax.ascend.program.AscendKernel` (every program), or module text
    with one function ``name`` run over ``blocks`` blocks. Keywords as :func:`run`."""
    if isinstance(kernel, str):
        if name is None or blocks is None:
            raise TypeError("module text needs the function name and its number of blocks")
        return run([(kernel, name, blocks)], **kw)
    return run(jobs_of(kernel, kw.get("arch", "a3")), **kw)


def table(results: Sequence[Result]) -> str:
    """Per function: status, blocks, worst errors, kinds."""
    rows = [f"{'function':34} {'status':13} {'blocks':>6} {'max_abs':>10} {'max_ulp':>8}  kinds"]
    for r in results:
        w = r.worst()
        rows.append(f"{r.function[:34]:34} {r.status:13} {r.blocks:6d} {w['max_abs']:10.3g} {w['max_ulp']:8.3g}  "
                    + " ".join(r.kinds))
    return "\n".join(rows)


def by_kind(results: Sequence[Result]) -> dict[str, dict]:
    """Per instruction kind: the functions using it that ran on both sides, how many agree / are bit
    exact, the worst errors, and the functions that differ."""
    out: dict[str, dict] = {}
    for r in results:
        for k in r.kinds:
            row = out.setdefault(k, dict(functions=0, agree=0, exact=0, max_abs=0.0, max_ulp=0.0, differ=[],
                                         not_run=[]))
            if r.engine is None or r.sim is None:
                row["not_run"].append(f"{r.function} ({r.status})")
                continue
            row["functions"] += 1
            row["agree"] += r.ok
            row["exact"] += r.status == "exact"
            w = r.worst()
            row["max_abs"], row["max_ulp"] = max(row["max_abs"], w["max_abs"]), max(row["max_ulp"], w["max_ulp"])
            if not r.ok:
                row["differ"].append(r.function)
    return dict(sorted(out.items()))


def kind_table(results: Sequence[Result]) -> str:
    rows = [f"{'instruction kind':28} {'funcs':>5} {'agree':>5} {'exact':>5} {'max_abs':>10} {'max_ulp':>8}  notes"]
    for k, row in by_kind(results).items():
        notes = ""
        if row["differ"]:
            notes += "DIFFER: " + ", ".join(row["differ"]) + " "
        if row["not_run"]:
            notes += "not run: " + ", ".join(row["not_run"])
        rows.append(f"{k[:28]:28} {row['functions']:5d} {row['agree']:5d} {row['exact']:5d} {row['max_abs']:10.3g} "
                    f"{row['max_ulp']:8.3g}  {notes}")
    return "\n".join(rows)


__all__ = ["Result", "TOLERANCE", "by_kind", "compare", "crosscheck", "functions", "jobs_of", "kind_table", "kinds",
           "pointer_params", "random_inputs", "run", "single", "table"]
