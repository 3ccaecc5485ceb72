"""A picture of a topology (PNG via matplotlib); `mrc-testbed draw` makes one.

Rows from the bottom: hosts, then tier 0 (leaf/edge), tier 1 (spine/aggregation), tier 2 (core).
Switches and links are coloured by plane; within a row, switches are grouped by plane. Links
between switches of the same row are drawn as arcs. Port numbers are optional.
"""
from __future__ import annotations

from topologies.model import TIER_NAMES, Topology

HOST_ROW = "hosts"
MAX_FIGURE_WIDTH_IN = 40.0
NODE_SPACING_IN = 0.75
ROW_HEIGHT_IN = 1.7


def layout(topo: Topology) -> dict[str, tuple[float, float]]:
    """(x, y) of every node: rows by tier (hosts at y=0, tier t at y=t+1), centred, evenly spaced."""
    rows: dict[int, list[str]] = {0: [h.name for h in topo.hosts]}
    for switch in sorted(topo.switches, key=lambda s: (s.tier, s.plane, s.index)):
        rows.setdefault(switch.tier + 1, []).append(switch.name)
    width = max(len(names) for names in rows.values()) or 1
    positions = {}
    for y, names in rows.items():
        spacing = width / len(names)
        for i, name in enumerate(names):
            positions[name] = (spacing * (i + 0.5), float(y))
    return positions


def draw(topo: Topology, output: str, show_ports: bool = False, dpi: int = 120) -> str:
    """Render `topo` to the PNG file `output`; return its path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    positions = layout(topo)
    widest = max((sum(1 for p in positions.values() if p[1] == y) for y in {p[1] for p in positions.values()}),
                 default=1)
    rows = 1 + (max(s.tier for s in topo.switches) + 1 if topo.switches else 0)
    fig_width = min(MAX_FIGURE_WIDTH_IN, max(6.0, NODE_SPACING_IN * widest + 1.5))
    fig, ax = plt.subplots(figsize=(fig_width, ROW_HEIGHT_IN * rows + 1.0))
    colours = plt.get_cmap("tab10")
    plane_colour = {plane: colours(i % 10) for i, plane in enumerate(topo.planes)}
    small = max(5.0, min(9.0, 90.0 / max(widest, 1)))

    for link in topo.links:
        switch = link.a if topo.is_switch(link.a) else link.b
        colour = plane_colour[topo.switch(switch).plane]
        curve = _link_curve(positions[link.a], positions[link.b])
        ax.plot([p[0] for p in curve], [p[1] for p in curve], color=colour, lw=1.0, alpha=0.8, zorder=1)
        if show_ports:
            for node, port, at in ((link.a, link.a_port, 0.2), (link.b, link.b_port, 0.8)):
                if topo.is_switch(node):
                    x, y = _bezier(curve[0], _control(curve[0], curve[-1]), curve[-1], at)
                    ax.text(x, y, str(port), fontsize=small * 0.8, ha="center", va="center", zorder=3,
                            bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.9))

    for host in topo.hosts:
        x, y = positions[host.name]
        ax.scatter([x], [y], marker="s", s=260, color="#d9d9d9", edgecolors="#555555", zorder=2)
        ax.text(x, y, host.name, fontsize=small, ha="center", va="center", zorder=4)
    for switch in topo.switches:
        x, y = positions[switch.name]
        ax.scatter([x], [y], marker="o", s=420, color=plane_colour[switch.plane], edgecolors="black", zorder=2)
        ax.text(x, y, switch.name, fontsize=small, ha="center", va="center", color="white",
                fontweight="bold", zorder=4)

    ax.set_yticks(range(rows))
    ax.set_yticklabels([HOST_ROW] + [TIER_NAMES[t] for t in range(rows - 1)])
    ax.set_xticks([])
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    xs = [p[0] for p in positions.values()] or [0.0]
    ax.set_xlim(min(xs) - 0.6, max(xs) + 0.6)
    ax.set_ylim(-0.5, rows - 0.4)
    if len(topo.planes) > 1:
        ax.legend(handles=[Line2D([0], [0], marker="o", color=plane_colour[p], lw=2, label=f"plane {p}")
                           for p in topo.planes], loc="upper right", fontsize=8, frameon=False)
    ax.set_title(f"{topo.name}: {len(topo.hosts)} hosts, {len(topo.switches)} switches, "
                 f"{len(topo.links)} links", fontsize=10)
    fig.tight_layout()
    fig.savefig(output, dpi=dpi)
    plt.close(fig)
    return output


def _control(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    """Control point of a link's curve: the midpoint, lifted for links within one row."""
    lift = min(0.7, 0.15 * abs(b[0] - a[0])) if a[1] == b[1] else 0.0
    return (a[0] + b[0]) / 2, (a[1] + b[1]) / 2 + lift


def _bezier(a, c, b, t: float) -> tuple[float, float]:
    """Point at `t` on the quadratic Bezier curve a-c-b."""
    return tuple((1 - t) ** 2 * a[i] + 2 * t * (1 - t) * c[i] + t ** 2 * b[i] for i in (0, 1))


def _link_curve(a, b, steps: int = 24) -> list[tuple[float, float]]:
    """Points of a link's line (straight between rows, an arc within a row)."""
    c = _control(a, b)
    return [_bezier(a, c, b, i / steps) for i in range(steps + 1)]
