"""Forms of the deployment pages: promoting a candidate's winning regions, the workload profile, and
asking which route serves a shape."""

from django import forms

from console.forms import PasswordConfirmed


class RegionPromoteForm(PasswordConfirmed, forms.Form):
    based_on = forms.IntegerField(min_value=0, widget=forms.HiddenInput)
    note = forms.CharField(max_length=2000, required=False)
    password = forms.CharField(widget=forms.PasswordInput,
                               help_text="Your password again: promoting changes what serves.")


def parse_workload(text: str, axes: list[str]) -> list[tuple[dict, float]]:
    """One cell a line: `rows=4 n_ctx=32768 0.25` (axis=value pairs, then the weight); # starts a comment."""
    cells, problems = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        *pairs, weight = line.split()
        try:
            shape = {}
            for pair in pairs:
                axis, value = pair.split("=", 1)
                shape[axis.strip()] = int(value)
            cells.append((shape, float(weight)))
        except ValueError:
            problems.append(f"line {number}: expected {' '.join(f'{a}=<int>' for a in axes)} <weight>, got {line!r}")
    if problems:
        raise forms.ValidationError(problems)
    return cells


def format_workload(cells: list[dict]) -> str:
    return "\n".join(" ".join(f"{k}={v}" for k, v in c["shape"].items()) + f" {c['weight']:g}" for c in cells)


class WorkloadForm(forms.Form):
    cells = forms.CharField(widget=forms.Textarea(attrs={"rows": 8}), label="Cells",
                            help_text="One cell a line: axis=value pairs, then how often it is served (any unit).")

    def __init__(self, *args, axes=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.axes = list(axes)

    def clean_cells(self):
        return parse_workload(self.cleaned_data["cells"], self.axes)


class ExplainForm(forms.Form):
    """Which route serves a shape: one integer field per grid axis, built from the config's axes."""

    def __init__(self, *args, axes=(), **kwargs):
        super().__init__(*args, **kwargs)
        for axis in axes:
            self.fields[axis] = forms.IntegerField(min_value=0, label=axis)
