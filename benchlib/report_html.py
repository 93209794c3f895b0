"""The HTML report of a pipeline: an index and one page per executed notebook, readable offline.

Pages are built from the executed notebooks' outputs: Markdown (the little the notebooks use),
figures as the SVG :mod:`benchlib.pipeline` exported, tables and text. Every string from data,
``study.toml`` or a pipeline file is HTML-escaped here; ``text/html`` outputs pass through as they
are (the notebooks' tables, which polars escapes).
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
import polars as pl

from benchlib.caveats import ONE_RUN, PAGE_CACHE, TOO_FEW, flag_of
from benchlib.tables import MISSING, inline, levels_words, number, runs_read, show

if TYPE_CHECKING:
    from benchlib.pipeline import Execution, Pipeline

VEGALITE = ("application/vnd.vegalite.v6+json", "application/vnd.vegalite.v5+json")  # see figures.use_in_notebooks

_STYLE = (
    "body{font-family:'Liberation Sans',Arial,Helvetica,sans-serif;max-width:1100px;margin:2em auto;color:#222}"
    "table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:2px 6px;font-size:13px}"
    ".figure svg{max-width:100%;height:auto}pre{background:#f6f6f6;padding:6px;overflow-x:auto}"
    ".benchlib-table{overflow-x:auto;margin:0.8em 0}th{background:#f3f3f3}"
    ".figure-files{font-size:12px;color:#555;margin:0 0 1em}"
    "td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}td.num{white-space:nowrap}"
    "td.txt{text-align:left;max-width:36em}caption{text-align:left;font-weight:bold;padding:4px 0}"
    ".crumb{color:#555;font-size:14px}.terms dt{font-weight:bold;margin-top:4px}.terms dd{margin-left:1.5em}"
    "p.terms{color:#555;font-size:14px}"
)


#: Terms the pages use that a storage engineer may not know, each with the pattern that finds it in a page's
#: text and one sentence; a page links those it uses (:func:`_terms`) to the report's glossary, which says each once.
TERMS = (
    (
        "Jain's index",
        r"\bJain\b",
        "Jain's fairness index of the members' figures: 1 when every member got the same, 1/n when one got everything.",
    ),
    (
        "Cliff's δ",
        r"Cliff|\bδ [+−-]",
        "how often a run of one side beats a run of the other, minus the reverse: from "
        "−1 to +1, 0 when neither side tends to be higher.",
    ),
    (
        "Hodges-Lehmann",
        r"Hodges",
        "the median of every run-to-run ratio between the two sides (n × m ratios for n and m runs; of an even "
        "count, the geometric mean of the middle two, as ratios average on a log scale): the change; with few "
        "runs, one odd run still moves it. With one run a side there is only their ratio.",
    ),
    (
        "benchstat",
        r"benchstat",
        "Go's benchmark comparison tool, whose table the comparison pages follow: a row per comparison with each "
        "side's median, the change and its p; where the rows can be summed up, a bottom row of their geometric mean.",
    ),
    (
        "Mann-Whitney",
        r"Mann-Whitney",
        "a rank test of two sides' runs; with few runs a side, its p has a floor it cannot go below.",
    ),
    (
        "Holm",
        r"\bHolm",
        "Holm's correction: it raises each p of a family of tests so that the chance of any false "
        "alarm among them stays at or below α; a comparison table's band verdicts (improved, regressed, "
        "equivalent) are held to the same α, each on its change's interval at 1 - 0.05/m for m comparisons.",
    ),
    (
        "Freedman-Lane",
        r"Freedman",
        "a permutation test of an interaction: it shuffles what the main effects leave "
        "unexplained and counts how often chance gives as strong an interaction; exact when every "
        "combination's runs spread alike.",
    ),
    (
        "ANOVA-type test",
        r"ANOVA-type",
        "Brunner, Dette and Munk's test of an interaction that lets each combination's runs spread their "
        "own way, assuming each combination's mean is near normal.",
    ),
    (
        "Confounded with time",
        r"confounded with time",
        "a comparison whose two sides ran in blocks of time, one after the other: a drift over time (a cache "
        "warming, a thin disk filling) would read the same as the setting's effect, so its test is shown but "
        "is no verdict; runs in a shuffled order, as benchlib's plans run them, avoid it.",
    ),
    (
        "Interaction",
        r"\binteraction\b",
        "two factors interact when the effect of one depends on the level of the other (block size helping more "
        "under one engine than the other).",
    ),
    (
        "SNIA PTS window",
        r"\bPTS\b",
        "the steady-state rule of SNIA's Solid State Storage Performance Test "
        "Specification: a window of 5 rounds (here, whole seconds of the logs) whose range is within 20% of "
        "their mean and whose least-squares line moves no more than 10% of it across the window.",
    ),
    (
        "T1², T2²",
        r"T[12]²",
        "Kalibera and Jones's variances: T1² within a run (between its seconds), T2² what a "
        "new run adds; together they say whether more runs or longer runs narrow the answer.",
    ),
    (
        "await",
        r"\bawait\b",
        "iostat's mean time a request spent in the block layer and the device, its queue "
        "included (the kernel's disk statistics, which fio reports).",
    ),
    ("aqu-sz", r"aqu-sz", "iostat's mean number of requests in the device's queue."),
    (
        "KAVG, DAVG, GAVG",
        r"\b[KDG]AVG\b",
        "esxtop's latency per command: in the ESXi kernel (KAVG), at the device "
        "(DAVG, the array and fabric included), and their sum, what the guest sees (GAVG).",
    ),
    ("AQLEN", r"\bAQLEN\b", "esxtop's adapter queue depth: the commands a host adapter can hold at once."),
    ("Little's law", r"Little's law|\(Little\)", "the I/Os in flight on average = IOPS × mean latency."),
    ("Coefficient of variation", r"coefficient of variation", "the standard deviation over the mean."),
    (
        "CPU%",
        r"CPU%|% of one CPU",
        "the CPU time fio's jobs used (its usr + sys), as a percentage of one CPU over the run: 100 is one whole "
        "CPU busy throughout.",
    ),
    (
        "SIOC",
        r"\bSIOC\b",
        "vSphere's Storage I/O Control: when a datastore's latency passes a threshold, it divides the "
        "datastore's queue among the VMs of every host by their disk shares.",
    ),
    (
        "PVSCSI, LSI Logic SAS",
        r"\bPVSCSI\b|\bLSI\b",
        "vSphere's virtual disk controllers: VMware's paravirtual SCSI controller, and an emulated LSI Logic SAS one.",
    ),
    (
        "p50, p99, p99.9",
        r"\bp\d\d(\.\d+)?\b",
        "latency percentiles: the latency within which that share of the I/Os completed (p99: 99 of every 100; "
        "p99.9: 999 of every 1,000).",
    ),
    (
        "json+",
        r"json\+",
        "fio's JSON output with each latency histogram's bins (--output-format=json+): percentiles read from "
        "it are good to a bin's width, about 1%.",
    ),
    (
        "Excursion",
        r"excursion",
        "in the steady-state window, how far its least-squares line moves from one end to the other, as a "
        "share of the window's mean.",
    ),
)


def used_terms(body: str) -> list[str]:
    """Return the terms of :data:`TERMS` a page's HTML uses (its text, charts' text too), in the glossary's order."""
    text = html.unescape(re.sub(r"<[^>]+>", " ", body))
    return [term for term, pattern, _ in TERMS if re.search(pattern, text)]


