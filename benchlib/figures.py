"""Figure builders: aggregated frames in, altair charts out.

Pure builders: a tidy frame that :mod:`benchlib.stats` (or :mod:`benchlib.views`) already
aggregated -> an ``altair`` chart.

Builders draw; they do not aggregate. Every builder sorts its data before it
reaches the chart, names its fields explicitly and computes its annotations
(Jain's index, spread, knee) with ``benchlib.stats``, so the Vega-Lite spec is a
deterministic function of the data: the same frame gives the same
``chart.to_dict()``, which is what the tests and nbval compare.

The look (fonts, sizes, palette) is one altair theme, ``benchlib``, registered
and enabled when this module is imported; charts carry no configuration of
their own, so two of them combine (``alt.hconcat(a, b)``, ``a | b``).
"""

from __future__ import annotations

import base64
import functools
import math
import os
import re
from collections.abc import Callable
from pathlib import Path

import altair as alt
import orjson
import polars as pl

from benchlib.stats.fairness import UNFAIR_BELOW, jain_expr
from benchlib.stats.queueing import MIN_SWEEP_POINTS, sweep_shape
from benchlib.tables import LEVEL_WORDS, inline, level, level_expr, natural_sort, number, span
from benchlib.tables import label as words
from benchlib.words.sweeps import shape_note

WIDTH, HEIGHT = 420, 260
#: a cell's bars under this share of the report's shared axis are drawn again on their own axis beside it
ZOOM_BELOW = 0.25
#: more members than this get one horizontal bar each (:func:`per_vm_bars`), 16 pixels a row
MANY_MEMBERS = 16
ROW_STEP = 16
#: Liberation Sans has Arial's (and Helvetica's) metrics, so a reader's browser lays labels out as they were
#: measured; vl-convert carries it, so every machine draws the same; and it draws in 0.6 of DejaVu Sans's time
#: (vl-convert reads a font's tables again for each glyph it measures, and DejaVu's are larger)
FONT = "Liberation Sans, Arial, Helvetica, sans-serif"
PALETTE = ["#1f5f8b", "#d9822b", "#3a8f5c", "#a23b72", "#6c757d", "#c9b037"]
#: each verdict of :data:`benchlib.stats.compare.VERDICTS` in one colour wherever it is drawn, and no colour of
#: :data:`PALETTE` (a level's): an effect in green or red, no change in teal; none grey, the runs' colour
VERDICT_COLOURS = {
    "improved": "#2e7d32",
    "regressed": "#c62828",
    "equivalent": "#00838f",
    "inconclusive": "#8d6e63",
    "not testable at this n": "#4527a0",
    "descriptive only": "#37474f",
    "rate-capped": "#f9a825",
    "confounded with time": "#212121",
}
#: the runs drawn behind a summary of them
RUNS_GREY = "#a6a6a6"


def theme() -> dict:
    """Return the project's Vega-Lite config: fonts, sizes and palette (no randomness, no network fonts)."""
    return {
        "config": {
            "view": {"continuousWidth": WIDTH, "continuousHeight": HEIGHT, "stroke": None},
            "font": FONT,
            "title": {"fontSize": 14, "anchor": "start", "subtitleFontSize": 11, "subtitleColor": "#555555"},
            # labels closer than 6 px are thinned: "−25−20" and "0.250.30" read as one number
            "axis": {"labelFontSize": 11, "titleFontSize": 12, "gridColor": "#e6e6e6", "labelSeparation": 6},
            "legend": {"labelFontSize": 11, "titleFontSize": 12},
            "range": {"category": PALETTE},
            # a screen reader hears the chart's description (its title and subtitle), not every point with
            # its column names and unrounded values
            "mark": {"aria": False},
        }
    }


@alt.theme.register("benchlib", enable=True)
def _registered() -> alt.theme.ThemeConfig:
    return alt.theme.ThemeConfig(theme())


def _in_words(chart: Callable[..., alt.TopLevelMixin]) -> Callable[..., alt.TopLevelMixin]:
    """Draw ``chart``'s data (its first argument) with every level in the study's words (:func:`level_expr`)."""

    @functools.wraps(chart)
    def drawn(data: pl.DataFrame, *args: object, **kwargs: object) -> alt.TopLevelMixin:
        worded = [c for c in data.columns if c in LEVEL_WORDS]
        return chart(data.with_columns(level_expr(c) for c in worded) if worded else data, *args, **kwargs)

    return drawn


def _joined(columns: list[str]) -> pl.Expr:
    """One label from several factor columns: ``LSI / off``; ``all runs`` where there are none."""
    if not columns:
        return pl.lit("all runs")
    return pl.concat_str([pl.col(c).cast(pl.String) for c in columns], separator=" / ")


def _series_color(
    data: pl.DataFrame, series: str | None, title: str | None = None
) -> alt.Color | alt.ValueChannelMixin:
    """One colour per level of ``series`` (in a reader's order: ``host 2`` before ``host 10``), or the first colour.

    Every level is in the legend, in columns past :data:`MANY_MEMBERS` (Vega-Lite drops entries past 30).
    """
    if not series:
        return alt.value(PALETTE[0])
    levels = natural_sort(data.select(pl.col(series).unique().drop_nulls()), series)[series].to_list()
    if len(levels) > 30:
        legend = alt.Legend(symbolLimit=0, columns=math.ceil(len(levels) / MANY_MEMBERS))
        return alt.Color(f"{series}:N", title=title or words(series), sort=levels, legend=legend)
    return alt.Color(f"{series}:N", title=title or words(series), sort=levels)


#: the significant digits a figure's data keep: two runs of a sum in another order differ in the 16th digit,
#: and a figure must be the same bytes however its numbers were added (nbval compares them)
FIGURE_DIGITS = 12


def _values(frame: pl.DataFrame) -> list[dict]:
    """Return a figure's rows, each float to :data:`FIGURE_DIGITS` significant digits."""
    return frame.with_columns(pl.col(pl.Float32, pl.Float64).round_sig_figs(FIGURE_DIGITS)).to_dicts()


class _Rows(alt.Data):
    """Rows of numbers, text and booleans: the spec takes them as they are.

    altair's ``to_dict`` walks every value of inline data (a protocol check each): 0.1 s for a cell page's
    exceedance curve (3,600 values), of the page's 0.5 s.
    """

    def to_dict(self, *args: object, **kwargs: object) -> dict:
        return {"values": self._kwds["values"]}


_PLAIN = (pl.Boolean, pl.String, pl.Null, pl.Categorical, pl.Enum)


def _data(frame: pl.DataFrame) -> alt.Data:
    """Return a figure's data: its rows (:func:`_values`), passed on as they are where JSON holds them."""
    plain = all(dtype.is_numeric() or isinstance(dtype, _PLAIN) for dtype in frame.dtypes)
    return (_Rows if plain else alt.Data)(values=_values(frame))


def _chart(frame: pl.DataFrame) -> alt.Chart:
    return alt.Chart(_data(frame)).properties(width=WIDTH, height=HEIGHT)


