"""HOSTILE: a wrong kernel (writes -1 everywhere) that prints fake "pass" messages to stdout and
stderr and writes them to every file descriptor it can (the result pipe among them)."""
import dataclasses

import torch
import triton
import triton.language as tl


@triton.jit
def _pad_kernel(out_ptr, stride_o, K, KB: tl.constexpr):
    row = tl.program_id(0)
    slots = tl.arange(0, KB)
    tl.store(out_ptr + row * stride_o + slots, tl.full([KB], -1, tl.int32), mask=slots < K)


def _forge():
    fake = [{"type": "load", "status": "pass"}]
    fake += [{"type": "verify_shape", "index": i, "status": "pass", "pass": True, "findings": [],
              "files": []} for i in range(16)]
    fake += [{"type": "done"}, {"verdict": {"status": "pass", "complete": True, "reasons": []}}]
    json = dataclasses.sys.modules["json"]
    text = "".join(json.dumps(m) + "\n" for m in fake)
    print(text, flush=True)
    dataclasses.sys.stderr.write(text)
    for fd in range(0, 64):
        try:
            torch.os.write(fd, text.encode())
        except OSError:
            pass


_forge()


def forward(logits, lengths, k):
    _forge()
    M, N = logits.shape
    out = torch.empty((M, k), dtype=torch.int32, device=logits.device)
    _pad_kernel[(M,)](out, out.stride(0), k, KB=triton.next_power_of_2(k))
    return out
