"""Row rules of instruction selection (``isel/rows.py``): ``mgather`` / ``mscatter`` as row loops,
``tcumsum`` as row-block scans.

Each program is realized to real PTO-AS, accepted by ``ptoas`` (A3 and A5, level2 and level3, when the
binary is present), and its text is EXECUTED here — by a small executor of the statements these
rules print (``scf.for`` / ``scf.if``, ``pto.tgetval``, ``pto.subset`` with PTOAS's runtime valid
shape, ``arith`` on ``index`` / ``i32``, atomic-add ``tstore``) whose compute instructions are
``tile_semantics`` — and compared bit for bit with ptojax's interpreter running codegen's program
(``semantics.py``: ``gather`` / ``mscatter_into`` / ``cumsum``) on the same GM tensors.
"""
from __future__ import annotations

import math
import re
import subprocess
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import ptojax as pj
from ptojax import ops as O
from ptojax.ascend import asm, compile_kernel
from ptojax.ascend import interpreter as private
from ptojax.ascend import isel
from ptojax.ascend.tile_semantics import SEMANTICS

PTOAS = Path(__file__).resolve().parents[1] / "shared/tools/ptoas/bin/ptoas"
if not PTOAS.exists():
    PTOAS = Path("/work/shared/tools/ptoas/bin/ptoas")
DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16, "i8": np.int8, "i16": np.int16,
          "i32": np.int32, "i64": np.int64, "i1": np.bool_}


# --------------------------------------------------------------------------- a small text executor
_TILE = re.compile(r"!pto\.tile_buf<loc=(\w+), dtype=(\w+), rows=(\d+), cols=(\d+), v_row=([\d?]+), "
                   r"v_col=([\d?]+), blayout=(\w+)")


class _Tile:
    """A tile over a byte buffer: element (r, c) at ``offset + r * pitch + c`` (elements)."""

    def __init__(self, buf, dtype, rows, cols, v_row, v_col, offset=0, pitch=None):
        self.buf, self.dtype, self.rows, self.cols = buf, np.dtype(dtype), rows, cols
        self.v_row, self.v_col, self.offset, self.pitch = v_row, v_col, offset, pitch or cols

    def valid(self):
        item = self.dtype.itemsize
        return np.ndarray((self.v_row, self.v_col), self.dtype, self.buf, self.offset * item,
                          (self.pitch * item, item))


def _tile_type(text):
    m = _TILE.search(text)
    loc, dt, r, c, vr, vc, layout = m.groups()
    assert layout == "row_major", text
    return DTYPES[dt], int(r), int(c), vr, vc


def _split_operands(text):
    """``%a, %b {attrs} : T0, T1`` -> names, attrs dict."""
    attrs = {}
    m = re.search(r"\{(.*)\}", text)
    if m:
        for k, v in re.findall(r"(\w+) = ([^,}]+)", m.group(1)):
            v = v.strip()
            attrs[k] = v.split()[-1].rstrip(">") if v.startswith("#") else v
        text = text[:m.start()] + text[m.end():]
    names = text.split(" : ")[0]
    return re.findall(r"%[\w]+", names), attrs


def _body(text, name):
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.strip().startswith(f"func.func @{name}("))
    out, depth = [], 0
    for line in lines[start + 1:]:
        s = line.strip()
        if s == "}" and depth == 0:
            return out
        depth += s.endswith("{") - (s == "}")
        out.append(s)
    raise AssertionError("unterminated function")


def execute(text, name, args, block_idx):
    """Run function ``name`` of the realized module on GM arrays ``args`` (updated in place)."""
    lines = _body(text, name)
    head = next(l for l in text.splitlines() if l.strip().startswith(f"func.func @{name}("))
    params = re.findall(r"(%\w+): !pto\.ptr", head)
    env = {p: a.reshape(-1) for p, a in zip(params, args)}
    _block(lines, 0, len(lines), env, block_idx)


def _end(lines, i):
    depth = 0
    for j in range(i, len(lines)):
        depth += lines[j].endswith("{") - (lines[j] == "}")
        if depth == 0:
            return j
    raise AssertionError("unbalanced block")


def _block(lines, i, stop, env, bid):
    while i < stop:
        s = lines[i]
        if s.startswith("scf.for"):
            var, lo, hi, step = re.match(r"scf\.for (%\w+) = (%\w+) to (%\w+) step (%\w+) \{", s).groups()
            end = _end(lines, i)
            for v in range(env[lo], env[hi], env[step]):
                env[var] = v
                _block(lines, i + 1, end, env, bid)
            i = end + 1
            continue
        if s.startswith("scf.if"):
            cond = re.match(r"scf\.if (%\w+) \{", s).group(1)
            end = _end(lines, i)
            if env[cond]:
                _block(lines, i + 1, end, env, bid)
            i = end + 1
            continue
        _statement(s, env, bid)
        i += 1