@_in_words
def per_vm_bars(
    frame: pl.DataFrame,
    *,
    value: str,
    member: str = "vm",
    unit: str = "",
    title: str = "",
    y_max: float | None = None,
    within: dict | None = None,
    runs: pl.DataFrame | None = None,
) -> alt.TopLevelMixin:
    """One bar per VM (or client), with Jain's index and the max/min spread in the subtitle.

    ``y_max``: the top of the value axis, shared by every cell page of a report so that flipping
    between pages compares bars, not axes (the report passes the largest value of any cell).
    ``within``: the cell's row of :func:`benchlib.views.fairness`; the subtitle then gives its
    figures (within each run, the median run's), the ones the sentence and the fairness page give.
    ``runs``: each member's value in each run (:func:`benchlib.views.member_run_totals`); where a
    member ran more than once, a dot per run beside its bar shows what the median hides (two VMs
    with equal medians may have traded 1.8x leads from run to run).
    """
    data = natural_sort(frame.select(member, value).drop_nulls(), member)
    data = data.with_columns(pl.col(value).map_elements(number, return_dtype=pl.String).alias("value_label"))
    if within is not None and within.get("jain_median") is not None:
        jain, spread, judged = within["jain_median"], within["max_min_median"], within["runs_judged"]
        basis = "" if judged == 1 else f"within each run, the median of {judged}: "
    else:
        stats = data.select(
            jain_expr(pl.col(value)).alias("jain"), (pl.col(value).max() / pl.col(value).min()).alias("spread")
        )
        (jain, spread), basis = stats.row(0), ""
    ratio = f"{spread:.2f}x" if spread is not None else "unknown (one got nothing)"
    subtitle = f"{basis}Jain's index {jain:.4f}; highest / lowest {ratio} ({data.height} {inline(member)}s)"
    if data.height < 2:  # one member shares with nobody: no index, not a perfect one
        subtitle = f"one {inline(member)}: how evenly members shared needs two or more"
    elif within is not None and within.get("runs_judged") == 2 and within.get("max_min_best") is not None:
        # the median of two is their mean, a figure neither run had: both runs' figures
        jains = span(f"{within['jain_worst']:.4f}", f"{within['jain_best']:.4f}", same=" in both runs")
        ratios = span(f"{within['max_min_best']:.2f}x", f"{within['max_min_worst']:.2f}x", same=" in both runs")
        subtitle = (
            f"within each of its 2 runs: Jain's index {jains}; highest / lowest {ratios} "
            f"({data.height} {inline(member)}s)"
        )
    label = f"{words(value)} ({unit})" if unit else words(value)
    dots = runs.select(member, value).drop_nulls() if runs is not None else None
    dots = dots if dots is not None and dots.height > data.height else None  # one run each: the bars are the runs
    # the bars are each member's median over runs, the figures above are per run: say which is which
    two = within is not None and within.get("runs_judged") == 2
    bars = f"bars: each {inline(member)}'s median over the runs{' (of 2, their mean)' if two else ''}" if basis else ""
    bars += "; dots: each run" if bars and dots is not None else ""
    top = max(data[value].max() or 0, dots[value].max() if dots is not None else 0)
    zoom = bool(y_max) and top < ZOOM_BELOW * y_max and data.height <= MANY_MEMBERS  # bars too short to read
    if zoom:
        shared = "left: the axis every cell page of this report shares; right: this cell's own, to read its runs"
    else:
        shared = "the axis is shared by every cell page of this report" if y_max else ""
    below = "; ".join(part for part in (bars, shared) if part)
    lines = [subtitle, below] if below else [subtitle]

    if data.height > MANY_MEMBERS:  # a bar a row: names and values stay readable, 64 of them as well as 4
        return _member_rows(data, dots, value=value, member=member, label=label, y_max=y_max).properties(
            title=alt.TitleParams(title or label, subtitle=lines)
        )

    def panel(axis_top: float | None) -> alt.LayerChart:
        base = _chart(data).encode(
            x=alt.X(f"{member}:N", sort=data[member].to_list(), title=words(member)),
            y=alt.Y(f"{value}:Q", title=label, scale=alt.Scale(domain=[0, axis_top]) if axis_top else alt.Undefined),
            tooltip=[alt.Tooltip(f"{member}:N"), alt.Tooltip(f"{value}:Q", format=",.1f")],
        )
        # each bar's value written above it: a bar a shared axis makes short is still read exactly
        layers = base.mark_bar() + base.mark_text(dy=-6, fontSize=11).encode(text=alt.Text("value_label:N"))
        if dots is not None:
            layers += (
                _chart(dots)
                .mark_point(filled=True, color="#222222", size=36, opacity=0.85, xOffset=26)  # clear of the label
                .encode(
                    x=alt.X(f"{member}:N", sort=data[member].to_list()),
                    y=alt.Y(f"{value}:Q"),
                    tooltip=[alt.Tooltip(f"{member}:N"), alt.Tooltip(f"{value}:Q", format=",.1f")],
                )
            )
        return layers

    chart = alt.hconcat(panel(y_max), panel(None)) if zoom else panel(y_max)
    return chart.properties(title=alt.TitleParams(title or label, subtitle=lines))


def _member_rows(
    data: pl.DataFrame, dots: pl.DataFrame | None, *, value: str, member: str, label: str, y_max: float | None
) -> alt.LayerChart:
    """:func:`per_vm_bars` for many members: one horizontal bar a member, its value at the bar's end.

    The dots of each run sit on the member's row; with them, the values are left to the table above the
    chart and the tooltips (a label at the bar's end would sit among the dots).
    """
    order = data[member].to_list()
    height = ROW_STEP * len(order)
    base = (
        _chart(data)
        .encode(
            y=alt.Y(f"{member}:N", sort=order, title=words(member)),
            x=alt.X(f"{value}:Q", title=label, scale=alt.Scale(domain=[0, y_max]) if y_max else alt.Undefined),
            tooltip=[alt.Tooltip(f"{member}:N"), alt.Tooltip(f"{value}:Q", format=",.1f")],
        )
        .properties(height=height)
    )
    layers = base.mark_bar(height={"band": 0.7})
    if dots is None:
        return layers + base.mark_text(align="left", dx=3, fontSize=10).encode(text=alt.Text("value_label:N"))
    points = (
        _chart(dots)
        .mark_point(filled=True, color="#222222", size=16, opacity=0.85)
        .encode(
            y=alt.Y(f"{member}:N", sort=order),
            x=alt.X(f"{value}:Q"),
            tooltip=[alt.Tooltip(f"{member}:N"), alt.Tooltip(f"{value}:Q", format=",.1f")],
        )
        .properties(height=height)
    )
    return layers + points


@_in_words
def iodepth_sweep(
    frame: pl.DataFrame,
    *,
    depth: str = "iodepth",
    iops: str = "iops",
    latency_ns: str = "lat_mean_ns",
    series: str | None = None,
    title: str = "IOPS and latency against queue depth",
) -> alt.TopLevelMixin:
    """IOPS (left) and mean latency (right) against depth on a log2 axis, the knee of each series marked.

    ``frame`` has one row per depth (and series): :func:`benchlib.views.sweep` gives the medians over runs.
    """
    keys = [series] if series else []
    # a series whose configured concurrency never changed (a synchronous engine) has no knee to mark
    held = pl.col("configured").drop_nulls().n_unique() == 1 if "configured" in frame.columns else pl.lit(False)
    data = frame.select(*keys, depth, iops, latency_ns, held.over(keys or pl.lit(0)).alias("_held"))
    data = data.sort([*keys, depth]).with_columns((pl.col(latency_ns) / 1e6).alias("latency_ms"))
    knees = []
    for part in data.partition_by(keys, maintain_order=True) if keys else [data]:
        if part.height < MIN_SWEEP_POINTS or part["_held"][0]:
            continue
        shape = sweep_shape(part[depth].cast(pl.Float64).to_list(), part[iops].to_list(), part[latency_ns].to_list())
        if shape.knee_depth is not None:
            knees.append(
                {
                    **({series: part[series][0]} if series else {}),
                    depth: shape.knee_depth,
                    iops: shape.knee_iops,
                    "note": shape_note(shape),
                }
            )
    data = data.drop("_held")
    color = _series_color(data, series)
    # ticks at the sweep's own depths: on a log axis from 16 to 128 Vega chose 20, 30, 40 ...
    ticks = sorted(set(data[depth].drop_nulls().to_list()))
    x = alt.X(f"{depth}:Q", scale=alt.Scale(type="log", base=2), title=words(depth), axis=alt.Axis(values=ticks))
    left = (
        _chart(data)
        .mark_line(point=True)
        .encode(x=x, y=alt.Y(f"{iops}:Q", title="IOPS (solid line, knee marked)"), color=color)
    )
    layers = [left]
    subtitle = []
    if knees:
        knee_frame = pl.DataFrame(knees).sort([*keys, depth])
        shared = knee_frame.filter(pl.len().over(depth) > 1) if series else knee_frame.clear()
        alone = knee_frame.join(shared.select(depth).unique(), on=depth, how="anti")
        if alone.height:
            layers.append(_chart(alone).mark_rule(strokeDash=[4, 3]).encode(x=x, color=color))
        if shared.height:  # one grey rule where several series' knees coincide: no one series' colour for it
            once = shared.select(depth).unique()
            layers.append(_chart(once).mark_rule(strokeDash=[4, 3], color="#555555").encode(x=x))
        # what the dashed rules are (rules of series that share a knee coincide, so each depth names its
        # series); the page's text and table say what the shape means
        subtitle = [
            f"Dashed line: the knee ({knees[0][depth]:g})" if not series else _knee_words(knee_frame, depth, series)
        ]
    right = (
        _chart(data)
        .mark_line(point=True, strokeDash=[2, 2])
        .encode(x=x, y=alt.Y("latency_ms:Q", title="mean latency, ms (dotted line)"), color=color)
    )
    heading = alt.TitleParams(title, subtitle=subtitle) if subtitle else title
    return alt.layer(alt.layer(*layers), right).resolve_scale(y="independent").properties(title=heading)


