"""ark's domain objects (docs/domain.md). State changes go through loop/services, never save() here."""

from django.conf import settings
from django.db import models

from .fields import OrderedJSONField


class Target(models.Model):
    """Mirror of a gpu_worker target: what may be optimised, over which operating range."""

    name = models.SlugField(max_length=64, unique=True)
    version = models.CharField(max_length=32, default="1")
    description = models.TextField(blank=True)
    axes = OrderedJSONField(default=dict)  # {"n_ctx": [4096, 262144], "rows": [1, 128]}
    dsls = models.JSONField(default=list)
    e2e_slot = models.CharField(max_length=64, blank=True)
    # An imported FlashInfer-Bench target: its `ark.fib-target/1` document (gpu_worker/fib/document.py), sent
    # in every evaluation spec; empty for the built-in targets mirrored from the catalog (docs/interop.md).
    document = OrderedJSONField(default=dict, blank=True)

    def __str__(self):
        return self.name


class SkillDoc(models.Model):
    key = models.CharField(max_length=255, unique=True)  # "hardware/h200/tma.md"
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["key"]

    def __str__(self):
        return self.key


class SkillRevision(models.Model):
    doc = models.ForeignKey(SkillDoc, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    text = models.TextField()
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    note = models.CharField(max_length=200, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["doc", "-number"]
        constraints = [models.UniqueConstraint(fields=["doc", "number"], name="skill_revision_unique_number")]


class Thesis(models.Model):
    class Status(models.TextChoices):
        BACKLOG = "backlog"
        ACTIVE = "active"
        CONCLUDED = "concluded"

    title = models.CharField(max_length=200)
    body = models.TextField(help_text="Diagnosis and proposed organisation, in markdown.")
    target = models.ForeignKey(Target, on_delete=models.PROTECT, related_name="theses")
    hardware = models.CharField(max_length=32)
    model = models.CharField(max_length=64, blank=True, help_text="Model whose skills apply, e.g. deepseek-v3.2.")
    constraints = models.TextField(blank=True, help_text="What may not change.")
    priority = models.IntegerField(default=0)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="theses")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.BACKLOG)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-priority", "-created"]
        verbose_name_plural = "theses"
        permissions = [("edit_thesis", "Can create and edit theses and skills")]

    def __str__(self):
        return self.title


