"""Forms parse and validate input; the services check permissions and state again."""

import itertools
import json

from django import forms

from loop.models import Run, Target, Thesis
from loop.policy import RunPolicy


class ThesisForm(forms.Form):
    title = forms.CharField(max_length=200)
    body = forms.CharField(widget=forms.Textarea(attrs={"rows": 14}), help_text="Markdown: the diagnosis and the proposed organisation.")
    target = forms.ModelChoiceField(queryset=Target.objects.all(), to_field_name="name")
    hardware = forms.CharField(max_length=32, initial="h200")
    model = forms.CharField(max_length=64, required=False, help_text="Model whose skills apply, e.g. deepseek-v3.2.")
    constraints = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False, help_text="What may not change.")
    priority = forms.IntegerField(initial=0, min_value=-1000, max_value=1000)


class ThesisEditForm(ThesisForm):
    status = forms.ChoiceField(choices=Thesis.Status.choices)


class PriorityForm(forms.Form):
    priority = forms.IntegerField(min_value=-1000, max_value=1000)


class JSONObjectField(forms.CharField):
    widget = forms.Textarea(attrs={"rows": 3})

    def to_python(self, value):
        value = super().to_python(value)
        if not value:
            return {}
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as error:
            raise forms.ValidationError(f"Not valid JSON: {error.msg} (line {error.lineno}).") from error
        if not isinstance(parsed, dict):
            raise forms.ValidationError("Give a JSON object, e.g. {\"model\": \"...\"}.")
        return parsed


class RunStartForm(forms.Form):
    proposer = forms.ChoiceField(choices=Run.Proposer.choices, initial=Run.Proposer.SWEEP)
    proposer_settings = JSONObjectField(required=False, initial="{}",
                                        help_text="JSON: e.g. sweep trials, or the LLM endpoint and model.")
    hardware = forms.CharField(max_length=32, help_text="The queue gpu.<hardware> that evaluates candidates.")
    profile = forms.ChoiceField(choices=[("smoke", "smoke"), ("full", "full")], initial="smoke")
    budget_candidates = forms.IntegerField(min_value=1, max_value=10000, initial=20)
    budget_gpu_minutes = forms.FloatField(min_value=0.1, max_value=100000, initial=60.0)
    review_mode = forms.ChoiceField(choices=Run.ReviewMode.choices, initial=Run.ReviewMode.GATE)
    # Defaults come from RunPolicy, the one place the keep rule's numbers live (docs/keep-rule.md).
    threshold = forms.FloatField(min_value=0.0, max_value=0.5, initial=RunPolicy.threshold, required=False,
                                 help_text="The smallest speedup worth keeping; the noise floor is at least this.")
    noise_multiplier = forms.FloatField(min_value=1.0, max_value=10.0, initial=RunPolicy.noise_multiplier,
                                        required=False, help_text="The noise floor is at least this many times "
                                                                  "the A/A interval's reach from 1.")
    allow_tail_regression = forms.BooleanField(initial=RunPolicy.allow_tail_regression, required=False,
                                               help_text="Keep a candidate whose p99 is worse beyond noise.")
    plateau_k = forms.IntegerField(min_value=1, max_value=1000, initial=8, required=False,
                                   help_text="Stop after this many candidates without a keep.")
    floor_fraction_stop = forms.FloatField(min_value=0.0, max_value=1.0, initial=0.9, required=False,
                                           help_text="Stop when the incumbent reaches this fraction of the floor.")

    def policy(self) -> dict:
        names = ("threshold", "noise_multiplier", "allow_tail_regression", "plateau_k", "floor_fraction_stop")
        return {k: self.cleaned_data[k] for k in names if self.cleaned_data.get(k) is not None}


class SkillEditForm(forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 24}), strip=False,
                           help_text="YAML front matter between two --- lines, then markdown.")
    note = forms.CharField(max_length=200, required=False, help_text="What changed, in a line.")


class SkillNewForm(SkillEditForm):
    key = forms.CharField(max_length=255, help_text="Path under skills/, e.g. hardware/h200/l2-residency.md.")

    def clean_key(self):
        key = self.cleaned_data["key"].strip()
        if not key.endswith(".md"):
            raise forms.ValidationError("A skill file's key ends in .md.")
        return key


class ApproveForm(forms.Form):
    note = forms.CharField(max_length=2000, required=False)


class VetoForm(forms.Form):
    reason = forms.CharField(max_length=2000, widget=forms.Textarea(attrs={"rows": 2}),
                             error_messages={"required": "Say why: a veto needs a reason."})


def parse_routes(text: str) -> list[dict]:
    """One route a line, `lo hi kernel`: half-open [lo, hi), hi `inf` for unbounded, kernel `candidate` or
    `default`."""
    routes = []
    for number, line in enumerate((text or "").splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.replace(",", " ").split()
        if len(parts) != 3:
            raise forms.ValidationError(f"Line {number}: write `lo hi kernel`, e.g. `0 100000 candidate`.")
        lo, hi, kernel = parts
        try:
            lo = int(lo)
            hi = None if hi.lower() in ("inf", "none", "-") else int(hi)
        except ValueError:
            raise forms.ValidationError(f"Line {number}: lo and hi must be whole numbers (hi may be inf).") from None
        if lo < 0 or (hi is not None and hi <= lo):
            raise forms.ValidationError(f"Line {number}: need 0 <= lo < hi.")
        if kernel not in ("candidate", "default"):
            raise forms.ValidationError(f"Line {number}: kernel must be `candidate` or `default`.")
        routes.append({"lo": lo, "hi": hi, "kernel": kernel})
    if not routes:
        raise forms.ValidationError("Give at least one route.")
    routes.sort(key=lambda r: r["lo"])
    for before, after in itertools.pairwise(routes):
        if before["hi"] is None or before["hi"] > after["lo"]:
            raise forms.ValidationError(f"Routes overlap at {after['lo']}.")
    if not any(r["kernel"] == "candidate" for r in routes):
        raise forms.ValidationError("No route sends traffic to the candidate.")
    return routes


def format_routes(routes: list[dict]) -> str:
    lines = []
    for route in routes:
        hi = "inf" if route.get("hi") is None else route["hi"]
        kernel = route.get("kernel")
        lines.append(f"{route.get('lo', 0)} {hi} {kernel if kernel in ('candidate', 'default') else 'candidate'}")
    return "\n".join(lines)


class PromoteForm(forms.Form):
    routes = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}),
                             help_text="One route a line: lo hi kernel (half-open [lo, hi); kernel candidate or default).")
    note = forms.CharField(max_length=2000, required=False)
    password = forms.CharField(widget=forms.PasswordInput, help_text="Your password again: promoting changes serving.")

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user

    def clean_routes(self):
        return parse_routes(self.cleaned_data["routes"])

    def clean_password(self):
        password = self.cleaned_data["password"]
        if self.user is None or not self.user.check_password(password):
            raise forms.ValidationError("That is not your password.")
        return password


class RollbackForm(forms.Form):
    to_version = forms.IntegerField(min_value=1)
    password = forms.CharField(widget=forms.PasswordInput)

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user

    def clean_password(self):
        password = self.cleaned_data["password"]
        if self.user is None or not self.user.check_password(password):
            raise forms.ValidationError("That is not your password.")
        return password
