"""The communicator a multi-process candidate receives as its last argument (`comm`).

Harness-owned; a candidate reads its attributes and launches its own kernels:

    rank, world_size, group (the process group: for the default kernel only; a candidate may not
    import torch.distributed, the guard refuses it)
    peer_memory      True on CUDA: buffer_ptrs are peer-mapped symmetric memory
    buffer_ptrs      int64 tensor [world_size] on the device: address of each rank's staging
                     buffer (capacity_bytes each)
    signal_pad_ptrs  int64 tensor [world_size]: address of each rank's signal pad (int32 slots,
                     zero between uses), for a barrier inside the kernel
    signal_slots     int32 slots per signal pad
    capacity_bytes   size of each staging buffer
    stage(x)         CPU only (see below)

CUDA: the buffers and signal pads come from torch.distributed._symmetric_memory (rendezvous over
the process group); rank r's kernel may load and store any rank's buffer directly over NVLink.
Multicast is off (env.py), so there is no multimem pointer.

CPU (gloo): processes share no memory, so there is no peer memory. `stage(x)` is the harness
standing in for the interconnect: it gathers every rank's x with gloo and writes them into local
copies of every rank's buffer, so that the same kernel reading through buffer_ptrs computes the
same sum as on CUDA. What a CPU run verifies is the kernel's reduction, addressing and output; the
peer loads, the signal-pad barrier and the timing are verified on GPUs only.
"""

from __future__ import annotations

import torch

try:  # the harness steps outside the candidate's op recorder while it communicates
    from torch.utils._python_dispatch import _disable_current_modes
except ImportError:  # pragma: no cover
    from contextlib import nullcontext as _disable_current_modes

POISON_BITS = 0x7FC1  # a bf16 NaN pattern written into staging buffers before every call


class Comm:
    def __init__(self, *, rank: int, world_size: int, group, device: str, capacity_bytes: int):
        self.rank, self.world_size, self.group = rank, world_size, group
        self.device = device
        self.capacity_bytes = int(capacity_bytes)
        self.peer_memory = device == "cuda"
        self._handle = None
        if self.peer_memory:
            # local: symmetric memory exists only in CUDA builds of torch; a CPU rank never loads it
            import torch.distributed._symmetric_memory as symm_mem

            device = torch.device("cuda", torch.cuda.current_device())
            buf = symm_mem.empty(self.capacity_bytes // 2, dtype=torch.bfloat16, device=device)
            if hasattr(symm_mem, "enable_symm_mem_for_group"):  # required by older torch, harmless after
                symm_mem.enable_symm_mem_for_group(group.group_name)
            self._handle = symm_mem.rendezvous(buf, group)
            self._local = buf
            self.buffer_ptrs = torch.tensor(self._handle.buffer_ptrs, dtype=torch.int64, device=buf.device)
            self.signal_pad_ptrs = torch.tensor(self._handle.signal_pad_ptrs, dtype=torch.int64, device=buf.device)
            self.signal_slots = symm_mem.get_signal_pad_size() // 4
        else:
            self._buffers = torch.empty(world_size, self.capacity_bytes // 2, dtype=torch.bfloat16)
            self._local = self._buffers[rank]
            # local, unshared pads: a CPU run never synchronises through them
            self._pads = torch.zeros(world_size, 64, dtype=torch.int32)
            self.buffer_ptrs = torch.tensor([self._buffers[r].data_ptr() for r in range(world_size)], dtype=torch.int64)
            self.signal_pad_ptrs = torch.tensor([self._pads[r].data_ptr() for r in range(world_size)], dtype=torch.int64)
            self.signal_slots = 64

    def poison(self) -> None:
        """NaN into this rank's staging buffer (on CPU: every local copy) before a call, so a
        candidate that reads a buffer nobody wrote this call returns NaN."""
        with _disable_current_modes():
            target = self._local if self.peer_memory else self._buffers
            target.view(torch.int16).fill_(POISON_BITS)

    def stage(self, x: torch.Tensor) -> None:
        """CPU only: every rank's x into the local copies of every rank's staging buffer (gloo)."""
        if self.peer_memory:
            raise RuntimeError("comm.stage is the CPU stand-in for peer memory; on CUDA a kernel writes its own "
                               "buffer and synchronises through the signal pads")
        with _disable_current_modes():
            # local: imported inside the harness's own mode guard, out of the candidate's dispatch modes
            import torch.distributed as dist

            flat = x.detach().reshape(-1).contiguous()
            if flat.numel() * 2 > self.capacity_bytes or flat.dtype != torch.bfloat16:
                raise ValueError(f"stage: {flat.dtype} x {flat.numel()} does not fit a {self.capacity_bytes}-byte bf16 buffer")
            parts = [torch.empty_like(flat) for _ in range(self.world_size)]
            dist.all_gather(parts, flat, group=self.group)
            for r, part in enumerate(parts):
                self._buffers[r, : part.numel()].copy_(part)

    def overlaps(self, t: torch.Tensor) -> bool:
        """Does `t` share memory with a staging buffer (an output must not)?"""
        if type(t) is not torch.Tensor or not t.numel():
            return False
        s = t.untyped_storage()
        a0, a1 = s.data_ptr(), s.data_ptr() + s.nbytes()
        spans = ([(self._local.data_ptr(), self._local.data_ptr() + self.capacity_bytes)] if self.peer_memory else
                 [(self._buffers.data_ptr(), self._buffers.data_ptr() + self._buffers.numel() * 2)])
        return any(a0 < b1 and b0 < a1 for b0, b1 in spans)
