"""A report's data: everything the page shows, as JSON-able values taken from a profile and its
compiled kernel; pass options read from a file."""
from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path

from ..ascend.targets import target as get_target
from ..errors import PtoArgumentError
from ..lowering.block_graph import block_graph
from ..mpmd.trace import colour
from .fusion import fusion
from .summary import check_profile, kind_order, runs, summary, wrong

LEVELS = ("tensor", "tile", "block", "pto")
_BOUND_TERMS = (("critical_path", "critical path (each task + its dispatch overhead)"),
                ("cube", "cube work / AIC cores"), ("vector", "vector work / AIV cores"),
                ("bandwidth", "HBM bytes (the L2 rule) / HBM bandwidth"), ("scheduler", "tasks x scheduler cost / schedulers"),
                ("phases", "chained phases: earliest start + the cores' time (work, dispatch gaps, waves) + the chain after"))


def label_colours(titles) -> dict:
    """A colour per label, in the order of their names (:func:`~ptojax.mpmd.trace.colour`)."""
    return {t: colour(i) for i, t in enumerate(sorted(titles))}


def check_args(where: str, profile, compiled) -> None:
    """:class:`PtoArgumentError` from ``where`` unless ``profile`` is a Profile and ``compiled`` None or a
    :class:`~ptojax.Compiled` kernel."""
    from ..kernel import Compiled

    check_profile(where, profile)
    if compiled is not None and not isinstance(compiled, Compiled):
        raise wrong(where, "compiled", "the Compiled kernel the profile ran (pj.kernel(f).lower(*args).compile()) "
                    "or None", compiled)


def _check_pair(profile, compiled, graph) -> None:
    """A :class:`PtoArgumentError` unless ``profile`` is a run of ``compiled``: the same machine, and each
    block call's tasks are of the compiled kernel's programs and cover that program's grid once."""
    from ..execute import machine

    grids: dict = {}                                    # program -> its grid points in one block call
    for n in graph["nodes"]:
        per: dict = {}
        for p in n.get("parts", ()):
            per[p["program"]] = per.get(p["program"], 0) + math.prod(p["grid"])
        for program, points in per.items():
            grids.setdefault(program, set()).add(points)
    ran: dict = {}                                      # (block call, program) -> grid points its tasks ran
    for t in profile.trace.graph.tasks:
        if t.name not in ("copy", "fill") or t.index:   # the runtime's copies and fills are no program's
            ran[(t.stage, t.name)] = ran.get((t.stage, t.name), 0) + t.points
    wrong_programs = sorted({name for (_, name), points in ran.items() if points not in grids.get(name, ())})
    source, want = profile.trace.source, machine(get_target(compiled.options.target)).name
    if source is not None and source[:2] == compiled.signature[:2] and source[3] != compiled.options.passes:
        ran = dataclasses.replace(compiled.options, passes=source[3]).written_passes
        raise PtoArgumentError(f"pj.report: the profile is not a run of {compiled!r} (it ran with pass options "
                               f"{ran or 'none'}, the kernel is compiled with {compiled.options.written_passes or 'none'}"
                               "); pass the profile of that kernel, compiled.profile(*args)")
    if wrong_programs or profile.trace.machine.name != want:
        why = (f"it ran on {profile.trace.machine.name}, the kernel is compiled for {want}"
               if profile.trace.machine.name != want else
               f"its tasks of {', '.join(wrong_programs[:4])} cover other grids than this kernel's: another kernel "
               "or other shapes")
        raise PtoArgumentError(f"pj.report: the profile is not a run of {compiled!r} ({why}); pass the profile of "
                               "that kernel, compiled.profile(*args)")