class Run(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running"
        PAUSED = "paused"
        STOPPED = "stopped"
        FINISHED = "finished"

    class ReviewMode(models.TextChoices):
        AUTO = "auto"
        GATE = "gate"

    class Proposer(models.TextChoices):
        SWEEP = "sweep"
        LLM = "llm"
        HUMAN = "human"

    thesis = models.ForeignKey(Thesis, on_delete=models.PROTECT, related_name="runs")
    hardware = models.CharField(max_length=32)
    proposer = models.CharField(max_length=16, choices=Proposer.choices)
    proposer_settings = models.JSONField(default=dict, blank=True)
    profile = models.CharField(max_length=16, default="smoke")
    budget_candidates = models.PositiveIntegerField(default=20)
    budget_gpu_minutes = models.FloatField(default=60.0)
    gpu_seconds_used = models.FloatField(default=0.0)
    policy = models.JSONField(default=dict, blank=True)  # threshold, plateau_k, floor_fraction_stop
    review_mode = models.CharField(max_length=8, choices=ReviewMode.choices, default=ReviewMode.AUTO)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    stop_reason = models.CharField(max_length=200, blank=True)
    incumbent = models.ForeignKey("Candidate", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    imported_from = models.CharField(max_length=255, blank=True, help_text="Set for runs loaded from GPU reports.")
    imported_device = models.CharField(max_length=100, blank=True)
    imported_date = models.CharField(max_length=40, blank=True)
    # A plain sentence the run page shows, e.g. that timings need a GPU worker (CPU mode).
    notice = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="runs")
    created = models.DateTimeField(auto_now_add=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self):
        return f"run {self.pk} of {self.thesis}"


class Candidate(models.Model):
    class Status(models.TextChoices):
        PROPOSED = "proposed"
        QUEUED = "queued"
        RUNNING = "running"
        AWAITING_REVIEW = "awaiting_review"
        KEPT = "kept"
        REVERTED = "reverted"
        VETOED = "vetoed"
        ERROR = "error"

    FINAL = (Status.KEPT, Status.REVERTED, Status.VETOED, Status.ERROR)

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="candidates")
    number = models.PositiveIntegerField()
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children")
    source = models.TextField()
    source_hash = models.CharField(max_length=80)
    params = models.JSONField(default=dict, blank=True)
    diff = models.TextField(blank=True)
    proposer = models.CharField(max_length=16)
    proposal = models.JSONField(default=dict, blank=True)  # proposer's notes: tokens, latency, rationale
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PROPOSED)
    stage = models.CharField(max_length=32, blank=True)  # running:<stage>
    attempt = models.PositiveIntegerField(default=0)
    worker = models.CharField(max_length=200, blank=True)
    lease_expires = models.DateTimeField(null=True, blank=True)
    # The last decision's reason, denormalised for lists; the Decision rows are the record.
    reason_code = models.CharField(max_length=64, blank=True)
    reason_text = models.TextField(blank=True)
    # What its last evaluation was measured against, set at dispatch: the run's incumbent then (null: the
    # default kernel) and the serving config version in force for its target and hardware (null: none).
    # A verdict against a superseded one is shown as stale (docs/domain.md, Stale verdicts).
    measured_against = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    measured_config_version = models.PositiveIntegerField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["run", "number"]
        constraints = [models.UniqueConstraint(fields=["run", "number"], name="candidate_unique_number")]
        permissions = [("review_candidate", "Can approve or veto candidates")]

    def __str__(self):
        return f"candidate {self.run_id}.{self.number}"

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL


class Evaluation(models.Model):
    candidate = models.ForeignKey(Candidate, on_delete=models.CASCADE, related_name="evaluations")
    attempt = models.PositiveIntegerField()
    worker = models.CharField(max_length=200, blank=True)
    # what the GPU reported about itself (name, driver, clocks); a run's `hardware` is the kind string
    hardware_fingerprint = models.JSONField(default=dict)
    report = models.JSONField()
    geomean_speedup = models.FloatField(null=True, blank=True)
    speedup_ci_lo = models.FloatField(null=True, blank=True)
    speedup_ci_hi = models.FloatField(null=True, blank=True)
    e2e_delta = models.FloatField(null=True, blank=True)
    floor_fraction = models.FloatField(null=True, blank=True)
    gpu_seconds = models.FloatField(default=0.0)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["candidate", "attempt"]
        constraints = [models.UniqueConstraint(fields=["candidate", "attempt"], name="evaluation_unique_attempt")]


class Decision(models.Model):
    class Verdict(models.TextChoices):
        KEEP = "keep"
        REVERT = "revert"
        AWAIT_REVIEW = "await_review"
        APPROVE = "approve"
        VETO = "veto"
        ERROR = "error"

    candidate = models.ForeignKey(Candidate, on_delete=models.CASCADE, related_name="decisions")
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    reason_code = models.CharField(max_length=64)
    reason_text = models.TextField()
    actor = models.CharField(max_length=150)  # "policy" or a username
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created", "id"]


class Event(models.Model):
    """Append-only audit log. UPDATE and DELETE are refused by database triggers; each row's hash
    chains to the previous one so that `manage.py verify_audit` finds a tampered row."""

    type = models.CharField(max_length=64, db_index=True)
    actor = models.CharField(max_length=150)
    subject_type = models.CharField(max_length=32, blank=True)
    subject_id = models.CharField(max_length=64, blank=True)
    run_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    payload = models.JSONField(default=dict)
    created = models.DateTimeField()
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)

    class Meta:
        ordering = ["id"]
        # The audit page's filter steps through it (loop.selectors._distinct_values). An index of its own, added
        # by CREATE INDEX: changing the field instead made SQLite rebuild the table without its append-only
        # triggers (tests/foundation/test_audit_log.py caught it).
        indexes = [models.Index(fields=["actor"], name="loop_event_actor")]