def _statement(s, env, bid):
    if s == "return":
        return
    m = re.match(r"(%\w+) = (\S+) ?(.*)", s)
    if not m:
        return _instr(s, env)
    res, op, rest = m.groups()
    if op == "arith.constant":
        value, type_ = rest.rsplit(" : ", 1)
        if type_ in ("f32", "f16", "bf16"):
            v = (np.array(int(value, 16), np.uint32).view(np.float32) if value.startswith("0x") else float(value))
            env[res] = np.array(v, DTYPES[type_])
        else:
            env[res] = int(value) if type_ == "index" else np.array(int(value), DTYPES[type_])
    elif op == "arith.index_cast":
        env[res] = int(env[rest.split()[0]])
    elif op == "arith.cmpi":
        pred, a, b = re.match(r"(\w+), (%\w+), (%\w+)", rest).groups()
        a, b = int(env[a]), int(env[b])
        assert pred == "ult"
        env[res] = (a % 2 ** 64) < (b % 2 ** 64)
    elif op.startswith("arith."):
        a, b, type_ = re.match(r"(%\w+), (%\w+) : (\w+)", rest).groups()
        a, b = int(env[a]), int(env[b])
        f = {"addi": a + b, "subi": a - b, "muli": a * b, "divsi": int(a / b) if b else 0,
             "remsi": a - b * int(a / b) if b else 0}[op[6:]]
        env[res] = f if type_ == "index" else np.array(f, DTYPES[type_])
    elif op == "pto.get_block_idx":
        env[res] = bid
    elif op == "pto.make_tensor_view":
        src, shape, strides = re.match(r"(%\w+), shape = \[(.*?)\], strides = \[(.*?)\]", rest).groups()
        flat = env[src]
        shape = [env[x.strip()] for x in shape.split(",")]
        strides = [env[x.strip()] * flat.itemsize for x in strides.split(",")]
        env[res] = np.lib.stride_tricks.as_strided(flat, shape, strides)
    elif op == "pto.partition_view":
        src, offs, sizes = re.match(r"(%\w+), offsets = \[(.*?)\], sizes = \[(.*?)\]", rest).groups()
        offs = [env[x.strip()] for x in offs.split(",")]
        sizes = [env[x.strip()] for x in sizes.split(",")]
        view = env[src]
        assert all(0 <= o and o + n <= d for o, n, d in zip(offs, sizes, view.shape)), (s, offs, view.shape)
        env[res] = view[tuple(slice(o, o + n) for o, n in zip(offs, sizes))]
    elif op == "pto.alloc_tile":
        dt, r, c, vr, vc = _tile_type(rest)
        env[res] = _Tile(np.zeros(r * c * np.dtype(dt).itemsize, np.uint8), dt, r, c, int(vr), int(vc))
    elif op == "pto.treshape":
        src = env[rest.split()[0]]
        dt, r, c, vr, vc = _tile_type(rest.split("->")[1])
        assert src.offset == 0 and src.pitch == src.cols
        env[res] = _Tile(src.buf, dt, r, c, int(vr), int(vc))
    elif op == "pto.subset":
        src, i, j, r, c = re.match(r"(%\w+)\[(%\w+), (%\w+)\] sizes \[(\d+), (\d+)\]", rest).groups()
        t, i, j, r, c = env[src], env[i], env[j], int(r), int(c)
        # PTOAS: valid = min(size, parent valid - offset % parent valid)
        vr, vc = min(r, t.v_row - i % t.v_row), min(c, t.v_col - j % t.v_col)
        assert (t.offset + i * t.pitch + j + (r - 1) * t.pitch + c) * t.dtype.itemsize <= t.buf.size, s
        env[res] = _Tile(t.buf, t.dtype, r, c, vr, vc, t.offset + i * t.pitch + j, t.pitch)
    elif op == "pto.load_scalar":
        ptr, off = re.match(r"(%\w+)\[(%\w+)\]", rest).groups()
        assert 0 <= env[off] < env[ptr].size
        env[res] = env[ptr][env[off]].copy()
    elif op == "pto.tgetval":
        t, off = re.match(r"ins\((%\w+), (%\w+)", rest).groups()
        t, off = env[t], env[off]
        assert 0 <= off < t.rows * t.pitch
        env[res] = np.ndarray((1,), t.dtype, t.buf, (t.offset + off) * t.dtype.itemsize)[0].copy()
    else:
        raise AssertionError(f"unknown statement {s}")


