"""A plain Lightning Trainer script (unmodified by ptui): small MLP on synthetic data."""
import sys

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset


class Net(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))

    def training_step(self, batch, _):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


if __name__ == "__main__":
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
    torch.manual_seed(0)
    ds = TensorDataset(torch.randn(4096, 64), torch.randint(0, 10, (4096,)))
    trainer = L.Trainer(max_steps=steps, accelerator="auto", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Net(), DataLoader(ds, batch_size=32, shuffle=True, num_workers=0))
