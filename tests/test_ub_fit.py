"""A sim kernel's text fits the UB as PTOAS plans it: ``lower()`` halves the default vector tiles where a
function's instructions (a composite's work tiles beside a fused program's) would overfill it — PTOAS
refused ``jnp.sin``, ``jnp.arctan2``, ``jax.nn.gelu`` or a bf16 row max over 512 x 1024 with "vec
overflow" — and names the function where tiles the user chose do not fit. The plan
(``ascend/isel/liveness.py``) is checked against the addresses PTOAS assigns. Without ``ptoas`` the
PTOAS comparisons skip, except in CI, where they fail."""
import os
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from helpers import BF16
from ptojax.ascend.isel import liveness
from ptojax.ascend.ptoas import PtoasError, assemble, find_ptoas
from ptojax.lowering.memory import ASCEND_CORE

needs_ptoas = pytest.mark.skipif(not find_ptoas() and os.environ.get("CI") != "true",
                                 reason="no ptoas: set PTOAS to Huawei's PTO assembler (hw-native-sys/PTOAS)")
_CPP_BYTES = {"float": 4, "half": 2, "bfloat16_t": 2, "int32_t": 4, "uint32_t": 4, "int16_t": 2, "uint16_t": 2,
              "int8_t": 1, "uint8_t": 1}


def _ptoas_top(cpp: str) -> int:
    """The highest UB byte PTOAS's plan uses: max over ``Tile<Vec, T, R, C> v; TASSIGN(v, offset)``."""
    offsets = dict(re.findall(r"const int64_t (v\d+) = (\d+);", cpp))
    return max(int(offsets[at]) + int(rows) * int(cols) * _CPP_BYTES[dtype]
               for dtype, rows, cols, name, at in re.findall(
                   r"Tile<TileType::Vec, (\w+), (\d+), (\d+)[^>]*> (v\d+);\s*TASSIGN\(\4, (v\d+)\);", cpp))


X = np.random.default_rng(0).uniform(-3, 3, (512, 1024)).astype(np.float32)
Y = np.random.default_rng(1).uniform(0.5, 3, (512, 1024)).astype(np.float32)


@needs_ptoas
@pytest.mark.parametrize("name, fn, args", [
    ("sin", jnp.sin, (X,)), ("arctan2", jnp.arctan2, (X, Y)), ("gelu", jax.nn.gelu, (X,)),
    ("pow", lambda a, b: b ** a, (X, Y)), ("bf16 row max", lambda a: jnp.max(a, 1), (X[:64].astype(BF16),))])
def test_default_tiles_shrink_until_the_text_fits(name, fn, args):
    kernel = pj.kernel(fn)
    compiled = kernel.lower(*args).compile()
    text = compiled.code.pto()
    assert all(liveness.ub_plan(t) <= ASCEND_CORE.ub for t in liveness.functions(text).values())
    compiled.ptoas()                                       # "vec overflow" before
    got, want = np.asarray(compiled(*args), np.float32), np.asarray(jax.jit(fn)(*args), np.float32)
    np.testing.assert_allclose(got, want, rtol=2e-6 if name != "pow" else 2e-5, atol=1e-6)


def test_tiles_you_chose_that_overfill_the_ub_name_the_function():
    def column_sort(cols):
        def fn(x):
            with pj.tile(vec=(64, cols)):          # each column sorted whole: bf16 widened, a work tile beside
                return jnp.sort(x, 0)
        return fn

    x = X[:64, :256].astype(BF16)
    with pytest.raises(pj.PtoCapacityError, match=r"function @sort needs \d+ bytes of UB .*UB holds 196608 bytes"):
        pj.kernel(column_sort(128)).lower(x)
    np.testing.assert_array_equal(np.asarray(pj.kernel(column_sort(64))(x)), np.asarray(jnp.sort(x, 0)))


def test_a_row_reduction_whose_tiles_you_chose_overfill_the_ub_reduces_them_in_pieces():
    def row_max(x):
        with pj.tile(vec=(32, 1000)):              # bf16 rows widened to f32 beside an f32 tmp tile
            return jnp.max(x, 1)

    x = X[:64, :1000].astype(BF16)
    compiled = pj.kernel(row_max).lower(x).compile()
    assert all(liveness.ub_plan(t) <= ASCEND_CORE.ub for t in liveness.functions(compiled.code.pto()).values())
    assert compiled.profile().tasks == 2                   # the 32-row tiles you chose
    np.testing.assert_array_equal(np.asarray(compiled(x)), np.asarray(jnp.max(x, 1)))


def test_an_elementwise_op_whose_tiles_you_chose_overfill_the_ub_runs_them_in_pieces():
    def tanh(x):
        with pj.tile(vec=(16, 1024)):               # two 64 KiB tiles fit; tanh's work tiles beside them not
            return jnp.tanh(x)

    compiled = pj.kernel(tanh).lower(X[:64]).compile()     # the partition asks the real plan: two 8-row pieces
    assert all(liveness.ub_plan(t) <= ASCEND_CORE.ub for t in liveness.functions(compiled.code.pto()).values())
    assert compiled.profile().tasks == 4                   # the 16-row tiles you chose
    np.testing.assert_allclose(np.asarray(compiled(X[:64])), np.asarray(jax.jit(tanh)(X[:64])), rtol=2e-6, atol=1e-6)


