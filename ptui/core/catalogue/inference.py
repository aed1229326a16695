"""Inference workloads and the measured sweep they are calibrated on.

The sweep is real: PyTorch inference on a Jetson Orin AGX at MAXN clocks (12 cores, CPU 2201.6 MHz,
GPU 1300.5 MHz, EMC 3199 MHz), time per minibatch and mean board power at five batch sizes per
model, with the authors' analytical FLOP and DRAM-byte counts of one forward pass.  Source: Pagoda
(Prashanthi S.K. et al., IISc DREAM:Lab, arXiv 2509.20189), github.com/dream-lab/pagoda @ 34dbe0f,
src/analysis/roofline_batch_size_expt.ipynb (Apache-2.0); extracted in shared/research-data.
Everything else about inference in ptui (other modes, other batch sizes) is SIMULATED from it.
"""
from __future__ import annotations

from dataclasses import dataclass

from .workloads import Workload, WorkloadError

# model, batch, time per minibatch (ms), board power (W), analytical GFLOP, analytical DRAM GB
MAXN_SWEEP: tuple[tuple[str, int, float, float, float, float], ...] = (
    ("lstm", 1, 1.232528, 29.474, 0.129, 0.0353),
    ("lstm", 4, 1.522864, 30.487, 0.4906, 0.0382),
    ("lstm", 16, 1.883888, 29.488, 1.9368, 0.0498),
    ("lstm", 32, 2.411056, 35.816, 3.865, 0.0651),
    ("lstm", 64, 3.364736, 41.436, 7.7215, 0.0959),
    ("yolov8n", 1, 17.943621, 25.677, 8.8399, 0.5393),
    ("yolov8n", 4, 30.361891, 34.648, 35.3594, 2.1196),
    ("yolov8n", 16, 107.458115, 42.523, 141.4377, 8.4408),
    ("yolov8n", 32, 212.697983, 44.2105, 282.8754, 16.869),
    ("yolov8n", 64, 431.46503, 44.035, 565.7507, 33.7253),
    ("mobnet", 1, 18.025488, 20.864, 0.4491, 0.103),
    ("mobnet", 4, 19.830769, 26.3805, 1.7966, 0.3465),
    ("mobnet", 16, 28.11472, 38.52, 7.1862, 1.3206),
    ("mobnet", 32, 53.966688, 38.162, 14.3724, 2.6193),
    ("mobnet", 64, 102.085697, 39.503, 28.7448, 5.2168),
    ("resnet50", 1, 15.366144, 26.929, 8.2063, 0.3367),
    ("resnet50", 4, 19.276112, 41.4105, 32.8253, 1.0407),
    ("resnet50", 16, 51.56144, 53.541, 131.3011, 3.8566),
    ("resnet50", 32, 100.979504, 18.355, 262.6021, 7.6111),
    ("resnet50", 64, 191.631409, 55.3625, 525.2043, 15.1202),
    ("bert-large", 1, 61.867664, 56.84, 79.1363, 2.601),
    ("bert-large", 4, 230.599648, 63.218, 316.5452, 6.7629),
    ("bert-large", 8, 444.014481, 63.557, 633.0904, 12.312),
    ("bert-large", 16, 920.411621, 63.5, 1266.1808, 23.4103),
    ("bert-large", 32, 1918.849304, 62.209, 2532.3615, 45.6068),
)
# the power logged at resnet50 batch 32 (18.4 W between 53.5 W and 55.4 W) is a logging glitch (the
# data's README says so); it is kept in the table and left out of the power fit
POWER_GLITCHES = {("resnet50", 32)}
MAXN_CLOCKS = (12, 2201.6, 1300.5, 3199.0)      # the mode the sweep was measured in (orin-agx MAXN)
INFER_BATCHES = (1, 2, 4, 8, 16, 32, 64)       # the inference batch sizes a decision searches


@dataclass(frozen=True)
class InferenceWorkload(Workload):
    """A forward-only workload: `sweep` names its rows of MAXN_SWEEP; `physics` is filled by the
    board's calibration (board.inference), typed loosely because the catalogue sits below it."""
    sweep: str = ""
    physics: object = None


INFERENCE: dict[str, InferenceWorkload] = {w.name: w for w in (
    InferenceWorkload("resnet50", "ResNet-50", "image classification (inference)", "3x224x224", 0,
                      25.6, 8.21, 50, 0, "-", 0.0, batch_size=1, sweep="resnet50"),
    InferenceWorkload("mobilenetv3-l", "MobileNetV3-Large", "image classification (inference)",
                      "3x224x224", 0, 5.5, 0.449, 20, 0, "-", 0.0, batch_size=1, sweep="mobnet"),
    InferenceWorkload("yolov8n-det", "YOLOv8n", "object detection (inference)", "3x640x640", 0,
                      3.2, 8.84, 53, 0, "-", 0.0, batch_size=1, sweep="yolov8n"),
    InferenceWorkload("bert-large", "BERT-large", "question answering (inference)", "seq 128", 0,
                      340.0, 79.1, 24, 0, "-", 0.0, batch_size=1, sweep="bert-large"),
    InferenceWorkload("lstm-lm", "LSTM", "next-word prediction (inference)", "seq 32", 0,
                      8.6, 0.129, 2, 0, "-", 0.0, batch_size=1, sweep="lstm"),
)}


def sweep_rows(workload: InferenceWorkload):
    """The measured rows of one inference workload: (batch, time_ms, power_w, gflop, gb)."""
    return [r[1:] for r in MAXN_SWEEP if r[0] == workload.sweep]


def get_inference(name: str) -> InferenceWorkload:
    key = (name or "").strip().lower()
    aliases = {"resnet-50": "resnet50", "mobilenet": "mobilenetv3-l", "mobilenetv3": "mobilenetv3-l",
               "mobnet": "mobilenetv3-l", "yolo": "yolov8n-det", "yolov8n": "yolov8n-det",
               "bert": "bert-large", "lstm": "lstm-lm"}
    key = aliases.get(key, key)
    if key not in INFERENCE:
        raise WorkloadError(f"unknown inference workload {name!r}; built-in inference workloads: "
                            f"{', '.join(INFERENCE)}")
    return INFERENCE[key]