def _term_id(term: str) -> str:
    """Return a term's anchor in the glossary page: ``jain-s-index``."""
    return re.sub(r"[^a-z0-9]+", "-", term.lower()).strip("-")


def _terms(body: str) -> str:
    """Return a page's line of the terms it uses, each linked to its one sentence in the glossary, or ""."""
    used = used_terms(body)
    if not used:
        return ""
    links = ", ".join(f"<a href='{GLOSSARY}#{_term_id(t)}'>{html.escape(t)}</a>" for t in used)
    return f"<p class='terms'>Terms on this page, each said once in <a href='{GLOSSARY}'>the glossary</a>: {links}.</p>"


#: the report's one page of terms: each term a page uses, its sentence, said once for the whole report
GLOSSARY = "glossary.html"


def _glossary(used: set[str]) -> str:
    """Return the glossary page's body: every term the report's pages use, with its sentence."""
    items = "".join(
        f"<dt id='{_term_id(term)}'>{html.escape(term)}</dt><dd>{html.escape(meaning)}</dd>"
        for term, _, meaning in TERMS
        if term in used
    )
    if not items:
        return "<h1>Glossary</h1><p>No page of this report uses a term that needs saying.</p>"
    said = "<p>The terms this report's pages use, each in one sentence.</p>"
    return f"<h1>Glossary</h1>{said}<dl class='terms'>{items}</dl>"


def _page(title: str, body: str) -> str:
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body>{body}</body></html>\n"
    )


def _inline(text: str) -> str:
    escaped = html.escape(text)
    escaped = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped)
    escaped = re.sub(r"(?<![*\w])\*([^*\s][^*]*?)\*(?![*\w])", r"<em>\1</em>", escaped)
    # a link to another page of the report alone (``[Comparison](comparison.html)``): no scheme, no path
    escaped = re.sub(r"\[([^\]]+)\]\(([\w=.-]+\.html)\)", r"<a href='\2'>\1</a>", escaped)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", escaped)


def _markdown(text: str) -> str:
    """Return the little Markdown the notebooks use as HTML.

    Headings, paragraphs, lists of ``- `` lines, **bold**, *italics* and `code`; every
    character of the text is escaped first.
    """
    blocks = []
    for block in text.strip().split("\n\n"):
        lines = block.splitlines()
        heading = re.match(r"(#{1,4}) (.*)", lines[0]) if lines else None
        if heading:
            level = len(heading[1]) + 1
            blocks.append(f"<h{level}>{_inline(heading[2])}</h{level}>")
            lines = lines[1:]
            if not lines:
                continue
            block = "\n".join(lines)
        if all(line.startswith("- ") for line in lines):
            blocks.append("<ul>" + "".join(f"<li>{_inline(line[2:])}</li>" for line in lines) + "</ul>")
        else:
            blocks.append(f"<p>{_inline(block)}</p>")
    return "\n".join(blocks)


def _without_title(source: str, title: str) -> str:
    """Return Markdown without a first heading that only repeats the page's ``title``."""
    first, _, rest = source.partition("\n")
    heading = re.fullmatch(r"#{1,6}\s+(.*)", first.strip())
    return rest if heading and heading[1].strip().lower() == title.lower() else source


#: a paragraph of a notebook's own text this long, on two pages of one report, is said on the first alone
SAID_ONCE_WORDS = 40


