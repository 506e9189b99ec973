"""The report's plots (matplotlib, no pyplot: figures are drawn with the Agg canvas, no global state).

Every plot function takes collected table rows (dicts) and the fault marks, writes `<name>.png`
and `<name>.svg` into the report folder, and returns the PNG's file name.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import matplotlib
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from loadtest.report.faults import FaultMark

Rows = list[dict[str, Any]]
P = ParamSpec("P")
R = TypeVar("R")

STYLE = {
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.titleweight": "bold",
    "axes.titlelocation": "left",
    "axes.labelsize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.alpha": 0.35,
    "grid.linewidth": 0.6,
    "legend.fontsize": 8.5,
    "legend.frameon": False,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "lines.linewidth": 1.4,
    "svg.fonttype": "none",  # text stays text in the SVG: smaller, searchable
    "savefig.dpi": 110,
}
FAULT_COLOR = "#c0392b"
STATE_COLORS = {
    "acknowledged": "#54a24b",
    "archived": "#8c8c8c",
    "acquired": "#4c78a8",
    "available": "#f2b134",
}
SERIES_STYLE = {
    "produced": {"color": "#222222", "linestyle": "--", "zorder": 3},  # on top: delivered often equals it
    "delivered (classic)": {"color": "#4c78a8"},
    "delivered (consumer)": {"color": "#54a24b"},
    "delivered (share)": {"color": "#f58518"},
}
PROTOCOL_COLORS = {"classic": "#4c78a8", "consumer": "#54a24b"}
WIDE = (10, 4)
TALL = (10, 6.5)


def palette(names: Iterable[str]) -> dict[str, Any]:
    """A stable colour per name (sorted), the same in every plot."""
    unique = sorted(set(names))
    cmap = matplotlib.colormaps["tab20"] if len(unique) > 10 else matplotlib.colormaps["tab10"]
    return {name: cmap(i % cmap.N) for i, name in enumerate(unique)}


def styled(plot: Callable[P, R]) -> Callable[P, R]:
    """Draw inside the report's style (rcParams are read as axes and texts are made)."""

    @functools.wraps(plot)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with matplotlib.rc_context(STYLE):
            return plot(*args, **kwargs)

    return wrapper


def _figure(size: tuple[float, float]) -> Figure:
    fig = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(fig)  # the Agg canvas, without pyplot's global backend
    return fig


def _save(fig: Figure, out: Path, name: str) -> str:
    fig.savefig(out / f"{name}.png")
    fig.savefig(out / f"{name}.svg")
    return f"{name}.png"


def _mark_faults(ax: Axes, faults: list[FaultMark], labels: bool = True) -> None:
    """A dashed line at each fault, its span shaded to its end, labelled inside the top of the axes
    (above them, a label would collide with the title)."""
    for i, fault in enumerate(faults):
        ax.axvline(fault.start_s, color=FAULT_COLOR, linestyle="--", linewidth=1, alpha=0.8, zorder=1)
        if fault.end_s is not None and fault.end_s > fault.start_s:
            ax.axvspan(fault.start_s, fault.end_s, color=FAULT_COLOR, alpha=0.08, zorder=0, linewidth=0)
        if labels:
            # Two label rows, so faults close together do not print over each other.
            ax.annotate(
                fault.label, xy=(fault.start_s, 1.0), xycoords=("data", "axes fraction"),
                xytext=(3, -3 - 12 * (i % 2)), textcoords="offset points", fontsize=8, color=FAULT_COLOR,
                va="top", zorder=5, bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85},
            )


def _headroom(ax: Axes) -> None:
    """A log axis a bit taller than its data: the fault labels sit at the top."""
    low, high = ax.get_ylim()
    ax.set_ylim(low, high * 3)


def _time_axis(ax: Axes) -> None:
    ax.set_xlabel("seconds since the first event")
    ax.margins(x=0.01)
    ax.set_xlim(left=0)


