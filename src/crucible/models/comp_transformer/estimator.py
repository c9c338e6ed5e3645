"""``comp-transformer``: the estimator (fit protocol, inference, persistence).

Inputs are built by :mod:`.encoding`, the network is in :mod:`.network`, one network's
training loop in :mod:`.training`.
The model: fraction-aware self-attention over the elements of a composition.

Our own implementation of the idea behind CrabNet/Roost-style models (no peer code copied):

* each element of a formula becomes a token: its row of a real element-embedding table
  (mat2vec by default, Magpie optionally; columns standardised over the table) projected to
  ``d_model``, plus a learned projection of a sinusoidal encoding of the element's molar
  fraction on a linear and on a log scale, so the network can tell 0.001 Mo from 0.1 Mo;
* a pre-norm transformer encoder lets the elements attend to each other (padding masked);
* the tokens are pooled twice (fraction-weighted sum and plain mean), concatenated with the
  fraction-weighted mean of the raw table rows (a Magpie-"mean"-like shortcut that helps the
  smallest tasks), and an MLP head gives one output: a scaled regression target (L1 loss,
  since Matbench scores MAE) or a logit (binary cross-entropy).

Training follows the fold protocol: ``fit(X, y, X_val, y_val)`` trains on the fold's training
rows, keeps the weights of the epoch with the best inner-validation score and stops after
``patience`` epochs without improvement. With ``refit=True`` it then retrains from scratch on
train+validation rows for the best epoch count (the validation rows only pick the length),
averaging the weights over the last ``swa_frac`` of those epochs (stochastic weight averaging
on the low-LR tail of the cosine schedule; no BatchNorm, so nothing to re-estimate).
``n_models > 1`` trains that many final networks with different seeds and averages them
(default: 5 below 300 training rows, 3 below 600, else 1).
Test rows are never seen before ``predict``.

Device: ``device="auto"`` picks CUDA when available, else CPU; the choice is recorded in
``device_`` and ``fit_info_``. On CUDA, autocast uses bfloat16 where the GPU supports it and
float16 with a gradient scaler otherwise; on CPU everything is float32, seeded and
deterministic (same seed, same thread count -> identical predictions).

Persistence: ``save(directory)`` writes ``weights.pt`` (a tensor-only state dict, read back
with ``weights_only=True``) and ``model.json`` (parameters, scaling, element list, fit info);
``load(directory)`` rebuilds the estimator without the CSV or retraining.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from crucible.core.errors import ConfigError, DataValidationError
from crucible.models.comp_transformer.encoding import _as_series, _Encoded, encode_formulas, load_element_table
from crucible.models.comp_transformer.network import CompTransformerNet, Ensemble
from crucible.models.comp_transformer.training import train_network

log = logging.getLogger(__name__)

FORMAT_VERSION = 1


def _pick_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("comp-transformer: device='cuda' requested but CUDA is not available")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise ConfigError(f"comp-transformer: device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    return torch.device(device)


class CompTransformer(BaseEstimator):
    """Scikit-learn estimator over formula strings; see the module docstring."""

    def __init__(
        self,
        task_type: str = "regression",
        element_table: str = "mat2vec",
        epochs: int | None = None,
        batch_size: int | None = None,
        lr: float = 1e-3,
        weight_decay: float = 1e-2,
        d_model: int = 128,
        n_heads: int = 4,
        n_layers: int = 3,
        d_ff: int = 256,
        dropout: float = 0.1,
        patience: int | None = None,
        warmup: float = 0.05,
        target_scaling: str = "robust",
        refit: bool = True,
        n_models: int | None = None,
        val_smoothing: int = 1,
        swa_frac: float = 0.2,
        amp: bool = True,
        inference_batch_size: int = 4096,
        num_threads: int | None = None,
        random_state: int = 0,
        device: str = "auto",
    ):
        self.task_type = task_type
        self.element_table = element_table
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_layers = n_layers
        self.d_ff = d_ff
        self.dropout = dropout
        self.patience = patience
        self.warmup = warmup
        self.target_scaling = target_scaling
        self.refit = refit
        self.n_models = n_models
        self.val_smoothing = val_smoothing
        self.swa_frac = swa_frac
        self.amp = amp
        self.inference_batch_size = inference_batch_size
        self.num_threads = num_threads
        self.random_state = random_state
        self.device = device

    # -- helpers ---------------------------------------------------------------------

    @property
    def _is_clf(self) -> bool:
        return self.task_type == "classification"

    def _check_params(self) -> None:
        if self.task_type not in ("regression", "classification"):
            raise ConfigError(f"comp-transformer: unknown task_type {self.task_type!r}")
        if self.d_model % self.n_heads:
            raise ConfigError(f"comp-transformer: d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.target_scaling not in ("robust", "standard", "none"):
            raise ConfigError(
                f"comp-transformer: target_scaling must be robust, standard or none, not {self.target_scaling!r}"
            )

    def _targets(self, y: Any, what: str) -> np.ndarray:
        arr = np.asarray(y)
        if self._is_clf:
            if arr.dtype != bool and not np.isin(arr, [0, 1]).all():
                raise DataValidationError(f"comp-transformer: {what} must be boolean for classification")
            return arr.astype(np.float32)
        arr = arr.astype(np.float64)
        if not np.isfinite(arr).all():
            raise DataValidationError(
                f"comp-transformer: {what} has non-finite values at rows {np.flatnonzero(~np.isfinite(arr))[:5].tolist()}"
            )
        return arr

    def _amp_dtype(self, device: torch.device) -> torch.dtype | None:
        if not self.amp or device.type != "cuda":
            return None
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16

    def _schedule(self, n_train: int) -> tuple[int, int]:
        # None: long cosine schedules where an epoch is a handful of steps (< 1000 rows),
        # 100 epochs / patience 20 from dielectric (~2.9k rows) upwards, where each epoch costs.
        small = n_train < 1000
        epochs = self.epochs if self.epochs is not None else (300 if small else 100)
        patience = self.patience if self.patience is not None else (40 if small else 20)
        return int(epochs), int(patience)

    def _n_models(self, n_train: int) -> int:
        # None: seed ensembles where variance dominates and training costs seconds
        # (steels 5, jdft2d 3), a single network from phonons (~760 rows) upwards.
        if self.n_models is None:
            return 5 if n_train < 300 else 3 if n_train < 600 else 1
        return max(1, int(self.n_models))

    def _batch_size(self, n_train: int) -> int:
        # None: small batches (many updates) for the 300-row tasks, larger ones for 100k rows
        if self.batch_size is None:
            return int(np.clip(n_train // 64, 32, 256))
        return int(self.batch_size)

    def _build(self, table: torch.Tensor) -> CompTransformerNet:
        return CompTransformerNet(table, self.d_model, self.n_heads, self.n_layers, self.d_ff, self.dropout)

    def _threads(self):
        class _Ctx:
            def __init__(self, n):
                self.n, self.old = n, None

            def __enter__(self):
                if self.n:
                    self.old = torch.get_num_threads()
                    torch.set_num_threads(int(self.n))

            def __exit__(self, *exc):
                if self.old:
                    torch.set_num_threads(self.old)

        return _Ctx(self.num_threads)

    # -- training --------------------------------------------------------------------

    def fit(self, X: Any, y: Any, X_val: Any = None, y_val: Any = None) -> "CompTransformer":
        self._check_params()
        symbols, table, sha = load_element_table(self.element_table)
        self.elements_ = symbols
        self.table_sha256_ = sha
        table_t = torch.from_numpy(table)
        enc = encode_formulas(X, symbols)
        if len(enc) == 0:
            raise DataValidationError("comp-transformer: no training rows")
        y_arr = self._targets(y, "y")
        if len(y_arr) != len(enc):
            raise DataValidationError(f"comp-transformer: X has {len(enc)} rows but y has {len(y_arr)}")
        if self._is_clf:
            self.classes_ = np.array([False, True])
            self.center_, self.scale_ = 0.0, 1.0
        else:
            if self.target_scaling == "robust":
                q25, q50, q75 = np.percentile(y_arr, [25, 50, 75])
                self.center_, self.scale_ = float(q50), float(q75 - q25) or float(y_arr.std()) or 1.0
            elif self.target_scaling == "standard":
                self.center_, self.scale_ = float(y_arr.mean()), float(y_arr.std()) or 1.0
            else:
                self.center_, self.scale_ = 0.0, 1.0
        val = None
        if X_val is not None and y_val is not None and len(y_val) > 0:
            val = (encode_formulas(X_val, symbols), self._targets(y_val, "y_val"))
        device = _pick_device(self.device)
        self.device_ = device.type
        amp_dtype = self._amp_dtype(device)
        t0 = time.perf_counter()
        with self._threads():
            seeds = [self.random_state + 1000 * i for i in range(self._n_models(len(enc)))]
            epochs, self.patience_ = self._schedule(len(enc))
            net, history, best_epoch, best_score = train_network(
                self, table_t, enc, y_arr, val, epochs, device, amp_dtype, seeds[0]
            )
            epochs_run = len(history)
            if self.refit and val is not None:
                # Retrain on train+validation rows for the length the validation rows chose.
                X_all = pd.concat([_as_series(X), _as_series(X_val)], ignore_index=True)
                y_all = np.concatenate([y_arr, val[1]])
                enc_all = encode_formulas(X_all, symbols)
                members = [
                    train_network(self, table_t, enc_all, y_all, None, best_epoch, device, amp_dtype, s)[0]
                    for s in seeds
                ]
            else:
                members = [net] + [
                    train_network(self, table_t, enc, y_arr, val, epochs, device, amp_dtype, s)[0] for s in seeds[1:]
                ]
        net = Ensemble(members)
        self.net_ = net.eval()
        self.fit_info_ = {
            "device": device.type,
            "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "amp": str(amp_dtype).replace("torch.", "") if amp_dtype else "float32",
            "epochs_run": epochs_run,
            "best_epoch": best_epoch,
            "best_val_score": best_score,
            "val_metric": ("log_loss" if self._is_clf else "mae") if val is not None else None,
            "refit": bool(self.refit and val is not None),
            "n_models": len(members),
            "max_epochs": epochs,
            "patience": self.patience_,
            "batch_size": self._batch_size(len(enc)),
            "n_train": len(enc),
            "n_val": 0 if val is None else len(val[1]),
            "n_parameters": sum(p.numel() for p in net.parameters()),
            "train_seconds": round(time.perf_counter() - t0, 3),
            "torch": torch.__version__,
            "element_table_sha256": sha,
            "history": history,
        }
        return self

    def _val_score(self, net, val, device, amp_dtype) -> float:
        """Validation log loss (classification) or MAE in target units (regression)."""
        raw = self._raw_outputs(net, val[0], device, amp_dtype)
        if self._is_clf:
            p = np.clip(1 / (1 + np.exp(-raw)), 1e-7, 1 - 1e-7)
            return float(-np.mean(val[1] * np.log(p) + (1 - val[1]) * np.log(1 - p)))
        return float(np.mean(np.abs(raw * self.scale_ + self.center_ - val[1])))

    # -- inference -------------------------------------------------------------------

    @torch.no_grad()
    def _raw_outputs(self, net, enc: _Encoded, device, amp_dtype) -> np.ndarray:
        net.eval()
        out = []
        # Batches by length so that short formulas are not padded to the longest one.
        order = torch.argsort(enc.lengths, stable=True)
        for s in range(0, len(enc), max(1, self.inference_batch_size)):
            rows = order[s : s + self.inference_batch_size]
            idx, frac = enc.batch(rows)
            with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                out.append(net(idx.to(device), frac.to(device)).float().cpu())
        res = torch.empty(len(enc), dtype=torch.float32)
        if out:
            res[order] = torch.cat(out)
        return res.numpy().astype(np.float64)

    def _check_fitted(self) -> None:
        # scikit-learn's NotFittedError (a ValueError and AttributeError), as its estimators raise
        check_is_fitted(self, "net_", msg="comp-transformer: call fit() or load() before predicting")

    def _predict_raw(self, X: Any) -> np.ndarray:
        self._check_fitted()
        device = next(self.net_.parameters()).device
        with self._threads():
            return self._raw_outputs(self.net_, encode_formulas(X, self.elements_), device, self._amp_dtype(device))

    def predict(self, X: Any) -> np.ndarray:
        raw = self._predict_raw(X)
        if self._is_clf:
            return raw > 0.0
        return raw * self.scale_ + self.center_

    def predict_proba(self, X: Any) -> np.ndarray:
        if not self._is_clf:
            raise AttributeError("predict_proba is only available for classification")
        p = 1.0 / (1.0 + np.exp(-self._predict_raw(X)))
        return np.column_stack([1.0 - p, p])

    # -- persistence -----------------------------------------------------------------

    def save(self, directory: str | Path) -> None:
        from crucible.core.io import atomic_path, write_json

        self._check_fitted()
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().cpu() for k, v in self.net_.state_dict().items()}
        with atomic_path(directory / "weights.pt", ".pt") as tmp:
            # Through a file object: torch.save names the zip's root folder after a path it is
            # given (here the random temp name), which made two saves of equal weights differ.
            with open(tmp, "wb") as fh:
                torch.save(state, fh)
        info = {k: v for k, v in self.fit_info_.items() if k != "history"}
        write_json(
            {
                "format_version": FORMAT_VERSION,
                "model": "comp-transformer",
                "params": self.get_params(),
                "elements": self.elements_,
                "element_table_sha256": self.table_sha256_,
                "center": self.center_,
                "scale": self.scale_,
                "fit_info": info,
                "history": self.fit_info_.get("history", []),
            },
            directory / "model.json",
        )

    @classmethod
    def load(cls, directory: str | Path, device: str = "cpu") -> "CompTransformer":
        directory = Path(directory)
        meta = json.loads((directory / "model.json").read_text(encoding="utf-8"))
        if meta.get("format_version") != FORMAT_VERSION:
            raise DataValidationError(
                f"{directory / 'model.json'}: unsupported format_version {meta.get('format_version')!r}"
            )
        params = dict(meta["params"])
        params["device"] = device
        est = cls(**params)
        state = torch.load(directory / "weights.pt", map_location="cpu", weights_only=True)
        n_members = len({k.split(".")[1] for k in state if k.startswith("members.")})
        if n_members == 0:
            raise DataValidationError(f"{directory / 'weights.pt'}: no ensemble members in the state dict")
        table = state["members.0.table"][1:]
        net = Ensemble([est._build(table) for _ in range(n_members)])
        net.load_state_dict(state)
        est.net_ = net.to(_pick_device(device)).eval()
        est.device_ = next(est.net_.parameters()).device.type
        est.elements_ = list(meta["elements"])
        est.table_sha256_ = meta["element_table_sha256"]
        est.center_, est.scale_ = float(meta["center"]), float(meta["scale"])
        est.fit_info_ = dict(meta["fit_info"], history=meta.get("history", []))
        if est._is_clf:
            est.classes_ = np.array([False, True])
        return est
