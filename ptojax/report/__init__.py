"""The tuning loop: a one-file HTML report of a profiled kernel, saved summaries, and their diff.

* :func:`build` (``build.py``) collects a report's data from a :class:`~ptojax.mpmd.Profile` (and
  the :class:`~ptojax.Compiled` kernel, for the lowering levels and the block graph) as plain
  JSON-able values; :func:`html` renders them (``render.py``; its style sheet and script are
  ``assets.py``); :func:`write` does both. ``Compiled.report(path, *args)`` and
  ``ptojax profile FILE:FUNC --shape ... --html report.html`` call it.
  The page is self-contained (inline CSS, SVG and a little JS; nothing is fetched): headline figures,
  the swimlane (one lane per used core, a colour per label, hover for a task's details, click a task
  to draw its dependency arrows), the per-core load (``load.py``: busy time per core, the cores far
  from the mean of their kind's busy cores and the labels whose tiles all ran on one core flagged, idle
  cores counted), the lower-bound table, time per label, idle time per core kind, the critical path,
  the largest bubbles, the fusion view
  (``fusion.py``: the ops before partition and the block each was merged into), a picture of the
  block graph and the four levels' text (``views.py`` renders the two tuning views). Blocks show the
  tasks they ran (``tiles_per_block="auto"`` groups tiles at run time). Arguments of the wrong kind, a
  profile that is not a run of ``compiled`` and paths that cannot be written raise
  :class:`~ptojax.PtoArgumentError` before any work.
* :func:`summary` / :func:`save_summary` (``summary.py``) — the saved form of a profile for
  comparisons: a JSON object with ``"format": "ptojax.profile-summary/1"``, ``makespan_us``, ``lower_bound_us``, ``bound_us``
  (per term), ``tasks``, ``utilisation`` and ``idle_us`` per core kind, ``label_us`` and
  ``label_tasks`` per label, the critical path's labels and ``load`` (the per-core load figures).
  ``ptojax profile --summary out.json`` writes it.
* :func:`diff` compares two profiles — :class:`Profile` objects, summaries, or paths to a summary JSON
  *or* a Chrome trace JSON (``Profile.save`` / ``--trace``: makespan, tasks, label times and
  utilisation are recovered from its events; the lower bound is not in a trace) — and returns a
  :class:`Diff` whose ``str`` is a table: makespan, lower bound, tasks, utilisation, the load
  (largest busy time over the mean, flagged and idle cores, single-core labels), time and tasks per
  label (rows ``label NAME us`` / ``label NAME tasks``).
  ``ptojax diff before.json after.json`` prints it.
"""
from ..lowering.block_graph import block_graph
from .build import build, load_options
from .render import html, write
from .summary import SUMMARY_FORMAT, Diff, diff, format_diff, load_summary, save_summary, summary

__all__ = ["SUMMARY_FORMAT", "Diff", "build", "block_graph", "diff", "format_diff", "html", "load_options",
           "load_summary", "save_summary", "summary", "write"]
