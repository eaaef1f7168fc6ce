"""The pages' shared frame: one style sheet, a navigation bar, a strict Content-Security-Policy, error answers.

The policy lets a page load scripts only from this server (``/static/...``), images and audio only from
``data:`` URLs, and nothing from anywhere else: even a rendering mistake could not make a dataset's bytes run.
"""

from __future__ import annotations

import html
from typing import Any

from starlette.responses import HTMLResponse, JSONResponse

__all__ = ["CSP", "error_html", "error_json", "page"]

CSP = (
    "default-src 'none'; script-src 'self'; connect-src 'self'; img-src data:; media-src data:; "
    "style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:1000px;margin:1em auto;padding:0 1em;color:#222}
nav a{margin-right:1.2em} th{text-align:left;padding-right:1em;vertical-align:top} td{vertical-align:top}
table.grid{border-collapse:collapse} table.grid td,table.grid th{border-bottom:1px solid #ddd;padding:2px 8px}
table.value th{font-weight:normal;color:#555} pre.text{white-space:pre-wrap;max-width:700px;margin:0}
img.sample{max-width:256px;max-height:256px;image-rendering:auto} .note{color:#777;font-size:85%}
.error{color:#b00020} .knobs{display:grid;grid-template-columns:14em 1fr 6em;gap:4px 12px;align-items:center}
svg{display:block;margin:1em 0} #status{min-height:1.4em}
"""


def page(
    title: str, body: str, *, nav: list[tuple[str, str]], script: str | None = None, status: int = 200
) -> HTMLResponse:
    """A whole HTML page: ``body`` is trusted HTML (escape what goes into it); ``title`` is escaped here."""
    links = "".join(f'<a href="{html.escape(href)}">{html.escape(text)}</a>' for href, text in nav)
    tag = f'<script src="{html.escape(script)}" defer></script>' if script else ""
    text = (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_STYLE}</style>{tag}</head><body><nav>{links}</nav><h1>{html.escape(title)}</h1>{body}"
        "</body></html>\n"
    )
    return HTMLResponse(text, status_code=status, headers=HEADERS)


def error_html(status: int, message: str, *, nav: list[tuple[str, str]]) -> HTMLResponse:
    """An error page naming the problem (escaped)."""
    return page(f"Error {status}", f'<p class="error">{html.escape(message)}</p>', nav=nav, status=status)


def error_json(status: int, message: str, **extra: Any) -> JSONResponse:
    """``{"error": message}`` with ``status``."""
    headers = dict(HEADERS)
    if status == 429:
        headers["Retry-After"] = "1"
    return JSONResponse({"error": message, **extra}, status_code=status, headers=headers)
