"""The dashboard's one page: the topology as SVG (servers at the bottom, switches above), each
link coloured by its measured rate against its configured rate, and the busiest links in a
table, updated from the server's event stream. No script from the internet: it is all here."""

from __future__ import annotations

__all__ = ["PAGE"]

PAGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>mlfabric dashboard</title>
<style>
body{font:14px system-ui,sans-serif;margin:1em 2em;color:#1d2330}
h1{font-size:1.3em;margin:.2em 0} .muted{color:#667}
svg{width:100%;height:420px;border:1px solid #e3e5ee;border-radius:6px;background:#fbfbfd}
line{stroke:#c9ccd8;stroke-width:2} circle{fill:#3d5a80} rect{fill:#ee6c4d}
text{font-size:10px;fill:#333} table{border-collapse:collapse;margin-top:1em}
td,th{border:1px solid #e3e5ee;padding:.2em .6em;text-align:right} th{background:#f4f5f9}
td:first-child{text-align:left}
</style></head><body>
<h1 id="title">mlfabric dashboard</h1>
<p class="muted" id="status">connecting...</p>
<svg id="fabric" viewBox="0 0 1000 420" preserveAspectRatio="none"></svg>
<table id="busiest"><thead><tr><th>link</th><th>interface</th><th>out Mbit/s</th><th>in Mbit/s</th>
<th>configured</th><th>share</th></tr></thead><tbody></tbody></table>
<script>
const NS = "http://www.w3.org/2000/svg";
const svg = document.getElementById("fabric");
const lines = {};
function colour(u) {  // grey idle or unshaped, green to red as a link fills its configured rate
  if (u === null || u === undefined || u < 0.01) return "#c9ccd8";
  const x = Math.max(0, Math.min(1, u));
  return `hsl(${120 - 120 * x}, 75%, ${45 - 5 * x}%)`;
}
function place(n, tiers) { return [40 + n.x * 920, 390 - n.y * (340 / Math.max(1, tiers))]; }
fetch("/api/topology").then(r => r.json()).then(topo => {
  document.getElementById("title").textContent = "mlfabric dashboard: " + topo.name;
  const tiers = Math.max(...topo.nodes.map(n => n.y));
  const at = {};
  topo.nodes.forEach(n => at[n.name] = place(n, tiers));
  topo.links.forEach(l => {
    const e = document.createElementNS(NS, "line");
    const [x1, y1] = at[l.a], [x2, y2] = at[l.b];
    Object.entries({x1, y1, x2, y2}).forEach(([k, v]) => e.setAttribute(k, v));
    e.setAttribute("data-link", l.link);
    const tip = document.createElementNS(NS, "title"); tip.textContent = l.link; e.appendChild(tip);
    svg.appendChild(e); lines[l.link] = e;
  });
  topo.nodes.forEach(n => {
    const [x, y] = at[n.name];
    const e = document.createElementNS(NS, n.kind === "host" ? "circle" : "rect");
    if (n.kind === "host") { e.setAttribute("cx", x); e.setAttribute("cy", y); e.setAttribute("r", 7); }
    else { e.setAttribute("x", x - 9); e.setAttribute("y", y - 7); e.setAttribute("width", 18); e.setAttribute("height", 14); }
    e.setAttribute("data-node", n.name);
    const label = document.createElementNS(NS, "text");
    label.setAttribute("x", x + 10); label.setAttribute("y", y - 8); label.textContent = n.name;
    svg.appendChild(e); svg.appendChild(label);
  });
  const events = new EventSource("/api/stream");
  events.onmessage = m => {
    const s = JSON.parse(m.data);
    s.links.forEach(r => {
      const e = lines[r.link]; if (!e) return;
      e.style.stroke = colour(r.utilisation);
      e.style.strokeWidth = 2 + 6 * Math.min(1, r.utilisation || 0);
      e.setAttribute("data-mbps", Math.max(r.tx_mbps, r.rx_mbps));
    });
    const top = [...s.links].sort((a, b) => Math.max(b.tx_mbps, b.rx_mbps) - Math.max(a.tx_mbps, a.rx_mbps)).slice(0, 10);
    document.querySelector("#busiest tbody").innerHTML = top.map(r =>
      `<tr><td>${r.link}</td><td>${r.interface}</td><td>${r.tx_mbps.toFixed(2)}</td><td>${r.rx_mbps.toFixed(2)}</td>` +
      `<td>${r.rate_mbps === null ? "unshaped" : r.rate_mbps + " Mbit/s"}</td>` +
      `<td>${r.utilisation === null ? "-" : (100 * r.utilisation).toFixed(0) + "%"}</td></tr>`).join("");
    document.getElementById("status").textContent =
      `sample ${s.seq} at ${new Date(s.t * 1000).toLocaleTimeString()}; ${s.links.length} links`;
  };
  events.onerror = () => document.getElementById("status").textContent = "disconnected: is the fabric still up?";
});
</script></body></html>
"""
