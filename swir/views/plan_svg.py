"""The picture of a kernel's plan (swir.views.plan.KernelPlan) as SVG, drawn
directly rather than through Graphviz: the plan is not a graph but a bar
(LDM use against capacity), a grid (the 8 x 8 CPEs), a nest and a table,
whose positions and sizes carry meaning (a buffer's width is its bytes) that
a graph layout would not keep. No program is needed to make it.

Top to bottom: the title; the LDM of one CPE as a bar as wide as its
capacity, a segment per buffer; the loop nest each CPE runs, the loop split
over the CPEs marked, beside the CPE grid coloured by which iterations of
that loop each CPE takes; the transfers (DMA gets, puts, broadcasts,
register-bus sends) with their sizes and counts; a legend.
"""

from __future__ import annotations

from xml.sax.saxutils import escape

from swir.views.plan import DIRECTION, KIND, KernelPlan, elements

WIDTH = 1000
MARGIN = 20
LINE = 16
FONT = 'font-family="Helvetica, Arial, sans-serif"'
MONO = 'font-family="DejaVu Sans Mono, Menlo, monospace"'
# Buffers (a colour each, in order) and transfers (a colour per kind).
PALETTE = ("#6c8ebf", "#82b366", "#d79b00", "#9673a6", "#b85450", "#23445d", "#56a3a6",
           "#a0522d")
TRANSFER_COLOUR = {"dma_get": "#6c8ebf", "dma_put": "#d79b00", "dma_bcast": "#9673a6",
                   "reg_send": "#82b366"}
IDLE = "#e6e6e6"
FREE = "#f5f5f5"
GRID = 8          # the SW26010's core group: 8 x 8 CPEs
CELL = 30


class Canvas:
    def __init__(self) -> None:
        self.items: list[str] = []
        self.y = MARGIN

    def text(self, x: float, y: float, s: str, size: int = 12, weight: str = "normal",
             fill: str = "#222222", mono: bool = False, anchor: str = "start") -> None:
        self.items.append(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" '
                          f'font-weight="{weight}" fill="{fill}" text-anchor="{anchor}" '
                          f'{MONO if mono else FONT}>{escape(s)}</text>')

    def rect(self, x: float, y: float, w: float, h: float, fill: str,
             stroke: str = "#666666", extra: str = "") -> None:
        self.items.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" '
                          f'height="{h:.1f}" fill="{fill}" stroke="{stroke}" '
                          f'stroke-width="0.8"{extra}/>')

    def svg(self, title: str) -> str:
        height = self.y + MARGIN
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
                f'viewBox="0 0 {WIDTH} {height}">\n<title>{escape(title)}</title>\n'
                '<defs><pattern id="double" width="6" height="6" patternUnits="userSpaceOnUse" '
                'patternTransform="rotate(45)"><rect width="3" height="6" fill="#ffffff" '
                'opacity="0.45"/></pattern></defs>\n'
                f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>\n')
        return head + "\n".join(self.items) + "\n</svg>\n"


def plan_svg(plan: KernelPlan) -> str:
    c = Canvas()
    title = f"Plan of cpe kernel @{plan.kernel} (module {plan.module})"
    c.y += 12
    c.text(MARGIN, c.y, title, 18, "bold")
    c.y += 20
    c.text(MARGIN, c.y, "What each of the 64 CPEs keeps in its local memory (LDM), the loops "
           "it runs, which part of the work it takes, and what moves between main memory "
           "and LDM.", 12, fill="#555555")
    c.y += 30
    _ldm(c, plan)
    _nest_and_grid(c, plan)
    _transfers(c, plan)
    _legend(c)
    return c.svg(title)