def _knee_words(knees: pl.DataFrame, depth: str, series: str) -> str:
    """Name each dashed knee rule: ``Dashed lines, each host's knee: 16 (127.0.0.2, 127.0.0.3; grey); 32 (127.0.0.4)``.

    Where several series share a knee, its one rule is grey, not one of their colours.
    """
    at = [
        f"{part[depth][0]:g} ({', '.join(str(v) for v in part[series].to_list())}{'; grey' if part.height > 1 else ''})"
        for part in knees.sort(depth, series).partition_by(depth, maintain_order=True)
    ]
    return f"Dashed lines, each {inline(series)}'s knee: " + "; ".join(at)


@_in_words
def rwmix_curve(
    frame: pl.DataFrame,
    *,
    write_pct: str = "write_pct",
    iops: str = "iops",
    series: str = "vm",
    title: str = "IOPS as the write share rises",
) -> alt.TopLevelMixin:
    """IOPS against write share, one line per series (the write-penalty curve).

    ``frame`` has one row per series and share: :func:`benchlib.views.sweep` gives each run's total
    (directions and jobs added), the median over runs.
    """
    data = frame.select(series, pl.col(write_pct).cast(pl.Float64), iops).sort(series, write_pct)
    chart = (
        _chart(data)
        .mark_line(point=True)
        .encode(
            x=alt.X(f"{write_pct}:Q", title="writes (%)", scale=alt.Scale(domain=[0, 100])),
            y=alt.Y(f"{iops}:Q", title="IOPS"),
            color=_series_color(data, series),
        )
    )
    return chart.properties(title=title)


@_in_words
def cpu_efficiency(
    frame: pl.DataFrame,
    *,
    test: str = "configuration",
    setting: str = "controller",
    value: str = "iops_per_cpu_pct",
    title: str = "IOPS per CPU%",
) -> alt.TopLevelMixin:
    """Draw grouped bars: the efficiency of each setting per configuration (the ``test`` column)."""
    data = frame.select(test, setting, value).drop_nulls().sort(test, setting)
    chart = (
        _chart(data)
        .mark_bar()
        .encode(
            x=alt.X(f"{setting}:N", title=None, sort=sorted(data[setting].unique().to_list())),
            y=alt.Y(f"{value}:Q", title=words(value)),
            color=alt.Color(f"{setting}:N", title=words(setting)),
            column=alt.Column(f"{test}:N", title=None, sort=sorted(data[test].unique().to_list())),
        )
    )
    return chart.properties(width=90, height=HEIGHT, title=title)


@_in_words
def time_series(
    frame: pl.DataFrame,
    *,
    time_ns: str = "time_ns",
    value: str = "value",
    series: str = "host",
    window_s: tuple[float, float] | None = None,
    title: str = "",
) -> alt.TopLevelMixin:
    """Draw a per-interval series per host, the steady-state window shaded when given.

    A line breaks where its host logged no interval for longer than one and a half of its usual steps
    (no I/O completed, or none was written): a line drawn across it would show a ramp where there was none.
    A line that ends that much before the others is said to, not left to read as the host stopping.
    """
    data = (
        frame.with_columns((pl.col(time_ns) / 1e9).alias("time_s"))
        .select(series, "time_s", value)
        .sort(series, "time_s")
    )
    step = pl.col("time_s").diff().over(series)
    gaps = (
        data.with_columns(step.alias("gap"), step.median().over(series).alias("usual"))
        .filter(pl.col("gap") > 1.5 * pl.col("usual"))
        .select(series, (pl.col("time_s") - pl.col("gap") + pl.col("usual")).alias("time_s"), pl.lit(None).alias(value))
    )
    ends = data.group_by(series).agg(
        pl.col("time_s").max().alias("end"), pl.col("time_s").diff().median().alias("usual")
    )
    early = ends.filter(pl.col("end") < pl.col("end").max() - 1.5 * pl.col("usual"))
    data = pl.concat([data, gaps.cast(data.schema)]).sort(series, "time_s")
    line = (
        _chart(data)
        .mark_line(invalid="break-paths-show-domains")
        .encode(
            x=alt.X("time_s:Q", title="time (s)"),
            y=alt.Y(f"{value}:Q", title=words(value)),
            color=_series_color(data, series),
        )
    )
    layers: list[alt.Chart] = []
    if window_s is not None:
        band = pl.DataFrame({"start": [window_s[0]], "end": [window_s[1]]})
        layers.append(_chart(band).mark_rect(opacity=0.12, color="#3a8f5c").encode(x="start:Q", x2="end:Q"))
    notes = ["A break in a line: no interval logged there (no I/O completed, or none written)"] if gaps.height else []
    if early.height:
        notes.append(f"A line that ends before the others: its {inline(series)} logged no interval after it")
    return alt.layer(*layers, line).properties(
        title=alt.TitleParams(title or value, subtitle=notes) if notes else title or value
    )


@_in_words
def comparison(
    table: pl.DataFrame,
    *,
    label: list[str],
    title: str = "Change against the baseline",
    runs: pl.DataFrame | None = None,
    value: str = "",
    factor: str = "",
    baseline: str = "",
) -> alt.TopLevelMixin:
    """Draw a setting comparison: the change, its exact interval where one exists, the verdict, and the runs.

    From :func:`benchlib.stats.compare.comparison_table`: the Hodges-Lehmann change in
    percent, its interval (none for ``descriptive only`` or ``not testable at this n``),
    coloured by verdict and labelled with benchstat's delta where significant, else the verdict.
    ``runs`` (the table's units, :func:`benchlib.views.run_totals` of ``value``): each run of either side
    drawn behind the change as its ``value`` against the baseline's median, grey, so that a reader sees
    how many runs a change rests on and how far apart they fell (the baseline's around 0).
    """
    data = (
        table.with_columns(
            _joined(label).alias("comparison"),
            ((pl.col("ratio_low") - 1) * 100).alias("low_pct"),
            ((pl.col("ratio_high") - 1) * 100).alias("high_pct"),
            pl.when(pl.col("delta") == "~").then(pl.col("verdict")).otherwise(pl.col("delta")).alias("label"),
        )
        .with_columns(pl.coalesce("high_pct", "change_pct").alias("label_at"))
        .select("comparison", "change_pct", "low_pct", "high_pct", "label_at", "label", "delta", "verdict")
        .sort("comparison")
    )
    y = alt.Y(
        "comparison:N",
        sort=data["comparison"].to_list(),
        title=None,  # in the subtitle: beside labels of any length an axis title ran into them
        axis=alt.Axis(labelLimit=0),  # a comparison's whole name: "randwrite_64k_8jobs / off / PVSCSI", not "PV…"
    )
    verdicts = [v for v in VERDICT_COLOURS if v in set(data["verdict"])]
    axis = alt.Axis(labelOverlap="greedy", tickCount=8)  # fewer, wider ticks: none of their labels dropped
    # one colour per verdict on every page and in every report; the legend lists the verdicts drawn, below
    # the chart (a label at the right end of a change must not run into it)
    colour = alt.Color(
        "verdict:N",
        title="verdict",
        scale=alt.Scale(domain=list(VERDICT_COLOURS), range=list(VERDICT_COLOURS.values())),
        legend=alt.Legend(orient="bottom", values=verdicts),
    )
    x_title = (
        "change against the baseline (%), with its 95% interval"
        if data["low_pct"].is_not_null().any()
        else "change against the baseline (%); no interval: too few runs to compute one"
    )
    rule = (
        _chart(data.filter(pl.col("low_pct").is_not_null()))
        .mark_rule()
        .encode(x=alt.X("low_pct:Q", title=x_title, axis=axis), x2="high_pct:Q", y=y, color=colour)
    )
    point = (
        _chart(data)
        .mark_point(filled=True, size=60)
        .encode(
            x=alt.X("change_pct:Q", title=x_title, axis=axis),
            y=y,
            color=colour,
            tooltip=["comparison:N", "delta:N", "verdict:N"],
        )
    )
    dots = _runs_against_baseline(runs, table, value=value, factor=factor, baseline=baseline, label=label)
    if dots is not None and dots.height:  # a row's label starts past its runs, not over them
        furthest = dots.group_by("comparison").agg(pl.col("pct").max().alias("_runs_to"))
        data = data.join(furthest, on="comparison", how="left").with_columns(
            pl.max_horizontal("label_at", "_runs_to").alias("label_at")
        )
    # a label only where it adds to the colour: every row's verdict written out repeated the legend
    labelled = data.filter(pl.col("delta") != "~") if data["verdict"].n_unique() == 1 else data
    text = _chart(labelled).mark_text(align="left", dx=8).encode(x="label_at:Q", y=y, text="label:N")
    zero = _chart(pl.DataFrame({"zero": [0.0]})).mark_rule(color="#999999").encode(x="zero:Q")
    rows = "each row: " + " / ".join(inline(c) for c in label)
    layers = [zero, rule, point, text]
    if dots is not None and dots.height:
        rows += "; grey: each run against the baseline's median"
        # a shape per role, the same in every report: the baseline's runs a circle, the others' a square
        roles = [dots.filter(pl.col("baseline"))["side"][0], dots.filter(~pl.col("baseline"))["side"][0]]
        scale = alt.Scale(domain=roles, range=["circle", "square"])
        side = alt.Shape("side:N", title="runs", legend=alt.Legend(orient="bottom"), scale=scale)
        layers.insert(
            1,
            _chart(dots)
            .mark_point(size=30, color=RUNS_GREY)
            .encode(
                x=alt.X("pct:Q", title=x_title, axis=axis),
                y=y,
                shape=side,
                tooltip=[
                    "comparison:N",
                    "side:N",
                    alt.Tooltip("pct:Q", format=".1f", title="against the baseline's median (%)"),
                ],
            ),
        )
    return alt.layer(*layers).properties(title=alt.Title(title, subtitle=rows))


