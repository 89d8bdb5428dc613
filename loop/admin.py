from django.contrib import admin

from loop import models


@admin.register(models.Target)
class TargetAdmin(admin.ModelAdmin):
    list_display = ("name", "version", "e2e_slot")


@admin.register(models.Thesis)
class ThesisAdmin(admin.ModelAdmin):
    list_display = ("title", "target", "hardware", "priority", "owner", "status")
    list_filter = ("status", "hardware", "target")


@admin.register(models.Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "thesis", "hardware", "proposer", "status", "review_mode", "created")
    list_filter = ("status", "proposer", "hardware")


@admin.register(models.Candidate)
class CandidateAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "number", "proposer", "status", "stage", "attempt")
    list_filter = ("status",)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records written only by services: shown, never edited here."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(models.Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ("id", "type", "actor", "subject_type", "subject_id", "created")
    list_filter = ("type",)


for model in (models.Evaluation, models.Decision, models.ServingConfig, models.SkillRevision, models.Worker,
              models.Ping, models.OutboxMessage):
    admin.site.register(model, ReadOnlyAdmin)
admin.site.register(models.SkillDoc)