def _log_scale(ax: Axes, formatter: Any, axis: str = "y") -> None:
    """A log axis labelled 1, 3, 10, 30, ... in plain numbers (matplotlib's default labels minor ticks
    as 2x10^2 on short ranges)."""
    target = ax.yaxis if axis == "y" else ax.xaxis
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    target.set_major_locator(LogLocator(base=10, subs=(1.0, 3.0)))
    target.set_major_formatter(FuncFormatter(formatter))
    target.set_minor_formatter(NullFormatter())


def _log_ms(ax: Axes, axis: str = "y") -> None:
    _log_scale(ax, _ms_label, axis)


def _ms_scale(ax: Axes, values: list[float], axis: str = "y") -> None:
    """Durations: a log axis when they span more than a decade or so, else a linear one from 0
    (a log axis over 0.5-1.5 s has one labelled tick)."""
    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) >= 30:
        _log_ms(ax, axis)
        return
    target = ax.yaxis if axis == "y" else ax.xaxis
    target.set_major_formatter(FuncFormatter(_ms_label))
    (ax.set_ylim if axis == "y" else ax.set_xlim)(0, max(positive, default=1) * 1.15)


def _count_label(value: float, _pos: int) -> str:
    return f"{value:,.0f}" if value >= 1 else f"{value:g}"


def _ms_label(value: float, _pos: int) -> str:
    if value >= 1000:
        return f"{value / 1000:g} s"
    return f"{value:g} ms"


def _series(rows: Rows, key: str, x: str, y: str, gap: float | None = None) -> dict[str, tuple[list[float], list[float]]]:
    """x and y lists per `key`; with `gap`, a NaN breaks the line where buckets are missing, so a
    call made at 1 s and again at 35 s is two points, not a line across the run."""
    out: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for row in sorted(rows, key=lambda r: r[x]):
        if row[y] is None:
            continue
        xs, ys = out[row[key]]
        if gap is not None and xs and row[x] - xs[-1] > gap * 1.5:
            xs.append(xs[-1] + gap)
            ys.append(math.nan)
        xs.append(row[x])
        ys.append(row[y])
    return dict(out)


def _line(ax: Axes, xs: list[float], ys: list[float], **kwargs: Any) -> None:
    """A line, with markers when its points are mostly isolated (rare calls: JoinGroup, SyncGroup)."""
    points = sum(1 for y in ys if not math.isnan(y))
    breaks = len(ys) - points
    marker = "o" if points < 3 or breaks * 2 >= points else None
    ax.plot(xs, ys, marker=marker, markersize=3.5, **kwargs)


# The latency chart's panels, by what a request does: one chart of every API (about 19 lines in a
# mixed run) could not be read. An API not named here (admin and describe calls, and any API the
# members learn later) goes to the last panel, so every API seen is drawn somewhere.
LATENCY_PANELS: dict[str, frozenset[str]] = {
    "group membership": frozenset({"JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "ConsumerGroupHeartbeat",
                                   "ShareGroupHeartbeat"}),
    "offsets": frozenset({"OffsetCommit", "OffsetFetch", "OffsetDelete", "TxnOffsetCommit"}),
    "data": frozenset({"Produce", "Fetch", "ShareFetch", "ShareAcknowledge", "ListOffsets"}),
}
OTHER_PANEL = "metadata and admin"


def latency_panels(apis: Iterable[str]) -> dict[str, list[str]]:
    """The panels that have APIs among `apis`, in LATENCY_PANELS' order then OTHER_PANEL, each
    with its APIs sorted; every API in exactly one."""
    panels: dict[str, list[str]] = {name: [] for name in (*LATENCY_PANELS, OTHER_PANEL)}
    for api in sorted(set(apis)):
        panel = next((name for name, members in LATENCY_PANELS.items() if api in members), OTHER_PANEL)
        panels[panel].append(api)
    return {name: mine for name, mine in panels.items() if mine}


