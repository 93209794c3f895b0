"""Tables a reader can take in: human column names with units, readable numbers, every row.

``show(frame)`` returns an object that notebooks display as an HTML table (and as
aligned plain text, which nbval compares and a terminal prints). Nothing is cut:
no "…" rows, no truncated strings. Numbers get three significant digits (whole
numbers keep every digit, with thousands separators; a column shares one number of
decimals); a missing value prints as
"—", never 0, NaN or inf. Every string is escaped: a label from a raw file stays
text.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal

import polars as pl

from benchlib.schema import NOT_GIVEN

#: Column names in words, with units. A column not listed keeps its name, underscores as spaces.
LABELS = {
    "iops": "IOPS",
    "bandwidth_mib_s": "Bandwidth (MiB/s)",
    "bandwidth_bytes_per_s": "Bandwidth (B/s)",
    "lat_mean_ns": "Mean latency (ns)",
    "clat_mean_ns": "Mean completion latency (ns)",
    "runs": "Runs",
    "runs_baseline": "Runs (baseline)",
    "runs_now": "Runs (new)",
    "median": "New level's median",
    "median_baseline": "Median (baseline)",
    "delta": "Δ (benchstat)",
    "change_pct": "Change (%)",
    "ratio_low": "Ratio, low",
    "ratio_high": "Ratio, high",
    "p_holm": "p (Holm)",
    "effect": "Effect: Cliff's δ (its size named where a test could decide)",
    "verdict": "Verdict",
    "spread_pct": "Spread of runs (%, about their coefficient of variation)",
    "why": "Why",
    "iterations_now": "Whole seconds every host logged, per run",
    "iterations_per_run": "Seconds per run (plan)",
    "note": "Note",
    "block_size": "Block size",
    "rate_cap": "Rate cap",
    "ioengine": "I/O engine",
    "profile": "Profile",
    "controller": "Controller",
    "sioc": "SIOC",
    "group_id": "Phase",
    "configuration": "Configuration",
}
MISSING = "—"


def label(column: str, labels: Mapping[str, str] | None = None) -> str:
    """Return the words for a column: ``labels`` first, then :data:`LABELS`, then the name itself."""
    return (labels or {}).get(column) or LABELS.get(column) or column.replace("_", " ")


def name_members(word: str) -> None:
    """Call a study's members (the ``vm`` column) ``word`` in this process's tables, axes and sentences.

    ``"VM"`` on vSphere; ``"Host"`` for fio servers on one machine (:func:`benchlib.views.member_word`).
    """
    LABELS["vm"] = word


#: fio's ``rw`` values in words (its HOWTO's readwrite=), said so unless a study words them its own way
FIO_RW_WORDS = {
    "read": "sequential read",
    "write": "sequential write",
    "trim": "sequential trim",
    "randread": "random read",
    "randwrite": "random write",
    "randtrim": "random trim",
    "rw": "sequential read/write mix",
    "readwrite": "sequential read/write mix",
    "randrw": "random read/write mix",
    "trimwrite": "trim then write",
    "randtrimwrite": "random trim then write",
}


#: factor -> level -> the level in words, from the study's ``[levels]`` (:func:`name_levels`)
LEVEL_WORDS: dict[str, dict[str, str]] = {"rw": dict(FIO_RW_WORDS)}


def name_levels(words: Mapping[str, Mapping[str, str]]) -> None:
    """Say a study's levels in its own words (study.toml's ``[levels]``) in this process's tables, axes and titles.

    fio's I/O patterns (``rw``) are said in words (:data:`FIO_RW_WORDS`) where the study does not word them.
    """
    LEVEL_WORDS.clear()
    LEVEL_WORDS.update({factor: dict(levels) for factor, levels in words.items()})
    LEVEL_WORDS["rw"] = {**FIO_RW_WORDS, **LEVEL_WORDS.get("rw", {})}


def phase_words(work: Mapping[str, list[tuple[str | None, int | None]]]) -> dict[str, str]:
    """Return each phase's level in words: fio's group and what it ran (``1 (sequential read, 512 KiB)``).

    ``work``: :func:`benchlib.fit.phase_work`. Jobs of unlike work in one phase are joined with "and". Where
    runs ran one pattern at several block sizes (a run of other work filed beside them), the phase is said by
    its patterns alone: the block sizes are pages of their own (:func:`benchlib.fit.work_axes`).
    """
    said = {}
    for phase, jobs in work.items():
        sizes: dict[str | None, set] = {}
        for rw, b in jobs:
            sizes.setdefault(rw, set()).add(b)
        one_each = all(len(s) == 1 for s in sizes.values())
        ran = " and ".join(
            ", ".join(filter(None, (level("rw", rw) if rw else None, None if b is None else _bytes_words(b))))
            for rw, b in (jobs if one_each else [(rw, None) for rw in sizes])
        )
        said[phase] = f"{phase} ({ran})" if ran else phase
    return said


def _bytes_words(n: int) -> str:
    """Return a block size in bytes as fio's job files give it: ``4 KiB``, ``1 MiB``, ``512 B``."""
    unit = next((u for u, b in (("MiB", 1 << 20), ("KiB", 1 << 10)) if n >= b and n % b == 0), None)
    return f"{n // (1 << 20 if unit == 'MiB' else 1 << 10)} {unit}" if unit else f"{n} B"