def _runs_against_baseline(
    runs: pl.DataFrame | None, table: pl.DataFrame, *, value: str, factor: str, baseline: str, label: list[str]
) -> pl.DataFrame | None:
    """Return each run of a comparison's two sides as its ``value`` against the baseline's median (%), per row.

    A row of ``table`` is one level of ``factor`` against ``baseline`` within a group of the other
    ``label`` columns; its baseline runs are drawn on every row that compares against them.
    """
    if runs is None or runs.is_empty() or not value or factor not in runs.columns or table.is_empty():
        return None
    if table["runs"].max() == 1 and table["runs_baseline"].max() == 1:  # each run is the change drawn: no spread
        return None
    by = [c for c in label if c != factor]
    # in the study's words, as the table's rows are drawn (:func:`_in_words`)
    runs = runs.filter(pl.col(value).is_not_null()).with_columns(level_expr(c) for c in (*by, factor))
    compared = table.select(*by, factor).with_columns(pl.col(c).cast(pl.String) for c in (*by, factor)).unique()
    base = runs.filter(pl.col(factor) == level(factor, baseline)).drop(factor)
    median = base.group_by(by or pl.lit(0).alias("_all")).agg(pl.col(value).median().alias("_median"))
    base = base.join(compared, on=by) if by else base.join(compared, how="cross")
    # private names while the factors' columns are beside them (a factor may be named side or baseline)
    base = base.with_columns(pl.lit(f"baseline run ({level(factor, baseline)})").alias("_side"), _baseline=True)
    levels = compared[factor].unique().sort().to_list()
    named = f"run of {levels[0]}" if len(levels) == 1 else "run of the level compared"
    new = runs.join(compared, on=[*by, factor]).with_columns(pl.lit(named).alias("_side"), _baseline=False)
    kept = [*by, factor, value, "_side", "_baseline"]
    both = pl.concat([new.select(kept), base.select(kept)])
    both = both.join(median, on=by) if by else both.join(median.drop("_all"), how="cross")
    return (
        both.filter(pl.col("_median") > 0)
        .select(
            _joined(label).alias("comparison"),
            pl.col("_side").alias("side"),
            pl.col("_baseline").alias("baseline"),
            ((pl.col(value) / pl.col("_median") - 1) * 100).alias("pct"),
        )
        .sort(pl.all())  # joins keep no order: the same runs, the same figure
    )


