"""Instruction selection: ptojax's block kernels as the real PTO-AS module Huawei's PTOAS reads.

Codegen plans each block program as tile operations in tensor-op terms (``tsum{axes}``, ``tsoftmax``,
broadcasting ``tadd``, ``i1`` predicates). Selection prints the real instructions for them — one
``module`` per kernel (``pto.target_arch``), one ``func.func`` per program (``pto.kernel_kind``), the
grid position from ``pto.get_block_idx`` — so that what ptojax prints is what the vendor's assembler
accepts:

- reductions are ``trow*`` (with their tmp tile; an ``R×1`` result) or ``tcol*`` (a ``1×C`` result);
- broadcasting binaries are ``trowexpand<op>`` / ``tcolexpand<op>``, other broadcasts ``trowexpand`` /
  ``tcolexpand`` into a tile first; rows repeated in groups go run by run on ``pto.subset`` windows,
  a column's in groups under a wider tile across its rows first (:mod:`.broadcast`);
- predicates are ``tcmp`` / ``tcmps`` packed ``i8`` masks that ``tsel`` reads (with its tmp tile), masks
  of different widths aliased to one;
- composites (softmax, norms, activations, pow, clip) are the instruction sequences of pto-isa's tile
  library; ``bf16`` / ``i8`` arithmetic goes through ``f32`` / ``i16`` (``tcvt``), as A2/A3 code must;
- matmuls use ``tmatmul`` / ``tmatmul.acc`` / ``tmatmul.bias`` on left ``zz`` (A2/A3; ``nz`` on A5) and
  right ``zn`` tiles, transposed operands through ``dn`` views.

Memory: ``level="level2"`` (the default) prints no addresses and lets PTOAS plan memory, because
selection adds tiles (tmp, masks, widened operands) that ptojax's planner did not place;
``level="level3"`` keeps codegen's addresses and places the added tiles above each buffer's
high-water mark (a :class:`~ptojax.errors.PtoCapacityError` when they do not fit). Synchronisation
is left to ``ptoas --enable-insert-sync``: the text holds no ``set_flag`` / ``wait_flag``.

A program whose tasks take several grid points (``tiles_per_block``) also gets a task function
(:mod:`.task`): a loop over the task's grid points that loads a window they share once (L1/UB reuse).

An instruction with no real form yet is a :class:`~ptojax.errors.PtoUnsupportedError` naming the
program and the instruction.
"""
from . import composite, cube, interleave, iota, predicate, quant, rows, sort, vector  # noqa: F401 - their rules
from .selector import LEVELS, mask_shape, module, symbols, vec_tile

__all__ = ["LEVELS", "mask_shape", "module", "symbols", "vec_tile"]
