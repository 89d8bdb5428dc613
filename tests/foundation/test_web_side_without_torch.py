"""The console and the loop import, serve their URLconf and read target metadata and serving configs with
torch and triton unimportable: the web side runs on hosts without them (docs/contract.md)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = r"""
import sys
for name in ("torch", "triton"):
    sys.modules[name] = None  # any `import torch` now raises ImportError
import importlib, os, pkgutil
os.environ["DJANGO_SETTINGS_MODULE"] = "console.settings"
import django
django.setup()
from django.urls import get_resolver
get_resolver().url_patterns  # the whole URLconf, every view module it names
for package in ("console", "loop"):
    for info in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
        importlib.import_module(info.name)
from loop.models import Target
from loop.selectors import serving_axis
from loop.services.deployments import _validate
from loop.services.targets import target_contract, target_seed_source
assert target_contract(Target(name="dsa_topk"))["e2e_slot"] == "topk"
assert "def " in target_seed_source(Target(name="dsa_topk"))
assert serving_axis(Target(name="dsa_topk", axes={"n_ctx": [4096, 262144], "rows": [1, 128]})) == "n_ctx"
try:
    _validate({"schema": "ark.serving/1", "target": "dsa_topk", "hardware": "h200", "version": 1,
               "axis": "n_ctx", "routes": [], "fallback": "nowhere"})
    raise SystemExit("a serving config with a bad fallback was accepted")
except django.core.exceptions.ValidationError:
    pass
assert "torch" not in [m for m, v in sys.modules.items() if v is not None]
print("web side ok")
"""


def test_console_and_loop_import_and_work_with_torch_and_triton_blocked():
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "web side ok" in done.stdout


def test_the_probe_notices_torch():
    """The blocking works: a module that needs torch fails to import under it."""
    code = "import sys; sys.modules['torch'] = None\nimport gpu_worker.targets"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "torch" in done.stderr
