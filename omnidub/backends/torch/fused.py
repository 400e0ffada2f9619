"""Fused projections for OmniVoice's Qwen3 language model: Q, K and V as one GEMM, gate and up as one GEMM.

Fewer, larger matmuls keep a CPU's (or GPU's) matrix units busier than three or two small ones. The fused
weights are concatenated once; the upstream projections' weights become views into them, so no memory is
duplicated and upstream's own ``generate`` keeps working, bit for bit, on the same model.

On a CPU the four GEMMs of a layer can run in oneDNN with its weights laid out once in oneDNN's own blocked
format (``gemm="onednn"``) instead of torch's default (MKL for float32, oneDNN with a reorder per call for
bfloat16): float32 at float32's rounding, bfloat16 bit for bit (see gemm.py). Which one is faster depends on
the CPU, so it is measured on first use (backends/torch/probe.py).

Upstream and transformers pieces this reaches (pinned by omnivoice>=0.2.1,<0.3 and transformers>=5):
the decoder layers' submodules (``self_attn.{q,k,v,o}_proj``, ``q_norm``, ``k_norm``, ``mlp.{gate,up,down}_proj``,
``mlp.act_fn``, the two RMS norms), ``llm.rotary_emb``, ``llm.norm``, ``modeling_qwen3.apply_rotary_pos_emb`` and
transformers' ``ALL_ATTENTION_FUNCTIONS`` (the attention kernel the model was loaded with). Upstream source is
never edited.
"""

from __future__ import annotations

import weakref

import torch
from torch import nn

from omnidub.backends.torch.gemm import linear

# One fused language model per upstream one and GEMM kind: backends sharing a resident model share it too.
_FUSED: "weakref.WeakKeyDictionary[nn.Module, dict[str, FusedLM]]" = weakref.WeakKeyDictionary()


def fused_llm(llm: nn.Module, gemm: str = "aten") -> nn.Module:
    """The fused twin of ``llm`` (made once per model and GEMM kind), or ``llm`` itself where its layout is not
    Qwen3's. ``gemm`` is "aten" (torch's own linear) or "onednn" (weights packed once for oneDNN, CPU only)."""
    if not can_fuse(llm):
        return llm
    twins = _FUSED.setdefault(llm, {})
    if gemm not in twins:
        twins[gemm] = FusedLM(llm, gemm)
    return twins[gemm]


def can_fuse(llm: nn.Module) -> bool:
    """True for a Qwen3-style decoder whose every layer is full attention (OmniVoice's language model)."""
    layers = getattr(llm, "layers", None)
    config = getattr(llm, "config", None)
    if layers is None or config is None or not hasattr(llm, "rotary_emb") or not hasattr(llm, "norm"):
        return False
    if any(kind != "full_attention" for kind in getattr(config, "layer_types", None) or ["full_attention"]):
        return False
    needed = ("q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm")
    return all(
        all(hasattr(layer.self_attn, name) for name in needed) and hasattr(layer.mlp, "gate_proj") for layer in layers
    )


class FusedLM(nn.Module):
    """The language model's forward with fused projections: hidden states in, last hidden states out."""

    takes_segments = True  # a joined row's Segments in place of a mask (layout.py)

    def __init__(self, llm: nn.Module, gemm: str = "aten"):
        super().__init__()
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
        from transformers.models.qwen3.modeling_qwen3 import eager_attention_forward

        self.config = llm.config
        self.rotary_emb = llm.rotary_emb
        self.norm = llm.norm
        attention = ALL_ATTENTION_FUNCTIONS.get_interface(llm.config._attn_implementation, eager_attention_forward)
        self.gemm = gemm
        self.layers = nn.ModuleList(
            _FusedLayer(layer, attention, gemm) for layer in llm.layers[: llm.config.num_hidden_layers]
        )

    def forward(
        self,
        inputs_embeds: torch.Tensor,
        attention_mask=None,
        position_ids: torch.Tensor | None = None,
        prefix: "KeysValues | None" = None,
        **_ignored,
    ) -> tuple[torch.Tensor]:
        """Same contract as the upstream model called with ``inputs_embeds``: returns ``(last_hidden_state,)``.

        ``attention_mask`` is a bool [R, 1, L, L] mask, or None (or transformers' ``{"full_attention": None}``)
        where every position may attend to every other, or a joined row's ``Segments`` (one row: each
        segment attends only to itself). ``prefix`` keeps every layer's keys and values (the prefix cache)."""
        if isinstance(attention_mask, dict):
            attention_mask = attention_mask.get("full_attention")
        if position_ids is None:
            position_ids = torch.arange(inputs_embeds.shape[1], device=inputs_embeds.device)[None]
        hidden = inputs_embeds
        position = self.rotary_emb(hidden, position_ids)
        for index, layer in enumerate(self.layers):
            hidden = layer(hidden, attention_mask, position, prefix, index)
        return (self.norm(hidden),)


