"""A DeepSeek-V3.2-shaped decode step over a static cache, with top-k through dispatch.

Per layer: RMSNorm; lightning indexer (q from the q-LoRA latent, one shared key head, per-head
weights; logits sum_h w*relu(q.k) over the FP8 index-key cache); top-k via the kernel the
dispatcher routes for n_ctx; sparse MQA over the latent KV cache at the selected positions;
residual; RMSNorm; SwiGLU MLP; residual. Presets: skills/models/deepseek-v3.2/e2e_presets.json.
"""

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

PRESETS_PATH = (
    Path(__file__).resolve().parents[2] / "skills" / "models" / "deepseek-v3.2" / "e2e_presets.json"
)
FP8_MAX = 448.0


def load_preset(name: str, path: Path | str | None = None) -> dict:
    data = json.loads(Path(path or PRESETS_PATH).read_text())
    if name not in data["presets"]:
        raise KeyError(f"no e2e preset {name!r}; have {sorted(data['presets'])}")
    return {"model": data["model"], "name": name, **data["presets"][name]}


@dataclass
class StepOutputs:
    hidden: torch.Tensor  # [B, d_model] final hidden state
    indices: torch.Tensor  # [layers, B, topk] int32, each layer's selection
    logits: torch.Tensor  # [layers, B, L] f32, each layer's indexer logits


def _quantize_rows(x: torch.Tensor, dtype: torch.dtype):
    """Per-row symmetric quantisation to FP8 (scale = amax/448); bf16 passes through with scale 1."""
    if dtype == torch.bfloat16:
        return x.to(dtype), torch.ones(x.shape[:-1], dtype=torch.float32, device=x.device)
    scale = x.float().abs().amax(-1).clamp_min(1e-4) / FP8_MAX
    return (x.float() / scale[..., None]).to(dtype), scale


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
    ):
        p = preset
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
            layer["idx_cache"], layer["idx_scale"] = _quantize_rows(kc, self.index_dtype)
            del kc
            layer["kv_cache"] = self._rand(g, (B, L, c), 1.0)
            self.layers.append(layer)
        self.x = self._rand(g, (B, d), 1.0)
        # row b holds lengths[b] tokens, in (7L/8, L]; the new token sits at lengths[b] - 1
        spread = max(1, L // 8)
        self.lengths = (L - (torch.arange(B) * 7919) % spread).to(torch.int32).to(self.device)
        self.rows = torch.arange(B, device=self.device)
        self.new_pos = (self.lengths - 1).long()
        nl = p["layers"]
        self.logits = torch.empty((nl, B, L), dtype=torch.float32, device=self.device)
        self.indices = torch.empty((nl, B, self.topk_k), dtype=torch.int32, device=self.device)
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

    def cache_bytes(self) -> int:
        return sum(
            t.numel() * t.element_size()
            for l in self.layers
            for t in (l["idx_cache"], l["idx_scale"], l["kv_cache"])
        )

    def step(self, topk) -> StepOutputs:
        """One decode step; `topk(logits, lengths, k)` is the dispatched top-k."""
        p, B = self.preset, self.batch
        eps = p["rms_eps"]
        x = self.x
        for i, ly in enumerate(self.layers):
            h = F.rms_norm(x, (x.shape[-1],), ly["norm1"], eps)
            qa = F.rms_norm(h @ ly["wq_a"], (ly["wq_a"].shape[1],), ly["qnorm"], eps)
            # indexer: new token's key into the cache, then logits over every cached position
            k_new, k_new_scale = _quantize_rows(h @ ly["wk_idx"], self.index_dtype)
            ly["idx_cache"][self.rows, self.new_pos] = k_new
            ly["idx_scale"][self.rows, self.new_pos] = k_new_scale
            q_idx, q_scale = _quantize_rows((qa @ ly["wq_idx"]).view(B, self.H, self.D), self.index_dtype)
            w_idx = (h @ ly["w_idx_weights"]).float() * (self.w_scale * q_scale)
            logits = self.logits[i]
            if self.indexer == "triton":
                from gpu_worker.e2e.indexer import index_logits_triton  # triton only where it compiles

                index_logits_triton(q_idx, w_idx, ly["idx_cache"], ly["idx_scale"], logits)
            else:
                _index_logits_torch(q_idx, w_idx, ly["idx_cache"], ly["idx_scale"], logits)
            idx = topk(logits, self.lengths, self.topk_k)
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
