"""swir-report's roofline plot (matplotlib, imported only when a plot is
drawn): kernels as points on log-log axes of operational intensity and
attained performance, under the machine's two roofs (docs/swir-report.md,
"The plot")."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swir.costmodel.cost import CostReport, KernelCost, Machine

from .errors import usage_error
from .report_table import n_kernels, seconds

PLOT_LABELS = 40             # the plot numbers at most this many kernels


def plot_format(path: str) -> str:
    """The image format --plot writes (from the suffix; PNG without one)."""
    try:
        import matplotlib
    except ImportError:
        raise usage_error("--plot needs matplotlib: pip install matplotlib, or swir's report "
                          "extra (pip install 'swir[report]'; from a source checkout, "
                          "pip install '.[report]')") from None
    matplotlib.use("Agg")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    fmt = Path(path).suffix[1:].lower() or "png"
    supported = FigureCanvasAgg.get_supported_filetypes()
    if fmt not in supported:
        raise usage_error(f"--plot: cannot write a '.{fmt}' image (formats: "
                          f"{', '.join(sorted(supported))})")
    return fmt


def roofline_image(r: CostReport, info: dict[str, Any], path: str) -> bytes:
    """The plot, in the image format of ``path``'s suffix."""
    fmt = plot_format(path)
    buf = io.BytesIO()
    roofline_figure(r, info).savefig(buf, format=fmt)
    return buf.getvalue()


def roofline_figure(r: CostReport, info: dict[str, Any]) -> Any:
    """The plot as a matplotlib Figure: the roofs, the kernels, the legend
    and the key (needs matplotlib; plot_format says so when it is missing)."""
    plot_format("roofline.png")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure  # no pyplot: no global figure state
    fig = Figure(figsize=(12, 7), dpi=150)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.075, 0.09, 0.56, 0.80))
    key = fig.add_axes((0.655, 0.04, 0.335, 0.85))
    key.set_axis_off()
    points = plotted(r.kernels)
    limits(ax, r.machine, points)
    avoid = roofs(ax, r.machine)
    kernel_points(ax, points, r.modeled_s, avoid, r.machine)
    key_text(key, r.kernels, points)
    level = f"-{info['level']}" if info["level"] else "a --pipeline"
    ax.set_title(f"Roofline of \"{info['module']}\" (@{r.function}) at {level}, "
                 f"{info['machine_name']} machine\nmodeled {seconds(r.modeled_s)} in "
                 f"{n_kernels(len(r.kernels))}", fontsize=11)
    ax.set_xlabel("operational intensity (flop/byte)", fontsize=10)
    ax.set_ylabel("attained performance (GFLOP/s)", fontsize=10)
    return fig


@dataclass
class Point:
    number: int
    kernel: KernelCost
    x: float             # flop/byte
    y: float             # GFLOP/s
    shown: tuple[float, float] | None = None   # where drawn (moved off another point), data


def at(p: Point) -> tuple[float, float]:
    """Where the point is drawn."""
    return p.shown or (p.x, p.y)


def plotted(kernels: list[KernelCost]) -> list[Point]:
    """The kernels a log-log plot can show: some flops and some DMA."""
    return [Point(n, k, k.intensity, k.flops / k.modeled_s / 1e9)
            for n, k in enumerate(kernels, 1)
            if k.flops and k.dma_bytes and k.modeled_s > 0]


def limits(ax: Any, m: Machine, points: list[Point]) -> None:
    ridge = m.peak_flops / m.bandwidth
    xs = [p.x for p in points] + [ridge]
    ys = [p.y for p in points] + [m.peak_flops / 1e9]
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(min(xs) / 4, max(xs) * 4)
    ax.set_ylim(min(ys) / 4, m.peak_flops / 1e9 * 3)
    ax.grid(True, which="major", alpha=0.3)
    ax.grid(True, which="minor", alpha=0.08)


Box = tuple[float, float, float, float]     # x0, y0, x1, y1 in display pixels


