"""Checks a kernel's realized programs: ``ptoas`` accepts them (A3 and A5, level2 and level3, when the
binary is present) and the engine running their text equals the tests' reference interpreter of
codegen's program (``plan_interpreter.py``) bit for bit on random GM tensors."""
from __future__ import annotations

import math
import re
import subprocess
from pathlib import Path

import numpy as np

import plan_interpreter as private
import ptojax as pj
from ptojax.ascend import asm, compile_kernel, engine
from ptojax.ascend import isel

PTOAS = Path(__file__).resolve().parents[1] / "shared/tools/ptoas/bin/ptoas"
if not PTOAS.exists():
    PTOAS = Path("/work/shared/tools/ptoas/bin/ptoas")
DTYPES = asm.DTYPES


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
        module = engine.parse(isel.module([prog], memory=ak.memory))
        name = re.sub(r"[^A-Za-z0-9_]", "_", prog.name)
        gm = _gm_args(prog, rng)
        want, got = [g.copy() for g in gm], [g.copy() for g in gm]
        n_index = sum(t == "index" for _, t in prog.params)
        grid = tuple(prog.grid) + (1,) * (n_index - len(prog.grid))
        for b in range(math.prod(grid)):
            index = np.unravel_index(b, grid) if grid else ()
            private.run(prog, tuple(int(i) for i in index), want, private.Core(ak.memory))
            engine.run(module, name, got, b)
        for w, g in zip(want, got):
            np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8), err_msg=prog.name)
    return progs
