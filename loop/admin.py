"""The admin site shows the domain; it changes none of it. Every change to theses, runs, candidates, decisions,
serving configs and skills goes through a service, which checks permissions and writes the audit Event
(docs/security.md): an admin edit that bypassed them (a reverted candidate set to kept, its source edited)
left no trace. People and their roles (django.contrib.auth) stay editable here."""

from django.contrib import admin

from loop import models


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records written only by services: shown, never added, edited or deleted here."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(models.Target)
class TargetAdmin(ReadOnlyAdmin):
    list_display = ("name", "version", "e2e_slot")


@admin.register(models.Thesis)
class ThesisAdmin(ReadOnlyAdmin):
    list_display = ("title", "target", "hardware", "priority", "owner", "status")
    list_filter = ("status", "hardware", "target")


@admin.register(models.Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ("id", "thesis", "hardware", "proposer", "status", "review_mode", "created")
    list_filter = ("status", "proposer", "hardware")


@admin.register(models.Candidate)
class CandidateAdmin(ReadOnlyAdmin):
    list_display = ("id", "run", "number", "proposer", "status", "stage", "attempt")
    list_filter = ("status",)


@admin.register(models.Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ("id", "type", "actor", "subject_type", "subject_id", "created")
    list_filter = ("type",)


for model in (models.Evaluation, models.Decision, models.ServingConfig, models.SkillRevision, models.Worker,
              models.Ping, models.OutboxMessage, models.SkillDoc):
    admin.site.register(model, ReadOnlyAdmin)
