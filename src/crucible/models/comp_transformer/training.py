"""How comp-transformer trains one network (:mod:`.estimator` fits, predicts and saves): the
seeded loop over epochs with early stopping on inner-validation rows, or the running weight
average over the tail of the schedule in the final refit run; AdamW with warm-up and cosine
decay; one epoch's batches under autocast."""

from __future__ import annotations

import logging
import math

import numpy as np
import torch
from torch import nn

from crucible.core.progress import Throttle

log = logging.getLogger(__name__)


class WeightAverage:
    """Running mean of a network's floating-point state over the epochs it is updated with.

    Not ``torch.optim.swa_utils.AveragedModel``: its update (``lerp``) rounds differently in the
    last bit of float32, which would move every published comp-transformer number.
    """

    def __init__(self):
        self.state: dict[str, torch.Tensor] | None = None
        self.n = 0

    def update(self, net: nn.Module) -> None:
        cur = net.state_dict()
        if self.state is None:
            self.state, self.n = {k: v.detach().clone() for k, v in cur.items()}, 1
            return
        self.n += 1
        for k, v in cur.items():
            if v.is_floating_point():
                self.state[k].add_(v.detach() - self.state[k], alpha=1.0 / self.n)


def train_network(est, table_t, enc, y_arr, val, epochs, device, amp_dtype, seed):
    """One network trained from ``seed``: early stopping on ``val`` when given, else the
    running weight average over the tail of the schedule (the final refit run). ``est`` is the
    :class:`~.estimator.CompTransformer` being fitted: its parameters, target scaling, network
    builder and validation score."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        if device.type == "cuda":
            torch.cuda.manual_seed_all(seed)
        gen = torch.Generator().manual_seed(seed)
        net = est._build(table_t).to(device)
        y_t = torch.as_tensor((y_arr - est.center_) / est.scale_, dtype=torch.float32)
        n = len(enc)
        bs = max(1, min(est._batch_size(n), n))
        opt, sched, scaler = make_optimizer(
            net, epochs * math.ceil(n / bs), amp_dtype, est.lr, est.weight_decay, est.warmup
        )
        loss_fn = nn.BCEWithLogitsLoss() if est._is_clf else nn.L1Loss()
        best_state, best_score, best_epoch, stale = None, math.inf, epochs, 0
        history: list[dict[str, float]] = []
        recent: list[float] = []
        # Weight averaging only where no validation rows pick a checkpoint (final refit run).
        n_swa = int(est.swa_frac * epochs)
        swa_start = epochs - n_swa + 1 if n_swa >= 2 else None
        average = WeightAverage()
        throttle = Throttle()
        for epoch in range(1, epochs + 1):
            perm = torch.randperm(n, generator=gen)
            total_loss = train_epoch(net, enc, y_t, perm, bs, opt, sched, scaler, loss_fn, device, amp_dtype)
            record = {"epoch": epoch, "train_loss": total_loss / n}
            if val is not None:
                score = est._val_score(net, val, device, amp_dtype)
                record["val_score"] = score
                recent.append(score)
                # A trailing mean over a few epochs: on 60-row validation sets a single
                # lucky epoch would otherwise fix the refit length.
                score = float(np.mean(recent[-max(1, int(est.val_smoothing)) :]))
                record["val_smoothed"] = score
                if score < best_score:
                    best_score, best_epoch, stale = score, epoch, 0
                    best_state = {k: v.detach().clone() for k, v in net.state_dict().items()}
                else:
                    stale += 1
            history.append(record)
            # Every epoch goes to the debug log; INFO at most every CRUCIBLE_PROGRESS_S, and the last.
            log.log(
                logging.INFO if throttle.ready(last=epoch == epochs) else logging.DEBUG,
                "comp-transformer seed %d: epoch %d/%d, train loss %.5g%s",
                seed,
                epoch,
                epochs,
                record["train_loss"],
                f", validation {record['val_score']:.5g}" if val is not None else "",
            )
            if val is None and swa_start is not None and epoch >= swa_start:
                average.update(net)
            if val is not None and est.patience_ and stale >= est.patience_:
                log.info(
                    "comp-transformer seed %d: no improvement for %d epochs, stopping at epoch %d (best %d)",
                    seed,
                    stale,
                    epoch,
                    best_epoch,
                )
                break
        if best_state is not None:
            net.load_state_dict(best_state)
        elif average.state is not None:
            net.load_state_dict(average.state)
        if val is None:
            best_epoch, best_score = epochs, math.nan
    return net.eval(), history, best_epoch, best_score


def make_optimizer(net, total_steps: int, amp_dtype, lr: float, weight_decay: float, warmup: float):
    """AdamW with linear warm-up then cosine decay to 1 % of ``lr``; a gradient scaler for
    float16 autocast."""
    total = max(1, total_steps)
    # foreach: one kernel per step for all tensors instead of one per parameter (CPU too)
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=weight_decay, foreach=True)
    warm = max(1, int(warmup * total))

    def lr_at(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warm) / max(1, total - warm)))) * 0.99 + 0.01

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    scaler = torch.amp.GradScaler("cuda") if amp_dtype == torch.float16 else None
    return opt, sched, scaler


def train_epoch(net, enc, y_t, perm, bs, opt, sched, scaler, loss_fn, device, amp_dtype) -> float:
    """One pass over the rows in ``perm`` order; the summed (row-weighted) training loss."""
    net.train()
    n = len(enc)
    total_loss = 0.0
    for s in range(0, n, bs):
        rows = perm[s : s + bs]
        if len(rows) < 2 and n >= 2:
            continue  # a batch of one gives LayerNorm/attention nothing to learn from
        idx, frac = enc.batch(rows)
        idx, frac, target = idx.to(device), frac.to(device), y_t[rows].to(device)
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            out = net(idx, frac)
        loss = loss_fn(out.float(), target)
        opt.zero_grad(set_to_none=True)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
        sched.step()
        total_loss += loss.detach().item() * len(rows)
    return total_loss