def build(profile, compiled=None, *, title: str | None = None, options=None, levels: dict | None = None) -> dict:
    """Everything the report shows, as JSON-able values (numbers straight from ``profile``); a profile
    that is not a run of ``compiled`` raises :class:`PtoArgumentError`. ``levels``: each level's text
    where there is no ``compiled`` to print them (a polymorphic compile's)."""
    check_args("pj.report.build", profile, compiled)
    if levels is not None and not isinstance(levels, Mapping):
        raise PtoArgumentError(f"pj.report.build: levels must be a mapping of level name -> its text, got "
                               f"{type(levels).__name__}")
    graph = block_graph(compiled.lowering) if compiled is not None else None
    if graph is not None:
        _check_pair(profile, compiled, graph)
    trace, m = profile.trace, profile.trace.machine
    records = sorted(trace.records, key=lambda r: r.tid)
    host = bool(records) and records[0].host
    lanes = sorted({r.lane for r in records},
                   key=lambda kc: (kind_order(kc[0]), kc[1]))
    lane_of = {kc: i for i, kc in enumerate(lanes)}
    titles = {r.title for r in records}
    colours = label_colours(titles)
    critical = set(profile.critical_path)
    succs: dict = {}
    for r in records:
        for p in r.preds:
            succs.setdefault(p, []).append(r.tid)
    recs = [{"tid": r.tid, "title": r.title, "program": r.name, "label": r.label, "kind": r.kind, "core": r.core,
             "lane": lane_of[r.lane], "start_us": r.start * 1e6,
             "end_us": r.end * 1e6, "dispatch_us": r.dispatch * 1e6, "index": list(r.index), "stage": r.stage,
             "preds": list(r.preds), "succs": succs.get(r.tid, []), "critical": r.tid in critical}
            for r in records]
    bound = dataclasses.asdict(profile.bound)
    binding = max(bound, key=bound.get)
    used: dict = {}
    for kind, core in lanes:
        used[kind] = used.get(kind, 0) + 1
    busy: dict = {}
    label_tasks: dict = {}
    label_kinds: dict = {}
    for r in records:
        kind = "host" if r.host else r.kind
        busy[kind] = busy.get(kind, 0.0) + (r.end - r.start) * 1e6
        label_tasks[r.title] = label_tasks.get(r.title, 0) + 1
        label_kinds.setdefault(r.title, set()).add(r.kind)
    total_busy = sum(profile.label_us.values()) or 1.0
    by_tid = {r["tid"]: r for r in recs}
    path = []
    for tid in profile.critical_path:
        r = by_tid.get(tid)
        if r is None:
            continue
        ready = max((by_tid[p]["end_us"] for p in r["preds"] if p in by_tid), default=0.0)
        path.append({**{k: r[k] for k in ("tid", "title", "program", "kind", "core", "start_us", "end_us")},
                     "duration_us": r["end_us"] - r["start_us"], "wait_us": r["start_us"] - ready,
                     "lane": "{} {}".format(*lanes[r["lane"]])})
    bubbles = []
    for gap, kind, core, after in profile.bubbles(10):      # kind, core: the swimlane's (host, thread on a host run)
        lane = [x for x in recs if x["lane"] == lane_of[(kind, core)]]
        nxt = min((x for x in lane if x["start_us"] >= by_tid[after]["end_us"] and x["tid"] != after),
                  key=lambda x: x["start_us"], default=None)
        bubbles.append({"gap_us": gap, "kind": kind, "core": core, "after": after, "after_title": by_tid[after]["title"],
                        "from_us": by_tid[after]["end_us"], "before": nxt and nxt["tid"],
                        "before_title": nxt and nxt["title"]})
    nodes = [n for n in (graph or {}).get("nodes", ()) if n["kind"] == "block"]
    for n, ran in zip(nodes, _tasks_per_call(trace, len(nodes))):
        for p in n["parts"]:
            p["tasks"] = ran.get(p["program"], 0)
        n["tasks"] = sum(ran.values())
    name = title or (compiled.name if compiled is not None else None)
    summ = summary(profile, name=name)
    data = {
        "title": title or (compiled.name if compiled is not None else "kernel"),
        "signature": repr(compiled) if compiled is not None else "",
        "machine": getattr(m, "name", ""), "mode": trace.mode, "host": host,
        "makespan_us": profile.makespan_us, "lower_bound_us": profile.lower_bound_us, "tasks": profile.tasks,
        "bound": [{"term": k, "what": what, "us": bound[k] * 1e6, "binding": k == binding} for k, what in _BOUND_TERMS],
        "binding": profile.binding,                     # the term, with what dominates a binding phase
        "machine_model": {"cores": [list(c) for c in m.cores], "schedulers": m.schedulers,
                          "schedule_cost_us": m.schedule_cost * 1e6, "dispatch_latency_us": m.dispatch_latency * 1e6,
                          "bandwidth_GBps": m.bandwidth / 1e9},
        "utilisation": dict(profile.utilisation),
        "idle": [{"kind": k, "cores": n, "used": used.get(k, 0), "busy_us": busy.get(k, 0.0),
                  "idle_us": profile.idle_us[k], "utilisation": profile.utilisation[k]} for k, n in profile.lanes],
        "labels": [{"label": lab, "us": us, "tasks": label_tasks.get(lab, 0), "share": us / total_busy,
                    "kinds": sorted(label_kinds.get(lab, ()), key=kind_order), "colour": colours.get(lab, "#999")}
                   for lab, us in profile.label_us.items()],
        "critical_path": {"tids": list(profile.critical_path), "tasks": path,
                          "runs": runs([p["title"] for p in path]),
                          "work_us": sum(p["duration_us"] for p in path),
                          "length_us": profile.bound.critical_path * 1e6},      # its tasks + dispatch overheads
        "bubbles": bubbles,
        "lanes": [f"{k} {c}" for k, c in lanes],
        "unused_cores": {k: n - used.get(k, 0) for k, n in m.cores} if not host else {},
        "records": recs, "colours": colours,
        "options": options if options is not None else (compiled.options.written_passes if compiled is not None else {}),
        "graph": graph, "fusion": None, "levels": dict(levels or {}), "load": summ["load"], "summary": summ,
    }
    if compiled is not None:
        data["fusion"] = fusion(compiled.lowering, get_target(compiled.options.target).memory,
                                compiled.options.pass_options)
        blocks = data["fusion"]["blocks"]
        for b, ran in zip(blocks, _tasks_per_call(trace, len(blocks))):
            b["tasks"] = sum(ran.values())
        for level in LEVELS:
            try:
                data["levels"][level] = compiled.as_text(level)
            except Exception as err:  # noqa: BLE001 - a level without text is reported, not fatal
                data["levels"][level] = f"(no text: {type(err).__name__}: {err})"
    return data


