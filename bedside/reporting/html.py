"""A static, self-contained HTML page (no script, no external resource): tables rendered by pandas
(escaped), figures as ``<img>`` of the PNGs next to it, with links to the SVGs and CSVs."""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import pandas as pd

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 1400px; color: #222; }
h1 { font-size: 1.5em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; } h3 { margin-top: 1.5em; }
table.data { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
table.data th, table.data td { border: 1px solid #ddd; padding: 3px 6px; text-align: right; white-space: nowrap; }
table.data th { background: #f4f4f4; } table.data td:first-child { text-align: left; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption, .note { font-size: 0.85em; color: #555; }
.files a { margin-right: 0.8em; font-size: 0.85em; }
"""


@dataclass
class Page:
    title: str
    parts: list[str] = field(default_factory=list)

    def heading(self, text: str, level: int = 2) -> None:
        self.parts.append(f"<h{level}>{html.escape(text)}</h{level}>")

    def note(self, text: str) -> None:
        self.parts.append(f'<p class="note">{html.escape(text)}</p>')

    def table(
        self, frame: pd.DataFrame, csv: str | None = None, caption: str | None = None, float_format: str = "{:.3f}"
    ) -> None:
        if caption:
            self.note(caption)
        if frame.empty:
            self.note("(no data)")
        else:
            self.parts.append(
                frame.to_html(index=False, classes="data", border=0, na_rep="–", float_format=float_format.format)
            )
        if csv:
            self.file(csv)

    def file(self, name: str) -> None:
        """A link to a file written beside the page (a table's CSV)."""
        self.parts.append(f'<p class="files"><a href="{html.escape(name)}">{html.escape(name)}</a></p>')

    def details(self, summary: str, frame: pd.DataFrame, csv: str | None = None) -> None:
        self.parts.append(f"<details><summary>{html.escape(summary)}</summary>")
        self.table(frame, csv)
        self.parts.append("</details>")

    def figure(self, name: str | None, caption: str, csv: str | None = None) -> None:
        """The figure ``name`` (its PNG, linked to its SVG and PNG and to its table ``csv``); None: no data."""
        if name is None:
            self.note(f"{caption}: no data")
            return
        src = html.escape(name)
        table = f', <a href="{html.escape(csv)}">CSV</a>' if csv else ""
        self.parts.append(
            f'<figure><img src="{src}.png" alt="{html.escape(caption)}">'
            f'<figcaption>{html.escape(caption)} — <a href="{src}.svg">SVG</a>, <a href="{src}.png">PNG</a>{table}'
            f"</figcaption></figure>"
        )

    def undrawn(self, caption: str, why: str, csv: str | None = None) -> None:
        """A figure not drawn (``why``): its caption, and a link to its table ``csv``."""
        self.note(f"{caption}: not drawn ({why})")
        if csv:
            self.file(csv)

    def render(self) -> str:
        body = "\n".join(self.parts)
        return (
            f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(self.title)}</title><style>{STYLE}</style></head>\n"
            f"<body><h1>{html.escape(self.title)}</h1>\n{body}\n</body></html>\n"
        )
