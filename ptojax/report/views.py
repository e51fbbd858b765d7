"""The tuning views of the report page: the fusion view (the ops before partition, coloured by the
block each went to, and the table of blocks) and the per-core load (busy time per core against the
mean of its kind, the cores a block call loaded off its mean, single-core labels)."""
from __future__ import annotations

import math

from ..mpmd.trace import colour
from .markup import CORE_STYLE, clip, curve, esc, layout_graph, size, svg_open, table


def block_colour(b: int) -> str:
    """The colour of block ``b`` in the fusion view."""
    return colour(b)


def _fusion_svg(fz: dict) -> str:
    lay = layout_graph(fz, node_w=170, node_h=50, gap_x=18, gap_y=48)
    xy, nw, nh = lay["xy"], lay["node_w"], lay["node_h"]
    blocks = fz["blocks"]
    out = [svg_open("fusiongraph", lay, "farr", 8)]
    top = max((e["bytes"] for e in fz["edges"]), default=1) or 1
    for e in fz["edges"]:
        if e["fused"]:
            style, tip = 'stroke="#15803d" stroke-width="2.4"', "on chip (one block): "
        else:
            sw = 0.8 + 2.2 * math.log1p(e["bytes"]) / math.log1p(top)
            style, tip = f'stroke="#9ca3af" stroke-width="{sw:.2f}" stroke-dasharray="5,3"', "through GM: "
        out.append(f'<path class="fedge {"fused" if e["fused"] else "gm"}" d="{curve(lay, e["src"], e["dst"])}" {style} '
                   'fill="none" marker-end="url(#farr)">'
                   f'<title>{esc(tip + ", ".join(e["tensors"]) + " (" + size(e["bytes"]) + ")")}</title></path>')
    for n in fz["nodes"]:
        x, y = xy[n["id"]]
        if n["kind"] != "op":
            out.append(f'<g class="fnode io"><title>{esc(n["title"] + ": " + n["detail"])}</title>'
                       f'<rect x="{x + 16:.1f}" y="{y + 6:.1f}" width="{nw - 32}" height="{nh - 12}" rx="16" fill="#f9fafb" '
                       f'stroke="#6b7280" stroke-dasharray="3,2"/><text x="{x + nw / 2:.1f}" y="{y + 22:.1f}" class="gt1" '
                       f'text-anchor="middle">{esc(n["title"])}</text><text x="{x + nw / 2:.1f}" y="{y + 36:.1f}" '
                       f'class="gt2" text-anchor="middle">{esc(clip(n["detail"], 26))}</text></g>')
            continue
        b = blocks[n["block"]]
        colour, stroke = block_colour(b["id"]), CORE_STYLE.get(n["core"], CORE_STYLE["host"])[1]
        grid = " + ".join("x".join(map(str, g)) or "1" for g in n["grid"])
        tip = (f"{n['op']}{' (' + n['label'] + ')' if n['label'] else ''} on {n['core']}, grid {grid}, writes {n['detail']}\n"
               f"merged into block {b['id']}: {', '.join(b['programs'])} ({len(b['ops'])} op(s), {b['tasks']} task(s) run)"
               + (f"\n{b['note']}" if b["note"] else "") + (f"\ninside {n['loop']}" if n["loop"] else ""))
        dash = ' stroke-dasharray="5,3"' if n["loop"] else ""
        out.append(f'<g class="fnode op" data-block="{b["id"]}"><title>{esc(tip)}</title>'
                   f'<rect x="{x:.1f}" y="{y:.1f}" width="{nw}" height="{nh}" rx="6" fill="{colour}33" stroke="{stroke}" '
                   f'stroke-width="1.4"{dash}/><rect x="{x:.1f}" y="{y:.1f}" width="7" height="{nh}" rx="3" fill="{colour}"/>'
                   f'<text x="{x + 14:.1f}" y="{y + 16:.1f}" class="gt1">{esc(clip(n["op"], 20))}</text>'
                   f'<text x="{x + 14:.1f}" y="{y + 30:.1f}" class="gt2">{esc(clip(n["label"] or "(no label)", 24))}</text>'
                   f'<text x="{x + 14:.1f}" y="{y + 43:.1f}" class="gt2">block {b["id"]} · {esc(n["core"])} · {esc(grid)}</text></g>')
    out.append("</svg>")
    return "".join(out)


