"""Profiling the user's own training script: run it under the probe, turn its optimizer steps
into minibatch events, and merge them with telemetry samples for the profiler."""
from __future__ import annotations

import os
import queue
import subprocess
import threading
import time
from pathlib import Path

import ptui

from .backends.base import Backend, MinibatchEvent
from .profiler import ProfileError

PROBE_SITE = Path(ptui.__file__).resolve().parent / "probe_site"


class ScriptSource:
    """A training command run under the probe; a measurement source for the Profiler."""

    def __init__(self, backend: Backend, argv: list[str], log_path: Path,
                 first_step_timeout: float = 180.0, stand_in=None) -> None:
        if not argv:
            raise ProfileError("no training command given after --")
        self.backend, self.argv, self.log_path = backend, argv, Path(log_path)
        self.first_step_timeout = first_step_timeout
        self.stand_in = stand_in          # workload the simulator draws power for
        self.proc: subprocess.Popen | None = None
        self.q: queue.Queue = queue.Queue()
        self.steps = 0
        self.device_kind = None

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        clock = self.backend.clock
        if getattr(clock, "virtual", False) or getattr(clock, "speed", 1.0) != 1.0:
            raise ProfileError("profiling a real script needs a real-time clock (no --speed)")
        r, w = os.pipe()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(PROBE_SITE), str(PROBE_SITE.parent.parent)] + [p for p in [env.get("PYTHONPATH")] if p])
        env["PTUI_PROBE_FD"] = str(w)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(self.argv, env=env, pass_fds=(w,), stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        except OSError as e:
            os.close(r)
            os.close(w)
            raise ProfileError(f"cannot start {self.argv[0]!r}: {e.strerror or e}") from None
        finally:
            log.close()
        os.close(w)
        self.t_start = time.monotonic()
        threading.Thread(target=self._reader, args=(r,), daemon=True, name="ptui-probe").start()
        if self.backend.simulated and self.stand_in is not None:
            self.backend.start_training(self.stand_in)   # the simulated board draws training power

    def _reader(self, fd: int) -> None:
        buf = b""
        with os.fdopen(fd, "rb", buffering=0) as f:
            while True:
                chunk = f.read(4096)
                if not chunk:
                    break
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    self.q.put(line.decode(errors="replace"))
        self.q.put(None)                                   # the script closed the pipe (ended)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.backend.simulated:
            self.backend.stop_training()

    # -- events -----------------------------------------------------------------------------------
    def _ended(self) -> ProfileError:
        rc = self.proc.wait() if self.proc else None
        tail = ""
        try:
            tail = self.log_path.read_text(errors="replace").strip().splitlines()[-1][:200]
        except (OSError, IndexError):
            pass
        what = "crashed" if rc else "ended"
        return ProfileError(f"the training script {what} (exit code {rc}) after {self.steps} "
                            f"minibatches" + (f"; last output: {tail}" if tail else "")
                            + f"; full log: {self.log_path}")

    def events(self, interval: float | None = None):
        clock = self.backend.clock
        interval = interval or 0.5
        to_clock = clock.now() - time.monotonic()          # offset from CLOCK_MONOTONIC
        last_step = None
        next_sample = clock.now() + interval
        while True:
            timeout = max(0.0, next_sample - clock.now())
            try:
                line = self.q.get(timeout=timeout)
            except queue.Empty:
                line = ""
            if line is None:
                raise self._ended()
            if line.startswith("S "):
                ts = float(line.split()[1]) + to_clock
                if last_step is not None:
                    self.steps += 1
                    yield MinibatchEvent(t_end=ts, ms=(ts - last_step) * 1000.0, index=self.steps)
                last_step = ts
            elif line.startswith("D "):
                self.device_kind = line.split()[1]
            if clock.now() >= next_sample:
                next_sample += interval
                yield self.backend.read()
            if self.steps == 0 and time.monotonic() - self.t_start > self.first_step_timeout:
                raise ProfileError(f"the training script has not completed a minibatch in "
                                   f"{self.first_step_timeout:.0f} s: does it call optimizer.step()?")
