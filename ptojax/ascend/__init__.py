"""The Ascend A2/A3 backend: targets, the PTO ISA table, PTO-AS emission and parsing, the
interpreter and the cost model.

``compile_kernel(lowering)`` turns every block program into PTO-AS text (parsed back and verified);
``run_sequential`` interprets it; importing this package adds the ``pto`` level to
``Lowering.as_text``.
"""
from ..lowering import pipeline as _pipeline
from .asm import Kernel, PtoAsmError, emit, parse
from .interpreter import PtoExecutionError
from .program import AscendKernel, compile_kernel, run_sequential

_pipeline.TEXT["pto"] = lambda lowering: compile_kernel(lowering).text

__all__ = ["AscendKernel", "Kernel", "PtoAsmError", "PtoExecutionError", "compile_kernel", "emit", "parse",
           "run_sequential"]
