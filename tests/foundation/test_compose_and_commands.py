import re
import shlex
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def module_exists(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def ark_modules_in(command: str) -> list[str]:
    """The project modules a command starts: daphne's app, celery's -A, python -m."""
    words = shlex.split(command)
    found = []
    for i, word in enumerate(words):
        if word in ("-A", "-m") and i + 1 < len(words):
            found.append(words[i + 1])
        if ":" in word and re.fullmatch(r"[\w.]+:\w+", word):
            found.append(word.split(":")[0])
    return [m for m in found if m.split(".")[0] in ("console", "loop", "gpu_worker")]


def test_compose_has_the_services_of_a_multi_host_deployment():
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"web", "loop", "gpu", "redis", "postgres"}
    assert "--appendonly yes" in services["redis"]["command"]
    assert "noeviction" in services["redis"]["command"]
    assert any("/var/lib/postgresql/data" in v for v in services["postgres"]["volumes"])
    devices = services["gpu"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["capabilities"] == ["gpu"]
    assert "ARK_HARDWARE" in services["gpu"]["environment"]
    assert services["gpu"]["command"] == "python -m gpu_worker worker --hardware ${ARK_HARDWARE:-h200}"


def test_the_gpu_worker_command_consumes_its_hardware_queue_with_a_solo_pool(monkeypatch):
    from celery import Celery

    from gpu_worker import cli

    seen = []
    monkeypatch.setattr(Celery, "worker_main", lambda self, argv: seen.append(argv))
    monkeypatch.delenv("ARK_HARDWARE", raising=False)
    assert cli.main(["worker", "--hardware", "h200"]) == 0
    argv = seen[0]
    assert argv[argv.index("-Q") + 1] == "gpu.h200"
    assert "--pool=solo" in argv


def test_every_compose_and_procfile_command_starts_a_module_that_exists():
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    commands = [s["command"] for name, s in compose["services"].items() if name in ("web", "loop", "gpu")]
    commands += [line.split(":", 1)[1] for line in (ROOT / "Procfile").read_text().splitlines() if line.strip()]
    for command in commands:
        modules = ark_modules_in(command)
        assert modules, f"no ark module in {command!r}"
        for module in modules:
            assert module_exists(module), f"{command!r} names {module}, which does not exist"


def test_ci_runs_the_test_command_of_the_readme():
    readme = (ROOT / "README.md").read_text()
    assert "scripts/test" in readme and "scripts/run" in readme
    assert "scripts/test" in (ROOT / ".ci" / "run").read_text()
