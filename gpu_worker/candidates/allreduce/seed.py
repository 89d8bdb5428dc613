"""allreduce seed (Triton): a one-shot all-reduce over peer memory.

forward(x bf16[n], comm) -> bf16[n] = sum over ranks of x, the same bits on every rank.

One kernel, every block owns the chunks start = pid*BLOCK, pid*BLOCK + grid*BLOCK, ...:
  1. copy its chunks of x into this rank's staging buffer (comm.buffer_ptrs[rank]);
  2. barrier with the same block of every rank through the signal pads (release / acquire at
     system scope; a pad slot goes 0 -> 1 -> 0, so the pads are zero again after every call and
     the kernel replays in a CUDA graph without any host-side counter);
  3. load the same chunks from every rank's buffer over NVLink, sum in f32 in rank order (so every
     rank gets the same bits), round once to bf16, store;
  4. barrier again, so that no rank's next call overwrites its buffer while a peer still reads it.
One launch, 2 x (world - 1) signals per block and one read of every peer's message: latency-bound
messages need no more. Large messages read every peer's whole message (W - 1 times what a ring
moves per GPU at W > 2; the same at W = 2), where NCCL is expected to win.

CPU (gloo, TRITON_INTERPRET=1): processes share no memory, so there is no peer memory. There the
harness's comm.stage(x) gathers every rank's x with gloo into local copies of all staging buffers
and the kernel runs with PEER_SYNC=False: it verifies steps 1 and 3 (addressing through the
buffer table, the reduction, rounding, odd sizes, masks), not the barrier, the NVLink loads or
the speed. Those need two GPUs (nvidia-h200-x2) and have not run yet.
"""
import torch
import triton
import triton.language as tl

PARAMS = {"BLOCK": 2048, "MAX_BLOCKS": 32, "num_warps": 8}
SPACE = {"BLOCK": [1024, 2048, 4096, 8192], "MAX_BLOCKS": [8, 16, 32, 64, 128], "num_warps": [4, 8, 16]}


@triton.jit
def _blockwise_barrier(pad_ptrs, block, RANK: tl.constexpr, WORLD: tl.constexpr):
    tl.debug_barrier()  # every thread's stores of this block come before the release below
    for r in tl.static_range(WORLD):
        remote = tl.load(pad_ptrs + r).to(tl.pointer_type(tl.int32))
        while tl.atomic_cas(remote + block * WORLD + RANK, 0, 1, sem="release", scope="sys") != 0:
            pass
    local = tl.load(pad_ptrs + RANK).to(tl.pointer_type(tl.int32))
    for r in tl.static_range(WORLD):
        while tl.atomic_cas(local + block * WORLD + r, 1, 0, sem="acquire", scope="sys") != 1:
            pass
    tl.debug_barrier()  # no thread of this block loads a peer's chunk before the acquire above


@triton.jit
def _one_shot_all_reduce(x_ptr, out_ptr, buffer_ptrs, pad_ptrs, n, RANK: tl.constexpr, WORLD: tl.constexpr,
                         BLOCK: tl.constexpr, PEER_SYNC: tl.constexpr):
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    own = tl.load(buffer_ptrs + RANK).to(tl.pointer_type(tl.bfloat16))
    for start in range(pid * BLOCK, n, step):
        offs = start + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(own + offs, tl.load(x_ptr + offs, mask=m, other=0.0), mask=m)
    if PEER_SYNC:
        _blockwise_barrier(pad_ptrs, pid, RANK, WORLD)
    for start in range(pid * BLOCK, n, step):
        offs = start + tl.arange(0, BLOCK)
        m = offs < n
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for r in tl.static_range(WORLD):
            peer = tl.load(buffer_ptrs + r).to(tl.pointer_type(tl.bfloat16))
            # .cv: never serve a peer's chunk from a cache line filled before the barrier
            acc += tl.load(peer + offs, mask=m, other=0.0, cache_modifier=".cv").to(tl.float32)
        tl.store(out_ptr + offs, acc.to(tl.bfloat16), mask=m)
    if PEER_SYNC:
        _blockwise_barrier(pad_ptrs, pid, RANK, WORLD)


def forward(x, comm):
    assert x.dtype == torch.bfloat16, "bf16 messages only"
    flat = x.reshape(-1)
    n = flat.numel()
    if 2 * n > comm.capacity_bytes:
        raise ValueError(f"{2 * n} bytes do not fit the {comm.capacity_bytes}-byte staging buffer")
    out = torch.empty_like(flat)
    if not comm.peer_memory:
        comm.stage(flat)  # CPU only: the harness's gloo stand-in for peer memory (see the docstring)
    block = PARAMS["BLOCK"]
    grid = max(1, min(triton.cdiv(n, block), PARAMS["MAX_BLOCKS"], comm.signal_slots // comm.world_size))
    _one_shot_all_reduce[(grid,)](flat, out, comm.buffer_ptrs, comm.signal_pad_ptrs, n, RANK=comm.rank,
                                  WORLD=comm.world_size, BLOCK=block, PEER_SYNC=comm.peer_memory,
                                  num_warps=PARAMS["num_warps"])
    return out.view(x.shape)
