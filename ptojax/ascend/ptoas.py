"""The vendor assembler as judge: run hw-native-sys/PTOAS's ``ptoas`` on PTO-AS text.

``ptoas`` parses and verifies the text, plans tile memory, optionally inserts pipe synchronisation,
and lowers each ``func.func`` to C++ for the pto-isa tile library. :func:`assemble` returns that
C++, or raises :class:`PtoasError` naming the function, the source line and ptoas's own message.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

from ..errors import PtoArgumentError
from .asm import PtoAsmError

TIMEOUT_S = 60
CRASH_RUNS = 3       # runs of ptoas killed by a signal before assemble gives up (it crashes now and then)
# ptoas's --pto-level values, and the level of the text ptojax writes for each: level1 runs the same pipeline
# as level2 at the pinned commit (PlanMemory places the tiles), level3 skips PlanMemory (every tile has an addr)
LEVELS = {"level1": "level2", "level2": "level2", "level3": "level3"}
_HOW_TO_GET = ("set PTOAS to the path of the `ptoas` binary built from hw-native-sys/PTOAS, "
               "or put `ptoas` on PATH")


class PtoasError(PtoAsmError):
    """``ptoas`` rejected the text (or could not be run)."""


class PtoasNotFoundError(PtoasError):
    """No ``ptoas`` binary was found."""


def find_ptoas() -> str | None:
    """The ``PTOAS`` environment variable if set, else ``ptoas`` on PATH, else None."""
    return os.environ.get("PTOAS") or shutil.which("ptoas")


def check_level(level: str, what: str = "ptoas") -> str:
    """``level`` if it is one of ptoas's ``--pto-level`` values (:data:`LEVELS`), else a
    :class:`~ptojax.errors.PtoArgumentError` naming them."""
    if not isinstance(level, str) or level not in LEVELS:
        raise PtoArgumentError(f"{what}: level {level!r} is not a ptoas --pto-level; one of {', '.join(LEVELS)} "
                               "(level1 runs ptoas's level2 pipeline; level3 takes the tile addresses as written)")
    return level


def assemble(text: str, *, arch: str = "a3", level: str = "level2", insert_sync: bool = True,
             ptoas: str | None = None) -> str:
    """Assemble PTO-AS ``text`` with ``ptoas`` at ``--pto-level=level`` (one of :data:`LEVELS`) and
    return the C++ it emits."""
    check_level(level, "ptoas.assemble")
    if not isinstance(text, str):
        raise PtoArgumentError(f"ptoas.assemble: the PTO-AS text is a str, not {type(text).__name__}")
    ptoas = ptoas or find_ptoas()
    if ptoas is None:
        raise PtoasNotFoundError(f"ptoas not found: {_HOW_TO_GET}")
    cmd = [ptoas, f"--pto-arch={arch}", f"--pto-level={level}"]
    if insert_sync:
        cmd.append("--enable-insert-sync")
    with tempfile.TemporaryDirectory(prefix="ptojax-ptoas-") as d:
        out = os.path.join(d, "out.cpp")
        # The text goes in on stdin: given it as a file, ptoas 0.27 crashed on some texts (std::bad_alloc,
        # SIGSEGV) or not depending on the file's path, so that a random temporary name made it flaky. On
        # stdin it still crashes now and then (about one run in a hundred of a fuzz kernel's text, with
        # other runs beside it): a run killed by a signal is run again, up to CRASH_RUNS times.
        for _ in range(CRASH_RUNS):
            try:
                proc = subprocess.run([*cmd, "-", "-o", out], input=text, capture_output=True, text=True,
                                      timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise PtoasError(f"ptoas timed out after {TIMEOUT_S} s: {' '.join(cmd)}") from None
            except OSError as e:
                raise PtoasNotFoundError(f"cannot run ptoas at {ptoas!r} ({e}): {_HOW_TO_GET}") from None
            if proc.returncode >= 0:
                break
        if proc.returncode < 0:
            raise PtoasError(f"ptoas crashed {CRASH_RUNS} times running; the last: "
                             + _describe(text, proc.stderr, proc.returncode))
        if proc.returncode != 0:
            raise PtoasError(_describe(text, proc.stderr, proc.returncode))
        if not os.path.exists(out):
            raise PtoasError(f"ptoas at {ptoas!r} exited 0 but wrote no C++ (-o {out})")
        with open(out) as f:
            return f.read()


def _describe(text: str, stderr: str, returncode: int) -> str:
    """Turn ptoas's stderr into ``ptoas: @func line N: `source`: error: ...``."""
    m = re.search(r'loc\("[^"]*":(\d+):(\d+)\)[^\n]*?: (error: [^\n]*)', stderr)
    if m is None:
        errors = re.findall(r"^.*\berror: .*$", stderr, re.M) or stderr.strip().splitlines()[-3:]
        return f"ptoas failed (exit {returncode}): " + " | ".join(e.strip() for e in errors)
    lines = text.splitlines()
    lineno = int(m.group(1))
    source = lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""
    if len(source) > 200:
        source = source[:200] + "..."
    func = next((f"@{f.group(1)}" for line in reversed(lines[:lineno])
                 if (f := re.search(r"func\.func\s+@([\w$.]+)", line))), "(outside any func.func)")
    return f"ptoas rejected {func}, line {lineno}:{m.group(2)}: `{source}`: {m.group(3)}"
