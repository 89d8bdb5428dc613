from django import template

register = template.Library()


@register.filter
def label(value) -> str:
    return str(value or "").replace("_", " ")


@register.filter
def times(value, digits=2) -> str:
    """A speedup as `1.23x`; a dash where there is none."""
    if value is None or value == "":
        return "–"
    return f"{float(value):.{int(digits)}f}x"


@register.filter
def signed_pct(value) -> str:
    """A fraction as a signed percentage: 0.031 -> +3.1%."""
    if value is None or value == "":
        return "–"
    return f"{100 * float(value):+.1f}%"


@register.filter
def us(value) -> str:
    if value is None or value == "":
        return "–"
    return f"{float(value):.2f}"