@needs_ptoas
@pytest.mark.parametrize("fn", [jnp.tanh, jnp.round, jax.scipy.special.erfc], ids=["tanh", "round", "erfc"])
def test_the_plan_is_ptoas_plan_where_tiles_must_share_the_ub(fn):
    """On a program whose tiles together pass the UB (else PTOAS places them without reuse), the plan
    places every tile where PTOAS does: the same high-water mark."""
    compiled = pj.kernel(fn).lower(X[:64]).compile()
    (text,) = liveness.functions(compiled.code.pto()).values()
    assert sum(b.size for b in liveness.buffers(text)) > ASCEND_CORE.ub
    assert liveness.ub_plan(text) == _ptoas_top(compiled.ptoas())


@needs_ptoas
def test_an_op_whose_own_tiles_overfill_the_ub_runs_in_pieces_ptoas_places():
    """Three 128 KiB f32 tiles (``a``, ``b``, ``a + b``) overfill the UB by the partition's own count,
    not only by the real plan: each tile is computed in two 32-row pieces, whose tiles PTOAS reuses."""
    def add(a, b):
        with pj.tile(vec=(64, 512)):
            return a + b

    a, b = X[:128], Y[:128]
    compiled = pj.kernel(add).lower(a, b).compile()         # PtoCapacityError before
    (program,) = compiled.lowering.programs
    assert "each tile in 2 pieces" in program.note and compiled.profile().tasks == 4
    (text,) = liveness.functions(compiled.code.pto()).values()
    assert sum(b.size for b in liveness.buffers(text)) > ASCEND_CORE.ub
    assert liveness.ub_plan(text) == _ptoas_top(compiled.ptoas()) <= ASCEND_CORE.ub
    np.testing.assert_array_equal(np.asarray(compiled(a, b)), a + b)


def _ptoas_verdict(text: str) -> tuple[str, int]:
    """PTOAS's plan of a one-function module: ``("ok", its top)`` (32-byte rounded, as the plan rounds)
    or ``("overflow", the bytes its "vec overflow" requires)``."""
    try:
        cpp = assemble(text, insert_sync=False)
    except PtoasError as error:
        need = re.search(r"vec overflow, requires (\d+) bits", str(error))
        assert need, str(error)
        return "overflow", int(need.group(1)) // 8
    return "ok", -(-_ptoas_top(cpp) // 32) * 32


CASES = Path(__file__).parent / "ub_plan_cases"
# One-function modules ptojax printed (with the UB check off or looser), and PTOAS's verdict on each.
PLANNED = {
    "int8_select_chain": ("overflow", 236800),   # PTOAS refused it where first fit said 192000 B fit:
                                                 # 40 roll-backs, split bounds, then "requires 1894400 bits"
    "int8_select": ("ok", 179200),               # fits after roll-backs
    "bf16_select_chain": ("ok", 195200),         # 8 roll-backs, 1408 bytes to spare
    "bf16_compare": ("overflow", 230400),        # roll-backs, then split bounds, then overflow
    "bf16_row_max": ("ok", 196608),              # one roll-back; a tile read unwritten placed past the plan
    "f16_cumsum_loop": ("ok", 155136),           # an scf.for among tiles that must share the UB
    "f16_cumsum_loop_overflow": ("overflow", 219776),
}


@pytest.mark.parametrize("case", list(PLANNED))
def test_the_plan_is_ptoas_plan_or_its_overflow(case):
    """Where PTOAS places the tiles, the plan's top is PTOAS's; where PTOAS reports "vec overflow",
    the plan passes the UB by the bytes PTOAS requires."""
    verdict, need = PLANNED[case]
    (body,) = liveness.functions((CASES / f"{case}.pto").read_text()).values()
    assert liveness.ub_plan(body) == need
    assert (need > ASCEND_CORE.ub) == (verdict == "overflow")


@needs_ptoas
@pytest.mark.parametrize("case", list(PLANNED))
def test_ptoas_plans_the_cases_as_recorded(case):
    assert _ptoas_verdict((CASES / f"{case}.pto").read_text()) == PLANNED[case]


_I8 = np.random.default_rng(0).integers(-128, 128, (200, 96)).astype(np.int8)


def _select_chain(s):                      # the int8 select chain of ub_plan_cases/int8_select_chain.pto
    x = s % 2
    y = jnp.where((x ^ s) >= 0, x, s)
    return jnp.min(jnp.where(y < x, y, x), axis=0)


@needs_ptoas
def test_the_select_chain_ptoas_refused_now_fits():
    """The int8 select chain's default tiles: lowering now shrinks them where PTOAS's plan overflows,
    and every function's plan is PTOAS's."""
    compiled = pj.kernel(_select_chain).lower(_I8).compile()
    text = compiled.code.pto()
    header = text.split("\n", 1)[0]
    for body in liveness.functions(text).values():
        plan = liveness.ub_plan(body)
        assert plan <= ASCEND_CORE.ub
        assert _ptoas_verdict(f"{header}\n{body}\n}}\n") == ("ok", plan)
    compiled.ptoas()
    np.testing.assert_array_equal(np.asarray(compiled(_I8)), np.asarray(jax.jit(_select_chain)(_I8)))