def _instr(s, env):
    m = re.match(r"pto\.(\w+) ins\((.*)\) outs\((.*?)\)( \{.*\})?$", s)
    op, ins, outs, trailing = m.groups()
    ins, attrs = _split_operands(ins)
    outs, _ = _split_operands(outs)
    if trailing:
        attrs.update(_split_operands(trailing)[1])
    a = [env[n] for n in ins]
    d = [env[n] for n in outs]
    if op == "tsetval":
        t, (off, value) = d[0], a
        assert 0 <= off < t.rows * t.pitch
        np.ndarray((1,), t.dtype, t.buf, (t.offset + off) * t.dtype.itemsize)[0] = value
    elif op == "tload":
        d[0].valid()[...] = a[0].reshape(d[0].valid().shape)
    elif op == "tstore":
        src = a[0].valid()
        assert src.size == d[0].size and src.dtype == d[0].dtype
        if attrs.get("atomicType") == "atomic_add":
            d[0][...] = SEMANTICS["tadd"](np.asarray(d[0]).reshape(src.shape), src).reshape(d[0].shape)
        else:
            d[0][...] = src.reshape(d[0].shape)
    else:
        args = [x.valid().copy() if isinstance(x, _Tile) else np.asarray(x) for x in a]
        out = jax.ShapeDtypeStruct(d[0].valid().shape, d[0].dtype)
        result = np.asarray(SEMANTICS[op](*args, out=out, **attrs))
        assert result.shape == d[0].valid().shape and result.dtype == d[0].dtype, (s, result.shape)
        d[0].valid()[...] = result


# ------------------------------------------------------------------------------------ harness
def _ptoas(text, arch, level):
    args = [str(PTOAS), f"--pto-arch={arch}", f"--pto-level={level}", "k.pto", "-o", "k.cpp"]
    if level != "level3":
        args.insert(1, "--enable-insert-sync")
    return args


def _programs(kernel, args, op):
    ak = compile_kernel(pj.lower(kernel, *args))
    progs = [k for k in ak.kernels.values() if any(getattr(st, "op", None) == op for st in k.body)]
    assert progs, f"no program with {op}"
    return ak, progs


def _gm_args(kernel: asm.Kernel, rng):
    """Random GM tensors for ``kernel``'s pointers; an i32 vector is indices over the largest other
    leading dimension ``M``, from -2 to ``M + 1`` and starting ``M - 1, M`` (the last row, the first past it)."""
    views = {s.ptr: s.type for s in kernel.body if isinstance(s, asm.MakeView)}
    ptrs = [views[name] for name, type_ in kernel.params if type_ != "index"]
    out = []
    for v in ptrs:
        dt = DTYPES[v.dtype]
        if v.dtype == "i32" and len(v.shape) == 1:
            m = max(d for w in ptrs if w is not v for d in (w.shape[:-1] or w.shape))
            idx = rng.integers(-2, m + 2, v.shape).astype(dt)
            idx[:2] = [m - 1, m][:v.shape[0]]
            out.append(idx)
        elif np.issubdtype(dt, np.integer):
            out.append(rng.integers(-50, 50, v.shape).astype(dt))
        else:
            out.append(rng.standard_normal(v.shape).astype(dt))
    return out


def check(kernel, args, op, tmp_path, archs=("a3", "a5"), levels=("level2", "level3")):
    ak, progs = _programs(kernel, args, op)
    rng = np.random.default_rng(0)
    for prog in progs:
        for arch in archs:
            for level in levels:
                text = isel.module([prog], arch=arch, level=level, memory=ak.memory)
                if PTOAS.exists():
                    (tmp_path / "k.pto").write_text(text)
                    r = subprocess.run(_ptoas(text, arch, level), cwd=tmp_path, capture_output=True, text=True)
                    assert r.returncode == 0, f"{prog.name} {arch} {level}: {r.stderr[-600:]}"
        text = isel.module([prog], memory=ak.memory)
        name = re.sub(r"[^A-Za-z0-9_]", "_", prog.name)
        gm = _gm_args(prog, rng)
        want, got = [g.copy() for g in gm], [g.copy() for g in gm]
        n_index = sum(t == "index" for _, t in prog.params)
        grid = tuple(prog.grid) + (1,) * (n_index - len(prog.grid))
        for b in range(math.prod(grid)):
            index = np.unravel_index(b, grid) if grid else ()
            private.run(prog, tuple(int(i) for i in index), want, private.Core(ak.memory))
            execute(text, name, got, b)
        for w, g in zip(want, got):
            np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8), err_msg=prog.name)
    return progs


def _tiled(vec, fn):
    def kernel(*a):
        with pj.tile(vec=vec):
            return fn(*a)
    return kernel


