"""Markdown for theses and skills: raw HTML off at parse time (shown as text), then sanitised with nh3
(docs/architecture.md). The parser is markdown-it's Rust port (markdown-it-pyrs), with the same rules as
markdown-it-py but about ten times faster: markdown-it-py took 1.5 s for a 256 KB skill, which put a skill at
the size limit far over 200 ms to view (docs/operations.md)."""

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it_pyrs import MarkdownIt

# CommonMark without its two raw-HTML rules (html_block, html_inline), plus tables and strikethrough.
_md = MarkdownIt("zero").enable_many([
    "blockquote", "code", "fence", "heading", "hr", "lheading", "list", "paragraph", "reference",
    "autolink", "backticks", "emphasis", "entity", "escape", "image", "link", "newline", "table", "strikethrough",
])

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