@styled
def latency_plot(rows: Rows, faults: list[FaultMark], colors: dict[str, Any], bucket_s: float, out: Path) -> str:
    """p50 (left) and p99 (right) latency over time, log scale, one row of panels per kind of API
    (latency_panels), each row with its own legend."""
    panels = latency_panels(r["api"] for r in rows)
    fig = _figure((12, 0.9 + 2.6 * len(panels)))
    grid = fig.subplots(len(panels), 2, sharex=True, squeeze=False)
    for (name, apis), (left, right) in zip(panels.items(), grid):
        mine = [r for r in rows if r["api"] in apis]
        for ax, column, title in ((left, "p50_ms", "p50"), (right, "p99_ms", "p99")):
            for api, (xs, ys) in sorted(_series(mine, "api", "t_s", column, gap=bucket_s).items()):
                _line(ax, xs, ys, label=api, color=colors.get(api))
            _log_ms(ax)
            _headroom(ax)
            ax.set_title(f"{name}: {title}")
            _mark_faults(ax, faults, labels=left is grid[0][0] and ax is left)
        handles, labels = left.get_legend_handles_labels()
        right.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8)
    for ax in grid[-1]:
        _time_axis(ax)
    return _save(fig, out, "latency")


@styled
def throughput_plot(rows: Rows, faults: list[FaultMark], colors: dict[str, Any], bucket_s: float, out: Path) -> str:
    """Requests/s per API (top, log scale) and records/s produced and delivered (bottom)."""
    fig = _figure(TALL)
    top, bottom = fig.subplots(2, 1, sharex=True)
    requests = [r for r in rows if r["what"] == "requests"]
    records = [r for r in rows if r["what"] == "records"]
    for api, (xs, ys) in sorted(_series(requests, "series", "t_s", "per_s", gap=bucket_s).items()):
        _line(top, xs, ys, label=api, color=colors.get(api))
    if requests:
        _log_scale(top, _count_label)
        _headroom(top)
    else:
        top.text(0.5, 0.5, "no requests in the event log", transform=top.transAxes, ha="center", va="center",
                 color="#59636e")
    top.set_ylabel("requests/s")
    top.set_title("requests sent per second, per API")
    for name, (xs, ys) in sorted(_series(_zero_filled(records, bucket_s), "series", "t_s", "per_s").items()):
        bottom.plot(xs, ys, label=name, linewidth=1.6, **SERIES_STYLE.get(name, {}))
    bottom.yaxis.set_major_formatter(FuncFormatter(_count_label))
    bottom.set_ylabel("records/s")
    bottom.set_ylim(0, bottom.get_ylim()[1] * 1.15)  # room for the legend and the fault labels
    bottom.set_title("records produced and delivered per second")
    if records:
        bottom.legend(loc="upper left", ncols=3)
    else:
        bottom.text(0.5, 0.5, "no records produced or delivered", transform=bottom.transAxes, ha="center",
                    va="center", color="#59636e")
    for ax in (top, bottom):
        _mark_faults(ax, faults, labels=ax is top)
    _time_axis(bottom)
    handles, labels = top.get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside right upper", title="API")
    return _save(fig, out, "throughput")


def _zero_filled(rows: Rows, bucket_s: float) -> Rows:
    """Records/s with the quiet buckets as 0 (a linear axis can show them; no row means none)."""
    if not rows:
        return rows
    last = max(r["t_s"] for r in rows)
    seen = {(r["series"], r["t_s"]) for r in rows}
    filled = list(rows)
    for series in {r["series"] for r in rows}:
        first = min(r["t_s"] for r in rows if r["series"] == series)
        for k in range(int(round((last - first) / bucket_s)) + 1):
            t = first + k * bucket_s
            if (series, t) not in seen:
                filled.append({"series": series, "t_s": t, "per_s": 0.0})
    return filled


