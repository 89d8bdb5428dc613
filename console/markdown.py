"""Markdown for theses and skills: raw HTML off at parse time, then sanitised with nh3 (docs/architecture.md)."""

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")

_TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "code", "pre", "blockquote",
    "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td", "img", "del", "s",
}
_ATTRIBUTES = {"a": {"href", "title"}, "img": {"src", "alt", "title"}, "th": {"style"}, "td": {"style"},
               "ol": {"start"}}


def render_markdown(text: str) -> SafeString:
    html = _md.render(text or "")
    clean = nh3.clean(html, tags=_TAGS, attributes=_ATTRIBUTES, url_schemes={"http", "https", "mailto"},
                      link_rel="noopener noreferrer nofollow", filter_style_properties={"text-align"})
    return mark_safe(clean)  # nh3 output
