"""Selection of ``ttopk`` / ``tsort`` / ``tmrgsort`` (``ptojax/ascend/isel/sort.py``): the real
``tci`` / ``tsort32`` / ``tmrgsort`` / ``tgather`` text is run by the real-text engine
(``ptojax/ascend/engine.py``, each instruction = ``tile_semantics.SEMANTICS``) and compared with
``np.sort`` / ``jax.lax.top_k`` / ptojax's own semantics: values exactly, indices exactly where the
values are distinct (ties: the lower index first, which is the rule tsort32 / tmrgsort keep).

The engine does not read everything the sort sequences print yet (``pto.subset`` row views, ``?``
valid rows, ``ui32`` tiles, the ``vector<4xi16>`` of ``tmrgsort``'s list form), so :class:`_Parser`
/ :class:`_Run` below extend it for these tests. ``ptoas`` itself (when present) checks the text."""
import dataclasses
import math
import os
import re
import shutil
import subprocess

import jax
import ml_dtypes
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend import compile_kernel, engine, isel
from ptojax.ascend import semantics as ptojax_semantics
from ptojax.ascend.isel import sort as sort_rules
from ptojax.ascend.tile_semantics import SEMANTICS

RNG = np.random.default_rng(7)
PTOAS = os.environ.get("PTOAS", "/work/shared/tools/ptoas/bin/ptoas")


# ------------------------------------------------------------------ the engine, extended for subsets
@dataclasses.dataclass(frozen=True)
class Subset(engine.Stmt):
    result: str
    src: str
    offsets: tuple
    sizes: tuple


class _Loose(engine.TileType):
    """A subset's type: its valid rows (``v_row = -1`` where the text says ``?``) match any."""

    def __eq__(self, other):
        if not isinstance(other, engine.TileType):
            return NotImplemented
        mine, theirs = dataclasses.astuple(self), dataclasses.astuple(other)
        return all(a == b or i == 4 and -1 in (a, b) for i, (a, b) in enumerate(zip(mine, theirs)))

    __hash__ = engine.TileType.__hash__


class _Parser(engine._Parser):
    def type(self):
        kind, text, line, col = self.peek()
        if text and text.startswith("!pto.tile_buf<") and "=?" in text:
            self.toks[self.i] = (kind, text.replace("=?", "=-1"), line, col)
        return super().type()

    def statement(self):
        kind, text, line, col = self.peek()
        if kind == "ssa" and self.peek(1)[1] == "=" and self.peek(2)[1] == "pto.subset":
            at = dict(line=line, text=self.lines[line - 1].strip())
            result = self.next("ssa")
            self.expect("=", "pto.subset")
            src = self.next("ssa")
            self.expect("[")
            offsets = self.listed(self.operand, "]")
            self.expect("sizes", "[")
            sizes = self.listed(self.operand, "]")
            self.expect(":")
            self.type()
            return Subset(**at, result=result, src=src, offsets=offsets, sizes=sizes)
        if kind == "ssa" and self.peek(2)[1] == "arith.constant" and str(self.peek(3)[1]).startswith("dense<"):
            at = dict(line=line, text=self.lines[line - 1].strip())
            result = self.next("ssa")
            self.expect("=", "arith.constant")
            self.next()
            self.expect(":")
            type_ = self.type()
            return engine.Const(**at, result=result, value=0, type=type_)
        return super().statement()


class _SubTile(engine._Tile):
    """A row-major window of another tile's bytes (its own row pitch = the window's cols)."""

    def __init__(self, type_, buf, v_row):
        super().__init__(type_, buf)
        self.v_row = v_row

    def valid(self):
        t = self.type
        flat = self.buf[: t.rows * t.cols * self.dtype.itemsize].view(self.dtype)
        return flat.reshape(t.rows, t.cols)[: self.v_row, : t.v_col]


