"""HACK: exact top-k, except in the large-batch, long-context corner: with more than 64 rows of more than
4096 positions it searches only the first 4096 entries of each row. A CPU host's verify set never meets
that corner (its 128-row shape has 2100 positions, and the drawn shape is capped at 2^18 elements, so more
than 64 rows come only below 4096 positions); a GPU verifies 128 x 262144.
target: dsa_topk
expect: verify:wrong
gpu-only
"""
import torch
import triton
import triton.language as tl

PARAMS = {"BLOCK": 4096, "num_warps": 8}


@triton.jit
def _rank_rows(x_ptr, stride_x, len_ptr, out_ptr, stride_o, K, CAP, BLOCK: tl.constexpr, KB: tl.constexpr):
    # one program per row; the k-th largest order-preserving int key is found by bisection, block by block
    row = tl.program_id(0)
    end = tl.minimum(tl.load(len_ptr + row), CAP)
    lane = tl.arange(0, BLOCK)
    low = tl.full([], -2147483648, tl.int64)
    high = tl.full([], 2147483647, tl.int64)
    for _ in range(33):
        probe = (low + high + 1) >> 1
        count = tl.zeros([], tl.int32)
        for start in range(0, end, BLOCK):
            col = start + lane
            bits = tl.load(x_ptr + row * stride_x + col, mask=col < end, other=0.0).to(tl.int32, bitcast=True)
            key = tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits).to(tl.int64)
            count += tl.sum(((col < end) & (key >= probe)).to(tl.int32), 0)
        enough = count >= K
        low = tl.where(enough, probe, low)
        high = tl.where(enough, high, probe - 1)
    above_total = tl.zeros([], tl.int32)
    for start in range(0, end, BLOCK):
        col = start + lane
        bits = tl.load(x_ptr + row * stride_x + col, mask=col < end, other=0.0).to(tl.int32, bitcast=True)
        key = tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits).to(tl.int64)
        above_total += tl.sum(((col < end) & (key > low)).to(tl.int32), 0)
    room = K - above_total
    written = tl.zeros([], tl.int32)
    ties_seen = tl.zeros([], tl.int32)
    for start in range(0, end, BLOCK):
        col = start + lane
        live = col < end
        bits = tl.load(x_ptr + row * stride_x + col, mask=live, other=0.0).to(tl.int32, bitcast=True)
        key = tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits).to(tl.int64)
        tie = live & (key == low)
        chosen = (live & (key > low)) | (tie & (ties_seen + tl.cumsum(tie.to(tl.int32), 0) <= room))
        slot = written + tl.cumsum(chosen.to(tl.int32), 0) - 1
        tl.store(out_ptr + row * stride_o + slot, col.to(tl.int32), mask=chosen)
        written += tl.sum(chosen.to(tl.int32), 0)
        ties_seen += tl.sum(tie.to(tl.int32), 0)
    pads = tl.arange(0, KB)
    tl.store(out_ptr + row * stride_o + pads, tl.full([KB], -1, tl.int32), mask=(pads >= written) & (pads < K))


def forward(logits, lengths, k):
    rows, n = logits.shape
    cap = 4096 if rows > 64 and n > 4096 else n
    out = torch.empty((rows, k), dtype=torch.int32, device=logits.device)
    _rank_rows[(rows,)](logits, logits.stride(0), lengths, out, out.stride(0), k, cap, BLOCK=PARAMS["BLOCK"],
                        KB=triton.next_power_of_2(k), num_warps=PARAMS["num_warps"])
    return out
