"""Workload catalog: the DNN training workloads of the PowerTrain paper (Table 3)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import InputError


class WorkloadError(InputError):
    pass


@dataclass(frozen=True)
class Workload:
    name: str
    model: str
    task: str
    dataset: str
    samples: int
    params_m: float        # parameters, millions
    fwd_gflops: float      # forward FLOPs at batch 1, GFLOPs, as published
    layers: int
    workers: int           # PyTorch DataLoader num_workers used in the paper
    dataset_size: str
    maxn_epoch_min: float  # published Orin AGX MAXN epoch time at batch 16
    batch_size: int = 16

    def with_batch(self, batch_size: int) -> "Workload":
        if int(batch_size) != batch_size or batch_size < 1:
            raise WorkloadError(f"batch size must be a positive integer, got {batch_size!r}")
        from dataclasses import replace
        return replace(self, batch_size=int(batch_size))

    @property
    def minibatches_per_epoch(self) -> int:
        return math.ceil(self.samples / self.batch_size)


WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Workload("resnet18", "ResNet-18", "image classification", "ImageNet val", 50_000,
             11.7, 1.8, 18, 4, "6.7GB", 3.1),
    Workload("mobilenetv3", "MobileNetV3", "image classification", "GLD23k", 23_080,
             5.5, 0.2254, 20, 4, "2.8GB", 2.3),
    Workload("yolov8n", "YOLOv8n", "object detection", "COCO minitrain", 25_000,
             3.2, 8.7, 53, 0, "3.9GB", 4.9),
    Workload("bert-base", "BERT-base", "question answering", "SQuAD", 70_000,
             110.0, 11500.0, 12, 4, "40MB", 68.7),
    Workload("lstm", "LSTM", "next-word prediction", "WikiText", 36_000,
             8.6, 3.9, 2, 4, "17.8MB", 0.4),
)}


ALIASES = {"resnet": "resnet18", "resnet-18": "resnet18", "mobilenet": "mobilenetv3",
           "yolo": "yolov8n", "bert": "bert-base", "yolov8": "yolov8n"}


SCRIPT_WORKLOAD = "script"
"""The workload name a profile of the user's own script is stored and written under."""


def workload_name(name: str) -> str:
    """A workload's one name: a built-in workload's own however written (RESNET18, ResNet-18,
    resnet: resnet18, as get_workload reads it), else the name as given, stripped."""
    try:
        return get_workload(name).name
    except WorkloadError:
        return (name or "").strip()


def workload_key(name: str) -> str:
    """A workload's name as one, to compare two: a built-in workload's own (resnet, ResNet-18:
    resnet18), else the name stripped, in lower case (MyNet and mynet are one workload)."""
    try:
        return get_workload(name).name
    except WorkloadError:
        return (name or "").strip().lower()


def workload_spellings(name: str) -> tuple[str, ...]:
    """Every name, stripped and in lower case, that names the workload `name` names (resnet18:
    resnet, resnet-18, resnet18): a stored name is that workload's when its lower case is one."""
    key = workload_key(name)
    return tuple(sorted({key} | {a for a, k in ALIASES.items() if k == key}))


def get_workload(name: str, batch_size: int = 16) -> Workload:
    key = (name or "").strip().lower()
    key = ALIASES.get(key, key)
    if key not in WORKLOADS:
        raise WorkloadError(f"unknown workload {name!r}; built-in workloads: {', '.join(WORKLOADS)}")
    return WORKLOADS[key].with_batch(batch_size)
