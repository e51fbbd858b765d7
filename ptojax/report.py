"""The tuning loop: a one-file HTML report of a profiled kernel, saved summaries, and their diff.

* :func:`build` collects a report's data from a :class:`~ptojax.mpmd.Profile` (and the
  :class:`~ptojax.Compiled` kernel, for the lowering levels and the block graph) as plain JSON-able
  values; :func:`html` renders them; :func:`write` does both. ``Compiled.report(path, *args)`` and
  ``ptojax profile FILE:FUNC --shape ... --html report.html`` call it.
  The page is self-contained (inline CSS, SVG and a little JS; nothing is fetched): headline figures,
  the swimlane (one lane per used core, a colour per label, hover for a task's details, click a task
  to draw its dependency arrows), the lower-bound table, time per label, idle time per core kind,
  the critical path, the largest bubbles, a picture of the block graph and the four levels' text.
* :func:`summary` / :func:`save_summary` — the saved form of a profile for comparisons: a JSON object
  with ``"format": "ptojax.profile-summary/1"``, ``makespan_us``, ``lower_bound_us``, ``bound_us``
  (per term), ``tasks``, ``utilisation`` and ``idle_us`` per core kind, ``label_us`` and
  ``label_tasks`` per label, and the critical path's labels. ``ptojax profile --summary out.json``
  writes it.
* :func:`diff` compares two profiles — :class:`Profile` objects, summaries, or paths to a summary JSON
  *or* a Chrome trace JSON (``Profile.save`` / ``--trace``: makespan, tasks, label times and
  utilisation are recovered from its events; the lower bound is not in a trace) — and returns a
  :class:`Diff` whose ``str`` is a table: makespan, lower bound, tasks, utilisation, time and tasks
  per label. ``ptojax diff before.json after.json`` prints it.
"""
from __future__ import annotations

import dataclasses
import html as _html
import json
import math
from pathlib import Path

SUMMARY_FORMAT = "ptojax.profile-summary/1"
LEVELS = ("tensor", "tile", "block", "pto")
_BOUND_TERMS = (("critical_path", "critical path (each task + its dispatch overhead)"),
                ("cube", "cube work / AIC cores"), ("vector", "vector work / AIV cores"),
                ("bandwidth", "GM bytes / bandwidth"), ("scheduler", "tasks x scheduler cost / schedulers"),
                ("phases", "chained phases: earliest start + the cores' time (work, dispatch gaps, waves) + the chain after"))
# Distinct colours for labels (Tableau 10, then lighter companions).
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac", "#86bcb6", "#f1ce63", "#a0cbe8", "#ffbe7d", "#8cd17d", "#d4a6c8", "#fabfd2", "#d7b5a6",
           "#79706e", "#499894")
CORE_STYLE = {"AIC": ("#dbeafe", "#1d4ed8"), "AIV": ("#dcfce7", "#15803d"), "host": ("#f3f4f6", "#374151")}


# ------------------------------------------------------------------------------------------- data
def _kind_order(kind: str) -> tuple:
    return ({"AIC": 0, "AIV": 1}.get(kind, 2), kind)


def label_colours(titles) -> dict:
    return {t: PALETTE[i % len(PALETTE)] for i, t in enumerate(sorted(titles))}


def _runs(labels) -> list:
    """Run-length encode a label sequence: [[label, count], ...]."""
    out: list = []
    for lab in labels:
        if out and out[-1][0] == lab:
            out[-1][1] += 1
        else:
            out.append([lab, 1])
    return out


def summary(profile, *, name: str | None = None, options=None) -> dict:
    """The saved form of a profile (see the module docstring); JSON-able."""
    trace = profile.trace
    tasks = trace.graph.tasks
    counts: dict = {}
    for r in trace.records:
        counts[r.title] = counts.get(r.title, 0) + 1
    return {
        "format": SUMMARY_FORMAT, "name": name, "machine": getattr(trace.machine, "name", ""), "mode": trace.mode,
        "makespan_us": profile.makespan_us, "lower_bound_us": profile.lower_bound_us,
        "bound_us": {k: v * 1e6 for k, v in dataclasses.asdict(profile.bound).items()},
        "tasks": profile.tasks, "utilisation": dict(profile.utilisation), "idle_us": dict(profile.idle_us),
        "label_us": dict(profile.label_us), "label_tasks": {k: counts.get(k, 0) for k in profile.label_us},
        "critical_path": _runs([tasks[t].label or tasks[t].name for t in profile.critical_path]),
        "options": options,
    }


def save_summary(profile, path, **kw) -> Path:
    """Write :func:`summary` of ``profile`` as JSON to ``path`` (for ``ptojax diff``); returns the path."""
    path = Path(path)
    path.write_text(json.dumps(summary(profile, **kw), indent=1, default=str))
    return path


