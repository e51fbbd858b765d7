"""Regression: a program that computes each tile in pieces made HBM bytes depend on ``tiles_per_block``.

``c = a + b; return c * a`` on f32 [8192, 4096] under ``vec=(32, 1024)``: three 128 KiB tiles overfill the
UB, so each tile runs in 2 pieces, whose windows are rows 0..16 and 16..32 of the 32-row tile. A task of
several grid points took one box per window from its first point's window to its last's: at 16 points per
task rows 0..112 and 16..128 of the task's 0..128 -- boxes that over-covered its tiles and overlapped. The
read regions of ``a`` covered 1.75x the tensor; the L2 rule (call working set past the 192 MiB L2) counted
the excess as re-reads that miss, so HBM went 544 -> 576 -> 592 MiB at 4, 8, 16 points per task and the
bandwidth term 401.7 -> 425.3 -> 437.2 us, although docs/performance.md and docs/calibration.md promise
grouping grid points into tasks does not change them.

The regions of a multi-point task now use the part's windows with a tile's abutting slices joined into
the tile's window (ptojax/mpmd/orchestrator.py ``_joined_windows``)."""
import jax
import jax.numpy as jnp
import pytest

import ptojax as pj

F32 = jnp.float32


def two(a, b):
    with pj.tile(vec=(32, 1024)), jax.named_scope("A"):
        c = a + b
    with pj.tile(vec=(32, 1024)), jax.named_scope("B"):
        return c * a


def _profile(tpb, rows):
    spec = jax.ShapeDtypeStruct((rows, 4096), F32)
    return pj.kernel(two, options={"tiles_per_block": tpb}).lower(spec, spec).compile().profile(compute=False)


def test_the_kernel_computes_each_tile_in_pieces():
    """The case this guards: 16-row slices of the 32-row tiles (else the test checks nothing new)."""
    spec = jax.ShapeDtypeStruct((256, 4096), F32)
    text = pj.kernel(two).lower(spec, spec).compile().as_text()
    assert "16x1024xf32" in text and "32x1024xf32" not in text


@pytest.mark.parametrize("tpb", [2, 4, 8, 16, "auto"])
def test_read_regions_cover_each_tensor_once(tpb):
    """Every call's read regions of ``a`` add up to the tensor, however the grid points are grouped."""
    tasks = _profile(tpb, 256).trace.graph.tasks
    a = min(r.buffer for t in tasks for r in t.reads)
    for stage in {t.stage for t in tasks}:
        read = sum(r.size for t in tasks if t.stage == stage for r in t.reads if r.buffer == a)
        assert read == 256 * 4096, (tpb, stage, read / (256 * 4096))


def test_hbm_bytes_and_bandwidth_do_not_depend_on_grouping():
    """Past the L2 (256 MiB per call): the HBM bytes and the bandwidth term at 1 point per task stay."""
    ref = _profile(1, 8192)
    hbm = sum(t.hbm for t in ref.trace.graph.tasks)
    for tpb in (2, 4, 8, 16, "auto"):
        profile = _profile(tpb, 8192)
        assert sum(t.hbm for t in profile.trace.graph.tasks) == hbm, tpb
        assert profile.bound.bandwidth == pytest.approx(ref.bound.bandwidth, rel=1e-9), tpb