IDX = np.array([3, 1, -1, 36, 5, 5, 0, 2, 9, 10, 11], np.int32)


def _f(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# -------------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("dtype", [np.float32, jnp.bfloat16, np.int32])
def test_mgather_rows_out_of_range_rows_are_zero(dtype, tmp_path):
    x = (_f(37, 64) * 10).astype(dtype)
    progs = check(_tiled((8,), lambda x, i: O.gather(x, i, 0)), (x, IDX), "mgather", tmp_path)
    assert len(progs) == 2                             # 8 indices, then the 3 left


def test_mgather_slabs_of_a_3d_tensor(tmp_path):
    check(_tiled((8,), lambda x, i: O.gather(x, i, 0)), (_f(37, 3, 16), IDX), "mgather", tmp_path)


def test_mgather_on_a_middle_axis(tmp_path):
    check(_tiled((8,), lambda x, i: O.gather(x, i, 1)), (_f(3, 37, 20), IDX), "mgather", tmp_path)


@pytest.mark.parametrize("accumulate", [False, True])
def test_mscatter_rows_in_index_order(accumulate, tmp_path):
    op = O.index_add if accumulate else O.scatter_update
    progs = check(_tiled((8,), lambda x, i, u: op(x, i, u, 0)), (_f(37, 50), IDX, _f(11, 50, seed=1)),
                  "mscatter", tmp_path)
    text = isel.module(progs[:1])
    assert ("atomic_add" in text) == accumulate
    assert "pto.tgetval" in text and "arith.cmpi ult" in text and "pto.subset" in text


def test_mscatter_f16_accumulates(tmp_path):
    check(_tiled((8,), lambda x, i, u: O.index_add(x, i, u, 0)),
          (_f(37, 64, dtype=np.float16), IDX, _f(11, 64, dtype=np.float16, seed=1)), "mscatter", tmp_path)


@pytest.mark.parametrize("axis,reverse", [(0, False), (1, False), (0, True), (1, True)])
def test_cumsum_2d(axis, reverse, tmp_path):
    fn = _tiled((8, 16), lambda x: jax.lax.cumsum(x, axis, reverse=reverse))
    progs = check(fn, (_f(21, 30),), "tcumsum", tmp_path)
    text = isel.module(progs[:1])
    assert ("pto.ttrans" in text) == (axis == 1)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_cumsum_3d(axis, tmp_path):
    check(_tiled((2, 4, 16), lambda x: jnp.cumsum(x, axis)), (_f(3, 5, 30),), "tcumsum", tmp_path)


@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16, np.int32])
def test_cumsum_dtypes(dtype, tmp_path):
    x = (_f(21, 30) * 4).astype(dtype)
    check(_tiled((8, 16), lambda x: jnp.cumsum(x, 1)), (x,), "tcumsum", tmp_path)
    check(_tiled((8, 16), lambda x: jnp.cumsum(x, 0)), (x,), "tcumsum", tmp_path)


def test_cumsum_1d(tmp_path):
    check(_tiled((16,), lambda x: jnp.cumsum(x)), (_f(40),), "tcumsum", tmp_path)


def test_mgather_elements_of_a_1d_table(tmp_path):
    """A lookup table (DeepSeek's block table): ``load_scalar`` + ``tsetval``, zero out of range."""
    progs = check(_tiled((8,), lambda t, i: O.gather(t, i, 0)), (_f(37), IDX), "mgather", tmp_path)
    assert "pto.load_scalar" in isel.module(progs[:1])


def test_single_elements_of_a_2d_tensor_fail_clearly():
    sel = isel.selector.Selector(asm.Kernel("k", "AIV", "", (), (), (), 0), "a3", "level2", None)
    sel.types.update({"%v": asm.ViewType((3, 37), "f32"), "%i": isel.vec_tile(1, 8, "i32"),
                      "%o": isel.vec_tile(1, 8, "f32")})
    instr = asm.Instr("mgather", (asm.Operand("%v", sel.types["%v"]), asm.Operand("%i", sel.types["%i"])),
                      (asm.Operand("%o", sel.types["%o"]),), (("axis", 1), ("shapes", ((8,),))))
    with pytest.raises(pj.PtoUnsupportedError, match="single elements"):
        sel.instr(instr)


def test_executor_follows_ptoas_subset_valid_rule():
    t = _Tile(np.zeros(8 * 8 * 4, np.uint8), np.float32, 8, 8, 3, 8)
    env = {"%t": t, "%r": 2, "%c0": 0}
    _statement("%s = pto.subset %t[%r, %c0] sizes [2, 8] : T", env, 0)
    assert env["%s"].valid().shape == (1, 8)           # min(2, 3 - 2 % 3)
