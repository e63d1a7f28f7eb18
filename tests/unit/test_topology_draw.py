"""The fabric drawing: no two labels overlap, whatever the fabric's size."""

from __future__ import annotations

import itertools

import pytest

from controller.topology import rail_only
from controller.topology.draw import topology_figure
from controller.topology.generators import rail_fat_tree

pytestmark = pytest.mark.unit


def _overlapping_labels(fig) -> list[tuple[str, str]]:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts]
    return [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2) if ba.overlaps(bb)]


@pytest.mark.parametrize("topo", [rail_only(32, 8), rail_only(32, 8, radix=16), rail_fat_tree(32, 8, spines=4),
                                  rail_only(4, 4)], ids=["rail-32x8", "rail-clos-32x8", "fat-tree-32x8", "rail-4x4"])
def test_no_two_labels_overlap(topo) -> None:
    import matplotlib.pyplot as plt

    fig = topology_figure(topo)
    try:
        assert fig.axes[0].texts, "nothing labelled"
        assert _overlapping_labels(fig) == []
    finally:
        plt.close(fig)


def test_a_fabric_without_spines_has_no_empty_spine_row() -> None:
    import matplotlib.pyplot as plt

    fig = topology_figure(rail_only(4, 4))
    try:
        assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["servers", "rail / leaf"]
    finally:
        plt.close(fig)
