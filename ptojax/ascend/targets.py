"""Ascend targets as data: one frozen :class:`Target` per chip generation, all numbers per die.

Sources (``shared/reference/``): ``deepseek_v32_and_ascend_hw.md`` §3 ("HW §3.x") quoting hicann/pypto's
platform file ``A2A3.ini`` (SoC Ascend910B1, arch dav-c220) and its cost model
(``framework/src/cost_model/simulation``), and ``pypto_and_pto_isa.md`` §4-§5 ("ISA §x").

A2 and A3 share the AI-core generation (``NpuArch=2201``, dav-c220, split cube/vector architecture), so
every number here is the same for both. They differ above the die only: an **A3 (910C) chip is two
910B-class dies in one package**, each die a separate device with its own 24 AIC / 48 AIV, HBM and L2
(HW §3.1); an A2 (910B1) chip is one die. Per-chip figures are therefore 2x the A3 numbers here
(e.g. 727 TFLOPS fp16, 3.2 TB/s HBM). The cost model works per die, as the runtime schedules per device.

Rates are bytes per AI-core clock cycle **per core** (ini ``[AICoreMemoryRates]``; the unit is not
stated in the file, bytes/cycle is the reading that gives 24 x 32 B x 1.85 GHz = 1.42 TB/s, the
die's HBM figure, HW §3.4).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import PtoArgumentError
from ..lowering.memory import ASCEND_CORE, CoreMemory

MIB = 1024 * 1024


@dataclasses.dataclass(frozen=True)
class Target:
    """One Ascend die: cores, clock, compute rates, per-core data paths, memory system, scheduler."""

    name: str

    # ---- cores (HW §3.1: ini [SoCInfo] for 910B1 / A3 Ascend910_9391: 24 AIC + 48 AIV per die;
    #      ISA §5 / simpler hardware.md: 8 AICPU cores, 6 usable)
    aic: int = 24                          # cube cores (AIC): scalar + cube + MTE1/MTE2 + FixPipe
    aiv: int = 48                          # vector cores (AIV): scalar + vector + MTE2/MTE3; 1 AIC : 2 AIV
    aicpu: int = 6                         # AICPU scheduler cores

    # ---- clock (HW §3.2: ini cube_freq 1850 MHz; npu-smi "Aicore Freq 1850" on A3)
    clock_hz: float = 1.85e9

    # ---- per-core buffers: reused from the lowering, never duplicated (UB/L1/L0A/L0B/L0C, alignment)
    memory: CoreMemory = ASCEND_CORE

    # ---- cube MACs per cycle per AIC (HW §3.2: ini [DtypeMKN] fractals; one fractal MMAD per cycle)
    cube_macs_f16: int = 4096              # fp16/bf16: M,N,K = 16,16,16 -> 16*16*16
    cube_macs_i8: int = 8192               # int8: 16,32,16 (K doubled) -> 8192 = 2x fp16
    # fp32 (mmad f32f32f32, HF32/TF32-like): no published rate in the sources. ASSUMPTION: the cube's
    # K edge is a fixed 32 bytes (int8 K=32, fp16 K=16, int4 K=64 all follow it), so fp32 has K = 8:
    # fractal 16x8x16 = 2048 MAC/cycle, half the fp16 rate.
    cube_macs_f32: int = 2048
    cube_k_bytes: int = 32                 # the fractal's K edge in bytes (see above); M = N = 16
    # Issue cost of one TMATMUL beyond its MACs: PyPTO PostSimulatorA2A3 A_MUL_B fixed term
    # r1 = 0.0107 us x 2000 cycles/us = 21 cycles (A_MULACC_B: 0.0103 -> 21) (HW §3.6).
    cube_issue_cycles: float = 21.0

    # ---- vector unit (HW §3.3: one repeat = 8 datablocks x 32 B = 256 B: 128 fp16 / 64 fp32 lanes)
    vector_bytes_per_repeat: int = 256
    # Cycles per 256 B repeat of a simple op (add). 1 would be the issue-limited peak (HW §3.3 "upper
    # bound if one repeat/cycle"); we take 2: hicann/pypto's fast simulator prices a vector op at
    # (bytes/256)*2 cycles, and its calibrated PostSimulator ADD slope (2.40457 us/MB, parallelRatio 2,
    # 2000 cycles/us) comes to 2.46 cycles per 256 B -- both say ~2 (HW §3.6). Other ops scale by their
    # PostSimulator slope relative to ADD (cost.py).
    vector_cycles_per_repeat: float = 2.0

    # ---- sort unit of the vector core: TSORT32 issues vbitsort (one repeat sorts 32 elements into
    #      (value, index) structs), TMRGSORT vmrgsort4 (one repeat merges four sorted lists). Measured
    #      on a 910B3 (dav-2201, the A2/A3 AI core) for pto-isa's a2a3 cost model (cann/pto-isa merge
    #      request 1192, include/pto/costmodel/a2a3/cce_costmodel/cce_costmodel_vector_compute.hpp):
    #      vbitsort = 16 cycles per repeat + 21; vmrgsort4 = 78 cycles per repeat of four 32-struct
    #      lists (128 structs written) + 20. The merge was measured on 32-struct lists only; a merge is
    #      priced by the structs it writes, one after another, at a rate FITTED to pto-isa's top-k
    #      (kernels/manual/a2a3/topk, fp32 4 800 rows x 1 024: 324.1 us, vector pipe 94 % busy on 48
    #      cores = 5 636 cycles a row): a row's tsort32 (533 cycles at the measured rate), tgather and
    #      index passes (388) and its three 1 024-struct merges fill that vector time at 194 cycles per
    #      128 structs, 2.5x the 32-struct measurement (docs/calibration.md).
    sort32_cycles: float = 16.0            # per 32-element group
    sort32_startup: float = 21.0           # per vbitsort (TSORT32 issues one per row)
    merge_cycles: float = 194.0 / 128      # per struct written (fitted, see above)
    merge_startup: float = 20.0            # per vmrgsort4 (one per TMRGSORT)

    # ---- per-core data paths, bytes/cycle (ini [AICoreMemoryRates], HW §3.4)
    gm_read_hbm: float = 32.0              # MTE2 GM->L1/UB when the bytes come from HBM: ddr read 32
    gm_read_l2: float = 110.0              # MTE2 GM->L1/UB when they hit L2: l2 read 110
    #   (cross-check: PyPTO COPY_IN slope 2.613 us/MB, parallelRatio 2 -> ~100 B/cycle)
    gm_write_l2: float = 86.0              # writes to GM land in L2 (write-back): l2 write 86
    l1_to_l0a: float = 512.0               # MTE1 L1->L0A: l1_to_l0_a_rate
    l1_to_l0b: float = 256.0               # MTE1 L1->L0B: l1_to_l0_b_rate
    l1_to_ub: float = 128.0                # l1_to_ub_rate (coupled-arch path; kept for completeness)
    l0c_to_ub: float = 256.0               # FixPipe L0C->UB (and L0C->L1): l0_c_to_ub_rate
    ub_to_gm: float = 64.0                 # MTE3 UB->GM: ub_to_ddr_rate = ub_to_l2_rate = 64
    ub_to_l1: float = 128.0                # ub_to_l1_rate
    # FixPipe L0C->GM has no own ini rate: it runs at most at l0_c_to_ub 256 and its GM writes at the
    # L2 write rate, so min(256, 86) = 86 B/cycle.
    # Indexed rows (MGATHER/MSCATTER): each row is its own burst. ASSUMPTION: one L2-hit latency of
    # occupancy per row (PyPTO cost-model config: L2 hit 50 cycles, HW §3.6); no published figure.
    row_access_cycles: float = 50.0
    # Fixed issue cost of one DMA instruction (tload/tstore): PostSimulator COPY_IN r1 0.00241 us and
    # COPY_OUT r1 0.00195 us x 2000 cycles/us = 5 / 4 cycles (HW §3.6).
    dma_issue_cycles: float = 5.0
    # Scalar-unit element accesses of the real text (SCALAR pipe occupancy). load_scalar (one GM
    # element): one L2-hit latency, 50 cycles (PyPTO cost-model config, HW §3.6). tgetval / tsetval
    # (one UB element): ASSUMPTION, no published figure -- the scalar unit reads UB only after a
    # vector->scalar flag (set_flag/wait_flag V_S), a few dozen cycles: 30.
    scalar_gm_cycles: float = 50.0
    scalar_ub_cycles: float = 30.0

    # ---- latencies exposed once per block (pipeline fill), cycles: PyPTO PostSimulatorA2A3 adds
    #      +1400 cycles to a COPY_IN from GM and +300 to a COPY_OUT (HW §3.6; §5 "GM latency ~1400")
    gm_read_latency: float = 1400.0
    gm_write_latency: float = 300.0

    # ---- memory system per die (HW §3.3, §3.4)
    l2_bytes: int = 192 * MIB              # ini l2_size = 201326592; the runtime's L2 rule (mpmd/l2.py)
    hbm_bytes: int = 64 * 1024 * MIB       # ini memory_size (about 61.3 GiB user-visible)
    # HBM bandwidth: 1.6 TB/s is the nominal HBM2e figure; 1.42 TB/s is what PyPTO's own platform file
    # implies (ddr 32 B/cycle x 24 AIC x 1.85 GHz). We use 1.42 as the *sustainable* die bandwidth: it
    # is the figure the per-core rates above are calibrated to (so 24 streaming AICs exactly saturate
    # the die), it is 89 % of nominal -- the usual achievable fraction of a DRAM peak -- and the seed's
    # 13 us Indexer Prolog floor implies only ~0.97 TB/s, so 1.6 would be optimistic.
    hbm_bytes_per_s: float = 1.42e12
    hbm_nominal_bytes_per_s: float = 1.6e12

    # ---- scheduler (seconds)
    # AICPU -> AICore dispatch latency per task (dispatch -> core start): "pickup latency ~0.8 us"
    # (hw-native-sys/pypto docs) to 1.84 us measured head overhead (simpler Case1); ~1 us (ISA §4.2,
    # runtimes §1).
    dispatch_s: float = 1.0e-6
    # AICPU CPU work per task (resolve dependencies, build payload, completion): PyPTO's cost model
    # charges 200 + 390 + 240 cycles (~0.45 us) and simpler's Case1 measured 7.66 us with cache
    # maintenance; docs/design.md: "a few us". We take 2 us.
    aicpu_task_s: float = 2.0e-6

    # ------------------------------------------------------------------------------------------ derived
    def cube_macs(self, dtype) -> int:
        """MACs per cycle of one AIC for operands of ``dtype``."""
        itemsize = np.dtype(dtype).itemsize
        if itemsize == 1:
            return self.cube_macs_i8
        if itemsize == 2:
            return self.cube_macs_f16
        if itemsize == 4:
            return self.cube_macs_f32
        raise PtoArgumentError(f"target {self.name}: the cube has no rate for dtype {np.dtype(dtype).name}")

    def fractal_k(self, dtype) -> int:
        """K edge of the cube fractal: 16 for fp16/bf16, 32 for int8, 8 for fp32 (32-byte K edge)."""
        return self.cube_k_bytes // np.dtype(dtype).itemsize

    @property
    def peak_flops_f16(self) -> float:
        """Dense fp16 FLOP/s of the die: 2 x 4096 x 24 x 1.85e9 = 363.7 TFLOPS (HW §3.2)."""
        return 2.0 * self.cube_macs_f16 * self.aic * self.clock_hz

    def gm_read_rate(self, l2_hit: float) -> float:
        """Effective MTE2 bytes/cycle when a fraction ``l2_hit`` of the bytes hits L2."""
        return 1.0 / (l2_hit / self.gm_read_l2 + (1.0 - l2_hit) / self.gm_read_hbm)

    def cores(self, kind: str) -> int:
        return {"AIC": self.aic, "AIV": self.aiv}[kind]


A2 = Target("a2")          # Atlas A2 (910B1): one die per chip
A3 = Target("a3")          # Atlas A3 (910C): two such dies per chip, each a device
TARGETS = {"a2": A2, "a3": A3}


def target(name) -> Target:
    """The :class:`Target` called ``name`` ("a2" or "a3"); a Target is returned as is."""
    if isinstance(name, Target):
        return name
    try:
        return TARGETS[str(name).lower()]
    except KeyError:
        raise PtoArgumentError(f"unknown Ascend target {name!r}; known targets: {', '.join(TARGETS)}") from None
