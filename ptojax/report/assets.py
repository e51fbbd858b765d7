"""The report page's style sheet and script, inline in every page (nothing is fetched)."""

CSS = """
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
h3{font-size:14px;margin:12px 0 6px;color:#374151}
.lbar{display:inline-block;position:relative;width:204px;height:10px;background:#f3f4f6;border-radius:2px;vertical-align:middle}
.lfill{position:absolute;left:0;top:0;height:10px;border-radius:2px}
.lmean{position:absolute;top:-3px;width:2px;height:16px;background:#111827}
tr.load-over td{background:#fee2e2}
tr.load-under td{background:#fef3c7}
"""

JS = """
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
