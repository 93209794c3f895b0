"""Pure builders: tidy polars frame -> ``altair.Chart``, in one theme.

Every builder sorts its data before it reaches the chart, names its fields
explicitly and computes annotations (Jain's index, spread, knee) with
``benchlib.stats``, so the Vega-Lite spec is a deterministic function of the
data: the same frame gives the same ``chart.to_dict()``, which is what the
tests and nbval compare.
"""

from __future__ import annotations

import altair as alt
import polars as pl

from benchlib.stats.fairness import jain_expr
from benchlib.stats.queueing import sweep_shape

WIDTH, HEIGHT = 420, 260
FONT = "DejaVu Sans"
PALETTE = ["#1f5f8b", "#d9822b", "#3a8f5c", "#a23b72", "#6c757d", "#c9b037"]


def theme() -> dict:
    """The project's Vega-Lite config: fonts, sizes and palette (no randomness, no network fonts)."""
    return {
        "config": {
            "view": {"continuousWidth": WIDTH, "continuousHeight": HEIGHT, "stroke": None},
            "font": FONT,
            "title": {"fontSize": 14, "anchor": "start", "subtitleFontSize": 11, "subtitleColor": "#555555"},
            "axis": {"labelFontSize": 11, "titleFontSize": 12, "gridColor": "#e6e6e6"},
            "legend": {"labelFontSize": 11, "titleFontSize": 12},
            "range": {"category": PALETTE},
        }
    }


def _chart(frame: pl.DataFrame) -> alt.Chart:
    return alt.Chart(alt.Data(values=frame.to_dicts())).properties(width=WIDTH, height=HEIGHT)


def _finish(chart: alt.TopLevelMixin) -> alt.TopLevelMixin:
    return chart.configure(**theme()["config"])


def per_vm_bars(frame: pl.DataFrame, *, value: str, member: str = "vm", unit: str = "", title: str = "") -> alt.TopLevelMixin:
    """One bar per VM (or client), with Jain's index and the max/min spread in the subtitle."""
    data = frame.select(member, value).drop_nulls().sort(member)
    stats = data.select(jain_expr(pl.col(value)).alias("jain"), (pl.col(value).max() / pl.col(value).min()).alias("spread"))
    jain, spread = stats.row(0)
    subtitle = f"Jain's index {jain:.4f}; highest / lowest {spread:.2f}x ({data.height} {member}s)"
    label = f"{value} ({unit})" if unit else value
    bars = _chart(data).mark_bar().encode(
        x=alt.X(f"{member}:N", sort=data[member].to_list(), title=member),
        y=alt.Y(f"{value}:Q", title=label),
        tooltip=[alt.Tooltip(f"{member}:N"), alt.Tooltip(f"{value}:Q", format=",.1f")],
    )
    return _finish(bars.properties(title=alt.TitleParams(title or label, subtitle=[subtitle])))


