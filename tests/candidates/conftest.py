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
