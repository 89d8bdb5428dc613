"""The candidate kernels' CPU tests need Triton's interpreter, which must be switched on before triton is
first imported: where TRITON_INTERPRET is unset (scripts/test sets it) and no CUDA device is present, it is
set here, before pytest imports any test module of this folder."""

import os

if not os.environ.get("TRITON_INTERPRET"):
    try:
        import torch

        _interpret = not torch.cuda.is_available()
    except Exception:  # noqa: BLE001  (no usable torch: the interpreter is the only way these tests run)
        _interpret = True
    if _interpret:
        os.environ["TRITON_INTERPRET"] = "1"

if os.environ.get("TRITON_INTERPRET") == "1":
    # These tests run kernels in this process: the interpreter without its per-program repeated work, as a CPU
    # child runs it (bit-identical results). The root conftest does the same after collection, but only where a
    # collected module had imported Triton already, which these do only when a test loads a kernel: a run of
    # this folder alone took about twice as long (docs/conventions.md, "Tests").
    from gpu_worker.pipeline import interpreter_fix

    interpreter_fix.install_speedups()
