"""The report page's building blocks: escaping, sizes, tables, core colours and the layered layout of
a graph (the Block graph, the fusion view's op graph)."""
from __future__ import annotations

import html as _html

CORE_STYLE = {"AIC": ("#dbeafe", "#1d4ed8"), "AIV": ("#dcfce7", "#15803d"), "host": ("#f3f4f6", "#374151")}


def esc(x) -> str:
    """``x`` as HTML text (quotes escaped)."""
    return _html.escape(str(x), quote=True)


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
    rows = [[] for _ in range(depth)]
    for n in nodes:
        rows[layer[n["id"]]].append(n["id"])
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


def svg_open(svg_id: str, lay: dict, marker: str, arrow: int) -> str:
    """The opening of a graph's ``<svg>`` sized by its :func:`layout_graph` and its arrowhead marker."""
    w, h = f'{lay["width"]:.0f}', f'{lay["height"]:.0f}'
    return (f'<svg id="{svg_id}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" '
            f'style="max-width:100%;height:auto"><defs><marker id="{marker}" viewBox="0 0 10 10" refX="9" refY="5" '
            f'markerWidth="{arrow}" markerHeight="{arrow}" markerUnits="userSpaceOnUse" orient="auto-start-reverse">'
            '<path d="M0,0L10,5L0,10z" fill="#6b7280"/></marker></defs>')


def curve(lay: dict, src: int, dst: int) -> str:
    """The path of an edge from the bottom of node ``src`` to the top of node ``dst``."""
    (x1, y1), (x2, y2) = lay["xy"][src], lay["xy"][dst]
    nw, nh = lay["node_w"], lay["node_h"]
    x1, y1, x2 = x1 + nw / 2, y1 + nh, x2 + nw / 2
    mid = (y1 + y2) / 2
    return f"M{x1:.1f},{y1:.1f} C{x1:.1f},{mid:.1f} {x2:.1f},{mid:.1f} {x2:.1f},{y2 - 1:.1f}"


def clip(s: str, n: int) -> str:
    """``s`` cut to ``n`` characters, with an ellipsis where cut."""
    return s if len(s) <= n else s[:n - 1] + "…"


def size(n: int) -> str:
    """A byte count in B, KiB, MiB or GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def table(head, rows, numeric=()) -> str:
    """An HTML table; a row is a list of cells (HTML) or ``(css class, cells)``; ``numeric``: right-aligned columns."""
    th = "".join(f'<th class="{"n" if i in numeric else ""}">{esc(h)}</th>' for i, h in enumerate(head))
    body = []
    for row in rows:
        cls, cells = (row[0], row[1]) if isinstance(row, tuple) and len(row) == 2 and isinstance(row[1], list) else ("", row)
        tds = "".join(f'<td class="{"n" if i in numeric else ""}">{c}</td>' for i, c in enumerate(cells))
        body.append(f'<tr class="{cls}">{tds}</tr>')
    return f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table>"


__all__ = ["CORE_STYLE", "clip", "esc", "layout_graph", "size", "table"]