def roofs(ax: Any, m: Machine) -> list[Box]:
    """min(peak, bandwidth x intensity), each part labelled with its value;
    returns where the labels are (for the kernels' numbers to avoid)."""
    peak, bw = m.peak_flops / 1e9, m.bandwidth / 1e9
    ridge = peak / bw
    x0, x1 = ax.get_xlim()
    ax.plot([x0, ridge], [bw * x0, peak], color="tab:red", lw=2)
    ax.plot([ridge, x1], [peak, peak], color="tab:blue", lw=2)
    ax.plot([x0, x1], [m.peak_bandwidth / 1e9 * x0, m.peak_bandwidth / 1e9 * x1],
            color="tab:red", lw=0.8, ls=":", alpha=0.6)
    ax.axvline(ridge, color="gray", lw=0.8, ls="--", alpha=0.6)
    labels = [ax.annotate(f"peak compute {peak:,.1f} GFLOP/s ({m.cpes} CPEs)", (x1, peak),
                          xytext=(-6, 5), textcoords="offset points", ha="right",
                          va="bottom", fontsize=9, color="tab:blue"),
              ax.annotate(f"ridge {ridge:.1f} flop/B", (ridge, peak), xytext=(4, -6),
                          textcoords="offset points", ha="left", va="top", fontsize=8,
                          color="gray")]
    # Above the dotted roof: no kernel can be there.
    xa = math.sqrt(x0 * ridge)           # halfway up the slope, in log space
    text = f"DMA {bw:,.2f} GB/s achievable (solid), {m.peak_bandwidth / 1e9:g} GB/s peak (dotted)"
    angle = slope_angle(ax, xa, bw)
    ax.annotate(text, (xa, m.peak_bandwidth / 1e9 * xa), xytext=(0, 6),
                textcoords="offset points", rotation=angle, rotation_mode="anchor",
                fontsize=9, color="tab:red", ha="center", va="bottom")
    renderer = ax.figure.canvas.get_renderer()
    boxes = [tuple(t.get_window_extent(renderer).extents) for t in labels]
    px, py = ax.transData.transform((xa, m.peak_bandwidth / 1e9 * xa))
    return boxes + along(px, py + 6 * ax.figure.dpi / 72, angle, len(text) * 5.2,
                         11, ax.figure.dpi / 72)


def along(x: float, y: float, angle: float, length: float, height: float,
          scale: float) -> list[Box]:
    """Boxes covering a text rotated by ``angle`` whose baseline is centred on
    (x, y): ``length`` and ``height`` in points."""
    c, s = math.cos(math.radians(angle)), math.sin(math.radians(angle))
    h = height * scale
    out = []
    for j in range(int(length / height) + 1):
        t = (j * height - length / 2) * scale
        cx, cy = x + t * c - h / 2 * s, y + t * s + h / 2 * c
        out.append((cx - h / 2, cy - h / 2, cx + h / 2, cy + h / 2))
    return out


def slope_angle(ax: Any, x: float, bw: float) -> float:
    """The on-screen angle of the line y = bw x (axes placed, limits set)."""
    (ax0, ay0), (ax1, ay1) = ax.transData.transform([(x, bw * x), (x * 2, bw * x * 2)])
    return math.degrees(math.atan2(ay1 - ay0, ax1 - ax0))


def kernel_points(ax: Any, points: list[Point], total: float, avoid: list[Box],
                  m: Machine) -> None:
    """Markers (area by share of the modeled time; colour by what bounds the
    kernel; moved apart where they would cover each other), numbered as the
    table, and a legend saying what the colours and shapes mean."""
    separate(ax, points, total)
    ridge = m.peak_flops / m.bandwidth
    for kind in KINDS:
        pts = [p for p in points if kind_of(p, ridge) == kind]
        if pts:
            ax.scatter([at(p)[0] for p in pts], [at(p)[1] for p in pts],
                       s=[area(p, total) for p in pts], label=LEGEND[kind], zorder=3,
                       alpha=0.75, edgecolors="black", linewidths=0.5, **STYLE[kind])
        if kind == "dma-right":
            effective_points(ax, pts, m)
    if points:
        legend = ax.legend(loc="upper left", fontsize=7, markerscale=0.6, framealpha=0.9,
                           title="colour: what bounds the modeled time", title_fontsize=7)
        avoid = avoid + [tuple(legend.get_window_extent(ax.figure.canvas.get_renderer())
                               .extents)]
    place_labels(ax, [p for p in points if p.number <= PLOT_LABELS], total, avoid)


# What bounds a kernel: its compute; its DMA (left of the ridge, as the roofs
# say); its DMA although right of the ridge, where the roofs say compute.
KINDS = ("compute", "dma", "dma-right")
STYLE = {"compute": {"color": "tab:green", "marker": "o"},
         "dma": {"color": "tab:orange", "marker": "o"},
         "dma-right": {"color": "tab:red", "marker": "D"}}
LEGEND = {
    "compute": "compute-bound: compute time >= DMA time",
    "dma": "DMA-bound: DMA time > compute time",
    "dma-right": ("DMA-bound right of the ridge: its DMA streams below\n"
                  "the roof's bandwidth (small transfers, start-up per DMA,\n"
                  "few busy CPEs); the hollow marker: where the roof's\n"
                  "bandwidth puts that DMA time, flops / (bandwidth x DMA time)"),
}


def kind_of(p: Point, ridge: float) -> str:
    if not is_dma_bound(p.kernel):
        return "compute"
    return "dma-right" if p.x > ridge else "dma"


def effective_points(ax: Any, points: list[Point], m: Machine) -> None:
    """For a DMA-bound kernel right of the ridge, a hollow marker at its
    effective intensity (the intensity at which the roof's bandwidth takes
    its DMA time), joined to its point: that is left of the ridge."""
    for p in points:
        x_eff = p.kernel.flops / (m.bandwidth * p.kernel.dma_s)
        x, y = at(p)
        ax.plot([x, x_eff * x / p.x], [y, y], color="tab:red", lw=0.7, ls=":", zorder=2)
        ax.scatter([x_eff * x / p.x], [y], s=28, facecolors="none", edgecolors="tab:red",
                   linewidths=0.9, marker="D", zorder=3)


