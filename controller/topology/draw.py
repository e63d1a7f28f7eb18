"""Draw a fabric: servers at the bottom, rail/leaf switches above, spines on top, every
rail's links in its own colour."""

from __future__ import annotations

from pathlib import Path

from controller.topology.model import Topology

__all__ = ["draw_topology"]

_TIER = {"rail": 1, "leaf": 1, "tor": 1, "hb-domain": 1, "ocs": 1, "spine": 2}


def _positions(topo: Topology) -> dict[str, tuple[float, float]]:
    pos: dict[str, tuple[float, float]] = {}
    n = max(1, len(topo.hosts))
    for i, h in enumerate(topo.hosts):
        pos[h.name] = ((i + 0.5) / n, 0.0)
    tiers: dict[int, list[str]] = {}
    for s in topo.switches:
        tiers.setdefault(_TIER.get(s.role, 1), []).append(s.name)
    for tier, names in tiers.items():
        for i, name in enumerate(names):
            pos[name] = ((i + 0.5) / len(names), float(tier))
    return pos


def draw_topology(topo: Topology, path: str | Path, *, max_hosts: int = 256) -> Path:
    """Write a PNG of ``topo`` to ``path``; large fabrics are drawn up to ``max_hosts`` servers.
    A TopoOpt fabric is drawn as its direct-connect graph instead."""
    if topo.kind == "topoopt":
        from controller.topology.draw_direct import draw_direct_connect

        return draw_direct_connect(topo, path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = {h.name for h in topo.hosts[:max_hosts]}
    pos = _positions(topo)
    rails = max([n.rail or 0 for h in topo.hosts for n in h.nics] + [s.rail or 0 for s in topo.switches] + [0]) + 1
    cmap = plt.get_cmap("tab10" if rails <= 10 else "tab20")
    fig, ax = plt.subplots(figsize=(max(8.0, len(shown) * 0.35), 5.0))
    for lk in topo.links:
        if (lk.a.node not in shown and not topo.is_switch(lk.a.node)) or (
            lk.b.node not in shown and not topo.is_switch(lk.b.node)
        ):
            continue
        rail = None
        for ep in (lk.a, lk.b):
            if topo.is_switch(ep.node):
                rail = topo.switch(ep.node).rail if rail is None else rail
        colour = cmap(rail % cmap.N) if rail is not None else "0.6"
        (x1, y1), (x2, y2) = pos[lk.a.node], pos[lk.b.node]
        ax.plot([x1, x2], [y1, y2], color=colour, linewidth=0.8, alpha=0.7, zorder=1)
    for h in topo.hosts[:max_hosts]:
        x, y = pos[h.name]
        ax.scatter([x], [y], marker="s", s=60, color="0.25", zorder=2)
        if len(shown) <= 32:
            ax.annotate(h.name, (x, y), textcoords="offset points", xytext=(0, -12), ha="center", fontsize=7)
    for s in topo.switches:
        x, y = pos[s.name]
        colour = cmap(s.rail % cmap.N) if s.rail is not None else "black"
        ax.scatter([x], [y], marker="o", s=120, color=colour, edgecolors="black", zorder=3)
        if len(topo.switches) <= 48:
            ax.annotate(s.name, (x, y), textcoords="offset points", xytext=(0, 9), ha="center", fontsize=7)
    ax.set_title(f"{topo.name} ({topo.kind}): {len(topo.hosts)} servers, {len(topo.switches)} switches, "
                 f"{len(topo.links)} links; colour = rail")
    ax.set_yticks([0, 1, 2], ["servers", "rail / leaf", "spine"])
    ax.set_xticks([])
    ax.set_ylim(-0.4, 2.4)
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    out = Path(path)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
