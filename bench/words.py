"""Words a reader meets on each page of a built report, outside tables and figures.

    python bench/words.py reports/pvscsi-vs-lsi [more report folders]

Counts the visible text of every ``*.html`` page (the index, the summary pages and the cell pages), leaving out
tables (figures a reader scans, not reads), scripts, styles and figures. Prints one line per page and the
report's total: the yardstick of issue 39 (a report should read like the post it checks, not an audit log).
"""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path

SKIPPED = {"table", "script", "style", "svg", "figure", "head"}


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.depth, self.words = 0, 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in SKIPPED:
            self.depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in SKIPPED and self.depth:
            self.depth -= 1

    def handle_data(self, data: str) -> None:
        if not self.depth:
            self.words += len(re.findall(r"\S+", data))


def words(page: Path) -> int:
    """Return the words of one page outside its tables and figures."""
    parser = _Text()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.words


def main(folders: list[str]) -> int:
    for folder in map(Path, folders):
        pages = sorted(folder.rglob("*.html"))
        counts = {p.relative_to(folder).as_posix(): words(p) for p in pages}
        for name, n in counts.items():
            print(f"{n:6,}  {name}")
        print(f"{sum(counts.values()):6,}  {folder.name}: {len(pages)} pages")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
