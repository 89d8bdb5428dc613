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


@register.filter
def person(user, none: str = "nobody") -> str:
    """How every page names a person: the login name (what the audit log, filters and the top bar show).
    A user object, an actor string from the event log, or None (`none`, e.g. "import" for a skill import)."""
    if user is None or user == "":
        return none
    if hasattr(user, "get_username"):
        return user.get_username()
    return str(user)


@register.filter
def recorded(run) -> str:
    """'recorded on NVIDIA H200, 2026-12-04' for a run loaded from reports (the demo, import_reports); '' for a
    live one. Pages show it wherever such a run or its candidates appear: nothing recorded passes for live."""
    device = getattr(run, "imported_device", "")
    if not device:
        return ""
    date = getattr(run, "imported_date", "")
    return f"recorded on {device}, {date}" if date else f"recorded on {device}"
