"""Tile lowering over jaxprs: Tensor graph -> Tile graph -> Block graph (see docs/design.md).

``lower(fn, *args)`` traces a kernel and runs the named passes; the result holds every level as a
jaxpr JAX can evaluate, readable dumps (``as_text``), the block programs and ``verify``.
"""
from .memory import ASCEND_CORE, CoreMemory
from .partition import Block, Options, Program
from .pipeline import LEVELS, PASSES, Lowering, lower
from .scope import TileConfig, tile

__all__ = ["ASCEND_CORE", "Block", "CoreMemory", "LEVELS", "Lowering", "Options", "PASSES", "Program", "TileConfig",
           "lower", "tile"]
