"""Run PTO-AS kernels on pto-isa's CPU simulator: the vendor's reference for what a tile
instruction computes.

The text goes through ``ptoas`` (:func:`~ptojax.ascend.ptoas.assemble`); the C++ it emits is
compiled with ``-D__CPU_SIM`` against the pto-isa headers together with a generated host driver,
which reads every argument from a file, calls the kernel once per block (setting the block index
that ``pto.get_block_idx`` returns, in order 0, 1, ...) and writes every pointer argument back.
Blocks run one after another on one thread; ``pto.get_block_num`` returns ``block_num``.

Tools: ``PTOAS`` (or ``ptoas`` on PATH), ``PTO_ISA_ROOT`` (the folder holding
``include/pto/pto-inst.hpp``) and ``CXX`` (or ``g++`` / ``clang++`` on PATH; C++20).
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Sequence

import numpy as np

from .ptoas import PtoasError, assemble, find_ptoas

COMPILE_TIMEOUT_S = 300
RUN_TIMEOUT_S = 120
CXXFLAGS = ["-std=c++20", "-O1", "-D__CPU_SIM", "-include", "stdint.h", "-include", "stddef.h",
            "-Wno-switch"]

# The C++ types ptoas emits for kernel parameters, and the numpy dtype each one holds.
# ``bfloat16_t`` is missing on purpose: under C++20 pto-isa's CPU sim makes it an alias of
# ``_Float16`` (real bf16 needs C++23 ``std::bfloat16_t``), so a bf16 kernel would compute in fp16.
CTYPES = {"float": np.float32, "double": np.float64, "half": np.float16, "bool": np.bool_,
          "int8_t": np.int8, "uint8_t": np.uint8, "int16_t": np.int16, "uint16_t": np.uint16,
          "int32_t": np.int32, "uint32_t": np.uint32, "int64_t": np.int64, "uint64_t": np.uint64}

Job = tuple[str, str, Sequence[np.ndarray], int]   # (text, entry, args, block_num)


class CpuSimError(PtoasError):
    """A kernel failed to compile or crashed in pto-isa's CPU simulator."""


class CpuSimUnavailable(CpuSimError):
    """``ptoas``, the pto-isa headers or a C++20 compiler is missing."""


def find_pto_isa() -> str | None:
    """``PTO_ISA_ROOT`` if it holds ``include/pto/pto-inst.hpp``, else None."""
    root = os.environ.get("PTO_ISA_ROOT")
    if root and os.path.isfile(os.path.join(root, "include", "pto", "pto-inst.hpp")):
        return root
    return None


def find_cxx() -> str | None:
    """``CXX`` if set, else the first of ``g++`` / ``clang++`` on PATH that accepts ``-std=c++20``."""
    if os.environ.get("CXX"):
        return os.environ["CXX"]
    for name in ("g++", "clang++"):
        path = shutil.which(name)
        if path and subprocess.run([path, "-std=c++20", "-x", "c++", "-fsyntax-only", "-"],
                                   input="int main() {}", capture_output=True, text=True).returncode == 0:
            return path
    return None


def run_module(text: str, entry: str, args: Sequence[np.ndarray], *, arch: str = "a3",
               block_num: int = 1) -> list[np.ndarray]:
    """Run ``@entry`` of ``text`` on ``args``; return every argument as it is afterwards."""
    return run_modules([(text, entry, args, block_num)], arch=arch)[0]


def run_modules(jobs: Sequence[Job], *, arch: str = "a3") -> list[list[np.ndarray]]:
    """:func:`run_module` for several ``(text, entry, args, block_num)`` jobs, with one compile."""
    ptoas, root, cxx = find_ptoas(), find_pto_isa(), find_cxx()
    missing = [what for what, found in [("ptoas (set PTOAS or put it on PATH)", ptoas),
                                        ("pto-isa headers (set PTO_ISA_ROOT)", root),
                                        ("a C++20 compiler (set CXX or install g++)", cxx)] if not found]
    if missing:
        raise CpuSimUnavailable("pto-isa CPU simulation needs " + ", ".join(missing))
    with tempfile.TemporaryDirectory(prefix="ptojax-cpusim-") as d:
        includes, kernels, calls, outputs = {}, [], [], []
        for j, (text, entry, args, block_num) in enumerate(jobs):
            cpp = assemble(text, arch=arch, level="level2", insert_sync=True, ptoas=ptoas)
            params = _signature(cpp, entry)
            if len(params) != len(args):
                raise CpuSimError(f"@{entry} takes {len(params)} arguments, got {len(args)}")
            if block_num < 1:
                raise CpuSimError(f"@{entry}: block_num must be >= 1, got {block_num}")
            arrays = [_check_arg(entry, i, *param, a) for i, (param, a) in enumerate(zip(params, args))]
            for i, a in enumerate(arrays):
                a.tofile(os.path.join(d, f"{j}_{i}.bin"))
            lines = cpp.splitlines()
            includes.update(dict.fromkeys(line for line in lines if line.startswith("#include")))
            body = "\n".join(line for line in lines if not line.startswith("#include"))
            kernels.append(f"namespace ptojax_k{j} {{\n{body}\n}}  // namespace ptojax_k{j}\n")
            calls.append(_call(j, entry, params, arrays, block_num))
            outputs.append(arrays)
        src = os.path.join(d, "sim.cpp")
        with open(src, "w") as f:
            f.write("".join(i + "\n" for i in includes) + _PRELUDE + "".join(kernels)
                    + "int main(int argc, char** argv) {\n  pto::cpu_sim::InitializeRuntime();\n"
                    + "".join(calls) + "  return 0;\n}\n")
        exe = os.path.join(d, "sim")
        _run([cxx, *CXXFLAGS, f"-I{os.path.join(root, 'include')}", src, "-o", exe],
             COMPILE_TIMEOUT_S, "compiling the simulation failed", cwd=d)
        _run([exe, d], RUN_TIMEOUT_S, "the simulated kernel crashed", cwd=d,
             env={**os.environ, "PTO_CPU_SIM_TRACE_ENABLE": "0"})
        return [[np.fromfile(os.path.join(d, f"{j}_{i}.bin"), a.dtype).reshape(a.shape)
                 for i, a in enumerate(arrays)] for j, arrays in enumerate(outputs)]


