"""The Ascend A2/A3 backend: targets, the real PTO instruction set (``instructions.py``), codegen and
instruction selection into real PTO-AS (``isel/``), the vendor's tools as judges (``ptoas.py``,
``cpusim.py``, ``crosscheck.py``), the engine that runs the real text (``engine.py``,
``tile_semantics.py``) and its replay as one JAX function (``replay.py``, ``replay_graph.py``, ``replay_loops.py``: what
``jax.jit`` of a ``sim`` kernel inlines), and the cost model.

``compile_kernel(lowering)`` plans every block program (codegen's tile operations, parsed back and
verified; ``AscendKernel.pto()`` is their real PTO-AS module);
``AscendBackend`` runs its real module on the MPMD runtime (``ptojax.execute``), the engine
interpreting every task; importing this package adds the ``pto`` level to ``Lowering.as_text``.
"""
from ..lowering import pipeline as _pipeline
from .asm import Kernel, PtoAsmError, emit, parse
from ..errors import PtoExecutionError
from .program import AscendBackend, AscendKernel, compile_kernel
from .ptoas import PtoasError, PtoasNotFoundError

_pipeline.TEXT["pto"] = lambda lowering: compile_kernel(lowering, target="a3").pto()

__all__ = ["AscendBackend", "AscendKernel", "Kernel", "PtoAsmError", "PtoExecutionError", "PtoasError",
           "PtoasNotFoundError", "compile_kernel", "emit", "parse"]
