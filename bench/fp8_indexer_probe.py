"""The FP8 indexer on a GPU: how far the FP8 tl.dot logits sit from the exact ones, and where the time goes.

python bench/fp8_indexer_probe.py OUT.json

1. accuracy: the best's logits kernel on every value family against the exact f64 logits of the target
   (gpu_worker/targets/dsa_indexer_topk_fp8.py): the largest |difference| / S_t, where S_t is the per-token sum
   of absolute terms that the check's band is ACC_EPS times; the band must cover it with margin.
2. time at 64 x 131072 (full rows, own pages), CUDA events, mean over 20 calls after 3 warm-ups: the logits
   kernel alone, the best, the seed at 32K chunks (the thesis "logits in 32K chunks, merged") and in one chunk,
   and the torch default.
"""
import importlib.util
import json
import sys

import torch
import triton

from gpu_worker.targets import dsa_indexer_topk_fp8 as t

ROOT = "gpu_worker/candidates/dsa_indexer_topk_fp8/"


def load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT + name + ".py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def logits_only(best, inp):
    q, cache, w, lens, bt = inp
    B, P = q.shape[0], bt.shape[1]
    out = torch.empty(B, P * 64, device=q.device)
    p = best.PARAMS
    best._fp8_logits[(B, triton.cdiv(P, p["PAGES"]))](
        q, cache.view(torch.float8_e4m3fn), cache.view(torch.float32), w, lens, bt, out, bt.stride(0), P * 64, B,
        H=64, D=128, PG=64, PAGES=p["PAGES"], BT=p["BT"], UPCAST=False, num_warps=p["num_warps"],
        num_stages=p["num_stages"])
    return out


def mean_us(fn, reps=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) * 1000 / reps


def main(path):
    best, seed = load("best"), load("seed")
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
           "acc_eps": t.ACC_EPS, "accuracy": {}, "time_us_64x131072": {}}
    for fam in t.FAMILIES:
        inp = t.make_inputs(t._shape(8, 32768, fam, "ragged"), 11, "cuda")
        lg = logits_only(best, inp)
        worst_s, worst_rel = 0.0, 0.0
        for m in range(8):
            ex, bd, _ = t.row_logits(inp, m)
            d = (lg[m, :ex.shape[0]].double() - ex).abs()
            worst_s = max(worst_s, float((d / bd.clamp(min=1e-300)).max()))
            worst_rel = max(worst_rel, float(d.max() / ex.abs().max().clamp(min=1e-300)))
        ok = t.check(best.forward(*inp), inp, t.reference(inp))
        res["accuracy"][fam] = {"max_diff_over_S": worst_s, "max_diff_over_row_max": worst_rel, "check": ok[0]}
        print(fam, res["accuracy"][fam], flush=True)
    inp = t.make_inputs(t._shape(64, 131072, "normal", "full"), 5, "cuda")
    tm = res["time_us_64x131072"]
    tm["logits_kernel"] = mean_us(lambda: logits_only(best, inp))
    tm["best"] = mean_us(lambda: best.forward(*inp))
    tm["seed_chunk_32768"] = mean_us(lambda: seed.forward(*inp))
    seed.PARAMS["CHUNK"] = 131072
    tm["seed_one_chunk_131072"] = mean_us(lambda: seed.forward(*inp))
    tm["torch_default"] = mean_us(lambda: t.baseline(*inp), reps=5)
    print(tm, flush=True)
    json.dump(res, open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
