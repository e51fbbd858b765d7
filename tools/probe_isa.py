"""Probe the real assembler (``ptoas``) with one minimal module per (instruction, arch, dtype) and
print — or write back into ``ptojax/ascend/instructions.py`` — the dtype sets it accepts.

    python tools/probe_isa.py            # print accepted dtypes per row, and the first error of each rejection
    python tools/probe_isa.py --write    # rewrite the ("a3", (...)), ("a5", (...)) literals in instructions.py
    python tools/probe_isa.py tadd tcvt  # only these rows

``tests/test_instructions.py`` imports this file (``build_probe``, ``run_ptoas``, ``probe_all``) and
checks that the table's literals are exactly what ptoas accepts. ``ptoas`` is found via ``$PTOAS``,
``PATH`` or ``<repo>/../shared/tools/ptoas/bin/ptoas``.

Each probe is a module ``{pto.target_arch = arch}`` with one ``func.func @probe`` (kernel_kind vector,
or cube for the matmul family) that allocates the operand tiles (level 2: no addresses), defines the
scalars as ``arith.constant`` and holds the one instruction, printed by ``instructions.text``. Only
the probed operand's dtype changes between the probes of a row; the other operands keep the shapes,
layouts and dtypes the verifier wants (R x 1 col_major per-row vectors, i8 masks, ui32 sort indices,
i32 gather indices, ...).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
INSTRUCTIONS_PY = REPO / "ptojax" / "ascend" / "instructions.py"


def load_instructions():
    """``ptojax.ascend.instructions`` without importing ptojax (and JAX): the module is standalone."""
    mod = sys.modules.get("ptojax.ascend.instructions")
    if mod is not None:
        return mod
    name = "_ptojax_ascend_instructions"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, INSTRUCTIONS_PY)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def find_ptoas() -> str | None:
    env = os.environ.get("PTOAS")
    if env:
        return env if os.access(env, os.X_OK) else None
    found = shutil.which("ptoas")
    if found:
        return found
    cand = REPO.parent / "shared" / "tools" / "ptoas" / "bin" / "ptoas"
    return str(cand) if os.access(cand, os.X_OK) else None


# --- types -------------------------------------------------------------------------------------------

R, C = 16, 64        # the probe tile: 16 x 64


def tb(dtype, rows=R, cols=C, loc="vec", blayout="row_major", slayout="none_box", fractal=512):
    return (f"!pto.tile_buf<loc={loc}, dtype={dtype}, rows={rows}, cols={cols}, v_row={rows}, v_col={cols}, "
            f"blayout={blayout}, slayout={slayout}, fractal={fractal}, pad=0>")


def colvec(dtype, rows=R):
    """An R x 1 per-row vector (DN: col_major)."""
    return tb(dtype, rows, 1, blayout="col_major")


def rowvec(dtype, cols=C):
    return tb(dtype, 1, cols)


_CONST = {"f32": "1.0", "f16": "1.0", "bf16": "1.0", "i8": "1", "i16": "1", "i32": "1", "i64": "1"}
_INT_OF = {"f32": "i32", "f16": "i16", "bf16": "i16"}    # a signless integer scalar for a float tile


class Probe:
    """Collects the operands of one probe: tiles (alloc_tile), scalars (arith.constant), views."""

    def __init__(self, arch: str, kind: str = "vector"):
        self.arch, self.kind = arch, kind
        self.lines: list[str] = []
        self.params: list[str] = []
        self.n = 0

    def _name(self, hint):
        self.n += 1
        return f"%{hint}{self.n}"

    def tile(self, ty, hint="t"):
        name = self._name(hint)
        self.lines.append(f"{name} = pto.alloc_tile : {ty}")
        return (name, ty)

    def scalar(self, dtype, value=None, hint="s"):
        name = self._name(hint)
        value = _CONST.get(dtype, "1") if value is None else value
        self.lines.append(f"{name} = arith.constant {value} : {dtype}")
        return (name, dtype)

    def vector4(self):
        name = self._name("ex")
        self.lines.append(f"{name} = arith.constant dense<0> : vector<4xi16>")
        return (name, "vector<4xi16>")

    def view(self, dtype, rows=R, cols=C):
        """A GM partition view rows x cols of a !pto.ptr<dtype> parameter."""
        p = f"%arg{len(self.params)}"
        self.params.append(f"{p}: !pto.ptr<{dtype}>")
        for c in sorted({0, 1, rows, cols}):
            line = f"%c{c} = arith.constant {c} : index"
            if line not in self.lines:
                self.lines.append(line)
        tv = self._name("tv")
        self.lines.append(f"{tv} = pto.make_tensor_view {p}, shape = [%c{rows}, %c{cols}], strides = [%c{cols}, %c1] "
                          f": !pto.tensor_view<?x?x{dtype}>")
        pv = self._name("pv")
        pty = f"!pto.partition_tensor_view<{rows}x{cols}x{dtype}>"
        self.lines.append(f"{pv} = pto.partition_view {tv}, offsets = [%c0, %c0], sizes = [%c{rows}, %c{cols}] "
                          f": !pto.tensor_view<?x?x{dtype}> -> {pty}")
        return (pv, pty)

    def module(self, instruction_text: str) -> str:
        body = "\n".join("    " + l for l in self.lines + [instruction_text, "return"])
        return (f'module attributes {{pto.target_arch = "{self.arch}"}} {{\n'
                f"  func.func @probe({', '.join(self.params)}) attributes "
                f"{{pto.kernel_kind = #pto.kernel_kind<{self.kind}>}} {{\n{body}\n  }}\n}}\n")


# --- one probe spec per row: (probe, dtype) -> (ins, outs, attrs) ------------------------------------

def _binary(p, dt):
    return [p.tile(tb(dt)), p.tile(tb(dt))], [p.tile(tb(dt))], {}


def _binary_tmp(p, dt):
    return [p.tile(tb(dt)), p.tile(tb(dt)), p.tile(tb(dt))], [p.tile(tb(dt))], {}


def _scalar(p, dt):
    return [p.tile(tb(dt)), p.scalar(dt)], [p.tile(tb(dt))], {}


def _int_scalar(p, dt):
    return [p.tile(tb(dt)), p.scalar(_INT_OF.get(dt, dt))], [p.tile(tb(dt))], {}


def _float_scalar(p, dt):
    # tmaxs/tmins: PTOViewToMemref only lowers a float scalar ("ins/outs are not memref yet" for an
    # integer one), so integer tiles take an f32 scalar
    return [p.tile(tb(dt)), p.scalar("f32")], [p.tile(tb(dt))], {}


def _scalar_tmp(p, dt):
    return [p.tile(tb(dt)), p.scalar(dt), p.tile(tb(dt))], [p.tile(tb(dt))], {}


def _int_scalar_tmp(p, dt):
    return [p.tile(tb(dt)), p.scalar(_INT_OF.get(dt, dt)), p.tile(tb(dt))], [p.tile(tb(dt))], {}


def _unary(p, dt):
    return [p.tile(tb(dt))], [p.tile(tb(dt))], {}


def _lrelu(p, dt):
    return [p.tile(tb(dt)), p.scalar("f32")], [p.tile(tb(dt))], {}


def _rowexpand(p, dt):
    return [p.tile(colvec(dt))], [p.tile(tb(dt))], {}


def _colexpand(p, dt):
    return [p.tile(rowvec(dt))], [p.tile(tb(dt))], {}


def _expands(p, dt):
    return [p.scalar(dt)], [p.tile(tb(dt))], {}


def _rowexpand_bin(p, dt):
    return [p.tile(tb(dt)), p.tile(colvec(dt))], [p.tile(tb(dt))], {}


def _colexpand_bin(p, dt):
    return [p.tile(tb(dt)), p.tile(rowvec(dt))], [p.tile(tb(dt))], {}


def _rowreduce(p, dt):
    return [p.tile(tb(dt)), p.tile(tb(dt))], [p.tile(colvec(dt))], {}


def _rowarg(p, dt):
    return [p.tile(tb(dt)), p.tile(tb(dt))], [p.tile(colvec("i32"))], {}


def _colreduce(p, dt):
    return [p.tile(tb(dt))], [p.tile(rowvec(dt))], {}


def _colarg(p, dt):
    return [p.tile(tb(dt)), p.tile(tb(dt))], [p.tile(rowvec("i32"))], {}


def _tcmp(p, dt):
    return [p.tile(tb(dt)), p.tile(tb(dt))], [p.tile(tb("i8"))], {"cmpMode": "gt"}


def _tcmps(p, dt):
    return [p.tile(tb(dt)), p.scalar(dt)], [p.tile(tb("i8"))], {"cmpMode": "gt"}


def _tsel(p, dt):
    return [p.tile(tb("i8")), p.tile(tb(dt)), p.tile(tb(dt)), p.tile(tb(dt))], [p.tile(tb(dt))], {}


def _tsels(p, dt):
    return [p.tile(tb("i8")), p.tile(tb(dt)), p.tile(tb(dt)), p.scalar(dt)], [p.tile(tb(dt))], {}


def _tcvt(p, dt):
    out = "f16" if dt == "f32" else "f32"
    return [p.tile(tb(dt))], [p.tile(tb(out))], {"rmode": "RINT"}


def _ttrans(p, dt):
    return [p.tile(tb(dt, 32, 32)), p.tile(tb(dt, 32, 32))], [p.tile(tb(dt, 32, 32))], {}


def _tconcat(p, dt):
    return [p.tile(tb(dt, R, 32)), p.tile(tb(dt, R, 32))], [p.tile(tb(dt))], {}


def _treshape(p, dt):
    return [p.tile(tb(dt))], [(p._name("r"), tb(dt, 32, 32))], {}


M, K, N = 16, 32, 32


def _left(p, dt):
    bl = "row_major" if p.arch == "a3" else "col_major"
    return p.tile(tb(dt, M, K, loc="left", blayout=bl, slayout="row_major"))


def _right(p, dt):
    return p.tile(tb(dt, K, N, loc="right", blayout="row_major", slayout="col_major"))


def _acc(p, dt):
    return p.tile(tb("i32" if dt == "i8" else "f32", M, N, loc="acc", blayout="col_major", slayout="row_major",
                     fractal=1024))


def _tmatmul(p, dt):
    return [_left(p, dt), _right(p, dt)], [_acc(p, dt)], {}


def _tmatmul_acc(p, dt):
    acc = _acc(p, dt)
    return [acc, _left(p, dt), _right(p, dt)], [acc], {}


def _tmatmul_bias(p, dt):
    bias = p.tile(tb("i32" if dt == "i8" else "f32", 1, N, loc="bias"))
    return [_left(p, dt), _right(p, dt), bias], [_acc(p, dt)], {}


def _tci(p, dt):
    return [p.scalar(dt)], [p.tile(rowvec(dt))], {"descending": False}


def _tsort32(p, dt):
    return [p.tile(rowvec(dt, 32)), p.tile(rowvec("ui32", 32))], [p.tile(rowvec(dt, 64 if dt == "f32" else 128))], {}


def _tmrgsort(p, dt):
    return ([p.tile(rowvec(dt, 128)), p.tile(rowvec(dt, 128)), p.tile(rowvec(dt, 256))],
            [p.tile(rowvec(dt, 256)), p.vector4()], {"exhausted": False})


def _tgather(p, dt):
    return [p.tile(tb(dt)), p.tile(tb("i32")), p.tile(tb("i32"))], [p.tile(tb(dt))], {}


def _tscatter(p, dt):
    idx = "i16" if dt in ("f16", "bf16", "i16", "i8") else "i32"
    return [p.tile(tb(dt)), p.tile(tb(idx))], [p.tile(tb(dt))], {}


def _tload(p, dt):
    return [p.view(dt)], [p.tile(tb(dt))], {}


def _tstore(p, dt):
    return [p.tile(tb(dt))], [p.view(dt)], {}


SPECS = {
    "tload": _tload, "tstore": _tstore, "tmov": _unary,
    **{m: _binary for m in ("tadd", "tsub", "tmul", "tdiv", "tmax", "tmin", "tfmod", "tand", "tor", "tshl", "tshr")},
    "trem": _binary_tmp, "txor": _binary_tmp,
    **{m: _scalar for m in ("tadds", "tsubs", "tmuls", "tdivs", "tfmods")},
    "tmaxs": _float_scalar, "tmins": _float_scalar,
    "trems": _scalar_tmp,
    **{m: _int_scalar for m in ("tands", "tors", "tshls", "tshrs")},
    "txors": _int_scalar_tmp,
    **{m: _unary for m in ("tnot", "texp", "tlog", "tsqrt", "trsqrt", "trecip", "tabs", "tneg", "trelu")},
    "tlrelu": _lrelu,
    "trowexpand": _rowexpand, "tcolexpand": _colexpand, "texpands": _expands,
    **{"trowexpand" + op: _rowexpand_bin for op in ("add", "sub", "mul", "div", "max", "min", "expdif")},
    **{"tcolexpand" + op: _colexpand_bin for op in ("add", "sub", "mul", "div", "max", "min", "expdif")},
    **{m: _rowreduce for m in ("trowsum", "trowmax", "trowmin", "trowprod")},
    "trowargmax": _rowarg, "trowargmin": _rowarg,
    **{m: _colreduce for m in ("tcolsum", "tcolmax", "tcolmin", "tcolprod")},
    "tcolargmax": _colarg, "tcolargmin": _colarg,
    "tcmp": _tcmp, "tcmps": _tcmps, "tsel": _tsel, "tsels": _tsels,
    "tcvt": _tcvt, "ttrans": _ttrans, "tconcat": _tconcat, "treshape": _treshape,
    "tmatmul": _tmatmul, "tmatmul.acc": _tmatmul_acc, "tmatmul.bias": _tmatmul_bias,
    "tci": _tci, "tsort32": _tsort32, "tmrgsort": _tmrgsort, "tgather": _tgather, "tscatter": _tscatter,
}


# --- operand forms: one verified line per form (tests/test_instructions.py asserts a3 and a5 accept them)

def _f32(p):
    return p.tile(tb("f32"))


def _cube(build):
    build.kind = "cube"
    return build


FORMS = {
    "trowsum": lambda p: ("trowsum", [_f32(p), _f32(p)], [p.tile(colvec("f32"))], {}),
    "tcolsum": lambda p: ("tcolsum", [_f32(p)], [p.tile(rowvec("f32"))], {}),
    "tcolsum binary": lambda p: ("tcolsum", [_f32(p), _f32(p)], [p.tile(rowvec("f32"))], {"isBinary": True}),
    "tcmp": lambda p: ("tcmp", [_f32(p), _f32(p)], [p.tile(tb("i8"))], {"cmpMode": "lt"}),
    "tcmps": lambda p: ("tcmps", [_f32(p), p.scalar("f32")], [p.tile(tb("i8"))], {"cmpMode": "ge"}),
    "tsel": lambda p: ("tsel", [p.tile(tb("i8")), _f32(p), _f32(p), _f32(p)], [_f32(p)], {}),
    "tsels": lambda p: ("tsels", [p.tile(tb("i8")), _f32(p), _f32(p), p.scalar("f32")], [_f32(p)], {}),
    "tcvt": lambda p: ("tcvt", [_f32(p)], [p.tile(tb("f16"))], {"rmode": "RINT", "sat_mode": "ON"}),
    "tcvt tmp": lambda p: ("tcvt", [_f32(p), p.tile(tb("i32"))], [p.tile(tb("i16"))], {"rmode": "TRUNC"}),
    "tmrgsort single list": lambda p: ("tmrgsort", [p.tile(rowvec("f32", 256)), p.scalar("i32", "64")],
                                       [p.tile(rowvec("f32", 256))], {}),
    "tmrgsort 4 lists": lambda p: ("tmrgsort", [p.tile(rowvec("f32", 128)) for _ in range(4)] + [p.tile(rowvec("f32", 512))],
                                   [p.tile(rowvec("f32", 512)), p.vector4()], {"exhausted": False}),
    "tsort32": lambda p: ("tsort32", [p.tile(rowvec("f32", 32)), p.tile(rowvec("ui32", 32))], [p.tile(rowvec("f32", 64))], {}),
    "tsort32 tmp": lambda p: ("tsort32", [p.tile(rowvec("f16", 32)), p.tile(rowvec("ui32", 32)), p.tile(rowvec("f16", 32))],
                              [p.tile(rowvec("f16", 128))], {}),
    "tgather index": lambda p: ("tgather", [_f32(p), p.tile(tb("i32")), p.tile(tb("i32"))], [_f32(p)], {}),
    "tgather mask": lambda p: ("tgather", [p.tile(rowvec("f32", 128))], [p.tile(rowvec("f32", 64))], {"maskPattern": "P0101"}),
    "tgather compare": lambda p: ("tgather", [p.tile(rowvec("f32", 32)), p.scalar("f32"), p.tile(rowvec("i8", 32))],
                                  [p.tile(rowvec("i32", 32)), p.tile(rowvec("i32", 32))], {"cmpMode": "gt", "offset": 7}),
    "tci": lambda p: ("tci", [p.scalar("i32", "0")], [p.tile(rowvec("i32"))], {"descending": True}),
    "ttrans": lambda p: ("ttrans", [p.tile(tb("f32", 16, 32)), p.tile(tb("f32", 16, 32))], [p.tile(tb("f32", 32, 16))], {}),
    "texpands": lambda p: ("texpands", [p.scalar("f32")], [_f32(p)], {}),
    "trowexpand": lambda p: ("trowexpand", [p.tile(colvec("f32"))], [_f32(p)], {}),
    "tcolexpand": lambda p: ("tcolexpand", [p.tile(rowvec("f32"))], [_f32(p)], {}),
    "trowexpandadd": lambda p: ("trowexpandadd", [_f32(p), p.tile(colvec("f32"))], [_f32(p)], {}),
    "trowexpandmul tmp": lambda p: ("trowexpandmul", [_f32(p), p.tile(colvec("f32")), _f32(p)], [_f32(p)], {}),
    "tcolexpandsub": lambda p: ("tcolexpandsub", [_f32(p), p.tile(rowvec("f32"))], [_f32(p)], {}),
    "treshape": lambda p: ("treshape", [p.tile(colvec("f32"))], [("%r", rowvec("f32", 16))], {}),
    "tmatmul.bias": _cube(lambda p: ("tmatmul.bias", [_left(p, "f16"), _right(p, "f16"), p.tile(tb("f32", 1, N, loc="bias"))],
                                     [_acc(p, "f16")], {})),
    "tmatmul.acc": _cube(lambda p: (lambda acc: ("tmatmul.acc", [acc, _left(p, "i8"), _right(p, "i8")], [acc], {}))(_acc(p, "i8"))),
    "tstore atomic": lambda p: ("tstore", [_f32(p)], [p.view("f32")], {"atomicType": "atomic_add"}),
    "tdivs scalar first": lambda p: ("tdivs", [p.scalar("f32"), _f32(p)], [_f32(p)], {}),
    "tmaxs i32 tile, f32 scalar": lambda p: ("tmaxs", [p.tile(tb("i32")), p.scalar("f32")], [p.tile(tb("i32"))], {}),
}

# attribute placements that ptoas rejects (the other side of attr_place)
MISPLACED = {
    "tcmp": lambda p: ("tcmp", [_f32(p), _f32(p)], [p.tile(tb("i8"))], {"cmpMode": "lt"}),
    "tcmps": lambda p: ("tcmps", [_f32(p), p.scalar("f32")], [p.tile(tb("i8"))], {"cmpMode": "ge"}),
    "tcvt": lambda p: ("tcvt", [_f32(p)], [p.tile(tb("f16"))], {"rmode": "RINT"}),
    "tci": lambda p: ("tci", [p.scalar("i32", "0")], [p.tile(rowvec("i32"))], {"descending": True}),
    "tcolsum": lambda p: ("tcolsum", [_f32(p), _f32(p)], [p.tile(rowvec("f32"))], {"isBinary": True}),
    "tstore": lambda p: ("tstore", [_f32(p)], [p.view("f32")], {"atomicType": "atomic_add"}),
    "tgather": lambda p: ("tgather", [p.tile(rowvec("f32", 32)), p.scalar("f32"), p.tile(rowvec("i8", 32))],
                          [p.tile(rowvec("i32", 32)), p.tile(rowvec("i32", 32))], {"cmpMode": "gt", "offset": 7}),
}


def build_form(build, arch: str, misplace: bool = False) -> tuple[str, str]:
    """(module text, instruction line) of a FORMS/MISPLACED entry; ``misplace`` flips attr_place."""
    import dataclasses
    mod = load_instructions()
    p = Probe(arch, getattr(build, "kind", "vector"))
    m, ins, outs, attrs = build(p)
    row = mod.TABLE[m]
    if misplace:
        mod.TABLE[m] = dataclasses.replace(row, attr_place="outs" if row.attr_place == "ins" else "ins")
    try:
        line = mod.text(m, ins, outs, attrs)
    finally:
        mod.TABLE[m] = row
    return p.module(line), line


def build_probe(mnemonic: str, arch: str, dtype: str) -> str:
    ins_mod = load_instructions()
    row = ins_mod.TABLE[mnemonic]
    p = Probe(arch, "cube" if row.pipe == "CUBE" else "vector")
    ins, outs, attrs = SPECS[mnemonic](p, dtype)
    return p.module(ins_mod.text(mnemonic, ins, outs, attrs))


def run_ptoas(ptoas: str, module_text: str, arch: str) -> tuple[bool, str]:
    """(accepted, first error line)."""
    proc = subprocess.run([ptoas, f"--pto-arch={arch}", "-", "-o", os.devnull], input=module_text,
                          capture_output=True, text=True, timeout=60)
    if proc.returncode == 0:
        return True, ""
    errs = [l for l in proc.stderr.splitlines() if "error:" in l]
    return False, errs[0] if errs else proc.stderr.strip().splitlines()[-1:][0] if proc.stderr.strip() else "?"


def probe_all(ptoas: str, mnemonics=None, archs=None, dtypes=None, workers=None):
    """{(mnemonic, arch, dtype): (accepted, error)} — one ptoas process per probe, in parallel."""
    mod = load_instructions()
    mnemonics = list(mnemonics or mod.TABLE)
    archs = archs or mod.ARCHS
    dtypes = dtypes or mod.DTYPES
    jobs = [(m, a, d) for m in mnemonics for a in archs for d in dtypes]
    texts = {j: build_probe(*j) for j in jobs}
    with ThreadPoolExecutor(max_workers=workers or max(4, 2 * (os.cpu_count() or 1))) as pool:
        results = pool.map(lambda j: run_ptoas(ptoas, texts[j], j[1]), jobs)
        return dict(zip(jobs, results))


def _write_back(accepted: dict[str, dict[str, tuple[str, ...]]]):
    src = INSTRUCTIONS_PY.read_text()
    for m, per_arch in accepted.items():
        pat = re.compile(r'(Instruction\("' + re.escape(m) + r'",.*?\(\n\s*\("a3", )\([^)]*\)(\),\n\s*\("a5", )\([^)]*\)',
                         re.S)
        lit = {a: "(" + ", ".join(repr(d) for d in ds) + ("," if len(ds) == 1 else "") + ")"
               for a, ds in per_arch.items()}
        src, n = pat.subn(lambda mo: mo.group(1) + lit["a3"] + mo.group(2) + lit["a5"], src, count=1)
        if n != 1:
            raise SystemExit(f"could not find the dtype literal of {m} in {INSTRUCTIONS_PY}")
    INSTRUCTIONS_PY.write_text(src)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mnemonics", nargs="*")
    ap.add_argument("--write", action="store_true", help="rewrite the dtype literals in instructions.py")
    ap.add_argument("--show", metavar="MNEMONIC:ARCH:DTYPE", help="print one probe module and ptoas' verdict")
    args = ap.parse_args(argv)
    ptoas = find_ptoas()
    if not ptoas:
        raise SystemExit("ptoas not found (set PTOAS)")
    mod = load_instructions()
    if args.show:
        m, a, d = args.show.split(":")
        text = build_probe(m, a, d)
        print(text)
        print(run_ptoas(ptoas, text, a))
        return
    res = probe_all(ptoas, args.mnemonics or None)
    accepted: dict[str, dict[str, tuple[str, ...]]] = {}
    for (m, a, d), (ok, err) in res.items():
        accepted.setdefault(m, {}).setdefault(a, ())
        if ok:
            accepted[m][a] += (d,)
    for m, per_arch in accepted.items():
        listed = {a: mod.TABLE[m].dtypes_for(a) for a in mod.ARCHS}
        mark = "" if listed == per_arch else "   # CHANGED"
        print(f"{m:18s} a3={','.join(per_arch['a3']) or '-':28s} a5={','.join(per_arch['a5']) or '-'}{mark}")
        errs = sorted({err for (mm, a, d), (ok, err) in res.items() if mm == m and not ok})
        for e in errs:
            print(f"    {e.split('error: ', 1)[-1]}")
    if args.write:
        _write_back(accepted)
        print(f"wrote {INSTRUCTIONS_PY}")


if __name__ == "__main__":
    main()