class _Run(engine._Run):
    def subset(self, s: Subset):
        src = self.get(s, s.src, engine._Tile)
        (r, c), (rows, cols) = [self.get(s, o, int) for o in s.offsets], s.sizes
        t = src.type
        assert t.blayout == "row_major" and (rows == 1 or cols == t.cols), "multi-row windows keep the pitch"
        item = src.dtype.itemsize
        v_row = max(0, min(rows, src.valid().shape[0] - r))
        v_col = max(0, min(cols, t.v_col - c))
        typ = _Loose(t.loc, t.dtype, rows, cols, -1, v_col, t.blayout, t.slayout, t.fractal, t.pad)
        self.env[s.result] = _SubTile(typ, src.buf[(r * t.cols + c) * item:], v_row)

    def const(self, s):
        if s.type == "vector<4xi16>":
            self.env[s.result] = np.zeros(4, np.int16)
        else:
            super().const(s)

    def instr(self, s):
        if s.op == "tmrgsort" and len(s.outs) == 2:          # list form: (dst, executed)
            lists = [np.array(self.get(s, n).valid()) for n in s.ins]          # the last is the tmp tile
            dst = self.get(s, s.outs[0])
            spec = jax.ShapeDtypeStruct(dst.valid().shape, dst.dtype)
            res, _ = SEMANTICS["tmrgsort"](*lists, out=(spec,), **dict(s.attrs))
            return self.put(s, dst, np.asarray(res))
        return super().instr(s)


_Run.DISPATCH = {**engine._Run.DISPATCH, Subset: _Run.subset, engine.Instr: _Run.instr, engine.Const: _Run.const}


@pytest.fixture(autouse=True)
def _ui32(monkeypatch):
    monkeypatch.setitem(engine.DTYPES, "ui32", np.dtype(np.uint32))


