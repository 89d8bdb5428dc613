"""A DeepSeek-V3.2-shaped decode step over a static cache, with one kernel slot served through dispatch.

Per layer: RMSNorm; lightning indexer (q from the q-LoRA latent, one shared key head, per-head
weights; logits sum_h w*relu(q.k) over the FP8 index-key cache); top-k; sparse MQA over the latent KV cache
at the selected positions; residual; RMSNorm; SwiGLU MLP; residual. Presets:
skills/models/deepseek-v3.2/e2e_presets.json.

The slot is a target (docs/harness.md, "Two slots"):
- `dsa_topk`: the model computes the logits (one Triton pass over a contiguous FP8 key cache) and the
  dispatched kernel picks the top-k positions.
- `dsa_indexer_topk_fp8`: the key cache is paged in that target's layout (132 bytes a token, 64-token pages,
  each row's pages shuffled over the pool by a block table) and the dispatched kernel is the whole indexer:
  q, the cache, the weights, the lengths and the block table in, global token ids out, which the step maps
  back to positions. The step keeps each layer's q and weights so that parity can check the ids against the
  exact logits afterwards.
"""

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from gpu_worker.e2e.quant import quantize_rows

PRESETS_PATH = (
    Path(__file__).resolve().parents[2] / "skills" / "models" / "deepseek-v3.2" / "e2e_presets.json"
)


def load_preset(name: str, path: Path | str | None = None) -> dict:
    data = json.loads(Path(path or PRESETS_PATH).read_text())
    if name not in data["presets"]:
        raise KeyError(f"no e2e preset {name!r}; have {sorted(data['presets'])}")
    return {"model": data["model"], "name": name, **data["presets"][name]}


SLOTS = ("dsa_topk", "dsa_indexer_topk_fp8")


@dataclass
class StepOutputs:
    hidden: torch.Tensor  # [B, d_model] final hidden state
    indices: torch.Tensor  # [layers, B, topk] int32, each layer's selection (positions)
    logits: torch.Tensor | None  # [layers, B, L] f32, each layer's indexer logits (slot dsa_topk)


def _index_logits_torch(q, w, k_cache, k_scale, out):
    """The indexer's math in torch (f32): the CPU path and the check for the Triton kernel."""
    s = torch.einsum("bhd,bld->blh", q.float(), k_cache.float()).clamp_min_(0)
    out.copy_(torch.einsum("blh,bh->bl", s, w) * k_scale)
    return out


