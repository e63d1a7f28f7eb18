"""Draw a TopoOpt direct-connect fabric as what it is: servers on a circle, each circuit an
arrow from a server to the one it reaches, one colour per circuit switch (a ring's stride, or
model-parallel circuits); the circuit switches themselves only patch fibers."""

from __future__ import annotations

import math
from pathlib import Path

from controller.topology.model import Topology

__all__ = ["draw_direct_connect"]


def draw_direct_connect(topo: Topology, path: str | Path) -> Path:
    """Write a PNG of the circuits of TopoOpt fabric ``topo`` to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from controller.routing.topoopt_routes import wiring_of

    n = len(topo.hosts)
    wiring = wiring_of(topo)
    labels = list(wiring.labels) or [f"stride {st}" for st in topo.params.get("strides", [])]  # type: ignore[attr-defined]
    pos = [(math.cos(2 * math.pi * s / n - math.pi / 2), math.sin(2 * math.pi * s / n - math.pi / 2)) for s in range(n)]
    cmap = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(7.0, 7.0))
    for i, perm in enumerate(wiring.perms):
        colour = cmap(i % cmap.N)
        for s, t in enumerate(perm):
            if t is None:
                continue
            (x1, y1), (x2, y2) = pos[s], pos[t]
            ax.annotate("", xy=(x2, y2), xytext=(x1, y1), zorder=1,
                        arrowprops={"arrowstyle": "-|>", "color": colour, "lw": 0.9, "alpha": 0.75,
                                    "shrinkA": 7, "shrinkB": 7})
        ax.plot([], [], color=colour, label=f"ocs{i}: {labels[i] if i < len(labels) else 'circuits'}")
    for s, (x, y) in enumerate(pos):
        ax.scatter([x], [y], marker="s", s=80, color="0.25", zorder=2)
        if n <= 48:
            ax.annotate(topo.hosts[s].name, (x, y), textcoords="offset points",
                        xytext=(14 * x, 14 * y), ha="center", va="center", fontsize=7)
    longest = max(wiring.distance(s, t) for s in range(n) for t in range(n))
    ax.set_title(f"{topo.name} (topoopt): {n} servers, degree {wiring.degree},\n"
                 f"longest route {longest} circuits; arrows = one-way circuits")
    ax.legend(loc="upper right", fontsize=8)
    ax.set_aspect("equal")
    ax.axis("off")
    out = Path(path)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
