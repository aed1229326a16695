"""PowerTrain time and power predictors: numpy inference, plain-array model files.

A model directory holds ``meta.json`` (device, reference workload, scalers, provenance, metrics) and
``time.npz`` / ``power.npz`` (weights as plain float32 arrays, loaded with allow_pickle=False).

Network (PowerTrain §3.1): inputs (cores, CPU, GPU, EMC frequency) -> dense 256 -> 128 -> 64 -> 1,
ReLU, dropout after the first two layers (training only), linear output.  Two deliberate
refinements over the paper, both measured in docs/accuracy.md:
  * inputs are fractions of the device's maximum before StandardScaler, so a reference trained on
    one board lines up with another board's tables when transferred;
  * the target is log(time) / log(power), standardised, so the MSE loss weighs a 10 % error on a
    fast mode like a 10 % error on a slow one (the evaluation metric is MAPE).
Uncertainty: ``heads`` holds K last layers (the fine-tuned one plus bootstrap refits shrunk toward
it); the spread across heads is combined with the cross-validated residual of the fit, so
``*_std`` reflects how wrong the model has actually been on held-out modes.
Training lives in ``train.py`` (torch, imported only there).
"""
from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from ..catalogue.devices import Device, get_device
from ..catalogue.modes import ModeList
from .gp import TIME_LOG, GPStack, GPTarget, raw_modes
from .modeldir import verify_model_dir, write_model_dir
from .nets import (  # noqa: F401 (the names a model's users import from here)
    MEASURED_KEYS,
    TARGETS,
    ModelError,
    Net,
    Predictor,
    check_predictions,
    features,
    measured_at,
)
from .roofline import PRIOR_KIND, RooflineTarget

# written; per-target kind in meta["predictors"].  3 (2026-11-24): GP stacks may carry a "spread"
# rule and a power stack a time predictor (time input), which a reader of format 2 would ignore
# or call corrupt; it refuses the directory as another format instead.
FORMAT = "ptui-model-3"
FORMATS = ("ptui-powertrain-1", "ptui-model-2", FORMAT)   # read: the first held two networks


def one_size_only(about: About) -> str:
    """What a model of one batch size rests on, said where another size is asked of it: a fit of a
    profile at that size, or the roofline prior alone (nothing was profiled or fitted)."""
    b = about.batch_size
    at = f"batch size {b} only" if b is not None else "one (unrecorded) batch size only"
    if getattr(about, "kind", "") == PRIOR_KIND:
        return f"the model is the roofline prior alone, of {at} (no mode profiled)"
    return f"the model was fitted on a profile at {at}"


def _cache_kw(predictor, cache: dict) -> dict:
    """The cache keyword for a GP predictor (a network takes none)."""
    return {"cache": cache} if getattr(predictor, "kind", "") == "gp" else {}


@dataclass(frozen=True)
class About:
    """What a model is, typed: the facts decisions read (what was profiled, at which batch sizes,
    what one time is, how well it fits), read from and written to the model directory's
    meta.json.  A model's users read ``model.about``; what a use case learns after the fit (the
    epoch's size, what was timed) goes in with ``Model.tell``, never by editing the dict."""
    kind: str = ""                        # transfer | scratch | gp | auto | reference | ...
    method: str | None = None
    workload: str | None = None           # what was profiled ('script': the user's own)
    reference_workload: str | None = None
    batch_size: int | None = None         # the profiled (default) batch size
    batch_sizes: tuple[int, ...] = ()     # several: the batch size is an input
    batches_per_epoch: int | None = None  # minibatches of batch_size per epoch, where known
    samples_per_epoch: float | None = None
    peak_mem_gb: dict[int, float] = field(default_factory=dict)   # batch -> measured peak
    timed: str = ""                       # what one time_ms is (the profile's own words)
    time_basis: str = "step"              # step | cycle
    metrics: dict[str, Any] = field(default_factory=dict)        # per target: CV scores, outliers
    trained_on: dict[str, Any] = field(default_factory=dict)     # source, modes, device
    created: str = ""                     # when it was fitted (UTC, ISO 8601)
    roofline_spec: dict[str, Any] = field(default_factory=dict)  # the counts of its roofline prior

    @classmethod
    def of(cls, meta: dict) -> "About":
        def num(k, kind):
            v = meta.get(k)
            return None if v in (None, "") else kind(v)
        return cls(kind=str(meta.get("kind") or ""), method=meta.get("method"),
                   workload=meta.get("workload"), reference_workload=meta.get("reference_workload"),
                   batch_size=num("batch_size", int),
                   batch_sizes=tuple(int(b) for b in meta.get("batch_sizes") or ()),
                   batches_per_epoch=num("batches_per_epoch", int),
                   samples_per_epoch=num("samples_per_epoch", float),
                   peak_mem_gb={int(k): float(v) for k, v in (meta.get("peak_mem_gb") or {}).items()},
                   timed=str(meta.get("timed") or ""), time_basis=str(meta.get("time_basis") or "step"),
                   metrics=dict(meta.get("metrics") or {}), trained_on=dict(meta.get("trained_on") or {}),
                   created=str(meta.get("created") or ""),
                   roofline_spec=dict(meta.get("roofline_spec") or {}))


