import subprocess
import sys

BLOCK_DJANGO = "import sys; sys.modules['django'] = None; "


def run_without_django(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK_DJANGO + code], capture_output=True, text=True, timeout=120)


def test_gpu_worker_imports_without_django():
    result = run_without_django("import gpu_worker, gpu_worker.queues, gpu_worker.celery_app, gpu_worker.tasks, "
                                "gpu_worker.hardware; print('ok')")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_blocking_django_really_blocks_it():
    result = run_without_django("import django")
    assert result.returncode != 0


def test_hardware_kind_is_read_from_the_gpu_name():
    from gpu_worker.hardware import kind_from_name

    assert kind_from_name("NVIDIA H200") == "h200"
    assert kind_from_name("NVIDIA B200") == "b200"
    assert kind_from_name("NVIDIA GeForce RTX 5090") == "rtx5090"
