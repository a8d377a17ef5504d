"""A Lightning DDP program: fit, save a checkpoint, resume from it; writes what it learned.

    mpiexec -n 2 python lightning_ddp.py OUT mpiflow      # the "mpiflow" backend, auto-loaded
    torchrun --standalone --nproc-per-node 2 lightning_ddp.py OUT gloo

Imports neither mpiflow nor mpi4py. ``self.log(..., sync_dist=True)`` averages the loss and
an int64 counter over the ranks (AVG on every backend but gloo). Rank 0 writes ``OUT/result.json``:
the weights after the first fit and after the resumed one, and the synced metrics.
"""

from __future__ import annotations

import json
import os
import sys

import lightning as L
import torch
from lightning.pytorch.strategies import DDPStrategy
from torch.utils.data import DataLoader, TensorDataset


class Tiny(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch: list[torch.Tensor], index: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("loss", loss, on_step=False, on_epoch=True, sync_dist=True)
        self.log("seen", torch.tensor(len(x)), on_step=False, on_epoch=True, sync_dist=True,
                 reduce_fx="sum")
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def trainer(backend: str, epochs: int) -> L.Trainer:
    local = int(os.environ["LOCAL_WORLD_SIZE"])
    return L.Trainer(accelerator="cpu", devices=local,
                     num_nodes=int(os.environ["WORLD_SIZE"]) // local,
                     strategy=DDPStrategy(process_group_backend=backend), max_epochs=epochs,
                     enable_progress_bar=False, logger=False, enable_checkpointing=False,
                     enable_model_summary=False)


def main(out: str, backend: str) -> None:
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(48, 4), torch.randn(48, 1))
    loader = DataLoader(data, batch_size=4)
    model = Tiny()
    first = trainer(backend, 2)
    first.fit(model, loader)
    saved = model.layer.weight.detach().flatten().tolist()
    checkpoint = os.path.join(out, "tiny.ckpt")
    first.save_checkpoint(checkpoint)
    resumed = Tiny()  # other initial weights: the checkpoint must restore them
    second = trainer(backend, 3)
    second.fit(resumed, loader, ckpt_path=checkpoint)
    metrics = {k: v.item() for k, v in sorted(second.callback_metrics.items())}
    if second.global_rank == 0:
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump({"first": saved, "resumed": resumed.layer.weight.flatten().tolist(),
                       "epoch": second.current_epoch, "metrics": metrics}, f)
    # Lightning leaves the group to the interpreter's exit, where gloo's threads sometimes
    # abort ("terminate called without an active exception", exit -6): end it here.
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:3])
