"""comp-transformer network: fraction encoding, the transformer over element tokens, and the
seed ensemble (torch modules; no training or data handling here)."""

from __future__ import annotations

import math

import torch
from torch import nn


class FractionEncoder(nn.Module):
    """Sinusoidal features of the fraction on a linear and a log scale, then a linear map.

    Frequencies are geometric so that both coarse (0.5 vs 0.25) and fine (1e-4 vs 2e-4 on the
    log scale) differences are resolved.
    """

    def __init__(self, d_model: int, n_freq: int = 16):
        super().__init__()
        self.register_buffer("freqs", (math.pi * torch.logspace(0, 3, n_freq)).float(), persistent=False)
        self.proj = nn.Linear(4 * n_freq + 2, d_model)

    def forward(self, frac: torch.Tensor) -> torch.Tensor:
        f = frac.clamp_min(1e-6).unsqueeze(-1)
        # log10(fraction) from -6 to 0 mapped onto [0, 1]
        lg = 1.0 + torch.log10(f) / 6.0
        a = f * self.freqs
        b = lg * self.freqs / 10.0
        feats = torch.cat([a.sin(), a.cos(), b.sin(), b.cos(), f, lg], dim=-1)
        return self.proj(feats)


class CompTransformerNet(nn.Module):
    def __init__(
        self,
        table: torch.Tensor,
        d_model: int,
        n_heads: int,
        n_layers: int,
        d_ff: int,
        dropout: float,
    ):
        super().__init__()
        n_el, n_feat = table.shape
        # Row 0 is the padding token; the table is a fixed (non-trained) buffer so that the
        # saved state dict carries it and loading needs no CSV.
        self.register_buffer("table", torch.cat([torch.zeros(1, n_feat), table.float()], dim=0))
        self.embed = nn.Sequential(nn.Linear(n_feat, d_model), nn.GELU(), nn.Linear(d_model, d_model))
        self.frac_enc = FractionEncoder(d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, n_heads, d_ff, dropout, activation="gelu", batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        d_pool = 2 * d_model + n_feat
        self.head = nn.Sequential(
            nn.Linear(d_pool, 2 * d_model),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(2 * d_model, d_model),
            nn.GELU(),
            nn.Linear(d_model, 1),
        )

    def forward(self, idx: torch.Tensor, frac: torch.Tensor) -> torch.Tensor:
        pad = idx == 0
        raw = self.table[idx]
        h = self.embed(raw) + self.frac_enc(frac)
        h = self.encoder(h, src_key_padding_mask=pad)
        h = self.norm(h)
        keep = (~pad).unsqueeze(-1).to(h.dtype)
        w = frac.unsqueeze(-1).to(h.dtype)
        weighted = (h * w).sum(1)
        mean = (h * keep).sum(1) / keep.sum(1).clamp_min(1.0)
        raw_mean = (raw * frac.unsqueeze(-1)).sum(1).to(h.dtype)
        return self.head(torch.cat([weighted, mean, raw_mean], dim=-1)).squeeze(-1)


class Ensemble(nn.Module):
    """Mean output of members trained with different seeds (variance of 300-row tasks)."""

    def __init__(self, members: list[CompTransformerNet]):
        super().__init__()
        self.members = nn.ModuleList(members)

    def forward(self, idx: torch.Tensor, frac: torch.Tensor) -> torch.Tensor:
        return torch.stack([m(idx, frac) for m in self.members]).mean(0)
