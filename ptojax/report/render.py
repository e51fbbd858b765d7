"""The report page: :func:`build`'s data rendered as one self-contained HTML document — the
swimlane and the block graph as SVG (a layered layout), tables, the levels' text; the fusion and
per-core load views are ``views.py``."""
from __future__ import annotations

import json
import math
from pathlib import Path

from ..mpmd.trace import output_path
from .assets import CSS, JS
from .build import build, check_args
from .markup import CORE_STYLE, curve, layout_graph, svg_open
from .markup import clip as _clip
from .markup import esc as _e
from .markup import size as _bytes
from .markup import table as _table
from .summary import wrong
from .views import fusion_section, load_section


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
    span = data["makespan_us"] if data["makespan_us"] > 0 else 1.0      # no tasks: an axis of 0..1 µs
    sx = plot_w / span
    height = top + len(lanes) * (lane_h + gap) + 8
    width = left + plot_w + right
    out = [f'<svg id="swimlane" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" data-scale="{sx!r}" data-left="{left}" data-top="{top}" '
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
        return ("<p class='note'>No block graph: the report was built from a profile alone, or of a polymorphic "
                "compile (whose grids depend on the size).</p>")
    lay = layout_graph(graph)
    xy, nw, nh = lay["xy"], lay["node_w"], lay["node_h"]
    colours = data["colours"]
    out = [svg_open("blockgraph", lay, "garr", 9)]
    max_bytes = max((e["bytes"] for e in graph["edges"]), default=1) or 1
    for e in graph["edges"]:
        sw = 0.8 + 2.6 * math.log1p(e["bytes"]) / math.log1p(max_bytes)
        tip = f"GM: {', '.join(e['tensors'])} ({_bytes(e['bytes'])})"
        out.append(f'<path class="gedge" d="{curve(lay, e["src"], e["dst"])}" '
                   f'stroke="#9ca3af" stroke-width="{sw:.2f}" fill="none" marker-end="url(#garr)"><title>{_e(tip)}</title></path>')
    for n in graph["nodes"]:
        x, y = xy[n["id"]]
        if n["kind"] == "block":
            fill, stroke = CORE_STYLE.get(n["core"], CORE_STYLE["host"])
            parts = n["parts"]
            progs = "; ".join(f"{p['program']} grid {'x'.join(map(str, p['grid'])) or '1'}, {p['tasks']} task(s) run"
                              + (f" ({p['tiles_per_block']} tiles/block)" if p["tiles_per_block"] > 1 else
                                 " (auto tiles/block)" if p["tiles_per_block"] == 0 else "")
                              for p in parts)
            tip = f"{n['title']} on {n['core']}: {progs}\nwrites {n['detail']}" + (f"\ninside {n['loop']}" if n["loop"] else "")
            line2 = f"{parts[0]['program']}" + (f" +{len(parts) - 1} part" + ("s" if len(parts) > 2 else "") if len(parts) > 1 else "")
            line3 = f"{n['core']} · {n['tasks']} task{'s' if n['tasks'] != 1 else ''} run" + (" · loop" if n["loop"] else "")
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


def html(data: dict) -> str:
    """The report page for :func:`build`'s data: one self-contained HTML document."""
    if not (isinstance(data, dict) and "records" in data):
        raise wrong("pj.report.html", "data", "pj.report.build(profile, compiled)'s dict", data)
    colours = data["colours"]
    ms, lb = data["makespan_us"], data["lower_bound_us"]
    util = " · ".join(f"{k} {u:.0%}" for k, u in data["utilisation"].items())
    opts = json.dumps(data["options"]) if data["options"] else "none"
    ran = data["tasks"] > 0                     # a run of no tasks has no ratio and no binding term
    host = data.get("host", False)              # host threads' wall time: the chip's bound does not apply
    why = "- (no tasks)" if not ran else "- (host threads)"
    cards = [("makespan", f"{ms:.2f} µs" + (" on the host's clock" if host else "")),
             ("lower bound", f"{lb:.2f} µs" + (" (the simulated chip's)" if host else "")),
             ("makespan / bound", f"{ms / max(lb, 1e-12):.2f}×" if ran and not host else why),
             ("bound set by", data["binding"].replace("_", " ") if ran and not host else why),
             ("tasks", f"{data['tasks']}"), ("utilisation", util)]
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>ptojax report — {_e(data['title'])}</title>"
             f"<meta name='viewport' content='width=device-width,initial-scale=1'><style>{CSS}</style></head><body>",
             f"<header><h1>ptojax profile report — {_e(data['title'])}</h1><div class='sub'>{_e(data['signature']) + ' · ' if data['signature'] else ''}"
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
    parts.append(load_section(data))
    # bound + idle
    brows = [("binding" if b["binding"] else "", [_e(b["term"].replace("_", " ")), _e(b["what"]), f"{b['us']:.2f}",
                                                  f"{b['us'] / max(ms, 1e-12):.0%}"]) for b in data["bound"]]
    brows.append(("", ["<b>makespan</b>", "the host threads' wall time" if host else "the simulated schedule",
                       f"<b>{ms:.2f}</b>", "100%"]))
    mm = data["machine_model"]
    irows = [[_e(i["kind"]), f"{i['cores']}", f"{i['used']}", f"{i['busy_us']:.2f}", f"{i['idle_us']:.2f}",
              f"{i['utilisation']:.1%}"] for i in data["idle"]]
    parts.append(
        "<section id='bound'><div class='two'><div><h2>Lower bound<span class='hint'>"
        + ("the simulated chip's; host threads' wall time is not bounded by it" if host else
           "the makespan can not beat the largest term (highlighted)") + "</span></h2>" + _table(["term", "what", "µs", "of makespan"], brows, (2, 3))
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
    crow = [[f"{p['tid']}", _e(p["title"]), _e(p["program"]), _e(p.get("lane") or f"{p['kind']} {p['core']}"), f"{p['start_us']:.2f}",
             f"{p['end_us']:.2f}", f"{p['duration_us']:.2f}", f"{p['wait_us']:.2f}"] for p in cp["tasks"][:400]]
    parts.append(f"<section id='critical'><h2>Critical path<span class='hint'>{len(cp['tasks'])} tasks, "
                 f"{cp['work_us']:.2f} µs of work; the longest dependency chain, each task counted with its dispatch "
                 f"overhead: the chain of the critical_path bound ({cp.get('length_us', 0.0):.2f} µs)</span></h2>"
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
    parts.append(fusion_section(data))
    # block graph
    parts.append("<section id='graph'><h2>Block graph<span class='hint'>block calls (programs, the tasks they ran) and the GM "
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
                 + json.dumps(tasks_js, separators=(",", ":")).replace("</", "<\\/") + f"</script><script>{JS}</script></body></html>")
    return "".join(parts)


def write(path, profile, compiled=None, *, title: str | None = None, options=None, levels=None) -> Path:
    """Build and write the report of ``profile``, a run of ``compiled`` (None: the timeline views only);
    returns the path. Arguments of the wrong kind, or a profile of another kernel, raise
    :class:`PtoArgumentError` before anything is written."""
    check_args("pj.report.write", profile, compiled)
    path = output_path(path, "pj.report.write")
    path.write_text(html(build(profile, compiled, title=title, options=options, levels=levels)), encoding="utf-8")
    return path


__all__ = ["CORE_STYLE", "html", "layout_graph", "write"]