class DecodeModel:
    """Weights, static caches and static buffers for B sequences at context L; `step(topk)` is one decode step."""

    def __init__(
        self,
        preset: dict,
        *,
        batch: int,
        context: int,
        device: str | torch.device,
        seed: int = 0,
        indexer: str | None = None,
        slot: str = "dsa_topk",
    ):
        if slot not in SLOTS:
            raise ValueError(f"no e2e slot {slot!r}; have {SLOTS}")
        p = preset
        self.slot = slot
        self.preset, self.batch, self.context = p, batch, context
        self.device = torch.device(device)
        self.dtype = getattr(torch, p["dtype"])
        self.index_dtype = getattr(torch, p["index_cache_dtype"])
        self.topk_k = p["index_topk"]
        self.indexer = indexer or ("triton" if self.device.type == "cuda" else "torch")
        g = torch.Generator(device="cpu").manual_seed(seed)
        d, r, f = p["d_model"], p["q_lora_rank"], p["ffn"]
        H, D = p["index_heads"], p["index_head_dim"]
        nh, c = p["attn_heads"], p["kv_lora_rank"] + p["rope_dim"]
        self.H, self.D, self.nh, self.c, self.v = H, D, nh, c, p["kv_lora_rank"]
        B, L = batch, context
        if slot == "dsa_indexer_topk_fp8":
            from gpu_worker.targets import dsa_indexer_topk_fp8 as fp8  # local: the slot's contract, torch only

            want = (fp8.HEADS, fp8.HEAD_DIM, fp8.K, torch.float8_e4m3fn)
            if (H, D, self.topk_k, self.index_dtype) != want:
                raise ValueError(f"preset {p['name']!r} does not fit the {slot} contract {want}")
            self.pages_per_row = (L + fp8.PAGE - 1) // fp8.PAGE
            # each row owns its pages, shuffled over the pool (as a server's allocator leaves them); drawn from a
            # generator of its own, so that weights and keys are the same as in the dsa_topk slot's model
            perm = torch.randperm(B * self.pages_per_row, generator=torch.Generator().manual_seed(seed + 1))
            self.block_table = perm.view(B, self.pages_per_row).to(torch.int32).to(self.device)
            # page id -> its row and the position of its first token there (ids map back to positions)
            page_start = torch.empty(B * self.pages_per_row, dtype=torch.int64)
            page_start[perm] = torch.arange(self.pages_per_row).repeat(B) * fp8.PAGE
            page_row = torch.empty(B * self.pages_per_row, dtype=torch.int64)
            page_row[perm] = torch.arange(B).repeat_interleave(self.pages_per_row)
            self.page_start, self.page_row = page_start.to(self.device), page_row.to(self.device)

        def w(*shape, fan_in):
            return self._rand(g, shape, 1.0 / math.sqrt(fan_in))

        self.layers = []
        for _ in range(p["layers"]):
            layer = {
                "norm1": 1.0 + 0.1 * self._rand(g, (d,), 1.0),
                "norm2": 1.0 + 0.1 * self._rand(g, (d,), 1.0),
                "qnorm": 1.0 + 0.1 * self._rand(g, (r,), 1.0),
                "wq_a": w(d, r, fan_in=d),
                "wq_idx": w(r, H * D, fan_in=r),
                "wk_idx": w(d, D, fan_in=d),
                "w_idx_weights": w(d, H, fan_in=d),
                "wq_b": w(r, nh * c, fan_in=r),
                "wkv_a": w(d, c, fan_in=d),
                "wo": w(nh * self.v, d, fan_in=nh * self.v),
                "w_gate": w(d, f, fan_in=d),
                "w_up": w(d, f, fan_in=d),
                "w_down": w(f, d, fan_in=f),
            }
            # static caches: random keys, FP8 index keys with per-token scales
            kc = self._rand(g, (B, L, D), 1.0)
            layer["idx_cache"], layer["idx_scale"] = quantize_rows(kc, self.index_dtype)
            del kc
            if slot == "dsa_indexer_topk_fp8":
                layer["idx_pages"] = self._paged(layer.pop("idx_cache"), layer.pop("idx_scale"))
            layer["kv_cache"] = self._rand(g, (B, L, c), 1.0)
            self.layers.append(layer)
        self.x = self._rand(g, (B, d), 1.0)
        # row b holds lengths[b] tokens, in (7L/8, L]; the new token sits at lengths[b] - 1
        spread = max(1, L // 8)
        self.lengths = (L - (torch.arange(B) * 7919) % spread).to(torch.int32).to(self.device)
        self.rows = torch.arange(B, device=self.device)
        self.new_pos = (self.lengths - 1).long()
        nl = p["layers"]
        self.indices = torch.empty((nl, B, self.topk_k), dtype=torch.int32, device=self.device)
        if slot == "dsa_topk":
            self.logits = torch.empty((nl, B, L), dtype=torch.float32, device=self.device)
            self.slot_out = self.indices  # the slot's output is the positions themselves
        else:
            self.logits = None
            self.slot_out = torch.empty((nl, B, self.topk_k), dtype=torch.int32, device=self.device)  # ids
            self.slot_q = torch.empty((nl, B, H, D), dtype=self.index_dtype, device=self.device)
            self.slot_w = torch.empty((nl, B, H), dtype=torch.float32, device=self.device)
            # where the new token's key and scale go in its page: byte offsets, fixed for the model
            t = (self.new_pos % 64)[:, None]
            self.new_page = self.block_table[self.rows, (self.new_pos // 64)].long()[:, None]
            self.new_key_bytes = t * D + torch.arange(D, device=self.device)[None, :]
            self.new_scale_bytes = 64 * D + t * 4 + torch.arange(4, device=self.device)[None, :]
        self.sm_scale = 1.0 / math.sqrt(c)
        self.w_scale = H**-0.5 * D**-0.5

    def _rand(self, g, shape, std):
        # generated on the CPU from the seed so that every device builds the same model
        if self.device.type == "cuda" and math.prod(shape) > (1 << 22):
            gd = torch.Generator(device=self.device).manual_seed(
                int(torch.randint(0, 2**62, (1,), generator=g))
            )
            return (torch.randn(shape, generator=gd, device=self.device, dtype=torch.float32) * std).to(
                self.dtype
            )
        return (torch.randn(shape, generator=g) * std).to(self.dtype).to(self.device)

    def _paged(self, keys: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
        """[B, L, D] FP8 keys and [B, L] scales -> the paged cache int8 [P, 64, 1, D + 4], row b's logical
        page j at block_table[b, j]; the tail of a row's last page holds zero keys with scale 1."""
        from gpu_worker.targets.dsa_indexer_topk_fp8 import PAGE, pack_pages  # local: the slot's contract

        B, L, D = keys.shape
        W = self.pages_per_row
        kp = torch.zeros((B, W * PAGE, D), dtype=keys.dtype, device=keys.device)
        sp = torch.ones((B, W * PAGE), dtype=torch.float32, device=keys.device)
        kp[:, :L], sp[:, :L] = keys, scales
        pages = torch.empty((B * W, PAGE, 1, D + 4), dtype=torch.int8, device=keys.device)
        pages[self.block_table.reshape(-1).long()] = pack_pages(kp.view(B * W, PAGE, D), sp.view(B * W, PAGE))
        return pages

    def _positions(self, ids: torch.Tensor) -> torch.Tensor:
        """Global token ids -> positions in their rows, -1 for padding. An id that is no token of its row (a
        wrong kernel's) becomes -1 too, so the step still runs and parity reports it by the target's check
        (an index past the cache would stop the step, on a GPU with a device-side error)."""
        gid = ids.clamp_min(0).long()
        page = (gid // 64).clamp_max(self.page_start.shape[0] - 1)
        pos = self.page_start[page] + gid % 64
        mine = (ids >= 0) & (gid // 64 < self.page_start.shape[0]) & (self.page_row[page] == self.rows[:, None])
        return torch.where(mine & (pos < self.context), pos, -1).to(torch.int32)

    def cache_bytes(self) -> int:
        keys = ("idx_pages", "kv_cache") if self.slot == "dsa_indexer_topk_fp8" else ("idx_cache", "idx_scale", "kv_cache")
        return sum(l[k].numel() * l[k].element_size() for l in self.layers for k in keys)

    def step(self, kernel) -> StepOutputs:
        """One decode step; `kernel` serves the slot: `kernel(logits, lengths, k)` for dsa_topk, `kernel(q, pages,
        weights, lengths, block_table)` for dsa_indexer_topk_fp8."""
        p, B = self.preset, self.batch
        eps = p["rms_eps"]
        x = self.x
        for i, ly in enumerate(self.layers):
            h = F.rms_norm(x, (x.shape[-1],), ly["norm1"], eps)
            qa = F.rms_norm(h @ ly["wq_a"], (ly["wq_a"].shape[1],), ly["qnorm"], eps)
            # indexer: new token's key into the cache, then logits over every cached position
            k_new, k_new_scale = quantize_rows(h @ ly["wk_idx"], self.index_dtype)
            q_idx, q_scale = quantize_rows((qa @ ly["wq_idx"]).view(B, self.H, self.D), self.index_dtype)
            w_idx = (h @ ly["w_idx_weights"]).float() * (self.w_scale * q_scale)
            if self.slot == "dsa_topk":
                ly["idx_cache"][self.rows, self.new_pos] = k_new
                ly["idx_scale"][self.rows, self.new_pos] = k_new_scale
                logits = self.logits[i]
                if self.indexer == "triton":
                    from gpu_worker.e2e.indexer import index_logits_triton  # triton only where it compiles

                    index_logits_triton(q_idx, w_idx, ly["idx_cache"], ly["idx_scale"], logits)
                else:
                    _index_logits_torch(q_idx, w_idx, ly["idx_cache"], ly["idx_scale"], logits)
                idx = kernel(logits, self.lengths, self.topk_k)
            else:
                flat = ly["idx_pages"].view(torch.uint8).view(ly["idx_pages"].shape[0], -1)
                flat[self.new_page, self.new_key_bytes] = k_new.view(torch.uint8)
                flat[self.new_page, self.new_scale_bytes] = k_new_scale.contiguous().view(torch.uint8).view(B, 4)
                self.slot_q[i].copy_(q_idx)
                self.slot_w[i].copy_(w_idx)
                ids = kernel(q_idx.contiguous(), ly["idx_pages"], w_idx.contiguous(), self.lengths, self.block_table)
                self.slot_out[i].copy_(ids)
                idx = self._positions(self.slot_out[i])
            self.indices[i].copy_(idx)
            # sparse MQA over the latent cache at the selected positions
            ly["kv_cache"][self.rows, self.new_pos] = h @ ly["wkv_a"]
            q = (qa @ ly["wq_b"]).view(B, self.nh, self.c)
            # position order: equal sets give bit-equal attention whatever order a kernel returns
            idx = torch.sort(idx, dim=-1).values
            valid = idx >= 0
            sel = ly["kv_cache"][self.rows[:, None], idx.clamp_min(0).long()]  # [B, k, c]
            scores = torch.einsum("bhc,bkc->bhk", q, sel).float() * self.sm_scale
            scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
            probs = torch.softmax(scores, dim=-1).to(self.dtype)
            attn = torch.einsum("bhk,bkv->bhv", probs, sel[..., : self.v]).reshape(B, self.nh * self.v)
            x = x + attn @ ly["wo"]
            h2 = F.rms_norm(x, (x.shape[-1],), ly["norm2"], eps)
            x = x + (F.silu(h2 @ ly["w_gate"]) * (h2 @ ly["w_up"])) @ ly["w_down"]
        return StepOutputs(x, self.indices, self.logits)