def _from_chrome(trace: dict) -> dict:
    """A summary from a Chrome trace (``Profile.save``): no lower bound (the trace does not hold it)."""
    lanes, busy, label_us, label_tasks, span = {}, {}, {}, {}, 0.0
    events = trace["traceEvents"]
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            kind = e["args"]["name"].split(" ")[0]
            lanes[kind] = lanes.get(kind, 0) + 1
    n = 0
    for e in events:
        if e.get("ph") != "X":
            continue
        n += 1
        kind = e.get("cat", "")
        busy[kind] = busy.get(kind, 0.0) + e["dur"]
        label_us[e["name"]] = label_us.get(e["name"], 0.0) + e["dur"]
        label_tasks[e["name"]] = label_tasks.get(e["name"], 0) + 1
        span = max(span, e["ts"] + e["dur"])
    name = next((e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"), "")
    util = {k: busy.get(k, 0.0) / (max(span, 1e-12) * c) for k, c in lanes.items()}
    label_us = dict(sorted(label_us.items(), key=lambda kv: -kv[1]))
    return {"format": SUMMARY_FORMAT, "name": name, "machine": name, "mode": "", "makespan_us": span,
            "lower_bound_us": None, "bound_us": {}, "tasks": n, "utilisation": util,
            "idle_us": {k: span * lanes[k] - busy.get(k, 0.0) for k in lanes}, "label_us": label_us,
            "label_tasks": {k: label_tasks[k] for k in label_us}, "critical_path": [], "options": None}


def load_summary(source) -> dict:
    """A summary from a :class:`Profile`, a summary dict, or a path to a summary or Chrome trace JSON."""
    if hasattr(source, "trace") and hasattr(source, "makespan_us"):
        return summary(source)
    if isinstance(source, (str, Path)):
        with open(source) as f:
            source = json.load(f)
    if isinstance(source, dict) and "traceEvents" in source:
        return _from_chrome(source)
    if isinstance(source, dict) and source.get("format") == SUMMARY_FORMAT:
        return source
    from .errors import PtoArgumentError
    raise PtoArgumentError("ptojax diff: expected a Profile, a profile summary (ptojax.report.save_summary, "
                           "ptojax profile --summary) or a Chrome trace JSON (Profile.save, ptojax profile --trace)")


@dataclasses.dataclass
class Diff:
    """Two profile summaries side by side; ``str(diff)`` is the table, ``rows`` its lines as tuples
    ``(what, before, after, change)`` (numbers; None where a side lacks the figure)."""

    before: dict
    after: dict
    rows: list

    @property
    def makespan_ratio(self) -> float:
        """Makespan after / before (below 1: faster)."""
        return self.after["makespan_us"] / max(self.before["makespan_us"], 1e-12)

    def __str__(self) -> str:
        return format_diff(self)


def diff(before, after) -> Diff:
    """Compare two profiles (see :func:`load_summary` for what each may be)."""
    a, b = load_summary(before), load_summary(after)
    rows = [("makespan us", a["makespan_us"], b["makespan_us"]),
            ("lower bound us", a.get("lower_bound_us"), b.get("lower_bound_us")),
            ("tasks", a["tasks"], b["tasks"])]
    for kind in sorted(set(a["utilisation"]) | set(b["utilisation"]), key=_kind_order):
        rows.append((f"utilisation {kind} %", _pct(a["utilisation"].get(kind)), _pct(b["utilisation"].get(kind))))
    labels = list(a["label_us"]) + [k for k in b["label_us"] if k not in a["label_us"]]
    for lab in labels:
        rows.append((f"{lab} us", a["label_us"].get(lab), b["label_us"].get(lab)))
        rows.append((f"{lab} tasks", a["label_tasks"].get(lab), b["label_tasks"].get(lab)))
    out = [(w, x, y, None if x is None or y is None else y - x) for w, x, y in rows]
    return Diff(a, b, out)


def _pct(u):
    return None if u is None else 100.0 * u


def _num(v, integer=False) -> str:
    if v is None:
        return "-"
    return f"{v:d}" if integer else f"{v:.2f}"


def format_diff(d: Diff) -> str:
    """The text table of a :class:`Diff` (what ``str(diff)`` returns)."""
    width = max(22, max(len(r[0]) for r in d.rows) + 2)
    lines = [f"{'':<{width}}{'before':>11}{'after':>11}{'change':>11}{'':>9}"]
    for what, x, y, change in d.rows:
        integer = what == "tasks" or what.endswith(" tasks")
        rel = ""
        if change is not None and x and not what.startswith("utilisation"):
            rel = f"{100.0 * change / x:+.1f}%"
        if change is not None and not integer and abs(change) < 5e-3:
            change = 0.0
        ch = "-" if change is None else (f"{change:+d}" if integer else f"{change:+.2f}")
        lines.append(f"{what:<{width}}{_num(x, integer):>11}{_num(y, integer):>11}{ch:>11}{rel:>9}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- block graph
def block_graph(lowering) -> dict:
    """The Block graph as nodes and GM edges: kernel inputs, block calls (programs, core kinds,
    instances), outputs; reshapes are followed through, block calls inside loops keep the loop."""
    from ._jax import Literal, Var
    from .lowering import ir
    from .lowering.walk import body_of

    nodes, edges = [], {}

    def desc(aval):
        return f"{aval.dtype.name}{list(aval.shape)}"

    def nbytes(aval):
        return int(math.prod(aval.shape)) * aval.dtype.itemsize

    def add_edge(src, dst, aval):
        key = (src, dst)
        e = edges.setdefault(key, {"src": src, "dst": dst, "tensors": [], "bytes": 0})
        d = desc(aval)
        if d not in e["tensors"]:
            e["tensors"].append(d)
            e["bytes"] += nbytes(aval)

    closed = lowering.block
    env: dict = {}
    for i, v in enumerate(closed.jaxpr.invars):
        nodes.append({"id": len(nodes), "kind": "input", "title": f"input {i}", "detail": desc(v.aval)})
        env[v] = {nodes[-1]["id"]}

    def srcs(env, v):
        return set() if isinstance(v, Literal) else env.get(v, set())

    def walk(jaxpr, env, loop):
        for eqn in jaxpr.eqns:
            ins = [srcs(env, v) for v in eqn.invars]
            name = eqn.primitive.name
            if eqn.primitive is ir.block_call_p:
                spec = eqn.params["spec"]
                progs = [p.program for p in spec.parts]
                parts = [{"program": p.program.name, "core": p.program.core, "grid": list(p.shape),
                          "tiles_per_block": p.tiles_per_block, "instances": p.instances} for p in spec.parts]
                label = progs[0].label
                nid = len(nodes)
                nodes.append({"id": nid, "kind": "block", "title": label or progs[0].name, "label": label,
                              "core": progs[0].core, "parts": parts, "loop": loop,
                              "instances": sum(p["instances"] for p in parts),
                              "detail": ", ".join(desc(v.aval) for v in eqn.outvars)})
                for v, s in zip(eqn.invars, ins):
                    for src in s:
                        add_edge(src, nid, v.aval)
                for v in eqn.outvars:
                    env[v] = {nid}
            elif name in ("scan", "while", "cond"):
                p = eqn.params
                tag = f"{loop + ' / ' if loop else ''}{name}"
                if name == "scan":
                    body, _ = body_of(p["jaxpr"])
                    inner = ins[:len(body.invars)]
                    ncarry = p["num_carry"]
                    bodies = [(body, inner)]
                    carry_in = ins[p["num_consts"]:p["num_consts"] + ncarry]
                elif name == "while":
                    body, _ = body_of(p["body_jaxpr"])
                    cn = p["cond_nconsts"]
                    bodies = [(body, ins[cn:])]
                    carry_in = ins[cn + p["body_nconsts"]:]
                else:
                    bodies = [(body_of(b)[0], ins[1:]) for b in p["branches"]]
                    carry_in = [set() for _ in eqn.outvars]
                outs = [set(c) for c in carry_in] + [set() for _ in range(len(eqn.outvars) - len(carry_in))]
                for body, inner in bodies:
                    sub = {v: set(s) for v, s in zip(body.invars, inner)}
                    walk(body, sub, tag)
                    for j, v in enumerate(body.outvars[:len(eqn.outvars)]):
                        outs[j] |= srcs(sub, v)
                for v, s in zip(eqn.outvars, outs):
                    env[v] = s
            else:                                   # reshape (a GM view) or scalar work on the host
                union = set().union(*ins) if ins else set()
                for v in eqn.outvars:
                    env[v] = set(union)

    walk(closed.jaxpr, env, "")
    for i, v in enumerate(closed.jaxpr.outvars):
        nid = len(nodes)
        nodes.append({"id": nid, "kind": "output", "title": f"output {i}",
                      "detail": desc(v.aval) if isinstance(v, Var) else "constant"})
        for src in (env.get(v, set()) if isinstance(v, Var) else set()):
            add_edge(src, nid, v.aval)
    return {"nodes": nodes, "edges": list(edges.values())}


def layout_graph(graph: dict, node_w=200, node_h=50, gap_x=24, gap_y=64, margin=20) -> dict:
    """Layered layout (top to bottom): layer = longest path from a source, order by barycentres."""
    nodes, edges = graph["nodes"], graph["edges"]
    preds = {n["id"]: [] for n in nodes}
    succs = {n["id"]: [] for n in nodes}
    for e in edges:
        preds[e["dst"]].append(e["src"])
        succs[e["src"]].append(e["dst"])
    layer = {}
    for n in nodes:                                 # node ids are in a topological (program) order
        nid = n["id"]
        layer[nid] = 0 if n["kind"] == "input" else 1 + max((layer[p] for p in preds[nid]), default=-1)
    out_layer = max(layer.values(), default=0) + (0 if any(n["kind"] == "output" for n in nodes) else 0)
    for n in nodes:
        if n["kind"] == "output":
            layer[n["id"]] = max(out_layer, layer[n["id"]])
    depth = max(layer.values(), default=0) + 1
    rows = [[n["id"] for n in nodes if layer[n["id"]] == d] for d in range(depth)]
    pos = {}
    for row in rows:
        for i, nid in enumerate(row):
            pos[nid] = float(i)
    for _ in range(4):                              # barycentre sweeps, down then up
        for d in range(1, depth):
            rows[d].sort(key=lambda nid: (sum(pos[p] for p in preds[nid]) / len(preds[nid]) if preds[nid] else pos[nid]))
            for i, nid in enumerate(rows[d]):
                pos[nid] = float(i)
        for d in range(depth - 2, -1, -1):
            rows[d].sort(key=lambda nid: (sum(pos[s] for s in succs[nid]) / len(succs[nid]) if succs[nid] else pos[nid]))
            for i, nid in enumerate(rows[d]):
                pos[nid] = float(i)
    widest = max((len(r) for r in rows), default=1)
    width = 2 * margin + widest * node_w + (widest - 1) * gap_x
    xy = {}
    for d, row in enumerate(rows):
        row_w = len(row) * node_w + (len(row) - 1) * gap_x
        x0 = (width - row_w) / 2
        for i, nid in enumerate(row):
            xy[nid] = (x0 + i * (node_w + gap_x), margin + d * (node_h + gap_y))
    height = 2 * margin + depth * node_h + (depth - 1) * gap_y
    return {"xy": xy, "width": width, "height": height, "node_w": node_w, "node_h": node_h}


# ------------------------------------------------------------------------------------------ build
def build(profile, compiled=None, *, title: str | None = None, options=None) -> dict:
    """Everything the report shows, as JSON-able values (numbers straight from ``profile``)."""
    trace, m = profile.trace, profile.trace.machine
    records = sorted(trace.records, key=lambda r: r.tid)
    host = bool(records) and records[0].host
    lanes = sorted({(("host", r.core) if r.host else (r.kind, r.core)) for r in records},
                   key=lambda kc: (_kind_order(kc[0]), kc[1]))
    lane_of = {kc: i for i, kc in enumerate(lanes)}
    titles = {r.title for r in records}
    colours = label_colours(titles)
    critical = set(profile.critical_path)
    succs: dict = {}
    for r in records:
        for p in r.preds:
            succs.setdefault(p, []).append(r.tid)
    recs = [{"tid": r.tid, "title": r.title, "program": r.name, "label": r.label, "kind": r.kind, "core": r.core,
             "lane": lane_of[("host", r.core) if r.host else (r.kind, r.core)], "start_us": r.start * 1e6,
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
        busy[r.kind] = busy.get(r.kind, 0.0) + (r.end - r.start) * 1e6
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
                     "duration_us": r["end_us"] - r["start_us"], "wait_us": r["start_us"] - ready})
    bubbles = []
    for gap, kind, core, after in profile.bubbles(10):
        lane = [x for x in recs if x["kind"] == kind and x["core"] == core]
        nxt = min((x for x in lane if x["start_us"] >= by_tid[after]["end_us"] and x["tid"] != after),
                  key=lambda x: x["start_us"], default=None)
        bubbles.append({"gap_us": gap, "kind": kind, "core": core, "after": after, "after_title": by_tid[after]["title"],
                        "from_us": by_tid[after]["end_us"], "before": nxt and nxt["tid"],
                        "before_title": nxt and nxt["title"]})
    data = {
        "title": title or (compiled.name if compiled is not None else "kernel"),
        "signature": repr(compiled) if compiled is not None else "",
        "machine": getattr(m, "name", ""), "mode": trace.mode, "host": host,
        "makespan_us": profile.makespan_us, "lower_bound_us": profile.lower_bound_us, "tasks": profile.tasks,
        "bound": [{"term": k, "what": what, "us": bound[k] * 1e6, "binding": k == binding} for k, what in _BOUND_TERMS],
        "machine_model": {"cores": [list(c) for c in m.cores], "schedulers": m.schedulers,
                          "schedule_cost_us": m.schedule_cost * 1e6, "dispatch_latency_us": m.dispatch_latency * 1e6,
                          "bandwidth_GBps": m.bandwidth / 1e9},
        "utilisation": dict(profile.utilisation),
        "idle": [{"kind": k, "cores": n, "used": used.get(k, 0), "busy_us": busy.get(k, 0.0),
                  "idle_us": profile.idle_us[k], "utilisation": profile.utilisation[k]} for k, n in m.cores],
        "labels": [{"label": lab, "us": us, "tasks": label_tasks.get(lab, 0), "share": us / total_busy,
                    "kinds": sorted(label_kinds.get(lab, ()), key=_kind_order), "colour": colours.get(lab, "#999")}
                   for lab, us in profile.label_us.items()],
        "critical_path": {"tids": list(profile.critical_path), "tasks": path,
                          "runs": _runs([p["title"] for p in path]),
                          "work_us": sum(p["duration_us"] for p in path)},
        "bubbles": bubbles,
        "lanes": [f"{k} {c}" for k, c in lanes],
        "unused_cores": {k: n - used.get(k, 0) for k, n in m.cores} if not host else {},
        "records": recs, "colours": colours,
        "options": options if options is not None else (_thaw(compiled.options.passes) if compiled is not None else {}),
        "graph": None, "levels": {},
        "summary": summary(profile, name=title or (compiled.name if compiled is not None else None)),
    }
    if compiled is not None:
        data["graph"] = block_graph(compiled.lowering)
        for level in LEVELS:
            try:
                data["levels"][level] = compiled.as_text(level)
            except Exception as err:  # noqa: BLE001 - a level without text is reported, not fatal
                data["levels"][level] = f"(no text: {type(err).__name__}: {err})"
    return data


def _thaw(v):
    if isinstance(v, tuple) and v and all(isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str) for x in v):
        return {k: _thaw(x) for k, x in v}
    if isinstance(v, tuple):
        return [_thaw(x) for x in v]
    return v


# ----------------------------------------------------------------------------------------- render
def _e(x) -> str:
    return _html.escape(str(x), quote=True)


def _nice_step(span: float, target: int = 10) -> float:
    raw = span / max(target, 1)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for f in (1, 2, 2.5, 5, 10):
        if raw <= f * mag:
            return f * mag
    return 10 * mag


def _swimlane_svg(data: dict) -> str:
    recs, lanes = data["records"], data["lanes"]
    left, right, top, gap = 78, 16, 26, 3
    lane_h = 16 if len(lanes) <= 40 else 11
    plot_w = 1180
    span = max(data["makespan_us"], 1e-9)
    sx = plot_w / span
    height = top + len(lanes) * (lane_h + gap) + 8
    width = left + plot_w + right
    out = [f'<svg id="swimlane" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" data-scale="{sx:.6f}" data-left="{left}" data-top="{top}" '
           f'data-lane="{lane_h + gap}" data-plot="{plot_w}" data-right="{right}">',
           '<defs><marker id="arr-in" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" '
           'orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#d97706"/></marker>'
           '<marker id="arr-out" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" '
           'orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#7c3aed"/></marker></defs>',
           f'<rect class="bg" x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>']
    step = _nice_step(span)
    t = 0.0
    while t <= span * 1.0001:
        x = left + t * sx
        out.append(f'<line class="tk" data-t="{t:g}" x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{height - 6}" '
                   f'stroke="#e5e7eb"/><text class="tick tk" data-t="{t:g}" x="{x:.1f}" y="{top - 8}">{t:g}</text>')
        t += step
    out.append(f'<text id="tunit" x="{left + plot_w}" y="{height - 1}" class="tick" text-anchor="end">time (µs)</text>')
    for i, name in enumerate(lanes):
        y = top + i * (lane_h + gap)
        kind = name.split(" ")[0]
        fill = CORE_STYLE.get(kind, CORE_STYLE["host"])[0]
        out.append(f'<rect class="lanebg" x="{left}" y="{y}" width="{plot_w}" height="{lane_h}" fill="{fill}" opacity="0.35"/>'
                   f'<text x="{left - 6}" y="{y + lane_h - 4}" class="lane" text-anchor="end">{_e(name)}</text>')
    out.append('<g id="tasks">')
    colours = data["colours"]
    for r in recs:
        x = left + r["start_us"] * sx
        w = max(0.6, (r["end_us"] - r["start_us"]) * sx)
        y = top + r["lane"] * (lane_h + gap)
        tip = (f"{r['title']} — task {r['tid']} ({r['program']})\n{r['kind']} {r['core']}, tile {tuple(r['index'])}\n"
               f"start {r['start_us']:.2f} µs, end {r['end_us']:.2f} µs ({r['end_us'] - r['start_us']:.2f} µs)\n"
               f"dispatched {r['dispatch_us']:.2f} µs; block call {r['stage']}\n"
               f"waits for {len(r['preds'])} task(s), {len(r['succs'])} wait for it"
               + ("\non the critical path" if r["critical"] else ""))
        cls = "task crit" if r["critical"] else "task"
        out.append(f'<rect class="{cls}" data-tid="{r["tid"]}" x="{x:.2f}" y="{y}" width="{w:.2f}" height="{lane_h}" '
                   f'fill="{colours[r["title"]]}"><title>{_e(tip)}</title></rect>')
    out.append('</g><g id="deps"></g></svg>')
    return "".join(out)


def _graph_svg(data: dict) -> str:
    graph = data["graph"]
    if not graph:
        return "<p class='note'>No block graph: the report was built from a profile alone.</p>"
    lay = layout_graph(graph)
    xy, nw, nh = lay["xy"], lay["node_w"], lay["node_h"]
    colours = data["colours"]
    out = [f'<svg id="blockgraph" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {lay["width"]:.0f} {lay["height"]:.0f}" '
           f'width="{lay["width"]:.0f}" height="{lay["height"]:.0f}" style="max-width:100%;height:auto">',
           '<defs><marker id="garr" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" markerHeight="9" markerUnits="userSpaceOnUse" '
           'orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#6b7280"/></marker></defs>']
    max_bytes = max((e["bytes"] for e in graph["edges"]), default=1) or 1
    for e in graph["edges"]:
        (x1, y1), (x2, y2) = xy[e["src"]], xy[e["dst"]]
        x1, y1, x2, y2 = x1 + nw / 2, y1 + nh, x2 + nw / 2, y2
        sw = 0.8 + 2.6 * math.log1p(e["bytes"]) / math.log1p(max_bytes)
        mid = (y1 + y2) / 2
        tip = f"GM: {', '.join(e['tensors'])} ({_bytes(e['bytes'])})"
        out.append(f'<path class="gedge" d="M{x1:.1f},{y1:.1f} C{x1:.1f},{mid:.1f} {x2:.1f},{mid:.1f} {x2:.1f},{y2 - 1:.1f}" '
                   f'stroke="#9ca3af" stroke-width="{sw:.2f}" fill="none" marker-end="url(#garr)"><title>{_e(tip)}</title></path>')
    for n in graph["nodes"]:
        x, y = xy[n["id"]]
        if n["kind"] == "block":
            fill, stroke = CORE_STYLE.get(n["core"], CORE_STYLE["host"])
            parts = n["parts"]
            progs = "; ".join(f"{p['program']} grid {'x'.join(map(str, p['grid'])) or '1'} x{p['instances']}"
                              + (f" ({p['tiles_per_block']} tiles/block)" if p["tiles_per_block"] > 1 else
                                 " (auto tiles/block)" if p["tiles_per_block"] == 0 else "")
                              for p in parts)
            tip = f"{n['title']} on {n['core']}: {progs}\nwrites {n['detail']}" + (f"\ninside {n['loop']}" if n["loop"] else "")
            line2 = f"{parts[0]['program']}" + (f" +{len(parts) - 1} part" + ("s" if len(parts) > 2 else "") if len(parts) > 1 else "")
            line3 = f"{n['core']} · ×{n['instances']} instance{'s' if n['instances'] != 1 else ''}" + (" · loop" if n["loop"] else "")
            colour = colours.get(n["title"], "#9ca3af")
            dash = ' stroke-dasharray="5,3"' if n["loop"] else ""
            out.append(f'<g class="gnode block" data-core="{_e(n["core"])}"><title>{_e(tip)}</title>'
                       f'<rect x="{x:.1f}" y="{y:.1f}" width="{nw}" height="{nh}" rx="6" fill="{fill}" stroke="{stroke}" stroke-width="1.4"{dash}/>'
                       f'<rect x="{x:.1f}" y="{y:.1f}" width="7" height="{nh}" rx="3" fill="{colour}"/>'
                       f'<text x="{x + 14:.1f}" y="{y + 16:.1f}" class="gt1">{_e(_clip(n["title"], 24))}</text>'
                       f'<text x="{x + 14:.1f}" y="{y + 30:.1f}" class="gt2">{_e(_clip(line2, 30))}</text>'
                       f'<text x="{x + 14:.1f}" y="{y + 43:.1f}" class="gt2">{_e(line3)}</text></g>')
        else:
            out.append(f'<g class="gnode io"><title>{_e(n["title"] + ": " + n["detail"])}</title>'
                       f'<rect x="{x + 20:.1f}" y="{y + 6:.1f}" width="{nw - 40}" height="{nh - 12}" rx="16" fill="#f9fafb" '
                       f'stroke="#6b7280" stroke-dasharray="3,2"/>'
                       f'<text x="{x + nw / 2:.1f}" y="{y + 22:.1f}" class="gt1" text-anchor="middle">{_e(n["title"])}</text>'
                       f'<text x="{x + nw / 2:.1f}" y="{y + 36:.1f}" class="gt2" text-anchor="middle">{_e(_clip(n["detail"], 30))}</text></g>')
    out.append("</svg>")
    return "".join(out)


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[:n - 1] + "…"


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


_CSS = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:0;color:#111827;background:#f3f4f6}
header{background:#111827;color:#f9fafb;padding:18px 28px}
header h1{margin:0 0 4px;font-size:22px}
header .sub{color:#d1d5db;font-size:13px}
main{padding:16px 28px 40px;max-width:1480px}
section{background:#fff;border:1px solid #e5e7eb;border-radius:8px;padding:14px 18px;margin:14px 0}
h2{font-size:17px;margin:0 0 10px;color:#111827}
h2 .hint{font-weight:400;font-size:12px;color:#6b7280;margin-left:8px}
.cards{display:flex;flex-wrap:wrap;gap:12px}
.card{flex:1 1 150px;background:#fff;border:1px solid #e5e7eb;border-radius:8px;padding:10px 14px}
.card .v{font-size:22px;font-weight:600}
.card .k{font-size:12px;color:#6b7280;text-transform:uppercase;letter-spacing:.04em}
table{border-collapse:collapse;font-size:13px}
th,td{padding:4px 10px;border-bottom:1px solid #eef0f3;text-align:left;white-space:nowrap}
th{background:#f9fafb;font-weight:600;color:#374151}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
tr.binding td{background:#fef3c7;font-weight:600}
.bar{display:inline-block;height:10px;border-radius:2px;vertical-align:middle}
.legend{display:flex;flex-wrap:wrap;gap:6px 16px;margin:6px 0 8px;font-size:12.5px}
.legend span.sw{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:5px;vertical-align:-2px;border:1px solid rgba(0,0,0,.25)}
.scroll{overflow:auto;border:1px solid #e5e7eb;border-radius:6px;background:#fff}
#swimwrap{max-height:1100px}
svg text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif}
svg .tick{font-size:10px;fill:#6b7280}
svg .lane{font-size:10.5px;fill:#374151;font-variant-numeric:tabular-nums}
svg .task{stroke:rgba(0,0,0,.35);stroke-width:.4;cursor:pointer}
svg .task:hover{stroke:#111;stroke-width:1.2}
svg.showcrit .task.crit{stroke:#dc2626;stroke-width:1.6}
svg .task.sel{stroke:#111;stroke-width:2.2}
svg .task.dim{opacity:.25}
svg .gt1{font-size:12.5px;font-weight:600;fill:#111827}
svg .gt2{font-size:11px;fill:#374151}
.controls{display:flex;gap:14px;align-items:center;font-size:13px;margin:4px 0 8px;flex-wrap:wrap}
.controls button{font:inherit;padding:2px 10px;border:1px solid #d1d5db;background:#fff;border-radius:4px;cursor:pointer}
#info{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#f9fafb;border:1px solid #e5e7eb;border-radius:6px;padding:8px 10px;min-height:2.2em;white-space:pre-wrap;margin-top:8px}
.chips{display:flex;flex-wrap:wrap;gap:4px;align-items:center;font-size:12.5px}
.chip{padding:2px 8px;border-radius:10px;color:#111;border:1px solid rgba(0,0,0,.15)}
.arrow{color:#9ca3af}
details{margin:6px 0;border:1px solid #e5e7eb;border-radius:6px}
details summary{cursor:pointer;padding:6px 10px;background:#f9fafb;font-weight:600}
details pre{margin:0;padding:10px;max-height:520px;overflow:auto;font:12px/1.35 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#fcfcfd}
.note{color:#6b7280;font-size:12.5px}
.two{display:flex;gap:18px;flex-wrap:wrap}
.two>div{flex:1 1 420px}
code{background:#f3f4f6;padding:1px 4px;border-radius:3px}
"""

_JS = """
(function(){
  var T = JSON.parse(document.getElementById('taskdata').textContent);
  var svg = document.getElementById('swimlane');
  if(!svg) return;
  var sx = +svg.dataset.scale, left = +svg.dataset.left, top = +svg.dataset.top, lh = +svg.dataset.lane;
  var deps = document.getElementById('deps'), info = document.getElementById('info');
  var NS = 'http://www.w3.org/2000/svg', byTid = {};
  svg.querySelectorAll('rect.task').forEach(function(r){ byTid[r.dataset.tid] = r; });
  function mid(t){ return top + T[t][0]*lh + (lh-3)/2; }
  function arrow(a, b, cls, colour, marker){
    var x1 = left + T[a][2]*sx, y1 = mid(a), x2 = left + T[b][1]*sx, y2 = mid(b), dx = Math.max(12, (x2-x1)/2);
    var p = document.createElementNS(NS, 'path');
    p.setAttribute('d', 'M'+x1+','+y1+' C'+(x1+dx)+','+y1+' '+(x2-dx)+','+y2+' '+x2+','+y2);
    p.setAttribute('stroke', colour); p.setAttribute('stroke-width', '1.4'); p.setAttribute('fill', 'none');
    p.setAttribute('marker-end', 'url(#'+marker+')'); p.setAttribute('class', cls); deps.appendChild(p);
  }
  function clear(){
    deps.innerHTML = '';
    svg.querySelectorAll('rect.task.sel,rect.task.dim').forEach(function(r){ r.classList.remove('sel','dim'); });
  }
  function select(tid){
    clear();
    sel = tid; var t = T[tid], keep = {}; keep[tid] = 1;
    t[3].forEach(function(p){ arrow(p, tid, 'dep in', '#d97706', 'arr-in'); keep[p] = 1; });
    t[4].forEach(function(s){ arrow(tid, s, 'dep out', '#7c3aed', 'arr-out'); keep[s] = 1; });
    if (document.getElementById('dim').checked)
      svg.querySelectorAll('rect.task').forEach(function(r){ if(!keep[r.dataset.tid]) r.classList.add('dim'); });
    byTid[tid].classList.add('sel');
    info.textContent = byTid[tid].querySelector('title').textContent +
      '\\nwaits for (orange): ' + (t[3].map(function(p){return p+' '+T[p][5];}).join(', ') || 'nothing') +
      '\\nunblocks (purple): ' + (t[4].map(function(s){return s+' '+T[s][5];}).join(', ') || 'nothing');
  }
  svg.addEventListener('click', function(ev){
    var r = ev.target.closest && ev.target.closest('rect.task');
    if (r) select(r.dataset.tid); else { clear(); sel = null; info.textContent = 'Click a task to see what it waits for and what it unblocks.'; }
  });
  var plot = +svg.dataset.plot, right = +svg.dataset.right, sx0 = sx, sel = null;
  function zoom(z){
    sx = sx0*z; var w = left + plot*z + right, h = +svg.getAttribute('height');
    svg.setAttribute('width', w); svg.setAttribute('viewBox', '0 0 '+w+' '+h);
    svg.querySelectorAll('rect.bg').forEach(function(r){ r.setAttribute('width', w); });
    svg.querySelectorAll('rect.lanebg').forEach(function(r){ r.setAttribute('width', plot*z); });
    svg.querySelectorAll('.tk').forEach(function(el){ var x = left + (+el.dataset.t)*sx;
      if (el.tagName == 'line') { el.setAttribute('x1', x); el.setAttribute('x2', x); } else el.setAttribute('x', x); });
    document.getElementById('tunit').setAttribute('x', left + plot*z);
    Object.keys(byTid).forEach(function(t){ var r = byTid[t];
      r.setAttribute('x', left + T[t][1]*sx); r.setAttribute('width', Math.max(0.6, (T[t][2]-T[t][1])*sx)); });
    if (sel !== null) select(sel);
  }
  document.querySelectorAll('[data-zoom]').forEach(function(b){ b.addEventListener('click', function(){ zoom(+b.dataset.zoom); }); });
  var crit = document.getElementById('crit');
  function sync(){ svg.classList.toggle('showcrit', crit.checked); }
  crit.addEventListener('change', sync); sync();
})();
"""


def _table(head, rows, numeric=()) -> str:
    th = "".join(f'<th class="{"n" if i in numeric else ""}">{_e(h)}</th>' for i, h in enumerate(head))
    body = []
    for row in rows:
        cls, cells = (row[0], row[1]) if isinstance(row, tuple) and len(row) == 2 and isinstance(row[1], list) else ("", row)
        tds = "".join(f'<td class="{"n" if i in numeric else ""}">{c}</td>' for i, c in enumerate(cells))
        body.append(f'<tr class="{cls}">{tds}</tr>')
    return f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def html(data: dict) -> str:
    """The report page for :func:`build`'s data: one self-contained HTML document."""
    colours = data["colours"]
    ms, lb = data["makespan_us"], data["lower_bound_us"]
    binding = next(b for b in data["bound"] if b["binding"])
    util = " · ".join(f"{k} {u:.0%}" for k, u in data["utilisation"].items())
    opts = json.dumps(data["options"]) if data["options"] else "none"
    cards = [("makespan", f"{ms:.2f} µs"), ("lower bound", f"{lb:.2f} µs"),
             ("makespan / bound", f"{ms / max(lb, 1e-12):.2f}×"), ("bound set by", binding["term"].replace("_", " ")),
             ("tasks", f"{data['tasks']}"), ("utilisation", util)]
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>ptojax report — {_e(data['title'])}</title>"
             f"<meta name='viewport' content='width=device-width,initial-scale=1'><style>{_CSS}</style></head><body>",
             f"<header><h1>ptojax profile report — {_e(data['title'])}</h1><div class='sub'>{_e(data['signature'])} · "
             f"machine {_e(data['machine'])} · {_e(data['mode'])} · pass options: <code style='background:#374151;color:#f9fafb'>"
             f"{_e(opts)}</code></div></header><main>",
             "<section id='overview'><h2>Overview</h2><div class='cards'>"
             + "".join(f"<div class='card'><div class='k'>{_e(k)}</div><div class='v'>{_e(v)}</div></div>" for k, v in cards)
             + "</div></section>"]
    # swimlane
    legend = "".join(f"<span><span class='sw' style='background:{c}'></span>{_e(t)}</span>"
                     for t, c in sorted(colours.items()))
    unused = ", ".join(f"{n} {k}" for k, n in data["unused_cores"].items() if n)
    tasks_js = {r["tid"]: [r["lane"], r["start_us"], r["end_us"], r["preds"], r["succs"], r["title"]] for r in data["records"]}
    parts.append(
        "<section id='swimlane-section'><h2>Swimlane<span class='hint'>one lane per core that ran a task; hover a task for "
        "its details, click it to draw its dependency arrows</span></h2>"
        f"<div class='legend' id='legend'>{legend}</div>"
        "<div class='controls'><span>zoom</span>" + "".join(f"<button data-zoom='{z}'>{z}×</button>" for z in (1, 2, 4, 8, 16))
        + "<label><input type='checkbox' id='crit' checked> outline the critical path (red)</label>"
        "<label><input type='checkbox' id='dim' checked> fade unrelated tasks on click</label></div>"
        f"<div class='scroll' id='swimwrap'>{_swimlane_svg(data)}</div>"
        "<div id='info'>Click a task to see what it waits for (orange arrows) and what it unblocks (purple arrows).</div>"
        + (f"<p class='note'>Idle cores not drawn: {_e(unused)}.</p>" if unused else "") + "</section>")
    # bound + idle
    brows = [("binding" if b["binding"] else "", [_e(b["term"].replace("_", " ")), _e(b["what"]), f"{b['us']:.2f}",
                                                  f"{b['us'] / max(ms, 1e-12):.0%}"]) for b in data["bound"]]
    brows.append(("", ["<b>makespan</b>", "the simulated schedule", f"<b>{ms:.2f}</b>", "100%"]))
    mm = data["machine_model"]
    irows = [[_e(i["kind"]), f"{i['cores']}", f"{i['used']}", f"{i['busy_us']:.2f}", f"{i['idle_us']:.2f}",
              f"{i['utilisation']:.1%}"] for i in data["idle"]]
    parts.append(
        "<section id='bound'><div class='two'><div><h2>Lower bound<span class='hint'>the makespan can not beat the largest "
        "term (highlighted)</span></h2>" + _table(["term", "what", "µs", "of makespan"], brows, (2, 3))
        + f"<p class='note'>Machine: {', '.join(f'{n} {k}' for k, n in mm['cores'])}, {mm['schedulers']} schedulers, "
        f"{mm['schedule_cost_us']:.2f} µs scheduling + {mm['dispatch_latency_us']:.2f} µs dispatch per task, "
        f"{mm['bandwidth_GBps']:.0f} GB/s.</p></div>"
        "<div id='idle'><h2>Idle time per core kind<span class='hint'>core-µs over the makespan</span></h2>"
        + _table(["kind", "cores", "used", "busy µs", "idle µs", "utilisation"], irows, (1, 2, 3, 4, 5)) + "</div></div></section>")
    # labels
    top = max((lab["us"] for lab in data["labels"]), default=1.0) or 1.0
    lrows = [[f"<span class='sw bar' style='background:{lab['colour']};width:12px'></span> {_e(lab['label'])}",
              _e("/".join(lab["kinds"])), f"{lab['tasks']}", f"{lab['us']:.2f}", f"{lab['us'] / max(lab['tasks'], 1):.2f}",
              f"{lab['share']:.1%}",
              f"<span class='bar' style='background:{lab['colour']};width:{240 * lab['us'] / top:.0f}px'></span>"]
             for lab in data["labels"]]
    parts.append("<section id='labels'><h2>Time per label<span class='hint'>task time summed over all cores (the "
                 "makespan overlaps it)</span></h2>"
                 + _table(["label", "cores", "tasks", "µs", "µs / task", "share", ""], lrows, (2, 3, 4, 5)) + "</section>")
    # critical path
    cp = data["critical_path"]
    chips = "<span class='arrow'>→</span>".join(
        f"<span class='chip' style='background:{colours.get(lab, '#ddd')}55'>{_e(lab)}{' ×' + str(c) if c > 1 else ''}</span>"
        for lab, c in cp["runs"])
    crow = [[f"{p['tid']}", _e(p["title"]), _e(p["program"]), f"{_e(p['kind'])} {p['core']}", f"{p['start_us']:.2f}",
             f"{p['end_us']:.2f}", f"{p['duration_us']:.2f}", f"{p['wait_us']:.2f}"] for p in cp["tasks"][:400]]
    parts.append(f"<section id='critical'><h2>Critical path<span class='hint'>{len(cp['tasks'])} tasks, "
                 f"{cp['work_us']:.2f} µs of work; the chain with the largest upward rank (HEFT)</span></h2>"
                 f"<div class='chips'>{chips}</div><details><summary>the tasks on it</summary><div style='padding:8px'>"
                 + _table(["task", "label", "program", "core", "start µs", "end µs", "µs", "waited µs"], crow,
                          (0, 4, 5, 6, 7)) + "</div></details></section>")
    # bubbles
    bb = [[f"{b['gap_us']:.2f}", f"{_e(b['kind'])} {b['core']}", f"{b['from_us']:.2f}",
           f"{b['after']} {_e(b['after_title'])}", "-" if b["before"] is None else f"{b['before']} {_e(b['before_title'])}"]
          for b in data["bubbles"]]
    parts.append("<section id='bubbles'><h2>Largest bubbles<span class='hint'>idle gaps between two tasks on one "
                 "core</span></h2>" + (_table(["gap µs", "core", "from µs", "after task", "before task"], bb, (0, 2))
                                       if bb else "<p class='note'>No gaps between tasks on any core.</p>") + "</section>")
    # block graph
    parts.append("<section id='graph'><h2>Block graph<span class='hint'>block calls (programs × instances) and the GM "
                 "tensors between them; hover for details</span></h2>"
                 "<div class='legend'><span><span class='sw' style='background:#dbeafe;border-color:#1d4ed8'></span>cube "
                 "(AIC) block</span><span><span class='sw' style='background:#dcfce7;border-color:#15803d'></span>vector "
                 "(AIV) block</span><span><span class='sw' style='background:#f9fafb;border:1px dashed #6b7280'></span>kernel "
                 "input / output</span><span>left stripe: the label's swimlane colour</span><span>dashed border: inside a "
                 "block-level loop</span><span>edge width: GM bytes</span></div>"
                 f"<div class='scroll' style='max-height:1400px'>{_graph_svg(data)}</div></section>")
    # levels
    lv = "".join(f"<details data-level='{_e(k)}'><summary>{_e(k)} level ({v.count(chr(10)) + 1} lines)</summary>"
                 f"<pre>{_e(v)}</pre></details>" for k, v in data["levels"].items())
    parts.append("<section id='levels'><h2>Lowering levels<span class='hint'>Tensor → Tile → Block → PTO-AS; click to "
                 "expand</span></h2>" + (lv or "<p class='note'>Not available (built from a profile alone).</p>") + "</section>")
    parts.append("<section id='summary-json'><details><summary>profile summary (JSON, as <code>ptojax profile --summary</code> "
                 f"saves it for <code>ptojax diff</code>)</summary><pre>{_e(json.dumps(data['summary'], indent=1, default=str))}"
                 "</pre></details></section>")
    parts.append("</main><script type='application/json' id='taskdata'>"
                 + json.dumps(tasks_js, separators=(",", ":")).replace("</", "<\\/") + f"</script><script>{_JS}</script></body></html>")
    return "".join(parts)


def write(path, profile, compiled=None, **kw) -> Path:
    """Build and write the report; returns the path."""
    path = Path(path)
    path.write_text(html(build(profile, compiled, **kw)), encoding="utf-8")
    return path


def load_options(path) -> dict:
    """Pass options from a JSON or TOML file (``.toml``): ``{"tiles": {...}, "tiles_per_block": {...}}``."""
    path = Path(path)
    if path.suffix == ".toml":
        import tomllib
        with open(path, "rb") as f:
            return tomllib.load(f)
    with open(path) as f:
        return json.load(f)


__all__ = ["Diff", "build", "block_graph", "diff", "format_diff", "html", "load_options", "load_summary",
           "save_summary", "summary", "write"]