ABOUT_FIELDS = frozenset(f.name for f in fields(About))


@dataclass
class Model:
    """Time and power predictors (each a network or a GP) for one device, plus the profiled
    measurements they were fitted on (``measured``: MEASURED_KEYS -> arrays; decisions use a
    profiled mode's measurement instead of its prediction)."""
    device: Device
    time: Predictor
    power: Predictor
    meta: dict = field(default_factory=dict)
    measured: dict | None = None

    @property
    def about(self) -> About:
        """What the model is (typed; from its meta.json)."""
        return About.of(self.meta)

    def tell(self, **facts) -> None:
        """Record what a use case learned of the model (About's fields), for its meta.json."""
        bad = set(facts) - ABOUT_FIELDS
        if bad:
            raise TypeError(f"not a fact About a model: {', '.join(sorted(bad))}")
        if "peak_mem_gb" in facts:              # JSON keys are strings
            facts["peak_mem_gb"] = {str(k): float(v) for k, v in sorted(facts["peak_mem_gb"].items())}
        if "batch_sizes" in facts:
            facts["batch_sizes"] = [int(b) for b in facts["batch_sizes"]]
        self.meta.update(facts)

    @property
    def batch_sizes(self) -> list[int]:
        """The batch sizes the model was fitted on when the batch size is one of its inputs
        (several profiled sizes); [] for a model of one batch size."""
        return list(self.about.batch_sizes)

    def measured_at(self, batch_size=None) -> dict | None:
        """The profiled measurements at one batch size (default: the model's own); a model of one
        batch size returns all of them."""
        if not self.batch_sizes or self.measured is None:
            return self.measured
        b0 = self.about.batch_size or self.batch_sizes[0]
        return measured_at(self.measured, int(batch_size or b0), b0)

    def decision_space(self, modes=None, *, extrapolate: bool = False) -> tuple[list, str]:
        """The modes a decision may choose, and a note when some were left out.  A fitted model
        chooses only modes whose every knob (cores, CPU, GPU, EMC) is at a value that at least one
        profiled mode had: elsewhere a prediction rests on the prior alone, and the bundled
        reference (trained on ptui's simulator) has structure there that another board need not
        share (e.g. a step in power between 3 and 4 cores when PowerTrain's grid profiles only even
        core counts).  On the independent generator, deciding over the whole space put 12.5 % of
        budget picks (batch 16) and 17.5-20 % of (mode, batch size) picks more than 1 W over the
        budget; see docs/accuracy.md.  A model without measurements (the bundled reference) and
        extrapolate=True keep every mode."""
        modes = self.device.full_space() if modes is None else ModeList(modes, getattr(modes, "raw", None))
        got = None if self.measured is None else np.asarray(self.measured.get("modes"), np.float64)
        if extrapolate or got is None or got.ndim != 2 or not len(got) or not modes:
            return modes, ""
        A = raw_modes(modes)
        ok = np.ones(len(A), bool)
        for k in range(4):
            ok &= np.isin(np.round(A[:, k], 3), np.round(got[:, k], 3))
        if ok.all() or not ok.any():
            return modes, ""
        names = ("cores", "CPU MHz", "GPU MHz", "EMC MHz")
        seen = "; ".join(f"{n} {', '.join(f'{v:g}' for v in sorted(set(np.round(got[:, k], 3))))}"
                         if len(set(got[:, k])) <= 6 else
                         f"{n}: {len(set(got[:, k]))} values" for k, n in enumerate(names))
        note = (f"{int((~ok).sum())} of {len(modes)} modes have a knob value no profiled mode had "
                f"and are not chosen: predictions there are extrapolations (profiled: {seen})")
        return ModeList([m for m, k in zip(modes, ok) if k], A[ok]), note

    def predict(self, modes, batch_size=None) -> dict[str, np.ndarray]:
        """Predictions for modes; batch_size (a number or one per mode) only for a model fitted on
        several batch sizes, or equal to the model's own batch size."""
        A = raw_modes(modes)
        if self.batch_sizes:
            b = (self.about.batch_size or self.batch_sizes[0]) if batch_size is None else batch_size
            B = np.broadcast_to(np.asarray(b, np.float64), (len(A),)).reshape(-1, 1)
            if not np.all((B >= 1) & np.isfinite(B)):
                raise ModelError("batch sizes must be positive whole numbers")
            A = np.hstack([A, B])
        elif batch_size is not None:
            own = self.about.batch_size
            if own is None or np.any(np.asarray(batch_size) != int(own)):
                # a prior model 'was fitted at batch size 32', where no mode was profiled (a user's trial)
                raise ModelError(f"{one_size_only(self.about)}; to predict other sizes profile them "
                                 f"(ptui profile --batch-sizes ...) and fit that profile")
        # GPs of both targets share one cache: the knob features and the grid index are computed
        # once for the two stacks' members
        shared: dict = {}
        t, ts = self.time.predict_modes(self.device, A, **_cache_kw(self.time, shared))
        # a power GP whose input is the step time takes the time predicted above when that is the
        # very predictor its stack was fitted with; otherwise the stack computes its own
        if getattr(self.power, "time_source", None) is self.time:
            shared[TIME_LOG] = np.log(t)
        else:
            shared.pop(TIME_LOG, None)
        p, ps = self.power.predict_modes(self.device, A, **_cache_kw(self.power, shared))
        return {"time_ms": t, "power_w": p, "time_ms_std": ts, "power_w_std": ps}

    def save(self, directory: str | Path) -> None:
        """Write atomically (temporary sibling directory swapped in); see modeldir for what may be
        replaced and the checksums recorded in meta.json."""

        # numpy's stub lets a **dict of arrays fill savez's allow_pickle (a bool): the keys here
        # are array names, never that one
        def write_files(tmp: Path) -> None:
            for name, net in (("time", self.time), ("power", self.power)):
                np.savez(tmp / f"{name}.npz", **net.to_arrays())  # type: ignore[arg-type]
            if self.measured is not None:
                keys = MEASURED_KEYS + (("batch_size",) if "batch_size" in self.measured else ())
                np.savez(tmp / "measured.npz",
                         **{k: np.asarray(self.measured[k], np.float64) for k in keys})  # type: ignore[arg-type]
        write_model_dir(directory, dict(self.meta, format=FORMAT, device=self.device.name,
                                        predictors={"time": self.time.config(),
                                                    "power": self.power.config()}), write_files)