@styled
def rebalance_plot(rows: Rows, faults: list[FaultMark], duration_s: float, out: Path) -> str:
    """Each rebalance's duration at its start time (left) and their histogram (right)."""
    fig = _figure(WIDE)
    timeline, histogram = fig.subplots(1, 2, width_ratios=[2.2, 1])
    timed = [r for r in rows if r["duration_ms"] is not None]
    groups = sorted({r["group"] for r in timed})
    colors = palette(groups) if len(groups) <= 10 else {g: "#4c78a8" for g in groups}
    for group in groups:
        mine = [r for r in timed if r["group"] == group]
        timeline.scatter([r["start_s"] for r in mine], [max(r["duration_ms"], 0.1) for r in mine], s=22,
                         color=colors[group], label=group, alpha=0.85, edgecolors="white", linewidths=0.5)
    _ms_scale(timeline, [max(r["duration_ms"], 0.1) for r in timed])
    timeline.set_title("rebalance duration, at its start")
    _mark_faults(timeline, faults)
    _time_axis(timeline)
    timeline.set_xlim(0, max(duration_s, 1))  # the whole run: when there were no rebalances shows too
    if len(groups) <= 10:
        timeline.legend(loc="best", fontsize=8, ncols=min(len(groups), 4), markerscale=1.2)
    durations = [max(r["duration_ms"], 0.1) for r in timed]
    low, high = min(durations), max(durations)
    # Classic and consumer-protocol groups side by side (the protocols scenario): one bar colour each.
    protocols = sorted({r.get("protocol") or "classic" for r in timed})
    if len(protocols) > 1:
        values = [[max(r["duration_ms"], 0.1) for r in timed if (r.get("protocol") or "classic") == p] for p in protocols]
        style = {"color": [PROTOCOL_COLORS.get(p, "#8c8c8c") for p in protocols], "label": protocols}
    else:
        values, style = durations, {"color": "#4c78a8"}
    if high / low >= 30:
        histogram.hist(values, bins=_log_edges(low, high), edgecolor="white", **style)
        _log_ms(histogram, "x")
    else:
        histogram.hist(values, bins=20, range=(0, high * 1.1), edgecolor="white", **style)
        _ms_scale(histogram, durations, "x")
        histogram.xaxis.set_major_locator(MaxNLocator(4))
    if len(protocols) > 1:
        histogram.legend(loc="best", fontsize=8)
    histogram.yaxis.set_major_locator(MaxNLocator(integer=True))
    histogram.set_title("how long rebalances took")
    histogram.set_ylabel("rebalances")
    return _save(fig, out, "rebalances")


def _log_edges(low: float, high: float, bins: int = 20) -> list[float]:
    low, high = low / 1.5, high * 1.5
    step = (math.log10(high) - math.log10(low)) / bins
    return [10 ** (math.log10(low) + i * step) for i in range(bins + 1)]


@styled
def recovery_plot(rows: Rows, faults: list[FaultMark], fault_ids: list[int], out: Path) -> str:
    """Per fault: its duration, the slowest target to work again, the slowest group to be Stable."""
    fig = _figure(WIDE)
    ax = fig.subplots()
    sources = (("recovery", "first success per target", "#4c78a8"), ("group Stable", "group Stable again", "#54a24b"))
    width = 0.34
    for i, fault_id in enumerate(fault_ids):
        mark = faults[i]
        if mark.end_s is not None:
            ax.bar(i, mark.end_s - mark.start_s, width=0.9, color=FAULT_COLOR, alpha=0.12, label="fault duration")
        for j, (source, label, color) in enumerate(sources):
            values = [r["since_fault_ms"] / 1000 for r in rows
                      if r["fault_id"] == fault_id and r["source"] == source and r["since_fault_ms"] is not None]
            x = i + (j - 0.5) * width
            if values:
                ax.bar(x, max(values), width=width * 0.9, color=color, alpha=0.85, label=label)
                # Every target as a dot: the bar is the slowest, the dots show the spread.
                spread = [x + width * 0.3 * ((k % 5) - 2) / 2 for k in range(len(values))]
                ax.scatter(spread, values, s=10, color="black", alpha=0.6, zorder=3)
    ax.set_xticks(range(len(fault_ids)), [m.label for m in faults])
    ax.set_ylabel("seconds since the fault")
    ax.set_title("time to recover after each fault")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), loc="upper left")
    ax.set_xlim(-0.6, len(fault_ids) - 0.4)
    return _save(fig, out, "recovery")


