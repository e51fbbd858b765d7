"""ptojax: Huawei CANN's PyPTO programming model for JAX."""
from importlib.metadata import PackageNotFoundError, version

from . import errors, ops
from .errors import PtoArgumentError, PtoDtypeError, PtoError, PtoShapeError, PtoUnsupportedError

try:
    __version__ = version("ptojax")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+source"

__all__ = [
    "PtoArgumentError", "PtoDtypeError", "PtoError", "PtoShapeError", "PtoUnsupportedError", "errors",
    "ops", "__version__",
]