def iodepth_sweep(frame: pl.DataFrame, *, depth: str = "iodepth", iops: str = "iops", latency_ns: str = "lat_mean_ns",
                  series: str | None = None, title: str = "IOPS and latency against queue depth") -> alt.TopLevelMixin:
    """IOPS (left) and mean latency (right) against depth on a log2 axis, the knee of each series marked."""
    keys = [series] if series else []
    data = frame.group_by([*keys, depth]).agg(pl.col(iops).median(), pl.col(latency_ns).median()).sort([*keys, depth])
    data = data.with_columns((pl.col(latency_ns) / 1e6).alias("latency_ms"))
    knees = []
    for part in data.partition_by(keys, maintain_order=True) if keys else [data]:
        shape = sweep_shape(part[depth].cast(pl.Float64).to_list(), part[iops].to_list(), part[latency_ns].to_list())
        if shape.knee_depth is not None:
            knees.append({**({series: part[series][0]} if series else {}), depth: shape.knee_depth,
                          iops: shape.knee_iops, "note": shape.note})
    color = alt.Color(f"{series}:N", title=series) if series else alt.value(PALETTE[0])
    x = alt.X(f"{depth}:Q", scale=alt.Scale(type="log", base=2), title=depth)
    left = _chart(data).mark_line(point=True).encode(x=x, y=alt.Y(f"{iops}:Q", title="IOPS"), color=color)
    layers = [left]
    if knees:
        knee_frame = pl.DataFrame(knees).sort([*keys, depth])
        layers.append(_chart(knee_frame).mark_rule(strokeDash=[4, 3]).encode(x=x, color=color))
        layers.append(_chart(knee_frame).mark_text(dy=-8, align="left", dx=4).encode(x=x, y=f"{iops}:Q", text="note:N"))
    right = _chart(data).mark_line(point=True, strokeDash=[2, 2]).encode(
        x=x, y=alt.Y("latency_ms:Q", title="mean latency (ms)"), color=color
    )
    chart = alt.layer(alt.layer(*layers), right).resolve_scale(y="independent").properties(title=title)
    return _finish(chart)


def rwmix_curve(frame: pl.DataFrame, *, write_pct: str = "write_pct", iops: str = "iops", series: str = "vm",
                title: str = "IOPS as the write share rises") -> alt.TopLevelMixin:
    """Total IOPS against write share, one line per series (the write-penalty curve)."""
    data = frame.with_columns(pl.col(write_pct).cast(pl.Float64)).group_by(series, write_pct).agg(pl.col(iops).sum())
    data = data.sort(series, write_pct)
    chart = _chart(data).mark_line(point=True).encode(
        x=alt.X(f"{write_pct}:Q", title="writes (%)", scale=alt.Scale(domain=[0, 100])),
        y=alt.Y(f"{iops}:Q", title="IOPS"),
        color=alt.Color(f"{series}:N", title=series, sort=sorted(data[series].unique().to_list())),
    )
    return _finish(chart.properties(title=title))


def cpu_efficiency(frame: pl.DataFrame, *, test: str = "test", setting: str = "controller",
                   value: str = "iops_per_cpu_pct", title: str = "IOPS per CPU%") -> alt.TopLevelMixin:
    """Grouped bars: the efficiency of each setting per test."""
    data = frame.select(test, setting, value).drop_nulls().sort(test, setting)
    chart = _chart(data).mark_bar().encode(
        x=alt.X(f"{setting}:N", title=None, sort=sorted(data[setting].unique().to_list())),
        y=alt.Y(f"{value}:Q", title=value),
        color=alt.Color(f"{setting}:N", title=setting),
        column=alt.Column(f"{test}:N", title=None, sort=sorted(data[test].unique().to_list())),
    )
    return chart.properties(width=90, height=HEIGHT, title=title).configure(**theme()["config"])


def time_series(frame: pl.DataFrame, *, time_ns: str = "time_ns", value: str = "value", series: str = "host",
                window_s: tuple[float, float] | None = None, title: str = "") -> alt.TopLevelMixin:
    """A per-interval series per host, the steady-state window shaded when given."""
    data = frame.with_columns((pl.col(time_ns) / 1e9).alias("time_s")).select(series, "time_s", value).sort(series, "time_s")
    line = _chart(data).mark_line().encode(
        x=alt.X("time_s:Q", title="time (s)"), y=alt.Y(f"{value}:Q", title=value),
        color=alt.Color(f"{series}:N", title=series, sort=sorted(data[series].unique().to_list())),
    )
    layers: list[alt.Chart] = []
    if window_s is not None:
        band = pl.DataFrame({"start": [window_s[0]], "end": [window_s[1]]})
        layers.append(_chart(band).mark_rect(opacity=0.12, color="#3a8f5c").encode(x="start:Q", x2="end:Q"))
    return _finish(alt.layer(*layers, line).properties(title=title or value))
