"""Regression: ptoas refused row-loop kernels with "vec overflow" that ptojax's own UB plan accepted.

Softmax f32 over 5000 / 7000 / 10000 columns (a row loop under the default tiles), logsumexp f16 -> f32
over 5000, rms_norm / layer_norm f16 over 10000: for the 5000-column softmax ptojax planned 98 464 bytes
and ptoas needed 207 552 ("requires 1660416 bits while 1572864 bits avaliable").

Cause: codegen allocates every tile at the top of the function, and PTOAS's liveness
(``MemLivenessAnalysis``) makes a buffer allocated before an ``scf.for`` live from the loop's start when
the loop or anything after it uses the buffer. So every tile of a row loop's later loops and of its
tail chunks took its space from the first loop on, beside that loop's tiles (the 4096-column softmax,
with no tail, needed 164 128 bytes where ptojax planned 98 464, just under the UB). ptojax's plan
(``isel/liveness.py``) counted a tile only from its first use.

Fix: selection allocates each tile just before the statement that first uses it
(``isel.selector.deferred``), and the plan follows PTOAS's liveness rules, so the two agree — checked
here against the addresses ptoas assigns where the tiles together overfill the UB (where they do not,
ptoas places them without reuse, which always fits).
"""
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend.isel import liveness
from ptojax.ascend.ptoas import PtoasError, assemble, find_ptoas
from ptojax.lowering.memory import ASCEND_CORE

HAVE_PTOAS = bool(find_ptoas()) or os.environ.get("CI") == "true"
needs_ptoas = pytest.mark.skipif(not HAVE_PTOAS, reason="no ptoas: set PTOAS to Huawei's PTO assembler")

_CPP_BYTES = {"float": 4, "half": 2, "bfloat16_t": 2, "int32_t": 4, "uint32_t": 4, "int16_t": 2, "uint16_t": 2,
              "int8_t": 1, "uint8_t": 1}
_UB = {"a3": ASCEND_CORE.ub, "a5": 256 * 1024}       # ptoas's vec capacity per arch

RNG = np.random.default_rng(0)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _f16(*shape):
    return RNG.standard_normal(shape).astype(np.float16)


def softmax(v):
    return jax.nn.softmax(v, axis=-1)


def softmax4(v):
    """Four rows a tile (the default takes one where there are few rows): tiles that overfill the UB
    when all are live at once."""
    with pj.tile(vec=(4, 2048)):
        return softmax(v)


CASES = {
    "softmax f32 x5000": (softmax, (_f32(4, 5000),), 1e-6),
    "softmax f32 x7000": (softmax, (_f32(4, 7000),), 1e-6),
    "softmax f32 x10000": (softmax, (_f32(4, 10000),), 1e-6),
    "softmax f32 x4096 (no tail)": (softmax, (_f32(4, 4096),), 1e-6),
    "logsumexp f16->f32 x5000": (lambda v: jax.nn.logsumexp(v.astype(jnp.float32), axis=-1), (_f16(6, 5000),), 1e-5),
    "rms_norm f16 x10000": (lambda v: pj.ops.rms_norm(v), (_f16(4, 10000),), 4e-3),
    "layer_norm f16 x10000": (lambda v: pj.ops.layer_norm(v), (_f16(16, 10000),), 4e-3),
    "rms_norm f16 x10000 weighted": (lambda v, w: pj.ops.rms_norm(v, w), (_f16(4, 10000), _f16(10000)), 4e-3),
    "argmax f32 x5000": (lambda v: jnp.argmax(v, axis=-1), (_f32(4, 5000),), 0),
}


def ptoas_tops(cpp: str) -> dict:
    """Per function of ptoas's C++, the highest UB byte its plan uses (``Tile<Vec, ...> v; TASSIGN(v, at)``)."""
    parts = re.split(r"^(?:__global__ )?AICORE void (\w+)\(", cpp, flags=re.M)
    tops = {}
    for name, body in zip(parts[1::2], parts[2::2]):
        offsets = dict(re.findall(r"const int64_t (v\d+) = (\d+);", body))
        tops[name] = max((int(offsets[at]) + int(rows) * int(cols) * _CPP_BYTES[dtype]
                          for dtype, rows, cols, _, at in re.findall(
                              r"Tile<TileType::Vec, (\w+), (\d+), (\d+)[^>]*> (v\d+);\s*TASSIGN\(\4, (v\d+)\);", body)),
                         default=0)
    return tops