class AuditHead(models.Model):
    """One row: the last event's hash, locked while an event is appended so the chain never forks."""

    last_hash = models.CharField(max_length=64)


class ServingConfig(models.Model):
    """An immutable version of the routes for one target on one hardware kind."""

    target = models.ForeignKey(Target, on_delete=models.PROTECT, related_name="serving_configs")
    hardware = models.CharField(max_length=32)
    version = models.PositiveIntegerField()
    axis = models.CharField(max_length=32)
    routes = models.JSONField()
    document = OrderedJSONField()  # the exported JSON, exactly
    note = models.TextField(blank=True)
    rolled_back_to = models.PositiveIntegerField(null=True, blank=True)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    approver = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["target", "hardware", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["target", "hardware", "version"], name="serving_config_unique_version")
        ]
        permissions = [("promote", "Can promote and roll back serving configs")]


class WorkloadProfile(models.Model):
    """How often each cell of a target's operating grid is served: `cells` is [{"shape": {axis: value},
    "weight": w}], weights in any unit (calls, seconds, tokens); shares are weight / total. Promotion
    impact, the waterfall and the backlog are weighted by it (docs/domain.md)."""

    target = models.OneToOneField(Target, on_delete=models.CASCADE, related_name="workload_profile")
    cells = models.JSONField(default=list)
    source = models.CharField(max_length=200, blank=True)  # "console", "fib:<file>", "e2e grid"
    updated = models.DateTimeField(auto_now=True)

    def __str__(self):
        return f"workload of {self.target.name}"


class Worker(models.Model):
    """A GPU worker as last heard from through its heartbeat."""

    name = models.CharField(max_length=200, unique=True)
    hardware = models.CharField(max_length=32)
    fingerprint = models.JSONField(default=dict)
    last_heartbeat = models.DateTimeField()

    class Meta:
        ordering = ["hardware", "name"]


class Ping(models.Model):
    """A wiring check: loop -> gpu.<hardware> -> loop -> browser."""

    hardware = models.CharField(max_length=32)
    actor = models.CharField(max_length=150)
    sent = models.DateTimeField(auto_now_add=True)
    answered = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    fingerprint = models.JSONField(default=dict, blank=True)


class OutboxMessage(models.Model):
    """A task to publish, written in the same transaction as the state change that needs it."""

    task = models.CharField(max_length=64)
    queue = models.CharField(max_length=64)
    args = models.JSONField(default=list)
    created = models.DateTimeField(auto_now_add=True)
    sent = models.DateTimeField(null=True, blank=True, db_index=True)
    attempts = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["id"]


class Confirmation(models.Model):
    """An independent re-timing of a kept candidate before promotion (docs/isolation.md, Independent
    re-timing): which evaluation it checked, which worker re-timed it, and the verdict the loop computed from
    the times the worker measured (gpu_worker/fib/confirm.py). Never written from a candidate's output."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        CONFIRMED = "confirmed"
        UNCONFIRMED = "unconfirmed"
        UNAVAILABLE = "unavailable"

    candidate = models.ForeignKey(Candidate, on_delete=models.CASCADE, related_name="confirmations")
    evaluation = models.ForeignKey(Evaluation, on_delete=models.CASCADE, related_name="confirmations")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    evaluated_by = models.CharField(max_length=200, blank=True)  # the worker that made the report
    worker = models.CharField(max_length=200, blank=True)  # the worker that re-timed it
    retimed = models.JSONField(default=dict, blank=True)  # what that worker measured
    result = models.JSONField(default=dict, blank=True)  # confirm()'s verdict: findings and per-shape ratios
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created = models.DateTimeField(auto_now_add=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["candidate", "-created"]
