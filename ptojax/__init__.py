"""ptojax: Huawei CANN's PyPTO programming model for JAX."""
from importlib.metadata import PackageNotFoundError, version

from . import ascend, errors, lowering, ops
from .errors import (PtoArgumentError, PtoCapacityError, PtoDtypeError, PtoError, PtoShapeError,
                     PtoUnsupportedError, PtoVerifyError)
from .kernel import Compiled, Kernel, Lowered, kernel
from .lowering import lower, tile
from . import nn  # noqa: E402  (after kernel: pj.nn builds on pj.kernel)

try:
    __version__ = version("ptojax")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+source"

__all__ = [
    "PtoArgumentError", "PtoCapacityError", "PtoDtypeError", "PtoError", "PtoShapeError", "PtoUnsupportedError",
    "PtoVerifyError", "__version__", "ascend", "errors", "kernel", "Kernel", "Lowered", "Compiled", "lower",
    "lowering", "nn", "ops", "tile",
]
