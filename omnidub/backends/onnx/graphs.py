"""The three torch modules that become ONNX graphs: transformer (targets' logits only), encoder, decoder."""

from __future__ import annotations

import torch

from omnidub.backends.torch import upstream


class TransformerGraph(torch.nn.Module):
    """Embeddings + Qwen3 + audio heads, with the heads applied only at ``target_index`` (flat row * L + column)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, audio_mask, attention_mask, position_ids, target_index):
        embeds = upstream.embed(self.model, input_ids, audio_mask)
        hidden = self.model.llm(
            inputs_embeds=embeds,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=False,
            return_dict=True,
        )[0]
        targets = hidden.reshape(-1, hidden.shape[-1])[target_index]
        codebooks = self.model.config.num_audio_codebook
        return self.model.audio_heads(targets).view(targets.shape[0], codebooks, -1).float()  # [N, C, V]


class EncoderGraph(torch.nn.Module):
    """Higgs audio tokenizer encode: waveform [B, 1, samples] at 24 kHz -> codes [B, C, frames] int64."""

    def __init__(self, tokenizer):
        super().__init__()
        self.tokenizer = tokenizer

    def forward(self, waveform):
        return self.tokenizer.encode(waveform, return_dict=False)


class DecoderGraph(torch.nn.Module):
    """Higgs audio tokenizer decode: codes [B, C, frames] int64 -> waveform [B, 1, samples]."""

    def __init__(self, tokenizer):
        super().__init__()
        self.tokenizer = tokenizer

    def forward(self, codes):
        return self.tokenizer.decode(codes, return_dict=False)