def load_model(directory: str | Path) -> Model:
    d = Path(directory)
    if not d.is_dir():
        raise ModelError(f"{d}: no model directory here (build one with ptui fit or ptui reference build)")
    meta = _read_meta(d)
    verify_model_dir(d, meta)
    _check_about(d, meta)
    if not isinstance(meta.get("device", ""), str):
        raise ModelError(f"{d}/meta.json: its device {meta['device']!r} is not a device name")
    try:
        device = get_device(meta.get("device", ""))
    except ValueError as e:
        raise ModelError(f"{d}/meta.json: {e}") from None
    kinds = meta.get("predictors") or {}
    if not isinstance(kinds, dict):
        raise ModelError(f"{d}/meta.json: 'predictors' is not a table of the targets' predictors")
    nets: dict[str, Predictor] = {name: _load_predictor(d / f"{name}.npz", kinds.get(name) or {"kind": "nn"})
                                  for name in TARGETS}
    _share_time_source(nets)
    model = Model(device, nets["time"], nets["power"], meta, _load_measured(d / "measured.npz"))
    with np.errstate(over="ignore", invalid="ignore"):
        probe = model.predict(_probe_modes(device))
    check_predictions(probe, f"{d}")
    return model


def _check_about(d: Path, meta: dict) -> None:
    """ModelError unless meta.json's facts read as About's types and make sense: a model of an
    older format (no digest to check) with a NaN, a word or a negative number where a count
    belongs was a traceback, or an epoch of -0.00 min (a fuzzing trial)."""
    def bad(why: str) -> ModelError:
        return ModelError(f"{d}/meta.json is damaged: {why}; fit the model again")
    for k in ("metrics", "trained_on", "peak_mem_gb"):
        if meta.get(k) is not None and not isinstance(meta[k], dict):
            raise bad(f"{k!r} is not a table")
    if meta.get("time_basis") not in (None, "", "step", "cycle"):
        raise bad(f"'time_basis' is {meta['time_basis']!r}, not step or cycle")
    try:
        about = About.of(meta)
    except (ValueError, TypeError, OverflowError) as e:
        raise bad(str(e)) from None
    counts = [("batch_size", about.batch_size), ("batches_per_epoch", about.batches_per_epoch),
              *(("batch_sizes", b) for b in about.batch_sizes)]
    for k, v in counts:
        if v is not None and v < 1:
            raise bad(f"{k!r} is {v}, not a count")
    spe = about.samples_per_epoch
    if spe is not None and not (math.isfinite(spe) and spe > 0):
        raise bad(f"'samples_per_epoch' is {spe}")