def _ldm(c: Canvas, plan: KernelPlan) -> None:
    used, size = plan.ldm_used, plan.ldm_size
    c.text(MARGIN, c.y, f"1. LDM of one CPE: {used:,} of {size:,} bytes used "
           f"({100 * used / size:.1f}%)", 14, "bold")
    c.y += 10
    _bar(c, plan, size, "free")
    if used < size / 4:     # too thin to read at full scale: the used part, enlarged
        c.text(MARGIN, c.y, f"the used {used:,} bytes enlarged:", 11, fill="#555555")
        c.y += 6
        _bar(c, plan, used, "")
    c.y += 8
    for k, b in enumerate(plan.buffers):
        c.rect(MARGIN, c.y - 10, 12, 12, PALETTE[k % len(PALETTE)], "#ffffff")
        one = b.bytes // b.copies
        kept = f"double-buffered, 2 x {one:,} bytes" if b.copies == 2 else f"{one:,} bytes"
        holds = f"a tile of {b.holds}: " if b.holds else ""
        c.text(MARGIN + 18, c.y, f"{b.name}  {b.type}  {holds}{kept}", 12, mono=False)
        c.y += LINE
    c.y += 18


def _bar(c: Canvas, plan: KernelPlan, scale: int, rest: str) -> None:
    """A bar ``scale`` bytes wide: a segment per buffer, the rest free."""
    span = WIDTH - 2 * MARGIN
    x = MARGIN
    c.rect(MARGIN, c.y, span, 34, FREE)
    for k, b in enumerate(plan.buffers):
        w = span * b.bytes / scale
        c.rect(x, c.y, w, 34, PALETTE[k % len(PALETTE)], "#ffffff")
        if b.copies == 2:
            c.rect(x + w / 2, c.y, w / 2, 34, "url(#double)", "#ffffff")
        if w > 8 * len(b.name):
            c.text(x + w / 2, c.y + 21, b.name, 11, fill="#ffffff", anchor="middle")
        x += w
    if rest:
        c.text(WIDTH - MARGIN - 4, c.y + 21, rest, 11, fill="#888888", anchor="end")
    c.y += 44


def _nest_and_grid(c: Canvas, plan: KernelPlan) -> None:
    top = c.y
    c.text(MARGIN, c.y, "2. Loop nest each CPE runs", 14, "bold")
    grid_x = WIDTH - MARGIN - 290
    c.text(grid_x, c.y, "3. The CPEs' shares of the work", 14, "bold")
    c.y += 22
    shown = plan.nest[:40]
    for depth, text, split in shown:
        if split:
            c.rect(MARGIN - 4, c.y - 12, grid_x - 2 * MARGIN, LINE, "#fff2cc", "#d6b656")
        c.text(MARGIN + 18 * depth, c.y, text + ("   <- split over the CPEs" if split else ""),
               11, mono=True, weight="bold" if split else "normal")
        c.y += LINE
    if len(plan.nest) > len(shown):
        c.text(MARGIN, c.y, f"... {len(plan.nest) - len(shown)} more lines", 11, fill="#888888")
        c.y += LINE
    c.y = max(c.y, _grid(c, plan, grid_x, top + 22)) + 24