def level(factor: str, value: object) -> str:
    """Return one level of ``factor`` as the study words it (``queue depth sweep``), else as the data names it."""
    said = LEVEL_WORDS.get(factor, {}).get(str(value))
    if said is None and (value is None or str(value) == NOT_GIVEN):  # an output that does not give the parameter
        said = "not given"
    elif said is None and factor == "block_size_bytes" and str(value).isdigit():  # a job's bytes, as fio says them
        said = _bytes_words(int(value))
    elif said is None and factor in ("rwmixread_pct", "iodepth", "numjobs") and str(value).endswith(".0"):
        said = str(value).removesuffix(".0")  # a whole share read as a float: 70, not 70.0
    return str(value) if said is None else said


def level_expr(column: str) -> pl.Expr:
    """Return ``column``'s values as text, each level in the study's words (:func:`level`)."""
    text = pl.col(column).cast(pl.String)
    words = LEVEL_WORDS.get(column)
    return text.replace(words) if words else text


def inline(column: str) -> str:
    """Return a column's words for inside a sentence: ``block size``; ``I/O engine`` and ``SIOC`` kept."""
    words = label(column)
    return words[0].lower() + words[1:] if words[:1].isupper() and not words[:2].isupper() else words


def runs_read(only: Mapping[str, object]) -> str:
    """Return which runs a page read, in words: ``profile randread, randwrite; rate cap off`` ("" for all)."""
    return "; ".join(
        f"{inline(f)} {', '.join(level(f, x) for x in v) if isinstance(v, list | tuple) else level(f, v)}"
        for f, v in only.items()
    )