@_in_words
def interaction(
    grid: pl.DataFrame,
    *,
    value: str,
    x: str,
    trace: str,
    by: list[str] | None = None,
    title: str = "",
    runs: pl.DataFrame | None = None,
) -> alt.TopLevelMixin:
    """Draw an interaction plot: ``value`` against ``x``, one line per level of ``trace``, a panel per ``by`` group.

    From :func:`benchlib.views.interaction`'s grid (medians of run totals). Parallel lines: the
    effect of ``x`` is the same at every level of ``trace``; lines that cross or diverge: it is not. The value
    axis is logarithmic where every value is above 0, as the test is on the log scale: lines parallel there
    have the same ratio, what the test calls no interaction. ``runs`` (:func:`benchlib.views.run_totals` of
    ``value`` by ``x``, ``trace`` and ``by``): each run drawn as a small open point behind its median, so
    that a crossing can be told from the spread of the runs it is drawn from.
    """
    by = by or []
    data = grid.with_columns((_joined(by) if by else pl.lit("all")).alias("group")).with_columns(
        pl.col(x).cast(pl.String), pl.col(trace).cast(pl.String)
    )
    if runs is not None and not runs.is_empty():  # one data set, a layer each: a facet takes only one
        kept = grid.select(*by, x, trace).with_columns(pl.col(c).cast(pl.String) for c in (*by, x, trace))
        each = runs.filter(pl.col(value).is_not_null()).with_columns(level_expr(c) for c in (*by, x, trace))
        each = each.join(kept.unique(), on=[*by, x, trace]).select(*by, x, trace, value).sort(pl.all())
        data = pl.concat(
            [
                data.with_columns(pl.lit("median").alias("_kind")),
                each.with_columns((_joined(by) if by else pl.lit("all")).alias("group"), pl.lit("run").alias("_kind")),
            ],
            how="diagonal_relaxed",
        )
    order = sorted(data[x].unique().to_list())
    traces = sorted(data[trace].unique().to_list())
    log = bool(data[value].drop_nulls().len()) and bool((data[value].drop_nulls() > 0).all())
    # not rounded out to whole decades: 1,723-2,283 drawn on 1,000-10,000 left most of the axis empty
    scale = alt.Scale(type="log", nice=False, padding=10) if log else alt.Undefined
    base = alt.Chart(_data(data)).encode(
        x=alt.X(f"{x}:N", sort=order, title=words(x)),
        # a short title: one longer than the panel stretched a facet's cell, leaving a blank band over the x axis
        y=alt.Y(f"{value}:Q", title=words(value) + (" (log scale)" if log else ""), scale=scale),
        color=alt.Color(f"{trace}:N", title=words(trace), sort=traces),
    )
    tooltip = ["group:N", f"{x}:N", f"{trace}:N", alt.Tooltip(f"{value}:Q", format=",.1f")]
    chart = base.mark_line(point=True).encode(tooltip=[*tooltip, "runs:Q"])
    if "_kind" in data.columns:
        lines = chart.transform_filter(alt.datum._kind == "median")
        each = base.mark_point(size=20, opacity=0.6).encode(tooltip=tooltip).transform_filter(alt.datum._kind == "run")
        chart = alt.layer(each, lines)
    chart = chart.properties(width=WIDTH // 2, height=HEIGHT * 2 // 3)
    # two lines within 2% of each other at every point draw as one: say so only where that happens
    medians = data.filter(pl.col("_kind") == "median") if "_kind" in data.columns else data
    spread = medians.group_by("group", x).agg((pl.col(value).max() / pl.col(value).min()).alias("spread"))
    hidden = spread.group_by("group").agg((pl.col("spread") < 1.02).all().alias("one")).filter(pl.col("one")).height
    hint = "; one line hiding another: the same totals" if hidden and len(traces) > 1 else ""
    if "runs" in grid.columns and grid.height and grid["runs"].max() == 1:
        hint += "; one run each: no test can tell lines that cross from run-to-run noise"
    elif "_kind" in data.columns:
        hint += "; small open points: each run"
    heading = alt.TitleParams(
        title or f"{words(x)} and {words(trace)} together", subtitle=[f"each point: {_run_total_words(grid)}{hint}"]
    )
    if not by:
        return chart.properties(title=heading)
    facet = alt.Facet("group:N", title=" / ".join(words(b) for b in by), sort=sorted(data["group"].unique().to_list()))
    # on a log axis one scale serves every panel, so slopes compare across them; on a linear one each its own
    shared = "shared" if log else "independent"
    return chart.facet(facet=facet, columns=2).resolve_scale(y=shared).properties(title=heading)


@_in_words
def heatmap(
    grid: pl.DataFrame, *, value: str, x: str, y: str, by: list[str] | None = None, title: str = ""
) -> alt.TopLevelMixin:
    """Draw the matrix of two factors as a heat map: one square per combination, its value written in it."""
    by = by or []
    low, high = grid[value].min(), grid[value].max()
    # a log colour scale where the values span a decade or more (uncapped 10,000-100,000 beside capped 2,000:
    # from zero, every square under 20,000 is the same pale blue); below that, linear from zero
    log = low is not None and low > 0 and high >= 10 * low
    shade = pl.col(value).log() if log else pl.col(value)
    middle = (math.log(low) + math.log(high)) / 2 if log else (high or 0) / 2
    data = grid.with_columns((_joined(by) if by else pl.lit("all")).alias("group")).with_columns(
        pl.col(x).cast(pl.String), pl.col(y).cast(pl.String), (shade > middle).alias("dark")
    )
    base = alt.Chart(_data(data)).encode(
        x=alt.X(f"{x}:N", sort=sorted(data[x].unique().to_list()), title=words(x)),
        y=alt.Y(f"{y}:N", sort=sorted(data[y].unique().to_list()), title=words(y)),
    )
    squares = base.mark_rect().encode(
        # from zero: a scale from the smallest value stretches a 27% spread to full contrast
        color=alt.Color(
            f"{value}:Q",
            title=words(value) + (" (log scale)" if log else ""),
            scale=alt.Scale(scheme="blues", type="log") if log else alt.Scale(scheme="blues", zero=True),
            legend=alt.Legend(titleLimit=0),  # the whole title: "Bandwidth (MiB/s) (log scale)" was cut short
        ),
        tooltip=["group:N", f"{x}:N", f"{y}:N", alt.Tooltip(f"{value}:Q", format=",.1f"), "runs:Q"],
    )
    text = base.mark_text(fontSize=11).encode(
        text=alt.Text(f"{value}:Q", format=",.0f"),
        # a condition, not a second colour scale: a scale of its own split the shared legend, one per panel
        color=alt.condition("datum.dark", alt.value("white"), alt.value("black")),
    )
    chart = alt.layer(squares, text).properties(width=WIDTH // 3, height=HEIGHT // 3)
    name = title or f"{_run_total_words(grid).capitalize()}: {words(x)} × {words(y)}"
    if not by:
        return chart.properties(title=name)
    facet = alt.Facet("group:N", title=" / ".join(words(b) for b in by), sort=sorted(data["group"].unique().to_list()))
    # one colour scale for every panel: a panel of its own would stretch 1,999 against 2,000 to full contrast
    return chart.facet(facet=facet, columns=2).resolve_scale(color="shared").properties(title=name)


@_in_words
def member_changes(
    members: pl.DataFrame, fair: pl.DataFrame, *, factor: str, baseline: str, by: list[str], title: str = ""
) -> alt.TopLevelMixin:
    """Draw what changing ``factor`` did to each member: a square per member and configuration, its change in it.

    From :func:`benchlib.results.member_changes`: rows are the members (in a reader's order), columns the
    configurations of ``by`` (and the level, where there are several besides ``baseline``), each square the
    member's change in percent, red for less and blue for more. The row above gives how evenly the members
    shared (Jain's index within each run, the median run's) at ``baseline`` and at the level, so a setting that
    moved members apart shows as a falling index over squares of both colours.
    """
    columns = [*by, factor] if members[factor].n_unique() > 1 or not by else by
    capped = pl.when(pl.col("capped")).then(pl.lit(" (capped)")).otherwise(pl.lit(""))
    data = members.with_columns(pl.concat_str(_joined(columns), capped).alias("column")).with_columns(
        pl.col("change_pct")
        .map_elements(lambda v: f"{v:+.0f}%" if round(v) else "0%", return_dtype=pl.String)  # never "-0%"
        .fill_null("—")
        .alias("said")
    )
    order = natural_sort(data.select(pl.col("vm").unique()), "vm")["vm"].to_list()
    column_order = data.select("column").unique(maintain_order=True)["column"].to_list()
    x = alt.X("column:N", sort=column_order, title=None, axis=alt.Axis(labelAngle=-30, labelLimit=220))
    cells = (
        alt.Chart(_data(data))
        .encode(x=x, y=alt.Y("vm:N", sort=order, title=words("vm")))
        .properties(width=max(120, 72 * len(column_order)), height=ROW_STEP * len(order) + 8)
    )
    # the colours span the changes a setting made; a cap's (+1500% where it set one side) are grey, not the scale
    free = data.filter(~pl.col("capped")) if not data["capped"].all() else data
    strong = max(abs(free["change_pct"].min() or 0), abs(free["change_pct"].max() or 0), 1.0) * 0.6
    capped_grey = "datum.capped && " + ("false" if data["capped"].all() else "true")
    squares = cells.mark_rect().encode(
        color=alt.condition(
            capped_grey,
            alt.value("#e4e4e4"),
            alt.Color(
                "change_pct:Q",
                title="change (%)",
                # symmetric about 0: -8% beside +194% is a pale red, not the darkest one
                scale=alt.Scale(scheme="redblue", domain=[-strong / 0.6, strong / 0.6], clamp=True),
                legend=alt.Legend(orient="bottom"),
            ),
        ),
        tooltip=["column:N", "vm:N", alt.Tooltip("baseline_value:Q", format=",.1f"),
                 alt.Tooltip("value:Q", format=",.1f"), alt.Tooltip("change_pct:Q", format="+.1f")],
    )  # fmt: skip
    text = cells.mark_text(fontSize=10).encode(
        text="said:N",  # white on the darkest squares, black elsewhere: a condition, not a second colour scale
        color=alt.condition(
            f"!({capped_grey}) && abs(datum.change_pct) > {strong}", alt.value("white"), alt.value("black")
        ),
    )
    fair = fair.with_columns(level_expr(c) for c in fair.columns if c in LEVEL_WORDS)  # as ``members`` are worded
    rank = {name: i for i, name in enumerate(column_order)}  # the squares' order: the same figure from the same data
    jain = fair.join(data.select(*columns, "column").unique(), on=columns)
    jain = jain.sort(pl.col("column").replace_strict(rank, return_dtype=pl.Int64)).select(
        "column",
        pl.when(pl.col("jain_baseline").is_not_null() & pl.col("jain").is_not_null())
        .then(
            pl.concat_str(
                pl.col("jain_baseline").map_elements(lambda v: f"{v:.2f}", return_dtype=pl.String),
                pl.lit(" → "),
                pl.col("jain").map_elements(lambda v: f"{v:.2f}", return_dtype=pl.String),
            )
        )
        .otherwise(pl.lit("—"))
        .alias("said"),
        pl.lit("Jain's index").alias("row"),
    )
    strip = (
        alt.Chart(_data(jain))
        .mark_text(fontSize=10)
        .encode(x=alt.X("column:N", sort=column_order, axis=None), y=alt.Y("row:N", title=None), text="said:N")
        .properties(width=max(120, 72 * len(column_order)), height=18)
    )
    baseline = level(factor, baseline)
    others = ", ".join(members[factor].unique(maintain_order=True).to_list())
    lead = f"{words(factor)} {others} against {baseline}: each {inline('vm')}'s change"
    subtitle = [
        f"each square: the {inline('vm')}'s median run against its median run at {baseline}",
        f"top row: Jain's index within each run (the median run's), {baseline} → {others}; — where a run had one "
        f"{inline('vm')}",
    ]
    return alt.vconcat(strip, alt.layer(squares, text), spacing=2).properties(
        title=alt.TitleParams(title or lead, subtitle=subtitle)
    )


def _run_total_words(grid: pl.DataFrame) -> str:
    """Say what a grid's value is: ``the median of the runs' totals``, or ``the one run's total`` with one run each."""
    once = "runs" in grid.columns and grid.height and grid["runs"].max() == 1
    return "the one run's total" if once else "the median of the runs' totals"


def _decades(values: pl.Series) -> alt.Axis:
    """Return a log axis labelled at its powers of ten only: Vega's own log ticks overlapped (0.010.02)."""
    present = values.filter(values > 0)
    if present.is_empty():
        return alt.Axis()
    low, high = math.floor(math.log10(present.min())), math.ceil(math.log10(present.max()))
    return alt.Axis(values=[10.0**e for e in range(low, high + 1)], format="~g")


@_in_words
def exceedance_curve(
    curve: pl.DataFrame, *, series: str | None = None, title: str = "Share of I/Os slower than each latency"
) -> alt.TopLevelMixin:
    """Draw :func:`benchlib.views.latency_exceedance`: the share of I/Os slower than each latency, log-log.

    One line per ``series`` (a VM), and per direction where the curve keeps a mix's reads and writes apart;
    the tail is the right end: how slow the slowest 1%, 0.1%... were.
    """
    legend = lines = None
    if "direction" in curve.columns:  # a mix: a line per member and direction, the legend saying both
        parts = [pl.col(series).cast(pl.String)] if series else []
        curve = curve.with_columns(pl.concat_str([*parts, pl.col("direction")], separator=", ").alias("_line"))
        legend = f"{words(series)}, direction" if series else "Direction"
        lines = f"curves (a {inline(series)}'s reads or writes each)" if series else "curves"
        series = "_line"
    keys = [series] if series else []
    data = (
        curve.filter(pl.col("slower") > 0)
        .with_columns((pl.col("slower") * 100).alias("slower_pct"))
        .select(*keys, "latency_ms", "slower_pct")
        .sort([*keys, "latency_ms"])
    )
    cut = "each curve stops where fewer than 10 I/Os lie beyond it; the slowest I/Os are past its end"
    if series and data[series].n_unique() > len(PALETTE):  # more lines than colours: grey, two tails named
        return _many_exceedances(data, series, title, cut, lines=lines)
    x, y, tooltip = _exceedance_encoding(data, keys, legend)
    chart = (
        _chart(data)
        .mark_line(interpolate="step-after")
        .encode(x=x, y=y, color=_series_color(data, series, legend), tooltip=tooltip)
    )
    # the curves stop where fewer than 10 I/Os lie beyond (their last steps would be single I/Os): say so,
    # so that a maximum the page quotes is not looked for on the chart
    return chart.properties(title=alt.TitleParams(title, subtitle=[cut]))


def _exceedance_encoding(data: pl.DataFrame, keys: list[str], named: str | None = None) -> tuple[alt.X, alt.Y, list]:
    """Return the log-log axes of an exceedance curve (latency, share slower) and its tooltip.

    ``named``: the words for its one key, where they are not the key's own.
    """
    x = alt.X("latency_ms:Q", scale=alt.Scale(type="log"), title="latency (ms)", axis=_decades(data["latency_ms"]))
    y = alt.Y(
        "slower_pct:Q",
        scale=alt.Scale(type="log"),
        title="I/Os slower than that (%)",
        axis=_decades(data["slower_pct"]),
    )
    tooltip = [
        *(alt.Tooltip(f"{k}:N", title=named) if named else f"{k}:N" for k in keys),
        alt.Tooltip("latency_ms:Q", format=".4f"),
        alt.Tooltip("slower_pct:Q", format=".4f"),
    ]
    return x, y, tooltip


def _many_exceedances(
    data: pl.DataFrame, series: str, title: str, cut: str, lines: str | None = None
) -> alt.TopLevelMixin:
    """Every member's curve in grey, the slowest and the fastest at 1% (their p99) drawn in colour and named.

    More members than colours: a colour per member would repeat, and a legend of them all says nothing.
    """
    p99 = (
        data.filter(pl.col("slower_pct") <= 1)
        .group_by(series)
        .agg(pl.col("latency_ms").min().alias("p99"))
        .sort("p99", series)
    )
    named = {}
    if p99.height >= 2:
        named = {p99[series][-1]: "slowest at 1%", p99[series][0]: "fastest at 1%"}
    marked = data.filter(pl.col(series).is_in(list(named))).with_columns(
        (pl.col(series).replace_strict(named, default="") + ": " + pl.col(series).cast(pl.String)).alias("_named")
    )
    x, y, tooltip = _exceedance_encoding(data, [series])
    every = (
        _chart(data)
        .mark_line(interpolate="step-after", color="#b8b8b8", strokeWidth=0.8, opacity=0.6)
        .encode(x=x, y=y, detail=f"{series}:N", tooltip=tooltip)
    )
    layers = [every]
    if marked.height:
        order = sorted(set(marked["_named"].to_list()), key=lambda n: not n.startswith("slowest"))
        layers.append(
            _chart(marked)
            .mark_line(interpolate="step-after", strokeWidth=2)
            .encode(x=x, y=y, color=alt.Color("_named:N", title=None, sort=order), tooltip=tooltip)
        )
    lines = lines or f"{inline(series)}s"
    members = f"{data[series].n_unique()} {lines} in grey; the slowest and fastest at 1% in colour"
    return alt.layer(*layers).properties(title=alt.TitleParams(title, subtitle=[members, cut]))


@_in_words
def latency_exceedance(
    pooled: pl.DataFrame, *, series: str | None = None, title: str = "Latency exceedance (pooled bins)"
) -> alt.TopLevelMixin:
    """From ``stats.aggregate.pooled_percentiles``: the share of I/Os slower than each latency, log-log."""
    keys = [series] if series else []
    data = pooled.with_columns(
        (100 - pl.col("percentile")).round(9).alias("exceeding_pct"), (pl.col("value_ns") / 1e3).alias("latency_us")
    )
    data = (
        data.filter(pl.col("exceeding_pct") > 0)
        .select(*keys, "percentile", "exceeding_pct", "latency_us")
        .sort([*keys, "percentile"])
    )
    color = _series_color(data, series)
    chart = (
        _chart(data)
        .mark_line(point=True, interpolate="step-after")
        .encode(
            x=alt.X("latency_us:Q", scale=alt.Scale(type="log"), title="latency (µs)"),
            y=alt.Y("exceeding_pct:Q", scale=alt.Scale(type="log"), title="I/Os slower (%)"),
            color=color,
        )
    )
    return chart.properties(title=title)


#: commands per second below which a device's mean latency is a few commands' (its bars are faded)
FEW_COMMANDS = 1.0


@_in_words
def esxtop_latency_stack(
    means: pl.DataFrame,
    *,
    by: list[str] | None = None,
    guest_ms: dict[str, float] | None = None,
    title: str = "Where the time goes: KAVG (kernel) + DAVG (device) = GAVG",
) -> alt.TopLevelMixin:
    """Draw KAVG and DAVG per device, stacked to GAVG.

    KAVG and DAVG per device (and configuration of ``by``) stacked to GAVG (each weighted by commands),
    from :func:`benchlib.stats.device_latency_means`; devices without commands are left out; the
    guest-measured latency per device as a tick when given (keyed ``host|device``, after the
    configuration's words and a ``|`` when ``by`` is given). Each label is its lines: the configuration,
    the host, the device name (the padding of t10.ATA_____... names, which run to 70 characters and end in
    the serial, cut to one ``_``; the tooltip gives it whole) and the device's commands per second. A device
    with fewer than :data:`FEW_COMMANDS` commands/s has a mean of a few commands' latency: beside busier
    devices it is left out (it would set the axis), and the subtitle names the largest; where every device
    is that idle, all are drawn faded.
    """
    by = by or []
    # a device without commands has no latency to draw; padded names (t10.ATA_____...) said with one "_"
    means = means.drop_nulls("GAVG").with_columns(
        pl.col("device").str.replace_all(r"_{2,}", "_").str.strip_chars_end("_").alias("short")
    )
    few = means.filter(pl.col("commands") < FEW_COMMANDS)
    subtitle = ""
    if few.height and few.height < means.height:
        means = means.filter(pl.col("commands") >= FEW_COMMANDS)
        top = few.sort("GAVG", descending=True).row(0, named=True)
        name = top["short"]
        subtitle = (
            f"Left out: {few.height} bars of devices under {FEW_COMMANDS:g} command/s, whose mean is a few "
            f"commands' latency (the largest, {name}: {number(top['GAVG'])} ms at {number(top['commands'])} commands/s)"
        )
    elif few.height:
        subtitle = f"Faded: every device had under {FEW_COMMANDS:g} command/s; each mean is a few commands' latency"
    parts = [_joined(by)] if by else []
    # each label ends with the device's commands/s: a mean over a few commands is a few commands' latency
    rate = pl.col("commands").map_elements(lambda c: f"{number(c)} commands/s", return_dtype=pl.String)
    means = means.with_columns(
        pl.concat_str(*parts, "host", "device", separator="|").alias("where"),  # guest_ms's keys
        pl.concat_str(*parts, "host", "short", rate, separator="|").alias("label"),
    ).sort("where")
    long = means.unpivot(
        index=["label", "device", "commands"], on=["KAVG", "DAVG"], variable_name="part", value_name="ms"
    ).sort("label", "part")
    lines = "split(datum.label, '|')"
    y = alt.Y("label:N", sort=means["label"].to_list(), title=None, axis=alt.Axis(labelLimit=0, labelExpr=lines))
    bars = (
        _chart(long)
        .mark_bar()
        .encode(
            x=alt.X("ms:Q", stack="zero", title="mean latency per command (ms)"),
            y=y,
            color=alt.Color("part:N", sort=["KAVG", "DAVG"], title=None),
            order=alt.Order("part:N", sort="descending"),
            opacity=alt.condition(f"datum.commands < {FEW_COMMANDS}", alt.value(0.3), alt.value(1.0)),
            tooltip=[
                alt.Tooltip("device:N"),
                alt.Tooltip("part:N"),
                alt.Tooltip("ms:Q", format=",.3f"),
                alt.Tooltip("commands:Q", format=",.1f", title="commands/s"),
            ],
        )
    )
    # a band tall enough for its label's lines (configuration, host, device, commands/s): none run into the next
    tall = max(HEIGHT, means.height * 18 * (3 + bool(by)))
    if subtitle:
        title = alt.TitleParams(title, subtitle=subtitle)
    if not guest_ms:
        return bars.properties(title=title, height=tall)
    ticks = pl.DataFrame({"where": list(guest_ms), "guest_ms": list(guest_ms.values())})
    ticks = ticks.join(means.select("where", "label"), on="where").sort("label")
    tick = _chart(ticks).mark_tick(color="black", thickness=2, size=18).encode(x="guest_ms:Q", y=y)
    return alt.layer(bars, tick).properties(title=title, height=tall)


@_in_words
def fairness_over_time(per_interval: pl.DataFrame, *, title: str = "Jain's index per interval") -> alt.TopLevelMixin:
    """Jain's index across members per interval, from :func:`benchlib.stats.jain_per_interval`.

    The axis starts just below the lowest interval or the 0.9 line, whichever is lower (as
    :func:`fairness_summary`'s): on 0 to 1 a run between 0.98 and 1 was a flat line on the top edge.
    """
    data = per_interval.select("time_s", "jain", "members").sort("time_s")
    start = _jain_axis_start(data["jain"])
    chart = (
        _chart(data)
        .mark_line(point=True)
        .encode(
            x=alt.X("time_s:Q", title="time (s)"),
            y=alt.Y(
                "jain:Q",
                # zero=False: the dashed rule's layer made the shared scale include 0 again (Vega-Lite's default)
                scale=alt.Scale(domain=[start, 1], clamp=True, nice=False, zero=False),
                title=f"Jain's index (1 = equal; the axis starts at {start:g})",
            ),
            tooltip=["time_s:Q", alt.Tooltip("jain:Q", format=".4f"), "members:Q"],
        )
    )
    line = (
        alt.Chart(alt.Data(values=[{"fair": UNFAIR_BELOW}]))
        .mark_rule(strokeDash=[4, 3], color=PALETTE[1])
        .encode(y="fair:Q")
    )
    layers = [line, chart] if start < UNFAIR_BELOW else [chart]
    return alt.layer(*layers).properties(title=alt.TitleParams(title, subtitle=[_unfair_line(start, data["jain"])]))


#: from this lowest value up, a Jain's-index axis zooms to the data and leaves the 0.9 line off
JAIN_ZOOM_FROM = 0.95


def _jain_axis_start(values: pl.Series) -> float:
    """Where a Jain's-index axis starts: 0.02 below the lowest value or the 0.9 line, on a 0.05 step.

    When every value is :data:`JAIN_ZOOM_FROM` or more, just below the lowest on a 0.01 step: on an
    axis down to 0.85, 0.987 and 1.000 were one dot.
    """
    found = values.drop_nulls().to_list()
    if found and min(found) >= JAIN_ZOOM_FROM:
        return math.floor((min(found) - 0.005) * 100) / 100
    low = min([UNFAIR_BELOW, *found])
    return max(0.0, math.floor((low - 0.02) * 20) / 20)


def _unfair_line(start: float, values: pl.Series) -> str:
    """Say where the 0.9 line is: drawn, dashed, or below an axis zoomed to the data (:func:`_jain_axis_start`)."""
    if start < UNFAIR_BELOW:
        return f"dashed line: {UNFAIR_BELOW} (below it, unfair)"
    lowest = math.floor(min(values.drop_nulls().to_list()) * 10_000) / 10_000  # 0.99996 is "0.9999", never "1.0000"
    return f"every value at least {lowest:.4f}: the 0.9 line (below it, unfair) is off the axis"


@_in_words
def fairness_summary(table: pl.DataFrame, *, by: list[str], title: str = "") -> alt.TopLevelMixin:
    """Jain's index per configuration from :func:`benchlib.stats.fairness_over_runs`.

    The dot is the median over runs of the index within each run (of two runs, the fairer: their median
    is their mean, a figure neither had); the black tick is the worst run.
    The title names the members as :func:`benchlib.tables.name_members` calls them (VMs by default).
    Beside it: the runs, the highest/lowest ratio (median over runs) and whether rate caps set the shares.
    Configurations whose runs had one member each are left out (nothing to judge).
    """
    table = table.filter(pl.col("jain_median").is_not_null())  # runs of one member are not judged
    # two runs at most: both runs, the dot the fairer; the median of two is their mean, a figure neither had
    two = table.height > 0 and table["runs_judged"].max() == 2
    if two:
        table = table.with_columns(pl.col("jain_best").alias("jain_median"))

    def ratio(column: str) -> pl.Expr:  # two decimals always: 1.005 rounded to "1.0x" beside 1.006's "1.01x"
        return pl.col(column).map_elements(lambda v: f"{v:.2f}x", pl.String)

    spread = (
        pl.when(pl.col("max_min_median").is_null())
        .then(pl.lit(f"a {inline('vm')} got nothing"))
        .when(pl.col("runs_judged") == 2)
        .then(pl.format("max/min {} and {}", ratio("max_min_best"), ratio("max_min_worst")))
        .otherwise(pl.format("max/min {}", ratio("max_min_median")))
    )
    note = pl.concat_str(
        pl.format("{} run", pl.col("runs")),
        pl.when(pl.col("runs") == 1).then(pl.lit("")).otherwise(pl.lit("s")),
        pl.lit(", "),
        spread,
        pl.when(pl.col("capped_runs") > 0).then(pl.lit(", rate-capped")).otherwise(pl.lit("")),
    )
    data = (
        table.with_columns(_joined(by).alias("configuration"), note.alias("note"))
        .select("configuration", "jain_median", "jain_worst", "note", "runs", "winners")
        .sort("configuration")
    )
    y = alt.Y("configuration:N", sort=data["configuration"].to_list(), title=None)
    # Jain's index of a few VMs sits near 1: an axis from 0 draws every configuration as the same full
    # bar. The axis starts just below the worst run or the 0.9 line, whichever is lower, and says so.
    start = _jain_axis_start(data["jain_worst"])
    x = alt.X(
        "jain_median:Q",
        scale=alt.Scale(domain=[start, 1], clamp=True, nice=False),
        title=f"Jain's index within a run (1 = equal shares; the axis starts at {start:g})",
    )
    tooltip = [
        "configuration:N",
        alt.Tooltip("jain_median:Q", format=".4f", title="Jain, fairer run" if two else "median Jain over runs"),
        alt.Tooltip("jain_worst:Q", format=".4f", title="less fair run" if two else "worst run"),
        "note:N",
        alt.Tooltip("winners:Q", title=f"different {inline('vm')}s on top"),
    ]
    span = _chart(data).mark_rule(color="#999").encode(x=x, x2="jain_worst:Q", y=y)
    worst = _chart(data).mark_tick(color="black", thickness=2, size=14).encode(x="jain_worst:Q", y=y, tooltip=tooltip)
    median = _chart(data).mark_circle(color=PALETTE[0], size=70, opacity=1).encode(x=x, y=y, tooltip=tooltip)
    line = (
        alt.Chart(alt.Data(values=[{"fair": UNFAIR_BELOW}]))
        .mark_rule(strokeDash=[4, 3], color=PALETTE[1])
        .encode(x="fair:Q")
    )
    # clear of a dot at 1.0 (its radius about 5 px)
    text = _chart(data).mark_text(align="left", dx=12).encode(x=alt.datum(1), y=y, text="note:N")
    one_run = bool((data["runs"] <= 1).all()) if "runs" in data.columns else False
    marks = (
        "dot: the one run of each"
        if one_run
        else "dot: the fairer run; black tick: the less fair"
        if two
        else "dot: the median over runs; black tick: the worst run"
    )
    subtitle = f"{marks}; {_unfair_line(start, data['jain_worst'])}"
    title = title or f"Fairness across {inline('vm')}s within each run"
    layers = [span, line, worst, median, text] if start < UNFAIR_BELOW else [span, worst, median, text]
    return alt.layer(*layers).properties(title=alt.TitleParams(title, subtitle=[subtitle]))


@_in_words
def latency_split(
    frame: pl.DataFrame,
    *,
    where: list[str],
    parts: tuple[str, ...] = ("device_await_ms", "above_device_ms"),
    total: str = "app_latency_ms",
    title: str = "Where the latency was spent",
) -> alt.TopLevelMixin | None:
    """Draw where the latency was spent, as bars of shares per configuration, the latency written beside each.

    Each configuration's bar is the latency the application saw, split into its parts (e.g. the block
    layer's await and the time above it) as shares of 100%, with that latency (``total``, where the frame
    has it; else the parts' sum) in ms at its end: where fio saw a little less than the await (noise),
    the time above is 0 and the bar all await, but the figure written is still fio's. Shares, not
    milliseconds: the totals of one study span a hundredfold (0.08 ms capped, 12.7 ms at a queue of 123),
    and on one linear axis the short bars would be slivers whose split no one can read. A configuration
    with a part unknown (the page cache answered: fio's latency is not the device's) is not drawn, since
    its bar would not be its latency; the subtitle names it. None where no configuration can be drawn (an
    empty frame of axes says nothing the table's notes do not).
    """
    data = frame.with_columns(_joined(where).alias("configuration"))
    unknown = data.filter(pl.any_horizontal(pl.col(list(parts)).is_null()))["configuration"].to_list()
    if len(unknown) == data.height:
        return None
    data = data.filter(pl.all_horizontal(pl.col(list(parts)).is_not_null())).with_columns(
        pl.sum_horizontal(list(parts)).alias("total_ms")
    )
    seen = data[total] if total in data.columns else data["total_ms"]
    data = data.with_columns(pl.Series("label", [f"{number(ms)} ms" for ms in seen], dtype=pl.String))
    named = {part: words(part) for part in parts}  # the legend in words, not column names
    long = (
        data.unpivot(index=["configuration", "total_ms"], on=list(parts), variable_name="part", value_name="ms")
        .with_columns(
            pl.col("part").replace_strict({p: i for i, p in enumerate(parts)}, return_dtype=pl.Int64).alias("order"),
            pl.col("part").replace_strict(named),
            (pl.col("ms") / pl.col("total_ms") * 100).alias("share_pct"),
        )
        .sort("configuration", "order")
    )
    y = alt.Y("configuration:N", sort=sorted(data["configuration"].to_list()), title=None)
    bars = (
        _chart(long)
        .mark_bar()
        .encode(
            x=alt.X(
                "share_pct:Q",
                stack="zero",
                scale=alt.Scale(domain=[0, 100], nice=False),
                title="share of the mean latency per I/O fio saw (%)",
            ),
            y=y,
            color=alt.Color(
                "part:N",
                sort=list(named.values()),
                title="where the time went",
                # below the bars: at their right it covered the totals written at their ends
                legend=alt.Legend(labelLimit=0, orient="bottom", direction="vertical"),
            ),
            order=alt.Order("order:Q", sort="ascending"),
            tooltip=[
                "configuration:N",
                "part:N",
                alt.Tooltip("ms:Q", format=".4f", title="ms"),
                alt.Tooltip("share_pct:Q", format=".1f", title="share (%)"),
            ],
        )
    )
    totals = (
        _chart(data.select("configuration", "label"))
        .mark_text(align="left", dx=4, fontSize=10)
        .encode(x=alt.datum(100), y=y, text="label:N")
    )
    subtitle = ["Each bar is its configuration's mean latency as 100%, split into its parts; that latency at its end"]
    if unknown:
        subtitle.append(f"Not drawn, a part unknown (see the table): {', '.join(unknown)}")
    return alt.layer(bars, totals).properties(title=alt.TitleParams(title, subtitle=subtitle))


VEGALITE_MIME = "application/vnd.vegalite.v6+json"


def _title_text(spec: dict) -> str:
    """Return a chart's title text ("" where it has none)."""
    title = spec.get("title", "")
    return title.get("text", "") if isinstance(title, dict) else title


#: set to "1" in the kernels ``benchlib report`` runs its pages in: their figures are exported as SVG and
#: PNG beside the pages, so the notebooks carry no PNG of them, and a chart is not checked against the
#: Vega-Lite schema as it is shown (every figure builder is, by the tests and by nbval on the bundled studies)
REPORT_KERNEL = "BENCHLIB_REPORT_KERNEL"
#: set by ``benchlib report`` in a page's kernel to the folder of that page's figure files: each figure shown
#: is written there as it is shown (:func:`write_figure`), in the page's own kernel, two of which run at once
#: (written by the build itself from the saved notebook, every figure of a report waited on one process)
FIGURES_TO = "BENCHLIB_FIGURES"


def write_figure(spec: dict, stem: Path) -> None:
    """Write one figure as ``stem``.json (Vega-Lite), .svg and .png (twice the size, drawn from the SVG)."""
    import vl_convert as vlc

    stem.with_suffix(".json").write_text(figure_json(spec), encoding="utf-8")
    svg = figure_svg(spec, stem.name)
    stem.with_suffix(".svg").write_text(svg, encoding="utf-8")
    # from the SVG: the bytes vegalite_to_png gives, in about half its time
    stem.with_suffix(".png").write_bytes(vlc.svg_to_png(svg, scale=2))


def figure_svg(spec: dict, name: str) -> str:
    """Return a figure's SVG with ids of its own, the same however and wherever it was drawn.

    Vega numbers gradients per process (the same figure drawn after another had ``gradient_3``, not
    ``gradient_0``); here they are numbered in the order they appear, after the figure's ``name``
    (``figure-2``), so they are also unique on the figure's page.
    """
    import vl_convert as vlc

    seen: dict[str, int] = {}
    return re.sub(
        r"gradient_(\d+)", lambda m: f"{name}-gradient-{seen.setdefault(m[1], len(seen))}", vlc.vegalite_to_svg(spec)
    )


def figure_json(spec: dict) -> str:
    """Return a figure's Vega-Lite file as :func:`write_figure` writes it (sorted keys: a stable diff)."""
    return orjson.dumps(spec, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode("utf-8")


def _render(spec: dict) -> dict:
    import vl_convert as vlc

    parts = spec.get("vconcat", spec.get("hconcat", []))  # charts stacked or side by side: their titles
    text = _title_text(spec) or "; ".join(filter(None, (_title_text(part) for part in parts)))
    title = spec.get("title", {})
    if "description" not in spec:  # what a screen reader says of the chart: its title and what it finds
        subtitle = title.get("subtitle", []) if isinstance(title, dict) else []
        said = [text, *([subtitle] if isinstance(subtitle, str) else subtitle)]  # one line, or a list of lines
        lines = [line for part in said for line in ([part] if isinstance(part, str) else part)]
        spec = {**spec, "description": ". ".join(line for line in lines if line)}
    shown = {VEGALITE_MIME: spec, "text/plain": f"<figure: {text}>"}
    if os.environ.get(REPORT_KERNEL) == "1":  # a report build: its pages draw the exported SVG, not a PNG here
        folder = os.environ.get(FIGURES_TO)
        if folder:  # this page's figure files, numbered in the order they are shown, as the page counts them
            write_figure(spec, Path(folder) / f"figure-{len(list(Path(folder).glob('figure-*.json'))) + 1}")
        return shown
    return {**shown, "image/png": base64.b64encode(vlc.vegalite_to_png(spec, scale=1)).decode("ascii")}


def use_in_notebooks() -> None:
    """Show charts as Vega-Lite JSON plus a PNG, with no random ids.

    Altair 6's own ``mimetype`` renderer writes the key
    ``application/vnd.vegalite.v6.json``, which nbformat rejects (a JSON value
    needs a ``+json`` key), so papermill and nbval cannot save it; this one
    writes ``application/vnd.vegalite.v6+json`` and a PNG. JupyterLab renders
    Vega-Lite only up to v5 and shows no SVG of a notebook it does not trust
    (a committed notebook opened for the first time); a PNG it shows either way.
    """
    alt.renderers.register("benchlib", _render)
    alt.renderers.enable("benchlib")
    if os.environ.get(REPORT_KERNEL) != "1":
        return
    # a report build: no schema check as a chart is built (altair's debug mode) or shown
    from altair.utils.schemapi import disable_debug_mode

    disable_debug_mode()
    shell = _ipython()
    if shell is not None:
        shell.display_formatter.mimebundle_formatter.for_type(alt.TopLevelMixin, _unchecked)


def _ipython() -> object | None:
    """Return the IPython shell this runs in, None outside one."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with jupyterlab
        return None
    return get_ipython()


def _unchecked(chart: alt.TopLevelMixin, include: object = None, exclude: object = None) -> dict:
    """Show a chart as :func:`_render` does, without checking its spec against the Vega-Lite schema."""
    return _render(chart.to_dict(validate=False, context={"pre_transform": False}))


# a figure builder changed (test_report)