def _signature(cpp: str, entry: str) -> list[tuple[str, bool]]:
    """``(C type, is_pointer)`` for each parameter of the kernel ``entry`` in ptoas's C++."""
    m = re.search(rf"\bvoid {re.escape(entry)}\(([^)]*)\)\s*{{", cpp)
    if m is None:
        raise CpuSimError(f"@{entry} is not a kernel in the C++ ptoas emitted")
    params = []
    for p in filter(None, (p.strip() for p in m.group(1).split(","))):
        pm = re.fullmatch(r"(?:__gm__\s+)?([\w:]+)\s*(\*?)\s*\w+", p)
        if pm is None:
            raise CpuSimError(f"@{entry}: cannot read the C++ parameter `{p}`")
        params.append((pm.group(1), bool(pm.group(2))))
    return params


def _check_arg(entry: str, i: int, ctype: str, ptr: bool, a) -> np.ndarray:
    if ctype == "bfloat16_t":
        raise CpuSimError(f"@{entry} argument {i}: bf16 is not simulated faithfully: pto-isa's CPU "
                          "sim stores bfloat16_t as _Float16 unless built with C++23 std::bfloat16_t")
    if ctype not in CTYPES:
        raise CpuSimError(f"@{entry} argument {i}: unsupported C++ parameter type {ctype}")
    want = np.dtype(CTYPES[ctype])
    a = np.asarray(a)
    if a.dtype == np.bool_ and want == np.int8:      # a bool GM tensor: its bytes, 0 or 1, as int8_t
        a = a.view(np.int8)
    if a.dtype != want:
        raise CpuSimError(f"@{entry} argument {i}: expected {want} for C++ {ctype}, got {a.dtype}")
    if not ptr and a.size != 1:
        raise CpuSimError(f"@{entry} argument {i}: scalar parameter needs one value, got shape {a.shape}")
    return np.array(a, order="C")   # a C-contiguous copy (keeps 0-d shapes)


def _call(j: int, entry: str, params, arrays, block_num: int) -> str:
    lines = [f"  {{  // job {j}: @{entry}, {block_num} block(s)"]
    names = []
    for i, ((ctype, ptr), a) in enumerate(zip(params, arrays)):
        path = f'ptojax_path(argv[1], "{j}_{i}.bin")'
        lines.append(f"    auto a{i} = ptojax_read({path}, {a.nbytes});")
        names.append(f"reinterpret_cast<{ctype}*>(a{i}.data())" if ptr
                     else f"*reinterpret_cast<{ctype}*>(a{i}.data())")
    lines += [f"    pto::cpu_sim::runtime_config().num_cores = {block_num};",
              f"    for (uint32_t b = 0; b < {block_num}; ++b) {{",
              "      pto::cpu_sim::set_execution_context(b, 0, 1);",
              f"      ptojax_k{j}::{entry}({', '.join(names)});",
              "    }",
              "    pto::cpu_sim::reset_execution_context();"]
    lines += [f'    ptojax_write(ptojax_path(argv[1], "{j}_{i}.bin"), a{i});'
              for i, (_, ptr) in enumerate(params) if ptr]
    return "\n".join(lines) + "\n  }\n"


def _run(cmd: list[str], timeout: int, what: str, **kw) -> None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired:
        raise CpuSimError(f"{what}: timed out after {timeout} s") from None
    if proc.returncode != 0:
        code = proc.returncode
        status = f"exit {code}" if code > 0 else f"killed by signal {-code}"
        if -code in signal.Signals._value2member_map_:
            status += f" ({signal.Signals(-code).name})"
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-30:])
        raise CpuSimError(f"{what} ({status}):\n{tail}")


_PRELUDE = r"""#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

static std::string ptojax_path(const char* dir, const char* name) { return std::string(dir) + "/" + name; }

static std::vector<unsigned char> ptojax_read(const std::string& path, size_t nbytes) {
  std::vector<unsigned char> buf(nbytes + 64);  // slack: never hand the kernel a zero-size buffer
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f || std::fread(buf.data(), 1, nbytes, f) != nbytes) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(3);
  }
  std::fclose(f);
  return buf;
}

static void ptojax_write(const std::string& path, const std::vector<unsigned char>& buf) {
  FILE* f = std::fopen(path.c_str(), "wb");
  size_t nbytes = buf.size() - 64;
  if (!f || std::fwrite(buf.data(), 1, nbytes, f) != nbytes) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(3);
  }
  std::fclose(f);
}

"""