def natural_rank(frame: pl.DataFrame, column: str) -> pl.Expr:
    """Return each row's place by ``column`` as a reader counts: ``127.0.1.2`` before ``127.0.1.10``."""
    names = frame[column].cast(pl.String).unique().drop_nulls().to_list()
    key = sorted(names, key=lambda n: [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", n)])
    order = {name: i for i, name in enumerate(key)}
    return pl.col(column).cast(pl.String).replace_strict(order, default=len(order), return_dtype=pl.Int64)


def natural_sort(frame: pl.DataFrame, column: str, *then: str) -> pl.DataFrame:
    """Sort ``frame`` by ``column`` as a reader counts (:func:`natural_rank`), then by ``then`` as they are."""
    return frame.sort([natural_rank(frame, column), *then])


def levels_words(levels: Mapping[str, object], *, within: bool = False) -> str:
    """Return a matrix cell's levels in words: ``Profile randread, block size 4k, I/O engine libaio``.

    ``within``: said within a sentence (``profile randread, ...``), not at its start.
    """
    parts = [
        f"{label(factor) if not i and not within else inline(factor)} {level(factor, value)}"
        for i, (factor, value) in enumerate(levels.items())
    ]
    return ", ".join(parts)


def _decimals(value: float, digits: int) -> int:
    """Decimals that show ``value`` to ``digits`` significant digits (0 for values of that many digits or more)."""
    if value == 0 or abs(value) >= 10 ** (digits - 1):
        return 0
    return digits - 1 - math.floor(math.log10(abs(value)))


def number(value: object, digits: int = 3, decimals: int | None = None) -> str:
    """Format one value: integers whole with separators, floats to ``digits`` significant digits.

    ``decimals``: a column's shared number of decimals (see :func:`show`), instead of the value's own.
    """
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        places = _decimals(value, digits) if decimals is None else decimals
        # half up from the value as written (12 digits), not from its binary neighbour: a published 10.45 ms
        # is stored as 10.4499999... and read 10.4 where the source's own rounding gives 10.5
        written = Decimal(f"{value:.12g}").quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
        return f"{written:,.{places}f}"
    return str(value)


def _column_decimals(values: list[object], digits: int) -> int | None:
    """Return one number of decimals for a float column.

    The most any value needs, but at most ``digits`` + 2 significant digits for its largest value
    (so 0.9998 and 1 read 0.9998 and 1.0000, not 0.9998 and 1.000). None, each value to ``digits``
    significant digits of its own, where one number of decimals would leave a value a single digit
    (0.003 beside 14.929: 0.00312 beside 14.9).
    """
    floats = [abs(v) for v in values if isinstance(v, float) and math.isfinite(v)]
    if not floats:
        return None
    largest = max(floats)
    # the largest value's digits before its first significant one count: 0.0032 has 2 more places than 0.32
    whole = math.floor(math.log10(largest)) + 1 if largest > 0 else 1
    places = max(0, min(max(_decimals(v, digits) for v in floats), digits + 2 - whole))
    if any(places + math.floor(math.log10(v)) + 1 < 2 for v in floats if v > 0):
        return None
    return places


class Shown:
    """A formatted table: ``_repr_html_`` for notebooks and reports, ``__repr__`` as aligned text."""

    def __init__(self, header: list[str], rows: list[list[str]], numeric: list[bool], caption: str) -> None:
        self.header, self.rows, self.numeric, self.caption = header, rows, numeric, caption

    def __repr__(self) -> str:
        """Return the table as aligned plain text."""
        widths = [max(len(h), *(len(r[i]) for r in self.rows)) for i, h in enumerate(self.header)]

        def line(cells: list[str]) -> str:
            return "  ".join(
                c.rjust(w) if right else c.ljust(w) for c, w, right in zip(cells, widths, self.numeric, strict=True)
            ).rstrip()

        body = [line(self.header), line(["-" * w for w in widths]), *(line(r) for r in self.rows)]
        return "\n".join(([self.caption] if self.caption else []) + body)

    def markdown(self) -> str:
        """Return the table as a Markdown pipe table, numbers aligned right.

        A cell stays text in any renderer: ``|`` escaped, ``<``, ``>`` and ``&`` as entities (no markup from
        data), a line break a space.
        """

        def line(cells: list[str]) -> str:
            said = (html.escape(c, quote=False).replace("|", "\\|").replace("\n", " ") for c in cells)
            return "| " + " | ".join(said) + " |"

        rule = ["---:" if right else "---" for right in self.numeric]
        return "\n".join([line(self.header), "|" + "|".join(rule) + "|", *(line(r) for r in self.rows)]) + "\n"

    def _repr_html_(self) -> str:
        def cell(tag: str, text: str, right: bool) -> str:
            return f'<{tag} class="{"num" if right else "txt"}">{html.escape(text)}</{tag}>'

        head = "".join(cell("th", h, n) for h, n in zip(self.header, self.numeric, strict=True))
        body = "".join(
            "<tr>" + "".join(cell("td", c, n) for c, n in zip(r, self.numeric, strict=True)) + "</tr>"
            for r in self.rows
        )
        caption = f"<caption>{html.escape(self.caption)}</caption>" if self.caption else ""
        table = f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        return f'<div class="benchlib-table">{table}</div>'


def show(
    frame: pl.DataFrame,
    *,
    labels: Mapping[str, str] | None = None,
    digits: int = 3,
    caption: str = "",
    alike: Sequence[Sequence[str]] = (),
    digits_for: Mapping[str, int] | None = None,
    significant: Sequence[str] = (),
) -> Shown:
    """Return ``frame`` as a readable table, every row and every character of it, levels in the study's words.

    ``alike``: groups of float columns of one quantity (three latencies in ms, say), shown to one number
    of decimals, so that a reader can add and subtract them across a row. ``digits_for``: significant
    digits of a column that differ from ``digits`` (a ratio said as 5.66x elsewhere, beside Jain's 0.6245).
    ``significant``: columns whose every value gets its own ``digits`` significant digits, not the column's
    shared decimals (percentiles from fio's histogram, good to about 1%: 0.101 and 27.4 ms, on every page).
    """
    digits_for = digits_for or {}
    worded = [c for c in frame.columns if c in LEVEL_WORDS and frame[c].dtype in (pl.String, pl.Categorical)]
    frame = frame.with_columns(level_expr(c) for c in worded) if worded else frame
    numeric = [dtype.is_numeric() for dtype in frame.dtypes]
    shared = {
        c: _column_decimals([v for g in group if g in frame.columns for v in frame[g].to_list()], digits)
        for group in alike
        for c in group
    }
    places = [
        None
        if c in significant
        else shared[c]
        if c in shared
        else _column_decimals(frame[c].to_list(), digits_for.get(c, digits))
        if frame[c].dtype.is_float()
        else None
        for c in frame.columns
    ]
    rows = [
        [number(v, digits_for.get(c, digits), p) for v, p, c in zip(row, places, frame.columns, strict=True)]
        for row in frame.iter_rows()
    ]
    return Shown([label(c, labels) for c in frame.columns], rows, numeric, caption)


def show_as_written(frame: pl.DataFrame, *, labels: Mapping[str, str] | None = None, caption: str = "") -> Shown:
    """Return a frame of cells as a file wrote them (strings) as :func:`show` does, every digit kept.

    A column whose every cell reads as a number is set to the right, as figures are.
    """

    def number_like(cell: str) -> bool:
        try:
            float(cell)
        except ValueError:
            return False
        return True

    shown = show(frame, labels=labels, caption=caption)
    shown.numeric = [all(number_like(v) for v in frame[c].drop_nulls()) for c in frame.columns]
    return shown


def span(low: str, high: str, *, same: str = "") -> str:
    """Say two formatted figures as a range: ``0.9846 to 0.9953``; one figure (and ``same``) where they read alike."""
    return f"{low}{same}" if low == high else f"{low} to {high}"


def comparison_labels(table: pl.DataFrame, *, baseline: str, others: list[str]) -> dict[str, str]:
    """Name :func:`comparison_rows`' two median columns for what they hold: one run, the mean of 2, or a median."""
    single = table.height and table["runs_baseline"].max() == 1 and table["runs"].max() == 1  # one run: no median
    two = table.height and set(table["runs_baseline"]) | set(table["runs"]) == {2}  # of two runs, their mean
    said = "" if single else ", mean of its 2 runs" if two else " median"
    other = f"{others[0]}{said}" if len(others) == 1 else ("Other level's run" if single else "Other level's median")
    return {"median_baseline": f"{baseline}{said}", "median": other}


def signed(value: float | None) -> str:
    """Return a change in percent with its sign, two decimals (``+1.23%``), or the missing mark."""
    return MISSING if value is None or not math.isfinite(value) else f"{value:+.2f}%"


def _effect(size: str | None, delta: float | None) -> str:
    """Cliff's δ, with its size in words where a test could decide (``large (δ +0.84)``); ``δ +1.00`` alone else."""
    if delta is None or not math.isfinite(delta):
        return MISSING
    return f"{size} (δ {delta:+.2f})" if size else f"δ {delta:+.2f}"


def comparison_rows(table: pl.DataFrame, *, by: list[str], factor: str) -> pl.DataFrame:
    """Return a :func:`~benchlib.stats.compare.comparison_table` as a reader's table.

    Runs per side, both medians, the change with its interval in one column (benchstat's
    ``%+.2f%%``), the Holm-adjusted p, the effect and the verdict; "—" where a value cannot exist, and
    no p or effect column where every comparison has one run a side.
    """
    rows = []
    # when no comparison has an interval the column says so once, instead of every row saying it
    any_interval = table.height > 0 and table["ratio_low"].is_not_null().any()
    single = table.height > 0 and table["runs_baseline"].max() == 1 and table["runs"].max() == 1
    change = "change" if any_interval else "change_single" if single else "change_alone"
    for row in table.iter_rows(named=True):
        low, high = row["ratio_low"], row["ratio_high"]
        if low is not None and high is not None:
            interval = f" ({signed(100 * (low - 1))} to {signed(100 * (high - 1))})"
        elif any_interval and row["runs_baseline"] > 1:
            interval = f" (no 95% interval exists with {row['runs_baseline']} v {row['runs']} runs)"
        else:
            interval = ""
        rows.append(
            {
                **{k: row[k] for k in [*by, factor]},
                "runs_pair": f"{row['runs_baseline']} / {row['runs']}",
                "median_baseline": row["median_baseline"],
                "median": row["median"],
                change: signed(row["change_pct"]) + interval,
                "p_holm": row["p_holm"],
                "effect": _effect(row["effect"], row["cliffs_delta"]),
                "verdict": row["verdict"],
            }
        )
    frame = pl.DataFrame(
        rows, schema_overrides={"median_baseline": pl.Float64, "median": pl.Float64, "p_holm": pl.Float64}
    )
    # one run a side everywhere: no test and no effect size can exist, so no columns of "—" for them
    return frame.drop("p_holm", "effect") if single else frame


def shared_clauses(frame: pl.DataFrame, column: str = "note") -> tuple[pl.DataFrame, str]:
    """Take the clauses every row's ``column`` shares (``"; "``-separated) out of the rows, to be said once.

    Returns the frame with only each row's own clauses (empty: "—") and the shared ones as one
    sentence; a table whose sixteen notes all end "... a first plan, to be redone" then says it once.
    """
    if frame.height < 2 or column not in frame.columns:
        return frame, ""
    split = [str(note or "").split("; ") for note in frame[column].to_list()]
    shared = [c for c in split[0] if c and all(c in clauses for clauses in split[1:])]
    if not shared:
        return frame, ""
    own = ["; ".join(c for c in clauses if c not in shared) or MISSING for clauses in split]
    said = "; ".join(shared)
    return frame.with_columns(pl.Series(column, own, dtype=pl.String)), f"Every row: {said[0].lower()}{said[1:]}."


def settle_section(
    settle: pl.DataFrame, table: pl.DataFrame, *, by: list[str], factor: str
) -> tuple[list[str], pl.DataFrame | None]:
    """Return the runs-to-settle section for reading: its sentences, then its table (None when a sentence says all).

    ``settle``: :func:`benchlib.stats.compare.runs_to_settle`; ``table``: the comparison table. Rate-capped
    comparisons are left out (more runs would measure the cap again), said once; a table whose every
    row has no plan for one and the same reason becomes that reason, said once.
    """
    from benchlib.words.compare import with_settle_why

    said = []
    settle = with_settle_why(settle)
    capped = table.filter(pl.col("verdict") == "rate-capped").select(*by, factor)
    if capped.height:
        settle = settle.join(capped, on=[*by, factor], how="anti")
        said.append(
            f"Left out: the {capped.height} rate-capped comparisons (more runs would measure the cap again; run "
            "them uncapped to test the setting)."
        )
    if settle.height and settle["runs"].is_null().all() and settle["why"].n_unique() == 1:
        which = (
            "For both comparisons"
            if settle.height == 2
            else f"For all {settle.height} comparisons"
            if settle.height > 2
            else "For the one comparison"
        )
        return [*said, f"{which}: {settle['why'][0]}."], None
    # estimates from a few runs' spread: two significant digits
    runs = [pl.col(c).map_elements(_two_digits, return_dtype=pl.Int64) for c in ("runs", "runs_high")]
    # the change as the comparison table above says it (-62.72%), not to 3 digits of its own (-62.7)
    change = pl.col("change_pct").map_elements(signed, return_dtype=pl.String, skip_nulls=False)
    return said, settle.select(*by, factor, "runs_baseline", "runs_now", "spread_pct", change, *runs, "why")


def _two_digits(runs: int) -> int:
    """Round a whole number to two significant digits (441 to 440; 64 stays 64)."""
    return round(runs, min(0, 2 - len(str(runs))))


def verdict_lines(table: pl.DataFrame, *, by: list[str], factor: str) -> list[str]:
    """Return a comparison table's verdicts as Markdown list items, comparisons with the same words together.

    Eight comparisons that are all *not testable at this n* for the same reason are one line that
    says so once, not eight lines a reader must check are the same; the table's Verdict column names
    them. Verdicts the design summary explains in full (:func:`benchlib.stats.compare.summarised_verdicts`)
    are not said again.
    """
    from benchlib.stats.compare import summarised_verdicts
    from benchlib.words.compare import verdict_note

    said = summarised_verdicts(table)
    groups: dict[tuple[str, str], list[str]] = {}
    for row in table.iter_rows(named=True):
        if row["verdict"] not in said:
            names = groups.setdefault((row["verdict"], verdict_note(row)), [])
            names.append(levels_words({k: row[k] for k in [*by, factor]}))
    lines = []
    for (verdict, note), names in groups.items():
        who = f"**{names[0]}**" if len(names) == 1 else f"**{len(names)} comparisons**"
        lines.append(f"- {who}: {verdict}. {note}.")
    return lines


LABELS |= {
    "latency_ms": "Mean latency (ms)",
    "total_latency_ms": "Mean total latency, submission + completion (ms)",
    "read_total_latency_ms": "Reads: mean total latency, submission + completion (ms)",
    "write_total_latency_ms": "Writes: mean total latency, submission + completion (ms)",
    "read_latency_ms": "Reads: mean latency (ms)",
    "write_latency_ms": "Writes: mean latency (ms)",
    "device_await_ms": "in the block layer and the device (await, its queue included)",
    "above_device_ms": "above the block layer (file system, fio)",
    "origin": "Histogram from",
    "change": "Change, new vs baseline: median of the run-to-run ratios (95% interval)",
    "change_alone": "Change, new vs baseline: median of the run-to-run ratios (too few runs for a 95% interval)",
    "change_single": "Change, new vs baseline (one run each: the two runs' ratio)",
    "iodepth": "Queue depth (iodepth)",
    "queue_depth": "Queue depth",
    "write_pct": "Write share (%)",
    "vm": "VM",
    "host": "Host",
    "iops_per_cpu_pct": "IOPS per % of one CPU",
    "mib_s_per_cpu_pct": "MiB/s per % of one CPU",
    "value": "Value",
    "test": "Test",
    "runs_pair": "Runs (baseline / new)",
    "table": "Published table",
    "rw": "I/O pattern",
    "rw_job": "I/O pattern",
    "bs": "Block size",
    "block_size_bytes": "Block size",
    "rwmixread_pct": "Read share (%)",
    "numjobs": "Jobs (numjobs)",
}


#: a claim's tolerance as claims.toml keys it, in words a reader takes at a glance
_TOLERANCE_WORDS = (("equals ", "= "), ("above ", "> "), ("below ", "< "))


def fairness_rows(table: pl.DataFrame, *, by: list[str]) -> Shown:
    """Show :func:`benchlib.stats.fairness_over_runs`' table for reading: each configuration's runs judged.

    With one run each, its figures (no median, no worst); with two at most, both runs' figures (the median
    of two is their mean, a figure neither run had); else the median over runs and the worst run. Which
    member was on top is counted only where the highest got 1.1x the lowest or more and no cap set it.
    """
    from benchlib.stats.fairness import CLEAR_LEAD, UNEVEN_FROM

    runs = table["runs_judged"].max() if table.height else 0
    capped_all = pl.col("capped_runs") >= pl.col("runs")  # the cap set the shares: which member led means nothing
    even = pl.col("max_min_median") < UNEVEN_FROM  # within 1.1x: which member led is noise
    table = table.with_columns(pl.when(~capped_all & ~even).then(pl.col("winners")).alias("winners"))
    if runs == 2:
        pair = (pl.col(c).map_elements(lambda v: f"{v:.2f}", pl.String) for c in ("max_min_best", "max_min_worst"))
        jain, ratio = ["jain_best", "jain_worst"], pl.format("{} / {}", *pair).alias("max_min_both")
    else:
        jain, ratio = ["jain_median", *(["jain_worst"] if runs and runs > 1 else [])], pl.col("max_min_median")
    frame = table.select(
        *by,
        "runs",
        "members",
        *jain,
        "runs_below",
        ratio,
        *(["winners"] if (table["runs"] > 1).any() else []),  # one run each: one member was on top, nothing to count
        *(["capped_runs"] if (table["capped_runs"] > 0).any() else []),
    )
    return show(
        frame,
        labels={
            "members": f"{label('vm')}s",
            "jain_median": "Jain's index (its one run)" if runs == 1 else "Jain, median over runs",
            "jain_worst": "Jain, less fair run" if runs == 2 else "Jain, worst run",
            "jain_best": "Jain, fairer run",
            "runs_below": "Runs below 0.9",
            "max_min_median": "Highest / lowest" if runs == 1 else "Highest / lowest (median over runs)",
            "max_min_both": "Highest / lowest (the two runs, lower first)",
            "winners": f"Different {inline('vm')}s clearly on top (by {(CLEAR_LEAD - 1) * 100:g}% over the next; "
            f"where the highest got {UNEVEN_FROM:g}x the lowest or more)",
            "capped_runs": "Rate-capped runs",
        },
        digits=4,
        digits_for={"max_min_median": 3},  # a ratio, said as 5.66x in the chart and the headline
    )


def claim_rows(table: pl.DataFrame) -> tuple[pl.DataFrame, str]:
    """Return the claims table for reading, and what the runs can support as one paragraph per kind.

    A recomputed plain number takes the unit its stated value is written in (``5.6x`` -> ``5.66x``,
    ``-65%`` -> ``-65.1%``); tolerances lose claims.toml's keys (``about: ±10%`` -> ``±10%``); the
    note every claim of a kind shares (``one run: ...``) is said once below the table, naming its
    claims, instead of on every row.
    """
    plain = pl.col("recomputed").str.contains(r"^-?[\d,]*\.?\d+$")
    unit = (
        pl.when(pl.col("stated").str.contains("%"))
        .then(pl.lit("%"))
        .when(pl.col("stated").str.contains(r"\dx\b|\d\s?times"))
        .then(pl.lit("x"))
        .otherwise(pl.lit(""))
    )
    tolerance = pl.col("tolerance").str.replace(r"^[a-z_]+: (±)", "$1")  # "about: ±10%" -> "±10%"
    for key, words in _TOLERANCE_WORDS:
        tolerance = tolerance.str.replace(key, words, literal=True)
    tolerance = tolerance.str.replace(r"between (.+) and (.+)", "$1 to $2")  # "between 0.4x and 0.7x"
    rows = table.with_columns(
        pl.when(plain).then(pl.col("recomputed") + unit).otherwise(pl.col("recomputed")).alias("recomputed"),
        tolerance.alias("tolerance"),
    )
    no_runs = pl.col("runs").is_null() if "runs" in rows.columns else pl.lit(False)
    notes = pl.when(no_runs & (pl.col("note") == "")).then(
        pl.lit("they read rows of other figures (no IOPS, bandwidth or latency, such as a table of CPU use), not runs")
    )
    kinds = rows.with_columns(notes.otherwise(pl.col("note")).alias("note"))
    kinds = kinds.group_by("note", maintain_order=True).agg(pl.col("claim"))
    paragraphs = [
        f"**Claims {', '.join(claims)}**: {note}." if len(claims) > 1 else f"**Claim {claims[0]}**: {note}."
        for note, claims in kinds.iter_rows()
        if note
    ]
    return rows.drop("note", "reading", strict=False), "\n\n".join(paragraphs)