def _outputs_html(
    notebook: Path, out: Path, title: str = "", files: str = "", said: dict[str, str] | None = None, link: str = ""
) -> str:
    """Return a page's body from an executed notebook: its Markdown, tables and figures, in order.

    A Markdown heading that only repeats the page's title (a summary notebook's ``# Fairness`` on
    the page "Fairness") is left out. ``files``: the figures' folder relative to the page; each figure is
    followed by links to its SVG, PNG and Vega-Lite files there (for a post, or to redraw it). ``said``:
    the report's long paragraphs of notebook text so far, each with a link to the page that says it; one
    said already (the comparison method on a second comparison page) is a link to it, and this page's are
    added with ``link`` (this page, as a Markdown link).
    """
    parts, figure = [], 0
    for cell in orjson.loads(notebook.read_bytes())["cells"]:
        if "parameters" in cell.get("metadata", {}).get("tags", []) or "injected-parameters" in cell.get(
            "metadata", {}
        ).get("tags", []):
            continue
        if cell["cell_type"] == "markdown":
            text = _without_title("".join(cell["source"]), title)
            parts.append(_markdown(text if said is None else _said_once(text, said, link)))
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if any(m in data for m in VEGALITE):
                figure += 1
                parts.append(_figure(next(data[m] for m in VEGALITE if m in data), out, figure, files))
            elif "text/markdown" in data:
                parts.append(_markdown("".join(data["text/markdown"])))
            elif "text/html" in data:
                parts.append("".join(data["text/html"]))
            elif "text/plain" in data:
                parts.append(f"<pre>{html.escape(''.join(data['text/plain']))}</pre>")
            elif output.get("output_type") == "stream":
                parts.append(f"<pre>{html.escape(''.join(output.get('text', '')))}</pre>")
    return "\n".join(parts)


def _said_once(text: str, said: dict[str, str], page: str) -> str:
    """Return a notebook's Markdown with each long paragraph an earlier page said as a link to that page.

    ``said`` maps each paragraph to the Markdown link of the page that said it first; this page's
    (``page``, a Markdown link) are added.
    """
    kept = []
    for paragraph in text.split("\n\n"):
        key = " ".join(paragraph.split())
        if len(key.split()) < SAID_ONCE_WORDS or key.startswith("#"):
            kept.append(paragraph)
        elif key in said:  # its first sentence, and where the rest is
            kept.append(f"{key.split('. ')[0].rstrip('.')} (said in full on {said[key]}).")
        else:
            said[key] = page
            kept.append(paragraph)
    return "\n\n".join(kept)


def _figure(spec: object, out: Path, figure: int, files: str) -> str:
    """Return figure ``figure`` of a page: its SVG, named for a screen reader, and links to its files."""
    svg = (out / f"figure-{figure}.svg").read_text()
    # one accessible name, the chart's title and findings, for the drawing a screen reader cannot read
    said = html.escape(str(spec.get("description", "")) if isinstance(spec, dict) else "", quote=True)
    named = f" role='img' aria-label='{said}'" if said else ""
    drawn = f"<div class='figure' id='figure-{figure}'{named}>{svg}</div>"
    if not files:
        return drawn
    stem = html.escape(f"{files}/figure-{figure}", quote=True)
    return drawn + (
        f"<p class='figure-files'>This figure as <a href='{stem}.svg'>SVG</a>, <a href='{stem}.png'>PNG</a>, "
        f"<a href='{stem}.json'>Vega-Lite</a></p>"
    )


def _headline(execution: Execution) -> tuple[str, list[tuple[str, str]]]:
    """Return a summary notebook's computed summary for the index and the caveats said with it, or nothing.

    The first Markdown printed by its cell tagged ``headline`` where it has one, else by the first cell that
    printed Markdown; and the caveats that cell printed (:class:`benchlib.caveats.Caveat`), each
    ``(flag, text)``.
    """
    notebook = execution.output_dir / execution.notebook.name
    if not notebook.is_file():
        return "", []
    cells = orjson.loads(notebook.read_bytes())["cells"]
    tagged = [c for c in cells if "headline" in c.get("metadata", {}).get("tags", [])]
    for cell in tagged or cells:
        texts, caveats = [], []
        for output in cell.get("outputs", []):
            text = "".join(output.get("data", {}).get("text/markdown", ""))
            flag = flag_of(output)
            if text and flag:
                caveats.append((flag, text))
            elif text:
                texts.append(text)
        if texts or caveats:
            return (texts[0] if texts else ""), caveats
    return "", []


def _finding(headline: str, caveats: list[tuple[str, str]], said: set[str]) -> str:
    """Return a page's headline for the index with its caveats, by flag, each flag once.

    A caveat whose flag is in ``said`` is left out (the design says one run per configuration; the answers,
    or an earlier page, said the page cache); the flags this page says are added to ``said``.
    """
    kept = [text for flag, text in caveats if flag not in said]
    said.update(flag for flag, _ in caveats)
    return "\n\n".join(filter(None, [headline, *kept]))


