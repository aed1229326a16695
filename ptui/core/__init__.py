"""ptui's core as the faces see it: this façade is the one place the CLI and the app import from.

The use cases (profile, fit, decide, tune, apply / roll back / persist / restore, the board's
status, the --json contract) and the values the faces show (modes, tables, goals, errors, ...).
A name's module is imported when the name is first used, so the app starts without the fitting
machinery (and never imports torch or scikit-learn at start).  The packages below are layered
(README: Architecture): usecases -> profiling, prediction, decision -> board -> catalogue ->
errors, paths, clock, progress; tests/unit/test_layers.py keeps the faces on this façade.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# module (under ptui.core) -> the names the faces take from it
_NAMES: dict[str, tuple[str, ...]] = {
    # the use cases
    "usecases.board": ("apply", "apply_preset", "board_status", "check_persist", "persist", "plan_apply",
                       "put_back_restore_record", "restore", "restore_record", "rollback", "begin_round",
                       "end_round", "keep_restore_record", "recover_round",),
    "usecases.colocate": ("colocate", "colocate_profiles", "colocate_view", "ColocateView", "goal_text",
                           "colocate_goal", "script_train",),
    "usecases.interleave": ("BoardMeter", "check_profiles_out", "Interleaver", "load_profiles", "Managed",
                            "Minibatch", "Poisson", "poisson", "profiles_of", "Report", "Request",
                            "save_profiles", "SimWork", "trace", "walk_profiles",),
    "usecases.interleavedemo": ("demo_pair", "live_snapshot", "run_demo",),
    "usecases.contract": ("batch_decision_body", "batch_decision_energy", "decision_body", "decision_energy",
                          "document", "infeasible", "point", "profiled_modes",),
    "usecases.decide": ("load_predictions", "model_predictions", "saved_sources", "tune_decide",
                        "tune_decide_batches", "tune_prior", "view",),
    "usecases.fit": ("fit", "fit_cancellable", "fit_prior", "PRIOR_KIND", "prior_model", "probe_spec",
                     "probe_time", "workload_spec",),
    "usecases.pool": ("board_id", "board_seed", "check_url", "fit_with_pool", "pool_holds", "pool_summary",
                      "pool_url", "pull_rows", "push_profile", "redact",),
    "usecases.profile": ("ACTIVE_MIN", "check_memory", "check_resumed_board", "default_seed",
                         "estimate_device_s", "startup_timeout_args",
                         "estimate_pairs_device_s", "latest_outputs", "profile_run", "ProfileRequest",
                         "ProfileRun", "random_pairs", "release_session", "reserve_session",
                         "resumable_sessions", "unfinished_after",),
    # decisions
    "decision.concurrent": ("Standalone",),
    "decision.batch": ("BatchError", "decide", "joint_goal", "MAX_BATCH", "MAX_EPOCHS", "parse_batch_sizes",
                       "predict_table",),
    "decision.energy": ("Energy", "EnergyPoint",),
    "decision.goals": ("Goal",),
    "decision.pareto": ("choose", "DEFAULT_RISK", "InfeasibleError", "parse_risk", "RISK_MEAN", "Table",
                        "interval90", "log_sd", "upper_bound", "upper_z", "wide_interval",),
    # prediction
    "prediction.fit": ("outlier_note", "subset_note",),
    "prediction.modeldir": ("check_out_dir",),
    "prediction.pooled": ("pooled_note",),
    "prediction.predictor": ("bundled_reference", "check_predictions", "load_model",),
    # profiling
    "profiling.active": ("ACTIVE_MIN_COUNT", "make_plan", "plan_candidates",),
    "profiling.profiler": ("batch_tag", "Control", "cycle_timed", "model_timed", "RestoreFailed",
                           "ScriptUnprofilable", "time_unit", "Timed",),
    "profiling.store": ("check_session_name", "Store",),
    "profiling.userscript": ("check_command", "command_text", "compiled_step_bytes", "count_script",
                             "CPU_TRAINING_WARNING", "PRIOR_CPU_TRAINING_WARNING",),
    # the board
    "board.apply": ("ApplyResult", "BoardChanged", "tpc_note",),
    "board.backends": ("choose_backend", "open_backend",),
    "board.backends.base": ("Backend",),
    "board.backends.replay": ("corpus_workload",),
    "board.csvio": ("check_out_file", "fmt_value", "mode_cells", "read_modes", "read_profile", "write_csv",),
    "board.emulator": ("Emulator",),
    "board.files": ("WriteError",),
    "board.locks": ("board_lock", "LockError",),
    "board.logs": ("LOG",),
    "board.physics": ("largest_batch", "steady_state",),
    "board.signals": ("exit_code_for", "install", "shielded", "Terminated",),
    "board.telemetry": ("Sampler",),
    # the catalogue
    "catalogue.devices": ("DeviceError", "get_device",),
    "catalogue.inference": ("get_inference", "INFERENCE",),
    "catalogue.modes": ("cpu_ghz", "Mode", "whole_mhz",),
    "catalogue.workloads": ("get_workload", "WORKLOADS", "workload_name",),
    # the rest
    "clock": ("Clock", "hms", "RealClock", "VirtualClock",),
    "errors": ("exit_code", "EXIT_INPUT", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_RUNTIME", "InputError",
               "Interrupted", "known_errors", "number", "PtuiError",),
    "paths": ("data_dir", "model_meta", "model_of", "script_log", "write_atomic",),
    "progress": ("SAVING", "STAGE", "Step", "plural",),
}
# modules the faces use whole
_MODULES = {"logs": "board.logs", "train": "prediction.train"}
_WHERE = {name: mod for mod, names in _NAMES.items() for name in names}
__all__ = sorted(list(_WHERE) + list(_MODULES))

if TYPE_CHECKING:       # for a type checker; at run time each name is imported on first use
    from .board import logs
    from .board.apply import ApplyResult, BoardChanged, tpc_note
    from .board.backends import choose_backend, open_backend
    from .board.backends.base import Backend
    from .board.backends.replay import corpus_workload
    from .board.csvio import check_out_file, fmt_value, mode_cells, read_modes, read_profile, write_csv
    from .board.emulator import Emulator
    from .board.files import WriteError
    from .board.locks import LockError, board_lock
    from .board.logs import LOG
    from .board.physics import largest_batch, steady_state
    from .board.signals import Terminated, exit_code_for, install, shielded
    from .board.telemetry import Sampler
    from .catalogue.devices import DeviceError, get_device
    from .catalogue.inference import INFERENCE, get_inference
    from .catalogue.modes import Mode, cpu_ghz, whole_mhz
    from .catalogue.workloads import WORKLOADS, get_workload, workload_name
    from .clock import Clock, RealClock, VirtualClock, hms
    from .decision.batch import (
        MAX_BATCH,
        MAX_EPOCHS,
        BatchError,
        decide,
        joint_goal,
        parse_batch_sizes,
        predict_table,
    )
    from .decision.concurrent import Standalone
    from .decision.energy import Energy, EnergyPoint
    from .decision.goals import Goal
    from .decision.pareto import (
        DEFAULT_RISK,
        RISK_MEAN,
        InfeasibleError,
        Table,
        choose,
        interval90,
        log_sd,
        parse_risk,
        upper_bound,
        upper_z,
        wide_interval,
    )
    from .errors import (
        EXIT_INPUT,
        EXIT_INTERRUPTED,
        EXIT_OK,
        EXIT_RUNTIME,
        InputError,
        Interrupted,
        PtuiError,
        exit_code,
        known_errors,
        number,
    )
    from .paths import data_dir, model_meta, model_of, script_log, write_atomic
    from .prediction import train
    from .prediction.fit import outlier_note, subset_note
    from .prediction.modeldir import check_out_dir
    from .prediction.pooled import pooled_note
    from .prediction.predictor import bundled_reference, check_predictions, load_model
    from .profiling.active import ACTIVE_MIN_COUNT, make_plan, plan_candidates
    from .profiling.profiler import (
        Control,
        RestoreFailed,
        ScriptUnprofilable,
        Timed,
        batch_tag,
        cycle_timed,
        model_timed,
        time_unit,
    )
    from .profiling.store import Store, check_session_name
    from .profiling.userscript import (
        CPU_TRAINING_WARNING,
        PRIOR_CPU_TRAINING_WARNING,
        check_command,
        command_text,
        compiled_step_bytes,
        count_script,
    )
    from .progress import SAVING, STAGE, Step, plural
    from .usecases.board import (
        apply,
        apply_preset,
        begin_round,
        board_status,
        check_persist,
        end_round,
        keep_restore_record,
        persist,
        plan_apply,
        put_back_restore_record,
        recover_round,
        restore,
        restore_record,
        rollback,
    )
    from .usecases.colocate import (
        ColocateView,
        colocate,
        colocate_goal,
        colocate_profiles,
        colocate_view,
        goal_text,
        script_train,
    )
    from .usecases.contract import (
        batch_decision_body,
        batch_decision_energy,
        decision_body,
        decision_energy,
        document,
        infeasible,
        point,
        profiled_modes,
    )
    from .usecases.decide import (
        load_predictions,
        model_predictions,
        saved_sources,
        tune_decide,
        tune_decide_batches,
        tune_prior,
        view,
    )
    from .usecases.fit import (
        PRIOR_KIND,
        fit,
        fit_cancellable,
        fit_prior,
        prior_model,
        probe_spec,
        probe_time,
        workload_spec,
    )
    from .usecases.interleave import (
        BoardMeter,
        Interleaver,
        Managed,
        Minibatch,
        Poisson,
        Report,
        Request,
        SimWork,
        check_profiles_out,
        load_profiles,
        poisson,
        profiles_of,
        save_profiles,
        trace,
        walk_profiles,
    )
    from .usecases.interleavedemo import demo_pair, live_snapshot, run_demo
    from .usecases.pool import (
        board_id,
        board_seed,
        check_url,
        fit_with_pool,
        pool_holds,
        pool_summary,
        pool_url,
        pull_rows,
        push_profile,
        redact,
    )
    from .usecases.profile import (
        ACTIVE_MIN,
        ProfileRequest,
        ProfileRun,
        check_memory,
        check_resumed_board,
        default_seed,
        estimate_device_s,
        estimate_pairs_device_s,
        latest_outputs,
        profile_run,
        random_pairs,
        release_session,
        reserve_session,
        resumable_sessions,
        startup_timeout_args,
        unfinished_after,
    )


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{_MODULES[name]}")
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{mod}"), name)


def __dir__() -> list[str]:
    return __all__