def run_program(fn, *args):
    """Select ``fn``'s one program, check the text with ptoas when there is one, run it on the
    extended engine; returns (GM outputs, the text)."""
    low = pj.lower(fn, *args)
    ak = compile_kernel(low)
    assert len(ak.kernels) == 1, [k for k in ak.kernels]
    ((program, _), kernel), = ak.kernels.items()
    text = isel.module([kernel])
    if shutil.which(PTOAS) or os.path.exists(PTOAS):
        with open("/tmp/_isel_sort.pto", "w") as f:
            f.write(text)
        r = subprocess.run([PTOAS, "--pto-arch=a3", "--enable-insert-sync", "/tmp/_isel_sort.pto", "-o",
                            "/tmp/_isel_sort.cpp"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
    module = _Parser(text).module()
    func = module.function(re.sub(r"[^A-Za-z0-9_]", "_", program))
    expected = jax.tree_util.tree_leaves(jax.eval_shape(fn, *args))
    outs = [np.zeros(e.shape, e.dtype) for e in expected]
    gm = [np.ascontiguousarray(a) for a in args] + outs
    for b in range(math.prod(kernel.grid)):
        runner = _Run(func, gm, b)
        runner.block(func.body)
    return outs, text


def check_topk(x, k, largest, values, indices):
    """Values exactly; each index points at its value; indices unique and, where the values are
    distinct, equal to the reference (a stable sort: the lower index first on ties)."""
    want_v, want_i = ptojax_semantics.topk(x, k=k, axis=x.ndim - 1, largest=largest)
    np.testing.assert_array_equal(values, want_v)
    n = x.shape[-1]
    real = indices < n
    assert np.all(real | (indices == -1)) and np.all(indices >= -1)
    np.testing.assert_array_equal(np.take_along_axis(x, np.where(real, indices, 0), -1)[real], values[real])
    np.testing.assert_array_equal(indices, want_i)


# ------------------------------------------------------------------------------------------ top-k
TOPK_CASES = {
    "f32 3x40 k5": (RNG.standard_normal((3, 40)).astype(np.float32), 5, True),
    "f32 1x100 k7 smallest": (RNG.standard_normal((1, 100)).astype(np.float32), 7, False),
    "f32 4x256 k20 (one merge round)": (RNG.standard_normal((4, 256)).astype(np.float32), 20, True),
    "f32 2x300 k33 (round + 3 lists)": (RNG.standard_normal((2, 300)).astype(np.float32), 33, True),
    "f16 16x256 k8": (RNG.standard_normal((16, 256)).astype(np.float16), 8, True),
    "f16 5x90 k9 smallest": (RNG.standard_normal((5, 90)).astype(np.float16), 9, False),
    "bf16 6x64 k16": (RNG.standard_normal((6, 64)).astype(ml_dtypes.bfloat16), 16, True),
    "f32 ties": (RNG.integers(0, 4, (3, 70)).astype(np.float32), 12, True),
    "f32 ties smallest, -inf": (np.where(RNG.random((2, 50)) < 0.3, -np.inf,
                                         RNG.integers(-3, 3, (2, 50))).astype(np.float32), 40, False),
    "f32 -inf rows": (np.full((2, 40), -np.inf, np.float32), 6, True),
}


@pytest.mark.parametrize("name", list(TOPK_CASES))
def test_topk_matches_reference(name):
    x, k, largest = TOPK_CASES[name]
    (values, indices), text = run_program(lambda a: pj.ops.topk(a, k, largest=largest), x)
    assert "pto.tsort32" in text and "pto.tgather" in text
    check_topk(x, k, largest, values, indices)
    if largest and x.dtype == np.float32:
        ref_v, _ = jax.lax.top_k(x, k)
        np.testing.assert_array_equal(values, np.asarray(ref_v))


def test_sort_along_rows():
    x = RNG.standard_normal((7, 48)).astype(np.float32)
    (values, indices), _ = run_program(lambda a: pj.ops.sort(a, 1), x)
    np.testing.assert_array_equal(values, np.sort(x, axis=1))
    np.testing.assert_array_equal(indices, np.argsort(x, axis=1, kind="stable"))


def test_sort_along_axis0_transposes():
    x = RNG.standard_normal((21, 16)).astype(np.float32)
    (values, indices), text = run_program(lambda a: pj.ops.sort(a, 0), x)
    assert "pto.ttrans" in text
    np.testing.assert_array_equal(values, np.sort(x, axis=0))
    np.testing.assert_array_equal(indices, np.argsort(x, axis=0, kind="stable"))


# ------------------------------------------------------------------------------------- merge_topk
def _lists(shape, k, largest, dtype=np.float32):
    """Sorted candidate lists with distinct indices (as a staged top-k leaves them), some padded."""
    *lead, lists, n = shape
    v = RNG.standard_normal(shape).astype(dtype)
    v = -np.sort(-v, axis=-1) if largest else np.sort(v, axis=-1)
    i = RNG.permutation(int(np.prod(shape))).reshape(shape).astype(np.int32)
    pad = ptojax_semantics._pad_value(np.dtype(dtype), largest)
    v[..., -1, n // 2:] = pad                          # the last list partly padding: (-inf | +inf, -1)
    i[..., -1, n // 2:] = -1
    return v, i


@pytest.mark.parametrize("shape,k,largest", [((8, 4, 5), 5, True), ((3, 2, 4, 16), 16, False),
                                             ((2, 3, 40), 24, True), ((4, 4, 64), 64, True)])
def test_merge_topk_matches_reference(shape, k, largest):
    v, i = _lists(shape, k, largest)
    (values, indices), text = run_program(lambda a, b: pj.ops.merge_topk(a, b, k, largest=largest), v, i)
    assert "pto.tsort32" in text
    want_v, want_i = ptojax_semantics.merge_topk(v, i, k=k, largest=largest)
    np.testing.assert_array_equal(values, want_v)
    np.testing.assert_array_equal(indices, want_i)


# -------------------------------------------------------------------------------------- the plan
def test_padded_lengths_and_rounds():
    assert sort_rules.padded_length(30) == (32, 1, 0)
    assert sort_rules.padded_length(40) == (64, 2, 0)
    assert sort_rules.padded_length(100) == (128, 1, 1)
    assert sort_rules.padded_length(300) == (384, 3, 1)
    assert sort_rules.padded_length(2048) == (2048, 1, 3)
    assert sort_rules.padded_length(8192) == (8192, 1, 4)
    assert sort_rules.padded_length(80, 64) == (128, 1, 1)
    assert sort_rules.rounds(384, 3, 1, "f32") == [("single", 64), ("lists", 3, 256)]
    assert sort_rules.rounds(1024, 2, 2, "f16") == [("single", 128), ("single", 512), ("lists", 2, 2048)]
