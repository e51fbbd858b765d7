"""ptojax: Huawei CANN's PyPTO programming model for JAX.

``pj.kernel`` compiles a JAX function (written with ``pj.ops`` and plain ``jnp``, tiled with
``pj.tile``) to PTO-AS code for the Ascend A2/A3 and runs it on a simulated chip through an MPMD task
runtime; ``pj.lower`` exposes the lowering levels; ``pj.nn`` holds training ops.
"""
import importlib
from importlib.metadata import PackageNotFoundError, version

from . import ascend, errors, lowering, mpmd, ops
from .ascend.asm import PtoAsmError
from .errors import (PtoArgumentError, PtoCapacityError, PtoDtypeError, PtoError, PtoExecutionError, PtoShapeError,
                     PtoUnsupportedError, PtoVerifyError)
from .execute import execute
from .kernel import Compiled, Kernel, Lowered, kernel
from .lowering import lower, tile
from .mpmd import PtoOrchestrationError, PtoTaskError

# Imported on first use (``pj.nn``, ``pj.report``, ``pj.tiles``): writing and running a kernel needs none.
_ON_FIRST_USE = ("nn", "report", "tiles")   # training ops; the tuning loop's report; the Tile level by hand


def __getattr__(name):
    if name in _ON_FIRST_USE:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'ptojax' has no attribute {name!r}")


try:
    __version__ = version("ptojax")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+source"

__all__ = [
    "Compiled", "Kernel", "Lowered", "PtoArgumentError", "PtoAsmError", "PtoCapacityError", "PtoDtypeError", "PtoError",
    "PtoExecutionError", "PtoOrchestrationError", "PtoShapeError", "PtoTaskError", "PtoUnsupportedError",
    "PtoVerifyError", "__version__", "ascend", "errors", "execute", "kernel",
    "lower", "lowering", "mpmd", "nn", "ops", "report", "tile", "tiles",
]
