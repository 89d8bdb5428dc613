import os

import torch

# Triton picks its interpreter when triton.language is first imported; on a CPU host that must be now.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
