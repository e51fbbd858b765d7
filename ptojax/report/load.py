"""Per-core load: busy time per simulated core, its mean per core kind, the cores far from that mean,
and the labels whose tiles all went to one core.

Rule: a core of a kind that did work is flagged ``over`` when its busy time is above ``HIGH`` (1.25) x the
mean busy time of all cores of that kind on the machine (idle cores count as 0), ``under`` when below
``LOW`` (0.75) x that mean. A label is flagged ``single_core`` when it has more than one tile (grid
point) on a core kind, all of its tasks there ran on one core, and the machine has more cores of that
kind. Figures come from task spans ``(kind, core, label, µs)``: a profile's records or a Chrome trace's
events.
"""
from __future__ import annotations

HIGH, LOW = 1.25, 0.75
RULE = (f"a core is flagged when its busy time is above {HIGH}x or below {LOW}x the mean of all cores of its "
        "kind (idle cores count as 0); a label when all of its tiles (more than one) on a core kind ran on one "
        "core of several")


def load(spans, cores: dict, tiles: dict | None = None) -> dict:
    """The load figures (JSON-able) of ``spans`` — ``(kind, core, label, busy µs)`` per task — on a machine
    with ``cores`` (kind -> count; a kind met in ``spans`` but not listed counts its distinct cores).
    ``tiles``: label -> kind -> grid points, where known; else each task counts as one tile."""
    busy: dict = {}
    tasks: dict = {}
    where: dict = {}                        # (label, kind) -> {core: tasks}
    for kind, core, label, us in spans:
        busy.setdefault(kind, {}).setdefault(core, 0.0)
        busy[kind][core] += us
        tasks.setdefault(kind, {}).setdefault(core, 0)
        tasks[kind][core] += 1
        on = where.setdefault((label, kind), {})
        on[core] = on.get(core, 0) + 1
    kinds = {}
    for kind in sorted(busy, key=lambda k: ({"AIC": 0, "AIV": 1}.get(k, 2), k)):
        n = max(cores.get(kind, 0), len(busy[kind]), 1 + max(busy[kind]))
        per = [busy[kind].get(c, 0.0) for c in range(n)]
        count = [tasks[kind].get(c, 0) for c in range(n)]
        mean = sum(per) / n
        kinds[kind] = {"cores": n, "busy_us": per, "tasks": count, "mean_us": mean, "max_us": max(per),
                       "min_us": min(per), "max_over_mean": max(per) / mean if mean else 0.0,
                       "over": [c for c in range(n) if mean and per[c] > HIGH * mean],
                       "under": [c for c in range(n) if mean and per[c] < LOW * mean]}
    labels = []
    for (label, kind), on in sorted(where.items()):
        n_tiles = (tiles or {}).get(label, {}).get(kind, sum(on.values()))
        single = len(on) == 1 and n_tiles > 1 and kinds[kind]["cores"] > 1
        labels.append({"label": label, "kind": kind, "tasks": sum(on.values()), "tiles": n_tiles,
                       "cores": sorted(on), "single_core": single})
    return {"rule": RULE, "high": HIGH, "low": LOW, "kinds": kinds, "labels": labels,
            "single_core": [f"{x['label']} ({x['kind']} {x['cores'][0]})" for x in labels if x["single_core"]]}


def profile_spans(trace) -> list:
    """``(kind, core, label, busy µs)`` per task of a :class:`~ptojax.mpmd.Trace` (host lanes: kind ``host``)."""
    return [("host" if r.host else r.kind, r.core, r.title, (r.end - r.start) * 1e6) for r in trace.records]


def chrome_spans(events) -> tuple[list, dict, dict]:
    """``(spans, cores per kind, tiles)`` of a Chrome trace's events (``Profile.save``); ``tiles`` is
    label -> kind -> grid points, from each event's ``points`` (1 where a trace has none)."""
    lanes = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            kind, _, core = e["args"]["name"].partition(" ")
            lanes[e["tid"]] = (kind, int(core))
    cores: dict = {}
    for kind, _ in lanes.values():
        cores[kind] = cores.get(kind, 0) + 1
    spans, tiles = [], {}
    for e in events:
        if e.get("ph") == "X":
            kind, core = lanes[e["tid"]]
            spans.append((kind, core, e["name"], e["dur"]))
            kinds = tiles.setdefault(e["name"], {})
            kinds[kind] = kinds.get(kind, 0) + e.get("args", {}).get("points", 1)
    return spans, cores, tiles


__all__ = ["HIGH", "LOW", "RULE", "chrome_spans", "load", "profile_spans"]
