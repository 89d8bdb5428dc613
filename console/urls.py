from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from console.ratelimit import RateLimitedLoginView
from console.views import audit, dashboard, deployments, interop, review, runs, skills, submit, theses, users
from console.views.confirmations import candidate_retime

urlpatterns = [
    path("login/", RateLimitedLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("healthz", dashboard.healthz, name="healthz"),
    path("", dashboard.dashboard, name="dashboard"),
    path("ping/", dashboard.ping, name="ping"),
    path("markdown/preview/", theses.markdown_preview, name="markdown_preview"),
    path("theses/", theses.thesis_list, name="theses"),
    path("theses/new/", theses.thesis_new, name="thesis_new"),
    path("theses/<int:pk>/", theses.thesis_detail, name="thesis"),
    path("theses/<int:pk>/edit/", theses.thesis_edit, name="thesis_edit"),
    path("theses/<int:pk>/priority/", theses.thesis_prioritise, name="thesis_prioritise"),
    path("theses/<int:pk>/runs/", theses.run_start, name="run_start"),
    path("skills/", skills.skill_tree, name="skills"),
    path("skills/new/", skills.skill_new, name="skill_new"),
    path("skills/preview/", skills.skill_preview, name="skill_preview"),
    path("skills/export/", skills.skill_export, name="skill_export"),
    path("skills/import/", skills.skill_import, name="skill_import"),
    path("skills/download.zip", skills.skill_download, name="skill_download"),
    path("skills/view/<path:key>", skills.skill_detail, name="skill"),
    path("skills/edit/<path:key>", skills.skill_edit, name="skill_edit"),
    path("skills/history/<path:key>", skills.skill_history, name="skill_history"),
    path("targets/import/", interop.definition_import, name="definition_import"),
    path("runs/<int:pk>/traceset.zip", interop.run_traceset, name="run_traceset"),
    path("runs/<int:pk>/", runs.run_detail, name="run"),
    path("runs/<int:pk>/submit/", submit.run_submit, name="run_submit"),
    path("runs/<int:pk>/<str:action>/", runs.run_action, name="run_action"),
    path("candidates/<int:pk>/", runs.candidate_detail, name="candidate"),
    path("candidates/<int:pk>/approve/", review.candidate_approve, name="candidate_approve"),
    path("candidates/<int:pk>/veto/", review.candidate_veto, name="candidate_veto"),
    path("candidates/<int:pk>/rebenchmark/", review.candidate_rebenchmark, name="candidate_rebenchmark"),
    path("candidates/<int:pk>/promote/", runs.candidate_promote, name="candidate_promote"),
    path("candidates/<int:pk>/retime/", candidate_retime, name="candidate_retime"),
    path("deployments/", deployments.deployment_list, name="deployments"),
    path("deployments/<slug:target>/<str:hardware>/", deployments.deployment_detail, name="deployment"),
    path("deployments/<slug:target>/<str:hardware>/rollback/", deployments.deployment_rollback,
         name="deployment_rollback"),
    path("deployments/<slug:target>/<str:hardware>/workload/", deployments.deployment_workload,
         name="deployment_workload"),
    path("candidates/<int:pk>/regions/", deployments.candidate_regions, name="candidate_regions"),
    path("candidates/<int:pk>/regions/measure/", deployments.candidate_regions_measure,
         name="candidate_regions_measure"),
    path("candidates/<int:pk>/regions/promote/", deployments.candidate_regions_promote,
         name="candidate_regions_promote"),
    path("deployments/<slug:target>/<str:hardware>/v<int:version>.json", deployments.deployment_download,
         name="deployment_download"),
    path("audit/", audit.audit_list, name="audit"),
    path("audit/export.csv", audit.audit_csv, name="audit_csv"),
    path("users/", users.user_list, name="users"),
    path("users/<int:pk>/roles/", users.user_roles, name="user_roles"),
    path("admin/", admin.site.urls),
]

handler400 = "console.views.errors.bad_request"
handler403 = "console.views.errors.permission_denied"
handler404 = "console.views.errors.not_found"
handler500 = "console.views.errors.server_error"