class KeysValues:
    """Every layer's keys and values [R, kv heads, L, d] over one forward's whole rows, for the prefix cache.

    A full pass (``kept`` None) computes every column and keeps what it computed. A cached pass computes only the
    ``kept`` columns [R, K] of each row (the targets): their fresh keys and values are written over the kept ones
    and its queries attend over all of them, so the prefix columns' keys and values are those of the last full
    pass. With ``scratch`` the kept tensors have one more column that no real query attends to: rows with fewer
    kept columns than others point their padding there."""

    def __init__(self, scratch: bool = False):
        self.scratch = scratch
        self.kept: torch.Tensor | None = None
        self.layers: list[tuple[torch.Tensor, torch.Tensor]] = []

    def update(self, index: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The keys and values layer ``index`` attends over in this pass."""
        if self.kept is None:
            # v is a view of the QKV GEMM's output (one of split's views, which torch keeps from in-place writes).
            kept = (k, v.clone())
            if self.scratch:
                kept = tuple(torch.cat((t, t.new_zeros(*t.shape[:2], 1, t.shape[3])), dim=2) for t in kept)
            if index < len(self.layers):
                self.layers[index] = kept
            else:
                self.layers.append(kept)
            return k, v
        full_k, full_v = self.layers[index]
        where = self.kept[:, None, :, None].expand(-1, k.shape[1], -1, k.shape[3])
        full_k.scatter_(2, where, k)
        full_v.scatter_(2, where, v)
        return full_k, full_v


class _FusedLayer(nn.Module):
    """One Qwen3 decoder layer, computed as upstream's but with one QKV GEMM and one gate+up GEMM."""

    def __init__(self, layer: nn.Module, attention, gemm: str = "aten"):
        super().__init__()
        from transformers.models.qwen3.modeling_qwen3 import apply_rotary_pos_emb

        attn, mlp = layer.self_attn, layer.mlp
        self.attn = attn  # kept for the attention kernel's needs (num_key_value_groups, config, training)
        self.input_layernorm = layer.input_layernorm
        self.post_attention_layernorm = layer.post_attention_layernorm
        self.q_norm, self.k_norm = attn.q_norm, attn.k_norm
        self.act_fn = mlp.act_fn
        self.head_dim = attn.head_dim
        self.scaling = attn.scaling
        self.split_qkv = (attn.q_proj.out_features, attn.k_proj.out_features, attn.v_proj.out_features)
        self.inner = mlp.gate_proj.out_features
        # Buffers, not parameters: nothing trains them, and torch.compile treats them as the module's own.
        qkv = _fuse(attn.q_proj, attn.k_proj, attn.v_proj)
        gate_up = _fuse(mlp.gate_proj, mlp.up_proj)
        self.qkv, self.gate_up = linear(*qkv, gemm), linear(*gate_up, gemm)
        self.o_proj = linear(attn.o_proj.weight.detach(), _bias(attn.o_proj), gemm)
        self.down_proj = linear(mlp.down_proj.weight.detach(), _bias(mlp.down_proj), gemm)
        self._attention = attention
        self._rotary = apply_rotary_pos_emb

    def forward(self, hidden: torch.Tensor, mask, position, prefix=None, index: int = 0) -> torch.Tensor:
        residual = hidden
        x = self.input_layernorm(hidden)
        shape = (*x.shape[:-1], -1, self.head_dim)
        q, k, v = self.qkv(x).split(self.split_qkv, dim=-1)
        q = self.q_norm(q.view(shape)).transpose(1, 2)
        k = self.k_norm(k.view(shape)).transpose(1, 2)
        v = v.reshape(shape).transpose(1, 2)
        cos, sin = position
        q, k = self._rotary(q, k, cos, sin)
        if prefix is not None:
            k, v = prefix.update(index, k, v)
        out = self._attend(q, k, v, mask)
        hidden = residual + self.o_proj(out.reshape(*x.shape[:-1], -1).contiguous())

        residual = hidden
        x = self.post_attention_layernorm(hidden)
        gate, up = self.gate_up(x).split(self.inner, dim=-1)
        return residual + self.down_proj(self.act_fn(gate) * up)

    def _attend(self, q, k, v, mask) -> torch.Tensor:
        """Attention over [R, heads, L, d] queries, keys and values: [R, L, heads, d]. OmniVoice's attention is
        bidirectional: never causal, with or without a mask. A joined row attends segment by segment: a segment
        is (start, length) of its queries and keys, or (query start, query length, key start, key length) where
        the queries are fewer than the keys (a cached pass)."""
        if not isinstance(mask, tuple):
            return self._attention(self.attn, q, k, v, mask, dropout=0.0, scaling=self.scaling, is_causal=False)[0]
        parts = [
            self._attention(
                self.attn,
                q[:, :, qs : qs + qn],
                k[:, :, ks : ks + kn],
                v[:, :, ks : ks + kn],
                None,
                dropout=0.0,
                scaling=self.scaling,
                is_causal=False,
            )[0]
            for qs, qn, ks, kn in (seg if len(seg) == 4 else (*seg, *seg) for seg in mask)
        ]
        return torch.cat(parts, dim=1)


def _fuse(*linears: nn.Linear) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One weight (and bias) stacking the linears' outputs; each linear's own weight becomes a view into it."""
    weight = torch.cat([m.weight.detach() for m in linears])
    bias = torch.cat([m.bias.detach() for m in linears]) if linears[0].bias is not None else None
    start = 0
    for m in linears:
        end = start + m.out_features
        # Views, not copies: upstream's unfused path reads the same numbers from the same memory.
        m.weight.data = weight[start:end]
        if bias is not None:
            m.bias.data = bias[start:end]
        start = end
    return weight, bias


def _bias(module: nn.Linear) -> torch.Tensor | None:
    return module.bias.detach() if module.bias is not None else None