def write_html(
    pipeline: Pipeline,
    folder: Path,
    executions: list[Execution],
    missing: list[dict],
    declared: int,
    front: dict[str, str] | None = None,
    unplanned: int | None = None,
    left_out: list[tuple[str, str]] | None = None,
    results: pl.DataFrame | None = None,
    answers: list[dict] | None = None,
    claims: pl.DataFrame | None = None,
    together: dict | None = None,
    matrix: tuple[str, ...] | None = None,
    conclusions: pl.DataFrame | None = None,
) -> None:
    """Write the report's HTML pages.

    Write ``index.html`` and one page per execution into ``folder``; ``missing``: the declared cells
    without data (their levels), of the whole matrix of ``declared`` combinations; ``front``: the
    index's design, caveats and provenance (:func:`benchlib.pipeline.front_matter`); ``unplanned``: how
    many combinations the plan ``benchlib run`` recorded never listed (None: no record); ``left_out``:
    the summary pages the study's data cannot support, each with why (one line each); ``results``: one row
    per configuration (:func:`benchlib.results.configuration_results`), shown first; ``answers``: what each
    setting did (:func:`benchlib.results.factor_answers`); ``claims``: the write-up's claims recomputed
    (:func:`benchlib.views.claim_table`), their verdicts said with the answers, and the write-up's
    ``conclusions`` they weaken (:func:`benchlib.views.conclusion_table`); ``together``: the interaction
    page's tests (:func:`benchlib.views.interaction`: ``tests``, ``x``, ``trace``, ``by``, its ``page``),
    said with the answers where any was made; ``matrix``: the axes the study declares (default: the pipeline's;
    not a job parameter that splits a configuration's runs, :func:`benchlib.fit.work_axes`). Every string
    from data, study.toml, a README or the pipeline is escaped.
    """
    front = front or {}
    links, cells, findings = [], [], []
    used: set[str] = set()  # the terms any page uses: the glossary's
    # the design is said once, before the findings: a page that repeats it (the overview) adds only the rest
    said = {p.strip() for key in ("design", "support") for p in front.get(key, "").split("\n\n") if p.strip()}
    # a caveat the answers give (what else changed with a setting) is not said again among the findings
    qualified = [(a, *_caveat(a)) for a in answers or []]  # each answer with its caveat and that caveat's flag
    said |= {p.strip() for _, caveat, _ in qualified for p in caveat.split("\n\n") if p.strip()}
    # caveats the pages print flagged (benchlib.caveats): each flag said once on the index
    flags = {flag for _, _, flag in qualified if flag} | {
        flag for flag, key in ((ONE_RUN, "runs_once"), (TOO_FEW, "too_few")) if front.get(key)
    }
    method: dict[str, str] = {}  # the pages' long paragraphs of method, each said on the first page alone
    told_together = _together(together)  # the interaction's tests, said with the answers (not again as a finding)
    for execution in executions:
        page = f"{execution.slug}.html"
        title = _title(execution)
        report = html.escape(pipeline.title)  # which report a page is of, when it is opened or printed alone
        body = f"<p class='crumb'><a href='index.html'>index</a> · {report}</p><h1>{html.escape(title)}</h1>"
        files = (
            execution.output_dir.relative_to(folder).as_posix() if execution.output_dir.is_relative_to(folder) else ""
        )
        link = f"[{title.replace('[', '(').replace(']', ')')}]({page})"  # where a paragraph said again is
        body += _outputs_html(
            execution.output_dir / execution.notebook.name, execution.output_dir, title, files, method, link
        )
        used.update(used_terms(body))
        body += _terms(body)
        (folder / page).write_text(_page(f"{title} · {pipeline.title}", body), encoding="utf-8")
        count = f"{execution.figures} figure{'' if execution.figures == 1 else 's'}"
        link = f"<li><a href='{html.escape(page)}'>{html.escape(title)}</a> ({count})</li>"
        (cells if execution.levels else links).append(link)
        # the claims are said with the answers, first (:func:`_claims_answer`), not again among the findings
        said_first = (execution.notebook.stem == "claims" and claims is not None) or (
            execution.notebook.stem == "interaction" and told_together
        )
        if not execution.levels and not said_first:
            headline = _finding(*_headline(execution), said=flags)
            # a paragraph an earlier page's finding already gave (the same caveat on three pages) is said once
            fresh = [p for p in headline.split("\n\n") if p.strip() and p.strip() not in said]
            said.update(p.strip() for p in fresh)
            headline = "\n\n".join(fresh)
            if headline:
                findings.append(f"<h3>{html.escape(title)}</h3>" + _markdown(headline))
    spanned = _spanned(pipeline)
    parts = [
        f"<h1>{html.escape(pipeline.title)}</h1><p>From the study <code>{html.escape(pipeline.study)}</code>: a "
        f"summary page for each analysis, and {spanned}.</p>"
    ]
    parts.append(_source(front.get("source", "")))  # which write-up or recording the data are, said first
    claims_page = next((f"{e.slug}.html" for e in executions if e.notebook.stem == "claims"), None)
    # what the design can call a change is said once, with the answers it qualifies, not again under the design
    design = [p for p in (front.get("design", ""), "" if answers else front.get("support", "")) if p.strip()]
    support = front.get("support", "") if answers else ""
    # does each setting matter, do the write-up's claims hold: the questions a post asks, answered first
    told_claims = _claims_answer(claims, claims_page, conclusions)
    parts.append(_answers(answers, told_claims, support, told_together, [q[1:] for q in qualified]))
    parts.append(_results(results, folder))  # what was measured, before how it may be read
    if design:
        parts.append("<h2>The design</h2>" + _markdown("\n\n".join(design)))
    if front.get("doubt"):  # runs that cannot have measured the storage, before anything is concluded from them
        parts.append("<h2>Runs to doubt</h2>" + _markdown(front["doubt"]))
    if findings:
        parts.append("<h2>What the pages find</h2>" + "".join(findings))
    if front.get("caveats"):
        parts.append("<h2>What this data is not</h2>" + _markdown(front["caveats"]))
    absent = "".join(
        f"<li>{html.escape(_page_title(name))}: not drawn, {_inline(why)}</li>" for name, why in left_out or []
    )
    glossary = f"<li><a href='{GLOSSARY}'>Glossary</a>: the terms the pages use, each in one sentence</li>"
    parts.append(f"<h2>Summary pages</h2><ul>{''.join(links)}{glossary}{absent}</ul>")
    drawn = ""
    if pipeline.only:  # the study's design above counts every configuration; say which this report draws
        kept = runs_read(pipeline.only)
        drawn = f"<p>This report draws only the configurations with {html.escape(kept)}.</p>"
    # a study with no factor and one phase has none (said at the top)
    parts.append(f"<h2>One page per configuration</h2>{drawn}<ul>{''.join(cells)}</ul>" if cells else "")
    parts.append(_matrix_gaps(pipeline.axes if matrix is None else matrix, missing, declared, unplanned))
    used.update(used_terms("".join(parts)))
    parts.append(_terms("".join(parts)))
    if front.get("provenance"):
        parts.append("<h2>Provenance</h2>" + _markdown(front["provenance"]))
    (folder / "index.html").write_text(_page(pipeline.title, "".join(parts)), encoding="utf-8")
    crumb = f"<p class='crumb'><a href='index.html'>index</a> · {html.escape(pipeline.title)}</p>"
    (folder / GLOSSARY).write_text(_page(f"Glossary · {pipeline.title}", crumb + _glossary(used)), encoding="utf-8")


