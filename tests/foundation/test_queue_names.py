"""Wire names: every queue and task name comes from gpu_worker.queues, and each one reaches a consumer.

A renamed task on one side only, a name typed as a string somewhere, or a task sent to a queue no
worker reads would each leave messages waiting in Redis forever; these tests fail instead.
"""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_worker.queues import LOOP_QUEUE, Task

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("console", "loop", "gpu_worker")
LOOP_TASKS = {t for t in Task if t.name.startswith("LOOP_")}
GPU_TASKS = {t for t in Task if t.name.startswith("GPU_")}


# Settings cannot import gpu_worker.queues (it would fix LOOP_QUEUE before a test run names its queue): its
# beat schedule spells the reaper's task, and the loop-app test below checks that name is registered.
_SPELLS_FOR_A_REASON = {ROOT / "console" / "settings.py"}


def _product_files():
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts and path.name != "queues.py" and path not in _SPELLS_FOR_A_REASON:
                yield path


def _task_uses():
    """(file, node) of every `Task.X` attribute read in product code outside queues.py."""
    for path in _product_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Task":
                yield path, node


def test_every_task_is_consumed_on_one_side_and_named_by_it():
    assert LOOP_TASKS | GPU_TASKS == set(Task)
    assert all(t.value.startswith("loop.") for t in LOOP_TASKS) and all(t.value.startswith("gpu.") for t in GPU_TASKS)


def test_no_wire_name_is_spelled_outside_queues_py():
    names = {t.value for t in Task}
    spelled = [f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}"
               for path in _product_files() for node in ast.walk(ast.parse(path.read_text(), str(path)))
               if isinstance(node, ast.Constant) and node.value in names]
    assert spelled == []


def test_every_task_name_used_exists():
    unknown = [f"{path.relative_to(ROOT)}:{node.lineno} Task.{node.attr}" for path, node in _task_uses()
               if node.attr not in Task.__members__]
    assert unknown == []


@pytest.mark.django_db
def test_the_loop_app_registers_every_loop_task_and_no_gpu_task():
    # in a fresh process: once another test has imported gpu_worker.tasks, its tasks are in this one's registry
    probe = ("import json, django; django.setup(); from console.celery import app; "
             "app.loader.import_default_modules(); print(json.dumps(sorted(app.tasks)))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True,
                         env={**os.environ, "DJANGO_SETTINGS_MODULE": "console.settings"})
    registered = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert {t.value for t in LOOP_TASKS} <= registered
    assert not {t.value for t in GPU_TASKS} & registered
    # its periodic tasks are its own, under the names queues.py gives them
    from django.conf import settings
    assert {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()} <= {t.value for t in LOOP_TASKS}


def test_the_gpu_app_registers_every_gpu_task_and_answers_on_the_loop_queue():
    import gpu_worker.tasks  # noqa: F401  registers the GPU tasks
    from gpu_worker.celery_app import app

    registered = set(app.tasks)
    # (loop tasks are @shared_task, so in one process they show up here too: only this side is checked)
    assert {t.value for t in GPU_TASKS} <= registered
    assert app.conf.task_default_queue == LOOP_QUEUE


def test_the_loop_sends_gpu_tasks_to_a_gpu_queue_and_loop_tasks_to_the_loop_queue():
    """Every `outbox_enqueue(task=Task.X, queue=...)` pairs a GPU task with gpu_queue(...) and a loop
    task with LOOP_QUEUE: the queue the consuming app reads (the GPU worker command's -Q is checked in
    test_compose_and_commands)."""
    pairs = []
    for path in _product_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "outbox_enqueue":
                kw = {k.arg: k.value for k in node.keywords}
                if "task" in kw and isinstance(kw["task"], ast.Attribute):
                    pairs.append((path.name, kw["task"].attr, ast.unparse(kw["queue"])))
    assert pairs, "the loop sends no task through the outbox: this test reads the wrong place"
    wrong = [(f, t, q) for f, t, q in pairs
             if (t.startswith("GPU_") and not q.startswith("gpu_queue(")) or (t.startswith("LOOP_") and q != "LOOP_QUEUE")]
    assert wrong == []
