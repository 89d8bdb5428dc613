"""Forms parse and validate input; the services check permissions and state again."""

import itertools

from django import forms
from django.core.exceptions import ValidationError

from console.ratelimit import password_confirm
from loop.hardware import hardware_registered_slug, hardware_slug
from loop.models import Run, Target, Thesis
from loop.policy import RunPolicy
from loop.proposer_config import json_object_parse, proposer_settings_clean


class HardwareField(forms.CharField):
    """A hardware kind, checked as a slug (loop/hardware.py); `registered` also requires a known kind."""

    def __init__(self, *args, registered=False, **kwargs):
        kwargs.setdefault("max_length", 200)  # the slug check gives the clearer message
        super().__init__(*args, **kwargs)
        self.registered = registered

    def clean(self, value):
        value = super().clean(value)
        if not value and not self.required:
            return ""
        try:
            return hardware_registered_slug(value) if self.registered else hardware_slug(value)
        except ValidationError as error:
            raise forms.ValidationError(error.messages) from None


class ThesisForm(forms.Form):
    title = forms.CharField(max_length=200)
    body = forms.CharField(widget=forms.Textarea(attrs={"rows": 14}), help_text="Markdown: the diagnosis and the proposed organisation.")
    target = forms.ModelChoiceField(queryset=Target.objects.all(), to_field_name="name")
    hardware = HardwareField(initial="h200")
    model = forms.CharField(max_length=64, required=False, help_text="Model whose skills apply, e.g. deepseek-v3.2.")
    constraints = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False, help_text="What may not change.")
    priority = forms.IntegerField(initial=0, min_value=-1000, max_value=1000)


class ThesisEditForm(ThesisForm):
    status = forms.ChoiceField(choices=Thesis.Status.choices)


class PriorityForm(forms.Form):
    priority = forms.IntegerField(min_value=-1000, max_value=1000)


class JSONObjectField(forms.CharField):
    """A JSON object within the size and depth limits of loop/proposer_config.py."""
    widget = forms.Textarea(attrs={"rows": 3})

    def to_python(self, value):
        value = super().to_python(value)
        if not value:
            return {}
        try:
            return json_object_parse(value)
        except ValueError as error:
            raise forms.ValidationError(f"Proposer settings: {error}.") from None


class RunStartForm(forms.Form):
    proposer = forms.ChoiceField(choices=Run.Proposer.choices, initial=Run.Proposer.SWEEP)
    proposer_settings = JSONObjectField(required=False, initial="{}",
                                        help_text="JSON: e.g. sweep trials, or the LLM endpoint and model.")
    hardware = HardwareField(help_text="The queue gpu.<hardware> that evaluates candidates.")
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

    def clean(self):
        data = super().clean()
        if "proposer" in data and "proposer_settings" in data:
            try:
                data["proposer_settings"] = proposer_settings_clean(data["proposer"], data["proposer_settings"])
            except ValidationError as error:
                self.add_error("proposer_settings", error.messages)
        return data

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


class PasswordConfirmed:
    """For a form whose `password` field re-enters the acting person's password (promote, rollback): built with
    user= and request=, it checks the password through authenticate(), throttled and audited like a login
    (console/ratelimit.py)."""

    def __init__(self, *args, user=None, request=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.user, self.request = user, request

    def clean_password(self):
        password = self.cleaned_data["password"]
        if not password_confirm(self.request, self.user, password):
            raise forms.ValidationError("That is not your password.")
        return password


class PromoteForm(PasswordConfirmed, forms.Form):
    routes = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}),
                             help_text="One route a line: lo hi kernel (half-open [lo, hi); kernel candidate or default).")
    note = forms.CharField(max_length=2000, required=False)
    password = forms.CharField(widget=forms.PasswordInput, help_text="Your password again: promoting changes serving.")

    def clean_routes(self):
        return parse_routes(self.cleaned_data["routes"])


class RollbackForm(PasswordConfirmed, forms.Form):
    to_version = forms.IntegerField(min_value=1)
    password = forms.CharField(widget=forms.PasswordInput)


class PingForm(forms.Form):
    hardware = HardwareField(registered=True, required=False)

    def clean_hardware(self):
        return self.cleaned_data["hardware"] or "cpu"


class AuditFilterForm(forms.Form):
    """The audit page's and CSV export's query parameters: each parsed, a bad one is a 400 with a message."""
    type = forms.CharField(max_length=64, required=False)
    run = forms.IntegerField(min_value=1, max_value=2**63 - 1, required=False,
                             error_messages={"invalid": "run must be a run number, e.g. 12."})
    actor = forms.CharField(max_length=150, required=False)
    reason = forms.CharField(max_length=200, required=False)
    verdict = forms.CharField(max_length=32, required=False)
    page = forms.IntegerField(min_value=1, max_value=10**9, required=False,
                              error_messages={"invalid": "page must be a page number."})

    def filters(self) -> dict:
        data = self.cleaned_data
        return {k: ("" if data.get(k) is None else str(data[k])) for k in ("type", "run", "actor", "reason", "verdict")}
