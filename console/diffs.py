"""Sources and diffs as HTML: highlighted by pygments (which escapes), capped in size."""

import difflib
import hashlib

from django.core.cache import caches
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import DiffLexer, PythonLexer

MAX_LINES = 1500
MAX_CHARS = 200_000
_formatter = HtmlFormatter(nowrap=False, cssclass="hl")


def _cap(text: str) -> tuple[str, int]:
    """The text cut to MAX_LINES lines and MAX_CHARS characters, and how many lines were cut."""
    lines = (text or "").splitlines(keepends=True)
    kept, size = [], 0
    for line in lines[:MAX_LINES]:
        if size + len(line) > MAX_CHARS:
            break
        kept.append(line)
        size += len(line)
    return "".join(kept), len(lines) - len(kept)


def _render(text: str, lexer) -> SafeString:
    """The text highlighted, kept by the digest of the text and the lexer's name: the same text always gives
    the same HTML, and highlighting was about a tenth of a candidate page (docs/scaling.md)."""
    key = f"ark:highlight:{lexer.name}:{hashlib.sha256(text.encode()).hexdigest()}"
    html = caches["highlighted"].get(key)
    if html is None:
        capped, cut = _cap(text)
        html = highlight(capped, lexer, _formatter)  # pygments escapes every token
        if cut:
            html += format_html('<p class="muted capped">{} more lines not shown (the view is capped at {} lines).</p>',
                                cut, MAX_LINES)
        caches["highlighted"].set(key, str(html))
    return mark_safe(html)


def unified_diff(old: str, new: str, *, old_name: str, new_name: str) -> str:
    return "".join(difflib.unified_diff((old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True),
                                        fromfile=old_name, tofile=new_name))


def render_diff(diff_text: str) -> SafeString:
    if not diff_text.strip():
        return mark_safe('<p class="muted">No differences.</p>')
    return _render(diff_text, DiffLexer())


def render_source(source: str) -> SafeString:
    return _render(source, PythonLexer())


def pygments_css() -> str:
    return _formatter.get_style_defs(".hl")
