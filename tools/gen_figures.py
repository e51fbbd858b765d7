"""Regenerate every figure of README.md and docs/*.md from the code that makes it.

Two kinds of generated text, both checked by ``tests/test_docs.py``:

- **Printed output.** A ```` ```text ```` fence on the line after an ``<!-- output -->`` comment holds
  what the ```` ```python ```` block before it prints. A file's python blocks run in order in one
  namespace, in a temporary working directory (they write traces and pictures).
- **Tables.** ``<!-- figures:NAME -->`` ... ``<!-- /figures -->`` holds what ``TABLES[NAME]`` returns.
  The tables of ``SLOW`` take minutes (the DeepSeek kernels at 64K KV); their test is marked slow.

Usage::

    python tools/gen_figures.py                   # rewrite every output block and table that differs
    python tools/gen_figures.py --check           # exit 1 when one is out of date
    python tools/gen_figures.py docs/moe.md       # these files only
    python tools/gen_figures.py --no-slow         # skip the slow tables

Not pytest-markdown-docs, phmdoctest or mktestdocs: they run the blocks, but none compares what each
prints with the output block after it or rewrites that block, and these docs assert their figures.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import io
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w+-]*)[ \t]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
                   re.M | re.S)
OUTPUT_MARK = re.compile(r"\s*<!-- output -->[ \t]*\n[ \t]*")
REGION = re.compile(r"(?P<open><!-- figures:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(?P<close><!-- /figures -->)", re.S)


def doc_files() -> list[Path]:
    """README.md and every page of docs/ but the generated api.md."""
    return [ROOT / "README.md"] + sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "api.md")


@dataclasses.dataclass
class Block:
    """A ```python block: its first line (1-based), its code, and the span of its output fence's body."""

    line: int
    code: str
    output: tuple[int, int] | None = None
    indent: str = ""


def python_blocks(text: str) -> list[Block]:
    """The ```python blocks of a Markdown text, dedented when the fence is indented (in a list); a
    ```text fence right after one, marked ``<!-- output -->``, is its printed output."""
    blocks, fences = [], list(FENCE.finditer(text))
    for i, m in enumerate(fences):
        if m.group("lang") != "python":
            continue
        indent = len(m.group("indent"))
        code = "".join(line[indent:] if line[:indent].strip() == "" else line
                       for line in m.group("body").splitlines(keepends=True))
        block = Block(text.count("\n", 0, m.start("body")) + 1, code)
        nxt = fences[i + 1] if i + 1 < len(fences) else None
        if nxt is not None and nxt.group("lang") == "text" and OUTPUT_MARK.fullmatch(text[m.end():nxt.start()]):
            block.output, block.indent = nxt.span("body"), nxt.group("indent")
        blocks.append(block)
    return blocks


def run_blocks(path: Path, blocks: list[Block], cwd: str | None = None) -> list[str]:
    """Run the blocks in order in one namespace, in ``cwd`` (default: a temporary directory); what
    each one printed."""
    printed, namespace = [], {"__name__": "__main__"}   # the blocks are scripts (quickstart's `if __name__`)
    path = Path(path).resolve()
    name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    with contextlib.ExitStack() as stack:
        stack.enter_context(contextlib.chdir(cwd or stack.enter_context(tempfile.TemporaryDirectory())))
        for block in blocks:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                # pad so that a traceback names the Markdown file's own line numbers; the file by its
                # path in the repository, as errors that name the user's line print it wherever it lies
                exec(compile("\n" * (block.line - 1) + block.code, name, "exec"), namespace)
            printed.append(out.getvalue())
    return printed


def lines(printed: str) -> list[str]:
    """Printed text as an output fence holds it: lines without trailing blanks, none empty at the end."""
    return [line.rstrip() for line in printed.rstrip().splitlines()]


def stale_outputs(text: str, blocks: list[Block], printed: list[str]) -> list[int]:
    """The first lines of the blocks whose marked output is not what they printed (compared line by
    line, indentation and trailing blanks aside)."""
    def same(shown: str, out: str) -> bool:
        return [line.strip() for line in shown.splitlines()] == [line.strip() for line in lines(out)]
    return [b.line for b, out in zip(blocks, printed) if b.output is not None and not same(text[slice(*b.output)], out)]


def with_outputs(text: str, blocks: list[Block], printed: list[str]) -> str:
    """``text`` with every marked output fence replaced by what its block printed."""
    for block, out in sorted(zip(blocks, printed), key=lambda bp: -bp[0].line):
        if block.output is not None:
            start, end = block.output
            text = text[:start] + "".join(block.indent * bool(line) + line + "\n" for line in lines(out)) + text[end:]
    return text


# ------------------------------------------------------------------------------------------ tables
def _table(header: list[str], rows: list[list]) -> str:
    head = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(head + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]) + "\n"


def _us(x: float) -> str:
    """Microseconds as the tables print them: whole numbers in groups of three digits from 1000, else one decimal."""
    return f"{x:,.0f}".replace(",", " ") if x >= 1000 else f"{x:.1f}"


def _bound(prof) -> str:
    terms = vars(prof.bound)
    return f"{_us(prof.lower_bound_us)} ({max(terms, key=terms.get)})"


def targets_table() -> str:
    """The numbers of one Ascend die that the cost model and the lowering use (docs/design.md)."""
    from ptojax.ascend.targets import A3

    m, kib = A3.memory, 1024
    rows = [
        ["cores", f"{A3.aic} AIC (cube) + {A3.aiv} AIV (vector), {A3.aicpu} AICPU schedulers", "`Target.aic`, `aiv`, `aicpu`"],
        ["clock", f"{A3.clock_hz / 1e9:.2f} GHz", "`Target.clock_hz`"],
        ["cube MACs per cycle per AIC", f"fp16/bf16 {A3.cube_macs_f16}, int8 {A3.cube_macs_i8}, fp32 {A3.cube_macs_f32}; "
         f"peak fp16 {A3.peak_flops_f16 / 1e12:.1f} TFLOPS per die", "`Target.cube_macs_*`"],
        ["vector", f"{A3.vector_bytes_per_repeat} B per repeat, {A3.vector_cycles_per_repeat:g} cycles per repeat of an add",
         "`Target.vector_*`"],
        ["sort unit", f"TSORT32 {A3.sort32_cycles:g} cycles per 32 values + {A3.sort32_startup:g} per row; TMRGSORT "
         f"{A3.merge_cycles * 128:g} cycles per 128 structs + {A3.merge_startup:g} (TSORT32 measured on a 910B3, "
         "the merge rate fitted to pto-isa's top-k)",
         "`Target.sort32_*`, `merge_*`"],
        ["buffers", f"UB {m.ub // kib} KiB per AIV; L1 {m.l1 // kib} KiB, L0A {m.l0a // kib} KiB, L0B {m.l0b // kib} KiB, "
         f"L0C {m.l0c // kib} KiB per AIC", "`CoreMemory` (lowering/memory.py)"],
        ["tile rules", f"rows {m.align}-byte aligned; at most {m.max_cols} columns and {m.max_rows} rows; cube fractal "
         f"{m.fractal}×{m.fractal}×{m.fractal} (k {m.fractal_k('int8')} for int8)", "`CoreMemory`"],
        ["GM reads per core", f"{A3.gm_read_hbm:g} B/cycle from HBM, {A3.gm_read_l2:g} from L2; writes {A3.gm_write_l2:g} "
         f"(L2); UB→GM {A3.ub_to_gm:g}", "`Target.gm_*`, `ub_to_gm`"],
        ["memory", f"L2 {A3.l2_bytes // 2 ** 20} MiB; HBM {A3.hbm_bytes // 2 ** 30} GiB, "
         f"{A3.hbm_bytes_per_s / 1e12:.2f} TB/s sustained ({A3.hbm_nominal_bytes_per_s / 1e12:.1f} nominal)",
         "`Target.l2_bytes`, `hbm_*`"],
        ["latencies", f"GM read {A3.gm_read_latency:g} cycles, GM write {A3.gm_write_latency:g} cycles, once per block",
         "`Target.gm_*_latency`"],
        ["scheduler", f"{A3.dispatch_s * 1e6:g} µs dispatch latency per task; {A3.aicpu_task_s * 1e6:g} µs of one AICPU "
         "scheduler per task", "`Target.dispatch_s`, `aicpu_task_s`"],
    ]
    return _table(["item (a2 = a3, per die)", "value", "in `ascend/targets.py`"], rows)


def ops_table() -> str:
    """The op catalogue by family (docs/ops.md)."""
    from ptojax.primitives import catalogue

    families: dict[str, list[str]] = {}
    for name, op in catalogue():
        families.setdefault(op.family, []).append(name)
    return _table(["family", "ops"], [[f, " ".join(f"`{n}`" for n in sorted(names))]
                                      for f, names in sorted(families.items())])


@functools.cache
def _deepseek():
    from examples.deepseek_v32 import kernels as K
    from examples.deepseek_v32 import reference as R
    from benchmarks import deepseek_v32 as D

    return K, R, D


def _profile(kernel, args, **kw):
    return kernel.lower(*args).compile().profile(*args, compute=False, **kw)


def _row(name, prof):
    return [name, _us(prof.makespan_us), _bound(prof), f"{prof.tasks:,}".replace(",", " ")]


KV = 65536


def prolog_64k_table() -> str:
    """The Indexer Prolog at B=4, S1=2, KV 64K: PyPTO's published steps, then the settings of
    benchmarks/deepseek_v32.py."""
    import numpy as np
    import ptojax as pj

    K, R, D = _deepseek()
    args, _ = R.prolog_inputs(D.B, D.S1, D.H, D.Q_LORA, D.N_IDX, [KV] * D.B)
    steps = [(f"PyPTO step {i} — {name}", tiles, options, {}, True, us)
             for i, (name, us, tiles, options) in enumerate(D.PYPTO_PROLOG_STEPS, 1)]
    rows = []
    for name, tiles, options, kw, donate, published in steps + [
            ("default tiles", D.UNTUNED_TILES, None, {}, False, None),
            ("tuned tiles, one Q matmul per batch (`q_rows=2`: M = S1)", K.PROLOG_TILES, K.PROLOG_OPTIONS,
             {"q_rows": D.S1}, False, None),
            ("tuned tiles, b·s1 merged into M (`K.PROLOG_TILES`, `K.PROLOG_OPTIONS`)", K.PROLOG_TILES,
             K.PROLOG_OPTIONS, {}, False, None),
            ("the same, caches donated", K.PROLOG_TILES, K.PROLOG_OPTIONS, {}, True, None)]:
        kernel = pj.kernel(functools.partial(K.indexer_prolog, n_heads=D.N_IDX, tiles=tiles, **kw), options=options,
                           donate_argnums=(13, 14) if donate else ())
        run_args = [np.array(a, copy=True) for a in args] if donate else args
        prof = _profile(kernel, run_args)
        rows.append(_row(name, prof) + ([f"{published:.0f}", f"{prof.makespan_us / published:.2f}"]
                                        if published else ["", ""]))
    return _table(["kernel (a3 model)", "makespan µs", "lower bound µs", "tasks", "PyPTO published (A3) µs",
                   "predicted / published"], rows)


def dsa_64k_table() -> str:
    """The Lightning Indexer, sparse attention and DIA at B=4, S1=2, KV 64K, top-k 2048."""
    import numpy as np
    import ptojax as pj

    K, R, D = _deepseek()
    rows = []
    args = R.indexer_inputs(D.B, D.S1, D.N_IDX, [KV] * D.B, seed=0)
    fn = functools.partial(K.lightning_indexer, sparse_count=D.TOPK)
    names = ["Lightning Indexer, baseline tiles", "… L1 reuse, `Score` ×4", "… `Reduce` tile 64 × 256",
             "… fewer, larger tasks (`Score` 16, `Reduce` 16, `Gather` 8, `TopK` 2 tiles per task)"]
    for name, (_, options) in zip(names, D.INDEXER_STEPS):
        rows.append(_row(name, _profile(pj.kernel(fn, options=options), args)))
    auto = {"tiles": D.INDEXER_OPTIONS["tiles"], "tiles_per_block": "auto"}
    rows.append(_row('… the same tiles, `tiles_per_block="auto"`', _profile(pj.kernel(fn, options=auto), args)))
    args = R.attention_inputs(D.B, D.S1, D.MLA_HEADS, [KV] * D.B, D.TOPK, seed=0)
    for name, tiles, options in [
            ("sparse attention (128 heads, latent 512 + rope 64)", None, None),
            ("the same, `gather_l1`", {"gather_l1": True}, None),
            ("… PV split in two along top-k (`pv_l1=(None, None, 2)`), `Softmax` 4 tiles per task",
             D.ATTENTION_TILES, D.ATTENTION_OPTIONS)]:
        sfa, _ = K.make_dsa_kernels(D.N_IDX, D.TOPK, tiles={"attention": tiles}, options=options)
        rows.append(_row(name, _profile(sfa, args)))
    pargs, table = R.prolog_inputs(D.B, D.S1, D.H, D.Q_LORA, D.N_IDX, [KV] * D.B)
    q, kvc, _, _, lens, qr, kr = R.attention_inputs(D.B, D.S1, D.MLA_HEADS, [KV] * D.B, D.TOPK, seed=1, indices=False)
    dargs = list(pargs) + [table, lens, q, qr, kvc, kr]
    dia = pj.kernel(functools.partial(K.dia, n_heads=D.N_IDX, sparse_count=D.TOPK, scale_value=K.SOFTMAX_SCALE,
                               tiles=D.DIA_TILES), options=D.DIA_OPTIONS, donate_argnums=(13, 14))
    compiled = dia.lower(*dargs).compile()
    for name, policy in [("DIA, one kernel, barrier after every block call", "spmd"), ("DIA, one kernel, MPMD", "mpmd")]:
        prof = compiled.profile(*[np.array(a, copy=True) for a in dargs], compute=False, policy=policy)
        rows.append(_row(name, prof))
    return _table(["kernel, KV 65 536 (a3 model)", "makespan µs", "lower bound µs", "tasks"], rows)


TABLES = {"targets": targets_table, "ops": ops_table, "prolog-64k": prolog_64k_table, "dsa-64k": dsa_64k_table}
SLOW = {"prolog-64k", "dsa-64k"}


def with_tables(text: str, names=None) -> str:
    """``text`` with every figures region (of ``names``, or all) replaced by its table."""
    def fill(m):
        name = m.group("name")
        if name not in TABLES:
            raise KeyError(f"figures region {name!r}: no such table (known: {', '.join(TABLES)})")
        if names is not None and name not in names:
            return m.group(0)
        return m.group("open") + TABLES[name]() + m.group("close")
    return REGION.sub(fill, text)


def regions(text: str) -> list[str]:
    """The names of the figures regions in ``text``."""
    return [m.group("name") for m in REGION.finditer(text)]


def regenerate(path: Path, names=None) -> str:
    """The text of ``path`` with its output blocks and tables (of ``names``, or all) regenerated."""
    text = path.read_text()
    blocks = python_blocks(text)
    if any(b.output is not None for b in blocks):
        text = with_outputs(text, blocks, run_blocks(path, blocks))
    return with_tables(text, names)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path, help="Markdown files (default: README.md and docs/*.md)")
    ap.add_argument("--check", action="store_true", help="exit 1 when a file is out of date; write nothing")
    ap.add_argument("--no-slow", action="store_true", help="leave the slow tables as they are")
    a = ap.parse_args(argv)
    names = set(TABLES) - SLOW if a.no_slow else None
    stale = []
    for path in [p.resolve() for p in a.files] or doc_files():
        new = regenerate(path, names)
        if new != path.read_text():
            stale.append(path.relative_to(ROOT))
            if not a.check:
                path.write_text(new)
    verb = "out of date" if a.check else "rewritten"
    print(f"{verb}: {', '.join(map(str, stale))}" if stale else "all figures up to date")
    return 1 if a.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