def fusion_section(data: dict) -> str:
    """The fusion view: the op graph before partition and the table of blocks after it."""
    head = ("<section id='fusion'><h2>Fusion<span class='hint'>the ops before partition (one tile grid per tensor op), "
            "coloured by the block partition merged each into; hover for details</span></h2>")
    fz = data.get("fusion")
    if not fz:
        return head + ("<p class='note'>No fusion view: the report was built from a profile alone, or of a "
                       "polymorphic compile (whose grids depend on the size).</p></section>")
    legend = ("<div class='legend'><span><span class='sw' style='background:#15803d'></span>tile passed on chip (same "
              "block)</span><span><span class='sw' style='background:#fff;border:1px dashed #6b7280'></span>tensor "
              "through GM</span><span>fill and stripe: the block's colour; border: cube (blue) or vector (green) core"
              "</span><span>dashed border: inside a block-level loop</span></div>")
    rows = []
    for b in fz["blocks"]:
        ops = " + ".join(esc(op) for op in b["ops"])
        rows.append(("", [f"<span class='sw bar' style='background:{block_colour(b['id'])};width:12px'></span> {b['id']}",
                          esc(", ".join(b["programs"])), esc(b["core"]), esc(b["label"] or "-"), ops,
                          f"{len(b['ops'])}", f"{b['tasks']}", size(b["gm_in_bytes"]), size(b["gm_out_bytes"]),
                          esc(b["loop"] or "") + esc(("; " if b["loop"] and b["note"] else "") + b["note"])]))
    return (head + legend + f"<div class='scroll' style='max-height:1200px'>{_fusion_svg(fz)}</div>"
            "<h3>Blocks after partition</h3>"
            + table(["block", "program", "core", "label", "ops merged", "ops", "tasks run", "GM in", "GM out", "note"],
                    rows, (5, 6, 7, 8)) + "</section>")


def _ranges(cores) -> str:
    out, start = [], None
    for i, c in enumerate(cores):
        if start is None:
            start = c
        if i + 1 == len(cores) or cores[i + 1] != c + 1:
            out.append(f"{start}" if start == c else f"{start}–{c}")
            start = None
    return ", ".join(out)


def load_section(data: dict) -> str:
    """Per-core load: busy time per core against its kind's mean, the cores a block call loaded off its
    mean (flagged), those calls, and single-core labels."""
    ld = data["load"]
    krows, crows, srows_calls = [], [], []
    for kind, k in ld["kinds"].items():
        used = [c for c in range(k["cores"]) if k["tasks"][c]]
        krows.append([esc(kind), f"{k['cores']}", f"{len(used)}", f"{k['mean_us']:.2f}", f"{k['max_us']:.2f}",
                      f"{k['max_over_mean']:.2f}×", f"{len(k['over'])}", f"{len(k['under'])}", f"{len(k['idle'])}"])
        top = k["max_us"] or 1.0
        for st in k.get("stages", ()):
            if st["over"] or st["under"]:
                srows_calls.append([f"{st['stage']}" if st["stage"] is not None else "-", esc(", ".join(st["labels"])),
                                    esc(kind), f"{len(st['cores'])}", f"{st['mean_us']:.2f}", f"{st['max_over_mean']:.2f}×",
                                    esc(", ".join(f"{kind} {c}" for c in st["over"]) or "-"),
                                    esc(", ".join(f"{kind} {c}" for c in st["under"]) or "-")])
        for c in used:
            busy, ratio = k["busy_us"][c], k["ratio"][c]
            flag = "over" if c in k["over"] else "under" if c in k["under"] else ""
            fill = {"over": "#dc2626", "under": "#d97706"}.get(flag, "#16a34a")
            bar = (f"<span class='lbar'><span class='lfill' style='width:{200 * busy / top:.0f}px;background:{fill}'></span>"
                   f"<span class='lmean' style='left:{200 * k['mean_us'] / top:.0f}px'></span></span>")
            crows.append((f"load-{flag}" if flag else "", [f"{esc(kind)} {c}", f"{k['tasks'][c]}", f"{busy:.2f}",
                                                           f"{ratio:.2f}×", flag or "-", bar]))
        if k["idle"]:
            crows.append(("", [f"{esc(kind)} {_ranges(k['idle'])}", "0", "0.00", "-", f"idle ({len(k['idle'])} cores)",
                               "<span class='lbar'></span>"]))
    single = [x for x in ld["labels"] if x["single_core"]]
    srows = [[esc(x["label"]), esc(x["kind"]), f"{x['tiles']}", f"{x['tasks']}", f"{esc(x['kind'])} {x['single_core_on']}"]
             for x in single]
    return ("<section id='load'><h2>Per-core load<span class='hint'>busy time per core; "
            f"{esc(ld['rule'])}</span></h2><div class='two'><div>"
            + table(["kind", "cores", "busy cores", "busy mean µs", "max µs", "max / call mean", "over", "under", "idle"],
                    krows, (1, 2, 3, 4, 5, 6, 7, 8))
            + "<h3>Block calls that loaded a core off their mean</h3>"
            + (table(["call", "labels", "kind", "cores", "mean µs", "max / mean", "over", "under"], srows_calls[:40],
                     (0, 3, 4, 5)) if srows_calls
               else "<p class='note'>None: every block call loaded the cores it ran on evenly.</p>")
            + "<h3>Labels whose tiles all ran on one core</h3>"
            + (table(["label", "kind", "tiles", "tasks", "core"], srows, (2, 3)) if srows
               else "<p class='note'>None: every label with more than one tile spread over several cores.</p>")
            + "</div><div>" + table(["core", "tasks", "busy µs", "× call mean", "flag", "busy (line: mean)"], crows, (1, 2, 3))
            + "</div></div></section>")


__all__ = ["block_colour", "fusion_section", "load_section"]