def _read_meta(d: Path) -> dict:
    """The model directory's meta.json, refused unless it is a ptui model of a format this ptui reads."""
    try:
        meta = json.loads((d / "meta.json").read_text())
    except FileNotFoundError:
        raise ModelError(f"{d}: meta.json is missing; not a ptui model") from None
    except (OSError, ValueError) as e:
        raise ModelError(f"{d}/meta.json is corrupt: {e}") from None
    if not isinstance(meta, dict) or meta.get("format") not in FORMATS:
        fmt = meta.get("format") if isinstance(meta, dict) else None
        if isinstance(fmt, str) and fmt.startswith("ptui-model-"):
            raise ModelError(f"{d}: written by a newer ptui (model format {fmt}; this one reads "
                             f"up to {FORMAT}); upgrade ptui or fit the profile again")
        raise ModelError(f"{d}/meta.json: not a ptui model (format {FORMAT})")
    return meta


def _load_predictor(f: Path, cfg: dict) -> Predictor:
    """One target's predictor: the arrays in `f` read as meta.json's `cfg` says."""
    try:
        with np.load(f, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        if cfg.get("kind") == "gp":
            if cfg.get("time_input"):
                raise ValueError("a GP with the step time as an input is saved in a stack")
            return GPTarget.from_arrays(cfg, arrays)
        if cfg.get("kind") == "gp-stack":
            return GPStack.from_arrays(cfg, arrays)
        if cfg.get("kind") == "roofline":
            return RooflineTarget.from_config(cfg)
        if cfg.get("kind") == "nn":
            return Net.from_arrays(arrays)
        raise ValueError(f"unknown predictor kind {cfg.get('kind')!r}")
    except FileNotFoundError:
        raise ModelError(f"{f}: missing") from None
    except Exception as e:  # noqa: BLE001 - zip/npy errors of every kind mean corrupt
        why = "not an archive of plain arrays" if "pickle" in str(e) else f"{type(e).__name__}: {e}"
        raise ModelError(f"{f}: corrupt model file ({why})") from None


def _load_measured(f: Path) -> dict | None:
    """The measurements saved beside the model (None: there are none), refused if their arrays
    do not line up."""
    if not f.exists():
        return None
    try:
        with np.load(f, allow_pickle=False) as z:
            measured = {k: np.asarray(z[k], np.float64) for k in MEASURED_KEYS
                        + (("batch_size",) if "batch_size" in z.files else ())}
        n = len(measured["time_ms"])
        if measured["modes"].shape != (n, 4) or any(measured[k].shape != (n,)
                                                     for k in measured if k != "modes"):
            raise ValueError("array lengths differ")
    except Exception as e:  # noqa: BLE001
        raise ModelError(f"{f}: corrupt measurements ({type(e).__name__}: {e})") from None
    return measured


def _share_time_source(nets: dict) -> None:
    """A power stack stores the time predictor it was fitted with; when that is the model's own
    time predictor (the same arrays and configuration), it uses the loaded one, so predicting both
    targets computes the time once."""
    src = getattr(nets["power"], "time_source", None)
    if src is None or type(src) is not type(nets["time"]) or src.config() != nets["time"].config():
        return
    a, b = src.to_arrays(), nets["time"].to_arrays()
    if a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a):
        nets["power"].time_source = nets["time"]


def _probe_modes(device: Device) -> np.ndarray:
    """The corners of the device's mode box, as model inputs for a sanity check on load."""
    import itertools
    knobs = [(1, device.max_cores), (device.cpu_mhz[0], device.cpu_mhz[-1]),
             (device.gpu_mhz[0], device.gpu_mhz[-1]), (device.mem_mhz[0], device.mem_mhz[-1])]
    return np.array(list(itertools.product(*knobs)), dtype=np.float64)


@functools.lru_cache(maxsize=4)
def load_bundled(device_name: str = "orin-agx") -> Model:
    """The bundled reference, loaded once per process (it is never modified: fitting copies it)."""
    return load_model(bundled_reference(device_name))


def bundled_reference(device_name: str = "orin-agx") -> Path:
    from importlib import resources
    return Path(str(resources.files("ptui.assets") / f"reference-{device_name}-resnet18"))