@styled
def delivery_count_plot(rows: Rows, limit: int, out: Path) -> str:
    """Deliveries by delivery count (log scale), stacked by share group."""
    fig = _figure(WIDE)
    ax = fig.subplots()
    counts = sorted({r["delivery_count"] for r in rows})
    groups = sorted({r["group"] for r in rows})
    stacked = len(groups) <= 8
    colors = palette(groups) if stacked else {}
    base = {c: 0 for c in counts}
    for group in groups if stacked else ["all share groups"]:
        mine = {c: 0 for c in counts}
        for r in rows:
            if not stacked or r["group"] == group:
                mine[r["delivery_count"]] += r["deliveries"]
        ax.bar(counts, [mine[c] for c in counts], bottom=[base[c] for c in counts], width=0.7,
               color=colors.get(group, "#4c78a8"), label=group, edgecolor="white", linewidth=0.5)
        for c in counts:
            base[c] += mine[c]
    for c in counts:
        ax.annotate(f"{base[c]:,}", (c, base[c]), xytext=(0, 3), textcoords="offset points", ha="center", fontsize=8)
    _log_scale(ax, _count_label)
    # Bars on a log axis start wherever the axis does: a decade under the smallest keeps them honest.
    ax.set_ylim(max(min(base.values()) / 10, 0.5), max(base.values()) * 2.5)
    ax.axvline(limit + 0.5, color=FAULT_COLOR, linestyle=":", linewidth=1)
    ax.annotate(f"limit {limit}", xy=(limit + 0.5, 1.0), xycoords=("data", "axes fraction"), xytext=(-3, -3),
                textcoords="offset points", color=FAULT_COLOR, fontsize=8, ha="right", va="top")
    ax.set_xticks(range(1, max(max(counts), limit) + 1))
    ax.set_xlim(0.4, max(max(counts), limit) + 1)
    ax.set_xlabel("delivery count (1 = first delivery)")
    ax.set_ylabel("deliveries")
    ax.set_title("share deliveries by delivery count" + (f": {groups[0]}" if len(groups) == 1 else ""))
    if len(groups) > 1:
        ax.legend(loc="upper center", ncols=min(len(groups), 4))
    return _save(fig, out, "delivery_counts")


@styled
def share_state_plot(rows: Rows, faults: list[FaultMark], out: Path, max_panels: int = 4) -> str:
    """Records per state over time, stacked: one panel per share group (or all summed)."""
    groups = sorted({r["group"] for r in rows})
    panels = groups if len(groups) <= max_panels else ["all share groups"]
    fig = _figure((10, 1.2 + 2.8 * len(panels)))
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    order = ["acknowledged", "archived", "acquired", "available"]  # done at the bottom, in flight on top
    for ax, group in zip(axes, panels):
        by_t: dict[float, dict[str, float]] = defaultdict(lambda: dict.fromkeys(order, 0))
        for r in rows:
            if group in (r["group"], "all share groups"):
                for state in order:
                    by_t[r["t_s"]][state] += r[state]
        ts = sorted(by_t)
        ax.stackplot(ts, *[[by_t[t][s] for t in ts] for s in order], labels=[s.upper() for s in order],
                     colors=[STATE_COLORS[s] for s in order], alpha=0.9, linewidth=0)
        ax.set_ylabel("records")
        ax.set_ylim(bottom=0)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}"))
        ax.set_title(group)
        _mark_faults(ax, faults, labels=ax is axes[0])
    _time_axis(axes[-1])
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles[::-1], labels[::-1], loc="outside right upper", title="state")
    return _save(fig, out, "share_states")
