"""Draw a fabric: servers at the bottom, rail/leaf switches and ToRs above, spines and circuit switches on top, every
rail's links in its own colour."""

from __future__ import annotations

from pathlib import Path

from controller.topology.model import Topology

__all__ = ["draw_topology", "label_rotation", "positions", "topology_figure"]

_TIER = {"rail": 1, "leaf": 1, "tor": 1, "hb-domain": 1, "ocs": 2, "spine": 2}


def positions(topo: Topology) -> dict[str, tuple[float, float]]:
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


def label_rotation(names: list[str], span_pt: float, fontsize: float = 7.0) -> float | None:
    """How to label ``names`` spread evenly over ``span_pt`` points: 0 (level) when the
    widest fits between neighbours, 90 (upright) when a line height fits, else None (no labels).

    >>> label_rotation(["s0", "s1"], 200.0)
    0
    >>> label_rotation([f"rail{i}-leaf{i}" for i in range(32)], 800.0)
    90
    >>> label_rotation([f"h{i}" for i in range(2000)], 800.0) is None
    True
    """
    if not names:
        return None
    gap = span_pt / len(names)
    if max(len(n) for n in names) * fontsize * _CHAR_WIDTH + fontsize * 0.5 <= gap:
        return 0
    if fontsize * 1.4 <= gap:
        return 90
    return None


_CHAR_WIDTH = 0.62  # of the font size: DejaVu Sans' average glyph, a little generous
_FIG_HEIGHT_IN = 5.0


def topology_figure(topo: Topology, *, max_hosts: int = 256):  # -> matplotlib.figure.Figure
    """The figure of a layered fabric (servers, rail/leaf switches, spines), not yet saved."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = {h.name for h in topo.hosts[:max_hosts]}
    pos = positions(topo)
    rails = max([n.rail or 0 for h in topo.hosts for n in h.nics] + [s.rail or 0 for s in topo.switches] + [0]) + 1
    cmap = plt.get_cmap("tab10" if rails <= 10 else "tab20")
    width_in = max(8.0, len(shown) * 0.35)
    fig, ax = plt.subplots(figsize=(width_in, _FIG_HEIGHT_IN))
    span_pt = width_in * 72 * 0.8  # the axes' share of the figure
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
    hosts = topo.hosts[:max_hosts]
    host_rotation = label_rotation([h.name for h in hosts], span_pt)
    for h in hosts:
        x, y = pos[h.name]
        ax.scatter([x], [y], marker="s", s=60, color="0.25", zorder=2)
        if host_rotation is not None:
            ax.annotate(h.name, (x, y), textcoords="offset points", xytext=(0, -8), ha="center", va="top",
                        rotation=host_rotation, fontsize=7)
    tiers: dict[float, list[str]] = {}
    for s in topo.switches:
        tiers.setdefault(pos[s.name][1], []).append(s.name)
    rotation = {name: label_rotation(names, span_pt) for names in tiers.values() for name in names}
    for s in topo.switches:
        x, y = pos[s.name]
        colour = cmap(s.rail % cmap.N) if s.rail is not None else "black"
        ax.scatter([x], [y], marker="o", s=120, color=colour, edgecolors="black", zorder=3)
        if rotation[s.name] is not None:
            ax.annotate(s.name, (x, y), textcoords="offset points", xytext=(0, 8), ha="center", va="bottom",
                        rotation=rotation[s.name], fontsize=7, zorder=4,
                        bbox={"boxstyle": "square,pad=0.05", "facecolor": "white", "edgecolor": "none", "alpha": 0.8})
    unlabelled = host_rotation is None or any(r is None for r in rotation.values())
    ax.set_title(f"{topo.name} ({topo.kind}): {len(topo.hosts)} servers, {len(topo.switches)} switches, "
                 f"{len(topo.links)} links; colour = rail" + ("; too many to label" if unlabelled else ""))
    used = sorted({0.0} | set(tiers))
    names = {0.0: "servers", 1.0: "rail / leaf", 2.0: "spine"}
    ax.set_yticks(used, [names[t] for t in used])
    ax.set_xticks([])
    ax.set_ylim(-0.6, max(used) + 0.6)
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    return fig


def draw_topology(topo: Topology, path: str | Path, *, max_hosts: int = 256) -> Path:
    """Write a PNG of ``topo`` to ``path``; large fabrics are drawn up to ``max_hosts`` servers.
    A TopoOpt fabric is drawn as its direct-connect graph instead."""
    if topo.kind == "topoopt":
        from controller.topology.draw_direct import draw_direct_connect

        return draw_direct_connect(topo, path)
    import matplotlib.pyplot as plt

    fig = topology_figure(topo, max_hosts=max_hosts)
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