#: the results table's columns in words (the factors are said as the study says them)
RESULT_LABELS = {
    "runs": "Runs",
    "iops": "IOPS",
    "bandwidth_mib_s": "MiB/s",
    "lat_mean_ms": "Mean latency (ms)",
    "p99_ms": "p99 latency (ms)",
    "cpu_pct": "CPU (% of one CPU)",
    "iops_max_over_min": "IOPS, largest run / smallest",
    "iodepth": "iodepth",
    "rwmixread_pct": "Reads (%)",
    "numjobs": "Jobs",
    "block_size_bytes": "Block size",
    "phase": "Phase",
}


def _gaps_table(missing: list[dict]) -> str:
    """Return the declared combinations without runs as a table, a column per factor ("" where none)."""
    if not missing:
        return ""
    from benchlib.tables import label, level

    factors = list(dict.fromkeys(k for m in missing for k in m))
    head = "".join(f"<th class='txt'>{html.escape(label(f)[:1].upper() + label(f)[1:])}</th>" for f in factors)
    rows = "".join(
        "<tr>" + "".join(f"<td class='txt'>{html.escape(level(f, m.get(f, '')))}</td>" for f in factors) + "</tr>"
        for m in missing
    )
    return f"<table><tr>{head}</tr>{rows}</table>"


def _answers(
    answers: list[dict] | None,
    told: str = "",
    support: str = "",
    together: str = "",
    caveats: list[tuple[str, str | None]] | None = None,
) -> str:
    """Return the index's first section: per setting, what changing it did and what the design can call it.

    From :func:`benchlib.results.factor_answers`, each said with its caveat (``caveats``: :func:`_caveat` of
    each, computed here where not given); the comparison page has every row of it. ``together``: what
    the interaction page's tests found (:func:`_together`), said after the settings. ``support``: the
    design's statement of what it can support (Markdown), said after the settings instead of a verdict every
    setting shares. Then ``told``: the write-up's claims (:func:`_claims_answer`).
    """
    if not answers and not told:
        return ""
    from benchlib.tables import label, level

    said = []  # per setting: its name and levels, what changed, what the design can call it, what was left out
    answers = answers or []
    for a, (caveat, _) in zip(answers, caveats or [_caveat(a) for a in answers], strict=True):
        factor, capped = a["factor"], a["verdicts"].get("rate-capped", 0)
        others = ", ".join(level(factor, lv) for lv in a["levels"])
        left = f" ({capped} under a rate cap left out: the cap set their totals)" if capped else ""
        name = f"<strong>{html.escape(label(factor)[:1].upper() + label(factor)[1:])}</strong>, "
        name += f"{html.escape(others)} against {html.escape(level(factor, a['baseline']))}"
        said.append((name, _setting_change(a, others), _design_can(a, support), left, caveat))
    # what the design can call the changes, said once where it is the same for every setting
    shared = said[0][2] if len(said) > 1 and len({s[2] for s in said}) == 1 else ""
    items = [
        f"<li>{name}: {html.escape(change + (f'; {can}' if can and not shared else '') + left)}."
        + (f" {_inline(caveat)}" if caveat else "")
        + "</li>"
        for name, change, can, left, caveat in said
    ]
    settings = (
        "<p>Each change is the median of the run-to-run ratios of the two sides, computed as the comparison page "
        "computes its own (not the ratio of the sides' medians in the results below).</p>"
        f"<ul>{''.join(items)}</ul>"
        + together
        + (f"<p>For every setting above, {html.escape(shared)}.</p>" if shared else "")
        + (_markdown(support) if support else "")
        if items
        else ""
    )
    return f"<h2>What each setting did</h2>{settings}{told}" if items else f"<h2>The write-up's claims</h2>{told}"


