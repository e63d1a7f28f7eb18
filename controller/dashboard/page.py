"""The dashboard's one page: the topology as SVG (servers at the bottom, switches above), each
link coloured by its measured rate against its configured rate; the busiest links; each switch's
CPU share, queue and drops (a click reads its tables' sizes); the experiment's progress and
verdicts; the optical schedule's current slices; and a time line of what happened, updated from
the server's event stream. No script from the internet: it is all here."""

from __future__ import annotations

__all__ = ["PAGE"]

PAGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>mlfabric dashboard</title>
<style>
body{font:14px system-ui,sans-serif;margin:1em 2em;color:#1d2330}
h1{font-size:1.3em;margin:.2em 0} h2{font-size:1.05em;margin:1em 0 .3em} .muted{color:#667}
svg#fabric{width:100%;height:420px;border:1px solid #e3e5ee;border-radius:6px;background:#fbfbfd}
svg#timeline{width:100%;height:70px;border:1px solid #e3e5ee;border-radius:6px;background:#fbfbfd}
line.link{stroke:#c9ccd8;stroke-width:2} circle.host{fill:#3d5a80} rect.switch{fill:#ee6c4d}
text{font-size:10px;fill:#333} table{border-collapse:collapse;margin-top:.3em}
td,th{border:1px solid #e3e5ee;padding:.2em .6em;text-align:right} th{background:#f4f5f9}
td:first-child,th:first-child{text-align:left} .grid{display:grid;grid-template-columns:1fr 1fr;gap:0 2em}
tr.clickable{cursor:pointer} tr.clickable:hover{background:#f4f5f9}
.decided{color:#1b7f3b} .undecided{color:#b3261e} #run{margin:.3em 0}
</style></head><body>
<h1 id="title">mlfabric dashboard</h1>
<p class="muted" id="status">connecting...</p>
<p id="run" class="muted">no experiment is running</p>
<ul id="job" class="muted"></ul>
<svg id="fabric" viewBox="0 0 1000 420" preserveAspectRatio="none"></svg>
<h2>Time line <span class="muted" id="timeline-note">(the last 2 minutes)</span></h2>
<svg id="timeline" viewBox="0 0 1000 70" preserveAspectRatio="none"></svg>
<ul id="events" class="muted"></ul>
<div class="grid"><div>
<h2>Busiest links</h2>
<table id="busiest"><thead><tr><th>link</th><th>interface</th><th>out Mbit/s</th><th>in Mbit/s</th>
<th>configured</th><th>share</th></tr></thead><tbody></tbody></table>
<h2>Verdicts</h2>
<table id="verdicts"><thead><tr><th>comparison</th><th>outcome</th><th>finding or reason</th></tr></thead>
<tbody></tbody></table>
</div><div>
<h2>Switches <span class="muted">(click one for its tables)</span></h2>
<table id="switches"><thead><tr><th>switch</th><th>CPU (of a core)</th><th>queued bytes</th>
<th>longest wait</th><th>drops</th></tr></thead><tbody></tbody></table>
<div id="tables"></div>
<h2>Schedule</h2><div id="schedule" class="muted">no optical schedule installed</div>
</div></div>
<p class="muted" id="own"></p>
<script>
const NS = "http://www.w3.org/2000/svg";
const svg = document.getElementById("fabric"), tl = document.getElementById("timeline");
let lines = {}, drawn = null, latestT = 0;
const KIND_COLOUR = {"reconfiguration": "#8e44ad", "verdict": "#1b7f3b", "unit": "#3d5a80", "run": "#3d5a80",
  "run-end": "#3d5a80", "fabric-up": "#ee6c4d", "fabric-down": "#ee6c4d", "schedule": "#8e44ad"};
function esc(s) { return String(s ?? "").replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"})[c]); }
function colour(u) {  // grey idle or unshaped, green to red as a link fills its configured rate
  if (u === null || u === undefined || u < 0.01) return "#c9ccd8";
  const x = Math.max(0, Math.min(1, u));
  return `hsl(${120 - 120 * x}, 75%, ${45 - 5 * x}%)`;
}
function place(n, tiers) { return [40 + n.x * 920, 390 - n.y * (340 / Math.max(1, tiers))]; }
function draw(topo) {
  svg.innerHTML = ""; lines = {}; drawn = topo.fabric_seq;
  document.getElementById("title").textContent = "mlfabric dashboard: " + (topo.name || "no fabric runs now");
  if (!topo.nodes.length) return;
  const tiers = Math.max(...topo.nodes.map(n => n.y));
  const at = {};
  topo.nodes.forEach(n => at[n.name] = place(n, tiers));
  topo.links.forEach(l => {
    const e = document.createElementNS(NS, "line");
    const [x1, y1] = at[l.a], [x2, y2] = at[l.b];
    Object.entries({x1, y1, x2, y2}).forEach(([k, v]) => e.setAttribute(k, v));
    e.setAttribute("class", "link"); e.setAttribute("data-link", l.link); e.setAttribute("data-mbps", 0);
    const tip = document.createElementNS(NS, "title"); tip.textContent = l.link; e.appendChild(tip);
    svg.appendChild(e); lines[l.link] = e;
  });
  topo.nodes.forEach(n => {
    const [x, y] = at[n.name];
    const e = document.createElementNS(NS, n.kind === "host" ? "circle" : "rect");
    if (n.kind === "host") { e.setAttribute("cx", x); e.setAttribute("cy", y); e.setAttribute("r", 7); e.setAttribute("class", "host"); }
    else { e.setAttribute("x", x - 9); e.setAttribute("y", y - 7); e.setAttribute("width", 18); e.setAttribute("height", 14); e.setAttribute("class", "switch"); }
    e.setAttribute("data-node", n.name);
    const label = document.createElementNS(NS, "text");
    label.setAttribute("x", x + 10); label.setAttribute("y", y - 8); label.textContent = n.name;
    svg.appendChild(e); svg.appendChild(label);
  });
}
function redraw() { return fetch("/api/topology").then(r => r.json()).then(draw); }
function showTables(name) {
  const box = document.getElementById("tables");
  box.textContent = `reading ${name}'s tables...`;
  fetch("/api/tables/" + encodeURIComponent(name)).then(r => r.json()).then(d => {
    if (d.error) { box.textContent = d.error; return; }
    box.innerHTML = `<table id="table-sizes" data-switch="${esc(name)}"><thead><tr><th>${esc(name)}'s table</th><th>entries</th></tr></thead><tbody>` +
      Object.entries(d.tables).map(([t, n]) => `<tr><td>${esc(t)}</td><td>${n}</td></tr>`).join("") + "</tbody></table>";
  });
}
function links(s) {
  s.links.forEach(r => {
    const e = lines[r.link]; if (!e) return;
    e.style.stroke = colour(r.utilisation);
    e.style.strokeWidth = 2 + 6 * Math.min(1, r.utilisation || 0);
    e.setAttribute("data-mbps", Math.max(r.tx_mbps, r.rx_mbps));
  });
  const top = [...s.links].sort((a, b) => Math.max(b.tx_mbps, b.rx_mbps) - Math.max(a.tx_mbps, a.rx_mbps)).slice(0, 10);
  document.querySelector("#busiest tbody").innerHTML = top.map(r =>
    `<tr><td>${esc(r.link)}</td><td>${esc(r.interface)}</td><td>${r.tx_mbps.toFixed(2)}</td><td>${r.rx_mbps.toFixed(2)}</td>` +
    `<td>${r.rate_mbps === null ? "unshaped" : r.rate_mbps + " Mbit/s"}</td>` +
    `<td>${r.utilisation === null ? "-" : (100 * r.utilisation).toFixed(0) + "%"}</td></tr>`).join("");
}
function switches(s) {
  document.querySelector("#switches tbody").innerHTML = (s.switches || []).map(w =>
    `<tr class="clickable" data-switch="${esc(w.switch)}"><td>${esc(w.switch)}</td>` +
    `<td>${w.cpu === null ? "-" : (100 * w.cpu).toFixed(1) + "%"}</td><td>${w.backlog_bytes}</td>` +
    `<td>${w.queue_ms === null || w.queue_ms === undefined ? "-" : w.queue_ms.toFixed(2) + " ms"}</td><td>${w.drops}</td></tr>`).join("");
  document.querySelectorAll("#switches tr.clickable").forEach(tr => tr.onclick = () => showTables(tr.dataset.switch));
}
function run(s) {
  const r = s.run, el = document.getElementById("run");
  el.textContent = r ? `${r.experiment}: ${r.status}${r.unit ? ", unit " + r.unit : ""} (results: ${r.folder})`
                     : "no experiment is running";
  el.setAttribute("data-status", r ? r.status : "");
  document.getElementById("job").innerHTML = Object.entries(s.job || {}).map(([k, text]) =>
    `<li data-job="${esc(k)}">${esc(text)}</li>`).join("");
  document.querySelector("#verdicts tbody").innerHTML = (s.verdicts || []).map(v =>
    `<tr data-comparison="${esc(v.comparison)}"><td>${esc(v.comparison)}</td>` +
    `<td class="${v.decided ? "decided" : "undecided"}">${esc(v.outcome)}</td><td>${esc(v.why)}</td></tr>`).join("");
}
function schedule(s) {
  const box = document.getElementById("schedule"), sc = s.schedule;
  if (!sc) { box.textContent = "no optical schedule installed"; return; }
  box.innerHTML = `${esc(sc.name)} (${esc(sc.kind)}, slices of ${sc.slice_us} us every ${sc.period_us} us): ` +
    sc.circuits.map((c, i) => `circuit switch ${i}: ${c.slice === null ? "night" : "slice " + c.slice}`).join("; ");
}
function timeline(s) {
  const span = 120, end = s.t, start = end - span;
  tl.innerHTML = "";
  const axis = document.createElementNS(NS, "line");
  Object.entries({x1: 0, y1: 50, x2: 1000, y2: 50}).forEach(([k, v]) => axis.setAttribute(k, v));
  axis.setAttribute("stroke", "#c9ccd8"); tl.appendChild(axis);
  const recent = (s.timeline || []).filter(e => e.t >= start);
  recent.forEach(e => {
    const x = Math.min(1000, Math.max(0, (e.t - start) / span * 1000));
    const m = document.createElementNS(NS, "rect");
    Object.entries({x: x - 2, y: e.kind === "reconfiguration" ? 10 : 30, width: 4, height: 20}).forEach(([k, v]) => m.setAttribute(k, v));
    m.setAttribute("fill", KIND_COLOUR[e.kind] || "#667"); m.setAttribute("data-kind", e.kind);
    if (e.phase) m.setAttribute("data-phase", e.phase);
    const tip = document.createElementNS(NS, "title"); tip.textContent = `${new Date(e.t * 1000).toLocaleTimeString()}: ${e.text}`;
    m.appendChild(tip); tl.appendChild(m);
  });
  document.getElementById("events").innerHTML = (s.timeline || []).slice(-8).reverse().map(e =>
    `<li data-kind="${esc(e.kind)}">${new Date(e.t * 1000).toLocaleTimeString()}: ${esc(e.text)}</li>`).join("");
}
function show(s) {
  if (s.fabric_seq !== undefined && s.fabric_seq !== drawn) { drawn = s.fabric_seq; redraw().then(() => links(s)); }
  else links(s);
  switches(s); run(s); schedule(s); timeline(s);
  const replay = s.replay ? `replay of ${s.replay.folder}: sample ${s.replay.index} of ${s.replay.of}; ` : "";
  document.getElementById("status").textContent = replay +
    `sample ${s.seq} at ${new Date(s.t * 1000).toLocaleTimeString()}; ${s.links.length} links` +
    (s.fabric ? "" : "; no fabric runs now");
  if (s.dashboard_cpu !== undefined)
    document.getElementById("own").textContent = `this dashboard's sampler: ${(100 * s.dashboard_cpu).toFixed(2)}% of a core`;
}
redraw().then(() => {
  const events = new EventSource("/api/stream");
  events.onmessage = m => show(JSON.parse(m.data));
  events.onerror = () => document.getElementById("status").textContent = "disconnected: is the dashboard still running?";
});
</script></body></html>
"""
