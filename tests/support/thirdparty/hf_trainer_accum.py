"""A Hugging Face Trainer script with gradient accumulation: tiny BERT from a config, synthetic data."""
import sys
import tempfile

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments


class Synthetic(torch.utils.data.Dataset):
    def __len__(self):
        return 100000

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return {"input_ids": torch.randint(0, 1000, (32,), generator=g),
                "labels": torch.tensor(i % 2)}


if __name__ == "__main__":
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
    cfg = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=128, max_position_embeddings=64)
    args = TrainingArguments(output_dir=tempfile.mkdtemp(), max_steps=steps, per_device_train_batch_size=8,
                             gradient_accumulation_steps=4, report_to=[], save_strategy="no",
                             logging_strategy="no", use_cpu=not torch.cuda.is_available(), disable_tqdm=True,
                             dataloader_num_workers=0)
    Trainer(model=BertForSequenceClassification(cfg), args=args, train_dataset=Synthetic()).train()