def _together(together: dict | None) -> str:
    """Say what the interaction page's tests found (:func:`benchlib.views.interaction`), "" where none was made.

    Where any group's test finds that one setting's effect depends on the other's level, those groups and
    their Holm-adjusted p; else how many found no evidence and how many could not tell at their n.
    """
    tests = together["tests"] if together else None
    if tests is None or tests.is_empty() or tests["p"].is_null().all():
        return ""
    from benchlib.tables import label, levels_words

    x, trace, by = together["x"], together["trace"], together["by"]
    name = f"<strong>{html.escape(label(x)[:1].upper() + label(x)[1:])} with {html.escape(inline(trace))}</strong>"
    link = f"<a href='{html.escape(together['page'])}'>the interaction page</a>"
    found = tests.filter(pl.col("verdict") == "interacts")
    if found.height:
        where = "; ".join(
            (f"{_lowered(levels_words({b: row[b] for b in by}))}: " if by else "") + f"p = {row['p_holm']:.4f}"
            for row in found.iter_rows(named=True)
        )
        tested = found["family"][0]
        of = f" in {found.height} of the {tested} groups tested" if found.height < tested else ""
        of = f" in each of the {tested} groups tested" if found.height == tested > 1 else of
        said = f"the effect of {inline(x)}, as a ratio, depends on {inline(trace)}{of} ({where}" + (
            f", Holm-adjusted over {tested} tests)" if tested > 1 else ")"
        )
    else:
        counts = dict(tests["verdict"].value_counts().iter_rows())
        parts = [f"no evidence in {counts['no evidence']}" if counts.get("no evidence") else ""]
        parts.append(f"too few runs to tell in {counts['cannot tell']}" if counts.get("cannot tell") else "")
        said = f"no test finds that the effect of {inline(x)} depends on {inline(trace)} ("
        tested = tests["family"][0]
        said += ", ".join(filter(None, parts)) + f" of {tested} {'group' if tested == 1 else 'groups'} tested)"
    return f"<p>{name}: {html.escape(said)}; {link} tests each group.</p>"


def _lowered(said: str) -> str:
    """Begin a phrase said mid-sentence in lower case ("Profile random read" -> "profile random read"; "SIOC" kept)."""
    return said[:1].lower() + said[1:] if said[1:2].islower() else said


def _claims_answer(claims: pl.DataFrame | None, page: str | None, conclusions: pl.DataFrame | None = None) -> str:
    """Say the write-up's claims as the data judge them: how many hold, and each that fails, in its own words.

    Then which of its conclusions (:func:`benchlib.views.conclusion_table`) rest on one that fails.
    """
    if claims is None or claims.is_empty() or page is None:
        return ""
    weak = conclusions.filter(pl.col("status") == "weakened") if conclusions is not None else None
    weakened = ""
    if weak is not None and weak.height:
        each = "; ".join(
            f"{r['conclusion']} (claim{'s' if len(r['failed']) > 1 else ''} {', '.join(r['failed'])})"
            for r in weak.iter_rows(named=True)
        )
        weakened = (
            f"<p><strong>Conclusions</strong>: {weak.height} of the write-up's {conclusions.height} rest on a claim "
            f"that fails: {html.escape(each)}.</p>"
        )
    counts = dict(claims["verdict"].value_counts().iter_rows())
    held, failed = counts.get("PASS", 0), claims.filter(pl.col("verdict") == "FAIL")
    open_ = claims.height - held - failed.height
    said = f"{held} of the write-up's {claims.height} claims hold"
    said += "" if not open_ else f", the data cannot decide {open_}"
    said += f"; these {failed.height} fail" if failed.height > 1 else "; this one fails" if failed.height else ""
    link = f"<a href='{html.escape(page)}'>the claims page</a>"
    fails = "".join(
        f"<li>{html.escape(row['says'])} (claim {html.escape(row['claim'])}, {html.escape(row['section'])}"
        + ("; the claims page says how benchlib reads these words" if row.get("reading") else "")
        + ")</li>"
        for row in failed.iter_rows(named=True)
    )
    if not fails:
        return f"<p><strong>Claims</strong>: {html.escape(said)}; each is recomputed on {link}.</p>" + weakened
    return f"<p><strong>Claims</strong>: {html.escape(said)} ({link} recomputes each):</p><ul>{fails}</ul>" + weakened


def _caveat(a: dict) -> tuple[str, str | None]:
    """Say the caveat that matters most for one setting's answer, as its comparison page says it, with its flag.

    What else changed with the setting (:func:`benchlib.words.confounding.confounded_note`), else unlike
    work across it (:func:`benchlib.words.confounding.unlike_work_note`), else that fio ran the runs through
    the page cache (flagged :data:`benchlib.caveats.PAGE_CACHE`: the pages' own notes are then not repeated);
    ("", None) where none.
    """
    from benchlib.words.cache import buffered_in_short
    from benchlib.words.confounding import confounded_note, unlike_work_note

    said = confounded_note(a.get("confounders") or [], a["factor"]) or unlike_work_note(
        a.get("unlike_sizes") or [], a["value"]
    )
    if said:
        return said, None
    cache = buffered_in_short(a.get("buffered"))
    return (cache, PAGE_CACHE) if cache else ("", None)