def is_dma_bound(k: KernelCost) -> bool:
    return k.dma_s > k.compute_s


# The least distance, in points, between the centres of two drawn markers.
SEPARATION = 5.0


def separate(ax: Any, points: list[Point], total: float) -> None:
    """Move markers that would (nearly) cover one another apart: each, in
    table order, goes to the nearest place (on rings around its true place)
    at least SEPARATION points from every marker placed before it."""
    gap = SEPARATION * ax.figure.dpi / 72
    inverse = ax.transData.inverted()
    placed: list[tuple[float, float]] = []
    for p in points:
        true = tuple(float(v) for v in ax.transData.transform((p.x, p.y)))
        spot = next(c for c in around(true, gap) if all(math.dist(c, q) >= gap for q in placed))
        placed.append(spot)
        if spot != true:
            x, y = inverse.transform(spot)
            p.shown = (float(x), float(y))


def around(centre: tuple[float, float], gap: float):
    """``centre``, then places on rings ``gap`` apart around it, nearest first."""
    yield centre
    ring = 1
    while True:
        for k in range(6 * ring):
            a = 2 * math.pi * k / (6 * ring)
            yield (centre[0] + ring * gap * math.cos(a), centre[1] + ring * gap * math.sin(a))
        ring += 1


def area(p: Point, total: float) -> float:
    return 12 + 400 * (p.kernel.modeled_s / total if total else 0)


# Label offsets in points, tried in order: right, above, left, below, diagonals.
OFFSETS = ((1, 0), (0, 1), (-1, 0), (0, -1), (1, 1), (-1, 1), (-1, -1), (1, -1))


def place_labels(ax: Any, points: list[Point], total: float, avoid: list[Box]) -> None:
    """Number the points; each number goes where it overlaps no marker, roof
    label or number placed before it (else farther out, with a leader line)."""
    scale = ax.figure.dpi / 72
    taken = avoid + [marker_box(ax, p, total) for p in points]
    for p in points:
        text = str(p.number)
        w, h = (4.6 * len(text) + 2) * scale, 9 * scale
        px, py = ax.transData.transform(at(p))
        r = (math.sqrt(area(p, total)) / 2 + 2) * scale
        chosen = None
        for ring in (1.0, 2.2, 3.4):
            for dx, dy in OFFSETS:
                cx, cy = px + dx * (r * ring + w / 2), py + dy * (r * ring + h / 2)
                box = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
                if not any(overlaps(box, t) for t in taken):
                    chosen = (ring, cx, cy, box)
                    break
            if chosen:
                break
        ring, cx, cy, box = chosen or (1.0, px + r + w / 2, py, (0, 0, 0, 0))
        taken.append(box)
        ax.annotate(text, at(p), xytext=((cx - px) / scale, (cy - py) / scale),
                    textcoords="offset points", ha="center", va="center", fontsize=7.5,
                    zorder=4, arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "0.4"}
                    if ring > 1 else None)


def marker_box(ax: Any, p: Point, total: float) -> Box:
    px, py = ax.transData.transform(at(p))
    r = math.sqrt(area(p, total)) / 2 * ax.figure.dpi / 72
    return (px - r, py - r, px + r, py + r)


def overlaps(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def key_text(key: Any, kernels: list[KernelCost], points: list[Point]) -> None:
    """Beside the plot: n: kernel (modeled time), for the numbered kernels."""
    shown = {p.number for p in points}
    lines: list[tuple[str, str]] = [("kernels, by modeled time (point area ~ time):", "black")]
    for n, k in enumerate(kernels[:PLOT_LABELS], 1):
        name = k.name if len(k.name) <= 34 else k.name[:33] + "…"
        mark = "" if n in shown else "  *"
        lines.append((f"{n:>3}: {name} ({seconds(k.modeled_s)}){mark}",
                      "black" if n in shown else "0.45"))
    if len(kernels) > PLOT_LABELS:
        lines.append(((f"  … {len(kernels) - PLOT_LABELS} more kernels (only the "
                      f"{PLOT_LABELS} slowest are numbered)"), "0.3"))
    if any(n not in shown for n in range(1, min(len(kernels), PLOT_LABELS) + 1)):
        lines.append(("  * not plotted: no flops (a pure copy) is intensity 0,", "0.3"))
        lines.append(("    off the log axes; still in the totals", "0.3"))
    step = min(0.028, 0.99 / max(len(lines), 1))
    for j, (text, color) in enumerate(lines):
        key.text(0, 1 - j * step, text, transform=key.transAxes, va="top", ha="left",
                 family="monospace", fontsize=8 if step >= 0.022 else 7, color=color)

