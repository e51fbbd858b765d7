"""The exceptions ptojax raises.

Every error derives from :class:`PtoError` and from the built-in type a JAX user would already catch
(``TypeError`` for dtypes, ``ValueError`` for shapes and arguments, ``NotImplementedError`` for what
ptojax does not support). Messages start with the op (``pto.matmul: ...``) and name the offending
shapes, dtypes or values together with the rule they broke.
"""


class PtoError(Exception):
    """Base class of every ptojax error."""


class PtoShapeError(PtoError, ValueError):
    """Operand shapes break an op's shape rule."""


class PtoDtypeError(PtoError, TypeError):
    """An operand's dtype is not accepted by the op."""


class PtoArgumentError(PtoError, ValueError):
    """A static argument (axis, k, offsets, rounding mode, ...) is out of range or malformed."""


class PtoCapacityError(PtoError, ValueError):
    """A tile or block does not fit the core's buffers (UB, L1, L0A, L0B, L0C)."""


class PtoVerifyError(PtoError, AssertionError):
    """Verification found a lowering level whose numbers differ from the level before it."""


class PtoExecutionError(PtoError, RuntimeError):
    """An instruction could not execute: out-of-bounds access, bad shapes or dtypes."""


class PtoUnsupportedError(PtoError, NotImplementedError):
    """A construct ptojax does not support (yet)."""


def op_error(cls: type[PtoError], op: str, message: str) -> PtoError:
    """Build ``cls`` with the message ``pto.<op>: <message>``."""
    return cls(f"pto.{op}: {message}")


def no_derivative(kernel: str) -> PtoUnsupportedError:
    """The error of ``jax.grad`` / ``jax.jvp`` through a kernel, which has no automatic derivative."""
    return PtoUnsupportedError(f"pj.kernel '{kernel}' has no automatic derivative: wrap forward and backward "
                               "kernels in jax.custom_vjp (as pj.nn's training ops do), or stop the gradient at "
                               "its inputs where its result needs none (kernel(jax.lax.stop_gradient(x))); "
                               "jax.custom_vjp has no forward mode (jax.jvp, jax.jacfwd); second derivatives "
                               "(grad of grad, jax.hessian) of pj.nn ops are not supported")