def _setting_change(a: dict, others: str) -> str:
    """Say what changing one setting did (:func:`benchlib.results.factor_answers`' row): its range, which way."""
    n = a["comparisons"] - a["verdicts"].get("rate-capped", 0)
    only = a.get("only") or {}  # the runs read, said where they are one level's (SIOC: one test of seven)
    single = only and all(len(v) == 1 for v in only.values() if isinstance(v, list | tuple))
    read = f" of {runs_read(only)}" if single else ""
    value = f"{inline(a['value'])} per run{read}"
    if a["low"] is None:
        change = "no comparison outside a rate cap"
    elif n == 1 or number(a["low"]) == number(a["high"]):
        within = f" (within each {', '.join(map(inline, a['by']))})" if a["by"] else ""
        change = f"{value} changed by {_change(a['low'])}{within}"
    else:
        change = f"{value} changed by {_span({**a, 'n': n})} over {n} comparisons"
        if a.get("higher") and a.get("lower"):  # both ways: say how often each, plainly
            change += f": {others} higher in {a['higher']}, lower in {a['lower']}"
        elif n in (a.get("higher"), a.get("lower")):
            change += f": {others} {'higher' if a.get('higher') == n else 'lower'} in every one"
    split = a.get("split")
    if split and split["totals"]["n"] and split["one_member"]["n"]:  # each kind's range on its own
        totals, one = split["totals"], split["one_member"]
        vm = inline("vm")
        return (
            f"{value} changed by {_span(totals)} over {_comparisons(totals['n'])} of run totals; where the data "
            f"list only one of the run's {vm}s ({_comparisons(one['n'])}), that {vm}'s {inline(a['value'])} changed "
            f"by {_span(one)}"
        )
    if a.get("one_member"):  # a published table that lists one VM of a run: its figure, not the run's total
        change += (
            f" (in {a['one_member']} of them the data list only one of the run's {inline('vm')}s: the change is "
            f"that {inline('vm')}'s, not the run's total)"
        )
    return change


def _span(part: dict) -> str:
    """Say a range of changes (:func:`benchlib.results._changes`): ``-21.4% (SIOC off) to +32.5% (SIOC on)``."""
    low, high = (f" ({runs_read(part[k])})" if part.get(k) else "" for k in ("low_at", "high_at"))
    if part["n"] == 1 or number(part["low"]) == number(part["high"]):
        return f"{_change(part['low'])}{low}"
    return f"{_change(part['low'])}{low} to {_change(part['high'])}{high}"


def _comparisons(n: int) -> str:
    return "one comparison" if n == 1 else f"{n} comparisons"


def _change(pct: float) -> str:
    """Say a change in percent to 3 significant digits, its sign and its zeros kept: ``-80.0%`` beside ``-98.1%``."""
    return f"{'+' if pct > 0 else ''}{number(pct)}%"


def _design_can(a: dict, support: str) -> str:
    """Say what the design can call one setting's changes: its verdicts, or why none where ``support`` is not said."""
    tested = {v: k for v, k in a["verdicts"].items() if v != "rate-capped"}
    if not tested:  # every comparison under a rate cap: nothing for the design to call
        return ""
    if a.get("one_side_capped", 0) == sum(tested.values()):  # the cap set one side: no test can add to it
        return "one side of each ran under a rate cap, so its totals are what the cap allowed: the change is the cap's"
    tally = "verdicts: " + "; ".join(f"{k} {v}" for v, k in sorted(tested.items()))
    if support:  # the design statement, said once after the settings, says why no test was made
        return tally
    if set(tested) == {"descriptive only"}:
        return f"{_runs(a['runs'])} a side: descriptive only, the design cannot call any of it an effect"
    if set(tested) == {"not testable at this n"}:
        return f"{_runs(a['runs'])} a side: too few for a test to call any of it an effect"
    return tally


def _runs(n: int) -> str:
    return "one run" if n == 1 else f"{n} runs"