def _grid(c: Canvas, plan: KernelPlan, x0: float, y0: float) -> float:
    """The 8 x 8 CPEs, each coloured by the first iteration it takes (hue
    along the parallel loop), idle ones grey; returns the bottom."""
    s = plan.split
    for k in range(min(plan.cpes, GRID * GRID)):
        lo, hi = s.shares[k] if s is not None else (0, 1)
        busy = hi > lo
        hue = 220 * lo / max(s.extent, 1) if s is not None else 200
        fill = f"hsl({hue:.0f}, 60%, 62%)" if busy else IDLE
        x, y = x0 + (k % GRID) * CELL, y0 + (k // GRID) * CELL
        c.rect(x, y, CELL - 2, CELL - 2, fill, "#ffffff")
        label = "" if not busy else str(lo) if hi - lo == 1 else f"{lo}-{hi - 1}"
        c.text(x + (CELL - 2) / 2, y + 18, label, 9 if len(label) > 3 else 10,
               fill="#222222", anchor="middle")
    y = y0 + GRID * CELL + 14
    if s is None:
        c.text(x0, y, "no parallel loop: every CPE runs all", 11)
        return y
    busy = sum(1 for lo, hi in s.shares if hi > lo)
    for line in (f"{s.loop}: {s.extent} iterations, {busy} of {plan.cpes} CPEs busy",
                 "cell = one CPE (row-major ids 0-63),",
                 f"numbers = the {s.loop} iterations it runs,",
                 "colour = where they lie in the loop; grey = idle"):
        c.text(x0, y, line, 11)
        y += 14
    for w in s.writes[:2]:
        c.text(x0, y, f"one iteration writes {w}", 11, fill="#555555")
        y += 14
    return y


def _transfers(c: Canvas, plan: KernelPlan) -> None:
    c.text(MARGIN, c.y, "4. What moves: each kind of transfer, its size and how often it "
           "runs", 14, "bold")
    c.y += 20
    heads = ("kind", "tensor", "direction", "per transfer", "layout in main memory",
             "busiest CPE", "all CPEs")
    rows = []
    for t in plan.transfers:
        runs = ("?", "?") if t.total is None else (f"x {t.busiest:,}", f"x {t.total:,}")
        rows.append((KIND[t.op], t.tensor, DIRECTION[t.op],
                     f"{elements(t.elements)}, {t.bytes:,} B", t.strided or "contiguous",
                     *runs))
    cols = [MARGIN + 16]        # each column as wide as its longest text (11 px: ~6.4 px a character)
    for k in range(len(heads) - 1):
        cols.append(cols[-1] + 14 + 6.4 * max(len(r[k]) for r in [heads, *rows]))
    for x, h in zip(cols, heads):
        c.text(x, c.y, h, 11, "bold", fill="#555555")
    c.y += LINE
    for t, row in zip(plan.transfers, rows):
        c.rect(MARGIN, c.y - 10, 10, 10, TRANSFER_COLOUR[t.op], "#ffffff")
        for x, v in zip(cols, row):
            c.text(x, c.y, v, 11)
        c.y += LINE
    if not plan.transfers:
        c.text(MARGIN + 16, c.y, "none: the kernel reads and writes main memory directly", 11)
        c.y += LINE
    if plan.unknown:
        c.text(MARGIN + 16, c.y, f"counts unknown: {plan.unknown}", 11, fill="#b85450")
        c.y += LINE
    c.y += 18


def _legend(c: Canvas) -> None:
    c.text(MARGIN, c.y, "Legend", 14, "bold")
    c.y += 18
    items = [(TRANSFER_COLOUR["dma_get"], "DMA get: main memory -> LDM"),
             (TRANSFER_COLOUR["dma_put"], "DMA put: LDM -> main memory"),
             (TRANSFER_COLOUR["dma_bcast"], "DMA broadcast: one read, every CPE's LDM"),
             (TRANSFER_COLOUR["reg_send"], "register bus: CPE to CPE along a row or column")]
    for k, (colour, text) in enumerate(items):
        x = MARGIN + (k % 2) * 480
        c.rect(x, c.y - 10, 12, 12, colour, "#ffffff")
        c.text(x + 18, c.y, text, 11)
        if k % 2:
            c.y += LINE
    c.rect(MARGIN, c.y - 10, 12, 12, PALETTE[0], "#ffffff")
    c.rect(MARGIN + 6, c.y - 10, 6, 12, "url(#double)", "#ffffff")
    c.text(MARGIN + 18, c.y, "hatched half: a double buffer's second copy (the next tile "
           "loads into it while the CPE computes on the first)", 11)
    c.y += LINE
    c.rect(MARGIN, c.y - 10, 12, 12, FREE)
    c.text(MARGIN + 18, c.y, "LDM left free (the bar is the whole LDM)", 11)
    c.y += LINE