@pytest.mark.parametrize("name", list(CASES))
def test_row_loop_matches_jit(name):
    fn, args, tol = CASES[name]
    compiled = pj.kernel(fn).lower(*args).compile()
    got, want = np.asarray(compiled(*args), np.float32), np.asarray(jax.jit(fn)(*args), np.float32)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_each_tile_is_allocated_where_first_used_and_the_tail_adds_nothing():
    """Without ptoas: no loop comes between a top-level ``alloc_tile`` of the row loop and the tile's
    first use (an instruction, or a loop that uses it); the 5000-column softmax then plans no more than its
    4096-column twin (the tail chunk's tiles live after the full chunks' loops, not beside them; a
    plan whose tiles fit side by side places them so, without reuse), while the same text with its tiles
    allocated up front overfills the UB."""
    plans = {}
    for n in (4096, 5000):
        text = pj.kernel(softmax4).lower(_f32(4, n)).compile().code.pto()
        (body,) = liveness.functions(text).values()
        plans[n] = liveness.ub_plan(body)
        statements = _top_level(body)
        for k, (line, _) in enumerate(statements):
            if "= pto.alloc_tile" in line:            # no loop between a tile's alloc and its first use
                name = re.compile(re.escape(line.split(" =")[0]) + r"\b")
                before = next(statements[k + 1:j] for j in range(k + 1, len(statements))
                              if any(name.search(x) for x in statements[j][1]))
                assert not [s for s, _ in before if s.startswith("scf.for")], line
        (hoisted,) = liveness.functions(_allocs_first(text)).values()
        plans[n, "up front"] = liveness.ub_plan(hoisted)
    assert plans[5000] <= plans[4096] <= plans[4096, "up front"] <= ASCEND_CORE.ub < plans[5000, "up front"], plans


def _top_level(body: str):
    """The top-level statements of a function's text: (first line, all its lines), a loop whole."""
    lines = [line.strip() for line in body.splitlines()[1:-1]]
    out, depth = [], 0
    for line in lines:
        if depth == 0:
            out.append((line, [line]))
        else:
            out[-1][1].append(line)
        depth += line.endswith("{") - (line == "}")
    return out


@needs_ptoas
@pytest.mark.parametrize("arch", ["a3", "a5"])
@pytest.mark.parametrize("name", list(CASES))
def test_ptoas_takes_the_row_loop_and_plans_what_ptojax_plans(name, arch):
    fn, args, _ = CASES[name]
    compiled = pj.kernel(fn).lower(*args).compile()
    text = compiled.code.pto(arch)
    tops = ptoas_tops(assemble(text, arch=arch))          # "vec overflow" before
    for function, body in liveness.functions(text).items():
        total = sum(b.size for b in liveness.buffers(body))
        plan = liveness.ub_plan(body)
        assert plan <= ASCEND_CORE.ub
        if total > _UB[arch]:                              # ptoas reuses space: its plan is ours
            assert plan == tops[function], (function, plan, tops[function])
        else:                                              # ptoas places every tile apart: it fits
            assert plan <= tops[function] <= total, (function, plan, tops[function])


@needs_ptoas
@pytest.mark.parametrize("n", [4096, 5000, 10000])
def test_the_plan_follows_ptoas_liveness_on_tiles_allocated_up_front(n):
    """The liveness rule itself, on the text with every top-level tile allocated at the function's
    start (as codegen had them): ptoas keeps them live from the first loop, and so does the plan —
    the same bytes where ptoas takes the text, the bytes its "vec overflow" names where not."""
    text = _allocs_first(pj.kernel(softmax4).lower(_f32(4, n)).compile().code.pto())
    (body,) = liveness.functions(text).values()
    plan = liveness.ub_plan(body)
    if plan <= ASCEND_CORE.ub:
        assert max(ptoas_tops(assemble(text)).values()) == plan
    else:
        with pytest.raises(PtoasError, match=f"vec overflow, requires {plan * 8} bits"):
            assemble(text)


def _allocs_first(text: str) -> str:
    """``text`` with every top-level ``alloc_tile`` of each function moved to the function's start."""
    out, allocs, head = [], [], None
    for line in text.splitlines():
        if line.startswith("  func.func"):
            out.append(line)
            head, allocs = len(out), []
        elif line.startswith("    %") and "= pto.alloc_tile" in line:
            allocs.append(line)
        elif line == "  }" and head is not None:
            out[head:head] = allocs
            out.append(line)
            head = None
        else:
            out.append(line)
    return "\n".join(out) + "\n"