def _results(results: pl.DataFrame | None, folder: Path) -> str:
    """Return the index's results table, and write it beside the pages as ``results.csv`` and ``results.md``.

    The CSV holds the figures as computed (to 9 significant digits, the study's level names); the page and the
    Markdown file show them to 3 significant digits, levels in the study's words.
    """
    if results is None or results.is_empty() or "runs" not in results.columns:
        return ""
    if "rwmixread_pct" in results.columns and "write_pct" not in results.columns:  # as the sweeps say a mix
        results = results.select(
            (100 - pl.col(c)).alias("write_pct") if c == "rwmixread_pct" else pl.col(c) for c in results.columns
        )
    results = results.with_columns(  # a job's parameter as it was set: 50, not 50.0
        pl.col(c).cast(pl.Int64)
        for c in ("write_pct", "rwmixread_pct", "iodepth", "numjobs")
        if c in results.columns and results[c].dtype.is_float() and (results[c].drop_nulls() % 1 == 0).all()
    )
    # a text cell a spreadsheet would read as a formula (=, +, @, a dash before a letter) starts with ' instead;
    # a figure to 9 significant digits, finer than any of them was measured, without binary float noise
    formula = r"^([=+@\t\r]|-[^0-9.])"
    written = results.with_columns(
        pl.when(pl.col(c).str.contains(formula)).then("'" + pl.col(c)).otherwise(pl.col(c)).alias(c)
        for c in results.columns
        if results.schema[c] == pl.String
    )
    written = written.with_columns(pl.col(c).round_sig_figs(9) for c in results.columns if results.schema[c].is_float())
    written.write_csv(folder / "results.csv")
    shown = results
    if "iops_max_over_min" in shown.columns:  # one run has no spread: said so, not a blank
        said = pl.col("iops_max_over_min").map_elements(lambda v: f"{number(v)}x", return_dtype=pl.String)
        spread = pl.when(pl.col("runs") < 2).then(pl.lit("one run")).otherwise(said)
        shown = shown.with_columns(spread.alias("iops_max_over_min"))
    from benchlib.tables import label, level

    if "block_size_bytes" in shown.columns:  # a job's bytes as fio's job files say them (4 KiB); the CSV keeps bytes
        shown = shown.with_columns(
            pl.col("block_size_bytes").map_elements(lambda b: level("block_size_bytes", b), return_dtype=pl.String)
        )
    labels = {**RESULT_LABELS, "members": f"{label('vm')}s in the data of a run"}
    table = show(shown, labels=labels, significant=[c for c in ("lat_mean_ms", "p99_ms") if c in shown.columns])
    (folder / "results.md").write_text(table.markdown(), encoding="utf-8")
    p99 = (
        " p99: of all the run's I/Os together, from its latency histogram; a configuration has one where each of"
        " its runs does."
        if "p99_ms" in results.columns
        else ""
    )
    if {"p99_ms", "lat_mean_ms"} <= set(results.columns):  # a mean above the p99: a few I/Os took very long
        above = results.filter(pl.col("lat_mean_ms") > pl.col("p99_ms")).height
        if above:
            p99 += (
                f" In {above} row{'s' if above > 1 else ''} the mean latency is above the p99: fewer than 1% of the "
                "I/Os took long enough to pull the mean past 99% of them (a stall); the p99 is the typical slow I/O."
            )
    holes = f"{MISSING}: the data hold no such figure. " if any(shown[c].null_count() for c in shown.columns) else ""
    # where rows hold different numbers of members (a published table listing one VM of five), say why
    fewer = (
        "; a published table may list fewer than ran: the members column says how many"
        if "members" in results.columns and results["members"].n_unique() > 1
        else ""
    )
    return (
        "<h2>Results</h2><p>One row per configuration: each run's total over the members the data hold of it "
        f"(rates add, latencies weighted by I/Os{fewer}), the median over the configuration's runs.{p99} "
        f"{holes}Download: <a href='results.csv'>results.csv</a> (9 significant digits), "
        "<a href='results.md'>results.md</a>.</p>" + table._repr_html_()
    )


def _source(source: str) -> str:
    """Return the index's line naming the study's source (its citation), "" where it has none."""
    source = source.strip()
    if not source:
        return ""
    return f"<p><strong>Source.</strong> {html.escape(source if source.endswith('.') else source + '.')}</p>"


def _matrix_gaps(matrix: tuple[str, ...], missing: list[dict], declared: int, unplanned: int | None) -> str:
    """Return the index's section on the declared combinations without runs (HTML); none without a matrix.

    A study that declares no factor has no matrix: its pages are the work its runs ran.
    """
    if not matrix and not missing:
        return ""
    scope = _without_runs(len(missing), declared, " × ".join(map(inline, matrix)), unplanned)
    return f"<h2>Combinations of the matrix without runs</h2><p>{html.escape(scope)}.</p>{_gaps_table(missing)}"


def _without_runs(missing: int, declared: int, axes: str, unplanned: int | None) -> str:
    """Say how many combinations of the matrix have no runs, and whether they were ever meant to run."""
    sweeps = (
        "The design above counts more configurations than combinations: each point of a sweep (a depth, a write "
        "share) is a configuration of its own"
    )
    if unplanned is not None:  # benchlib run recorded its plan: what it meant to run is known
        meant = declared - unplanned
        scope = (
            f"{missing} of the {meant} combinations of {axes} that the recorded plan (benchlib-plan.json) "
            "lists have no runs"
            if missing
            else f"The one combination of {axes} that the recorded plan (benchlib-plan.json) lists has runs"
            if meant == 1
            else f"Every one of the {meant} combinations of {axes} that the recorded plan (benchlib-plan.json) lists "
            "has runs"
        ) + (
            f"; the other {unplanned} of the {declared} combinations were never planned, so none of them is missing"
            if unplanned
            else ""
        )
        scope += f". {sweeps}" if unplanned or missing else ""
    elif missing:
        scope = (
            f"{missing} of the {declared} combinations of {axes} have no runs. study.toml declares each "
            "factor's levels, not which combinations were planned, run or published: these may never have been "
            f"meant to run. {sweeps}"
        )
    elif declared == 1:
        scope = f"The one combination of {axes or 'the study'} has runs"
    else:
        scope = f"Every one of the {declared} combinations of {axes} has runs"
    return scope


def _spanned(pipeline: Pipeline) -> str:
    """Say what the report's configuration pages span (HTML), or why it has none."""
    if len(pipeline.axes) > 1:
        return f"a page for each combination of {html.escape(' × '.join(map(inline, pipeline.axes)))}"
    if pipeline.axes:
        return f"a page for each {html.escape(inline(pipeline.axes[0]))}"
    return (
        "no page per configuration (the study declares no factor and its runs ran in one phase: "
        f"<code>benchlib notebook cell --study {html.escape(pipeline.study)}</code> gives one of all its runs)"
    )


def _title(execution: Execution) -> str:
    """Return a page's title in words: its levels (``profile randread, block size 4k``) or its name."""
    if execution.levels:
        return levels_words(execution.levels)
    return _page_title(execution.slug)


def _page_title(name: str) -> str:
    """Return a summary page's title from its name: ``host-side`` -> ``Host side``."""
    return name.replace("-", " ").capitalize()
