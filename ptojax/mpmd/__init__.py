"""The MPMD task runtime: orchestration, dependency-driven dispatch to cube and vector cores, traces.

Target-agnostic: a :class:`Backend` turns a block instance into a callable and a cost.
``orchestrate`` unrolls a Block graph into a :class:`TaskGraph`; ``simulate`` (event-driven,
deterministic) or ``run_threads`` (host threads) execute it and return a :class:`Trace`; ``replay``
runs a replayable plan's tasks again on new inputs (``Plan.rebind``).
"""
from .executors import Machine, PtoTaskError, replay, run_threads, simulate
from .graph import PtoTaskGraphError, Region, Task, TaskGraph, TaskTable
from .orchestrator import Backend, Plan, PtoOrchestrationError, orchestrate
from .trace import Profile, Record, Trace

__all__ = ["Backend", "Machine", "Plan", "Profile", "PtoOrchestrationError", "PtoTaskError", "PtoTaskGraphError",
           "Record", "Region", "Task", "TaskGraph", "TaskTable", "Trace", "orchestrate", "replay", "run_threads", "simulate"]