def _tasks_per_call(trace, count) -> list[dict]:
    """Per block call (``count`` of them, in block-graph order), {program: tasks it ran} (what
    ``tiles_per_block="auto"`` made), over every run of a call in a loop; the runtime's copies are no
    call's."""
    out = [{} for _ in range(count)]
    tasks = trace.graph.tasks
    for r in trace.records:
        k = tasks[r.tid].call
        if 0 <= k < count:
            out[k][r.name] = out[k].get(r.name, 0) + 1
    return out


def load_options(path) -> dict:
    """Pass options from a JSON or TOML file (``.toml``): ``{"tiles": {...}, "tiles_per_block": {...}}``;
    a file that cannot be read or does not parse raises :class:`PtoArgumentError` naming it."""
    import tomllib

    if not isinstance(path, (str, os.PathLike)):
        raise wrong("pj.report.load_options", "path", "a str or os.PathLike", path)
    path = Path(path)
    toml = path.suffix == ".toml"
    try:
        with open(path, "rb") as f:
            return tomllib.load(f) if toml else json.load(f)
    except ValueError as err:                           # JSONDecodeError, TOMLDecodeError, UnicodeDecodeError
        raise PtoArgumentError(f"pass options {path}: not valid {'TOML' if toml else 'JSON'} ({type(err).__name__}: "
                               f"{err}); only JSON, or TOML in a .toml file, is accepted") from None
    except OSError as err:                              # no such file, a folder, no permission
        raise PtoArgumentError(f"pass options {path}: cannot read it ({type(err).__name__}: "
                               f"{err.strerror or err})") from None


__all__ = ["LEVELS", "build", "check_args", "label_colours", "load_options"]
