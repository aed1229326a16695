"""Profiling the user's own, unmodified training script under the probe."""
import sys
import textwrap

import numpy as np
import pytest

# real training scripts run under the probe, timed on the wall clock
pytestmark = pytest.mark.realtime

pytest.importorskip("torch")

TRAIN = textwrap.dedent("""
    import sys, time, torch
    steps = int(sys.argv[1])
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 32), torch.randint(0, 4, (64,))
    for i in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        time.sleep(0.02)                       # a 20 ms data pipeline
        opt.step()
    if len(sys.argv) > 2:
        raise RuntimeError("CUDA out of memory (pretend)")
""")


@pytest.fixture
def script(tmp_path):
    p = tmp_path / "train.py"
    p.write_text(TRAIN)
    return p


@pytest.mark.slow
def test_profiles_a_real_script_on_the_simulator_as_a_whatif(tmp_path, script, cli):
    rc, _, err = cli("profile", "--device", "orin-agx", "--count", "2", "--sample-interval", "0.1",
                       "--out", tmp_path / "s.csv", "--", sys.executable, script, "100000")
    assert rc == 0, err
    rows = (tmp_path / "s.csv").read_text().splitlines()
    assert rows[0].startswith("cores,cpu_mhz,gpu_mhz,mem_mhz,time_ms,power_w") and len(rows) == 3
    assert ",timed,host_step_ms," in rows[0]
    host = rows[0].split(",").index("host_step_ms")
    for r in rows[1:]:
        assert int(r.split(",")[9]) >= 40
        assert "what-if from the model's measured size (SIMULATED): one optimizer step" in r
        assert float(r.split(",")[host]) >= 20.0   # the host step: 20 ms sleep + a tiny step
    assert "under the optimizer-step probe" in err and "host step time" in err
    assert "trains on the CPU" not in err          # a what-if: where the counting runs is no matter


@pytest.mark.slow
def test_script_that_ends_early_is_reported(tmp_path, script, emulated_board, cli):
    root, _ = emulated_board
    rc, _, err = cli("profile", "--backend", "sysfs", "--sysfs-root", root, "--count", "3",
                     "--sample-interval", "0.1", "--out", tmp_path / "s.csv", "--", sys.executable,
                     script, "25")
    assert rc == 1 and "the training script ended (exit code 0) after 25 optimizer steps" in err
    assert "restored to its original mode" in err


@pytest.mark.slow
def test_script_that_crashes_is_reported(tmp_path, script, emulated_board, cli):
    root, _ = emulated_board
    rc, _, err = cli("profile", "--backend", "sysfs", "--sysfs-root", root, "--count", "3",
                     "--sample-interval", "0.1", "--out", tmp_path / "s.csv", "--", sys.executable,
                     script, "30", "crash")
    assert rc == 1 and "crashed (exit code 1)" in err and "CUDA out of memory (pretend)" in err


def test_script_that_never_steps(tmp_path):
    from ptui.core.board.backends.sim import SimJetson
    from ptui.core.catalogue.devices import get_device
    from ptui.core.clock import RealClock
    from ptui.core.profiling.profiler import ProfileError
    from ptui.core.profiling.userscript import ScriptSource
    idle = tmp_path / "idle.py"
    idle.write_text("import time\ntime.sleep(30)\n")
    sim = SimJetson(get_device("orin-agx"), clock=RealClock())
    src = ScriptSource(sim, [sys.executable, str(idle)], tmp_path / "log", first_step_timeout=1.5,
                       whatif=False)
    src.start()
    try:
        with pytest.raises(ProfileError, match="still running but has taken no optimizer step in 1.5 s; "
                           "if it needs longer to start .* raise --startup-timeout"):
            for _ in src.events(0.1):
                pass
    finally:
        src.stop()
    assert src.proc.poll() is not None


def test_a_script_that_only_runs_inference_is_not_only_told_to_wait_longer(tmp_path):
    """An inference-only script (forward passes, no backward(), no step) was told only that it may
    need longer to start and to raise --startup-timeout (600 s by default)."""
    from ptui.core.board.backends.sim import SimJetson
    from ptui.core.catalogue.devices import get_device
    from ptui.core.clock import RealClock
    from ptui.core.profiling.profiler import ProfileError
    from ptui.core.profiling.userscript import ScriptSource
    infer = tmp_path / "infer.py"
    infer.write_text("import torch\nm = torch.nn.Linear(8, 2).eval()\nwith torch.no_grad():\n"
                     "    while True:\n        m(torch.randn(4, 8))\n")
    sim = SimJetson(get_device("orin-agx"), clock=RealClock())
    src = ScriptSource(sim, [sys.executable, str(infer)], tmp_path / "log", first_step_timeout=1.5,
                       whatif=False)
    src.start()
    try:
        # the start-up timeout's error (no forward pass seen yet: 'called no backward() either')
        # or, once a pass was seen, the inference-only one: both name inference, not only the wait
        # (the test took the first alone, and failed on a machine fast enough to see a pass)
        with pytest.raises(ProfileError, match="a script that only runs inference or evaluation has no "
                           "training step") as got:
            for _ in src.events(0.1):
                pass
        assert "1.5 s" in str(got.value), got.value
    finally:
        src.stop()


@pytest.mark.parametrize("optimizer", ["", "torch.optim.Adam(model.parameters())"])
def test_a_script_that_runs_forward_passes_without_backward_is_named_soon(tmp_path, cli, monkeypatch,
                                                                          optimizer):
    """An inference-only script waited the whole start-up timeout (600 s) before its error, though
    every progress note said it had called no backward().  Now, once it has run its model's forward
    passes for FORWARD_ONLY_S seconds with no backward() and no step, ptui stops it and says why:
    one error line, exit 1, its forward passes, its last output and log named.  A script that
    builds an optimizer it never steps (a training script told only to evaluate) too: the
    optimizer's constructor imports dynamo, which once stopped the counting."""
    monkeypatch.setattr("ptui.core.profiling.userscript.FORWARD_ONLY_S", 2.0)
    monkeypatch.setattr("ptui.core.profiling.userscript.STARTUP_TIMEOUT_S", 60.0)
    infer = _write(tmp_path, "infer.py", textwrap.dedent("""
        import torch
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                    torch.nn.Linear(8 * 14 * 14, 10)).eval()
        OPTIMIZER
        print("evaluating", flush=True)
        with torch.no_grad():
            while True:
                model(torch.randn(4, 3, 16, 16))
    """).replace("OPTIMIZER", optimizer))
    rc, _, err = cli("tune", "--count", "0", "--budget-w", "30", "--", sys.executable, infer)
    assert rc == 1, err
    errors = [x for x in err.splitlines() if x.startswith("ptui: error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert "forward passes of its model in" in errors[0], err          # not the 60 s timeout's
    assert "called no backward() and stepped no optimizer" in errors[0], err
    assert "only runs inference or evaluation" in errors[0] and "--startup-timeout" in errors[0], err
    assert "last output: evaluating" in errors[0] and "full log:" in errors[0], err


@pytest.mark.slow
def test_an_inference_loop_under_a_startup_timeout_gets_the_inference_only_error(tmp_path):
    """With --startup-timeout T the forward passes' limit is T too, counted from their first pass,
    but the start-up timeout counts T from the script's start: it always came first, and an
    inference loop, whose progress notes promised a stop 'after T s of forward passes', was told
    only that it may need longer to start.  Now a script still running forward passes without a
    backward() when the start-up timeout ends gets the inference-only error, and the notes say
    when it will stop."""
    from ptui.core.board.backends.sim import SimJetson
    from ptui.core.catalogue.devices import get_device
    from ptui.core.clock import RealClock
    from ptui.core.profiling.profiler import ScriptUnprofilable
    from ptui.core.profiling.userscript import ScriptSource
    infer = _write(tmp_path, "infer.py", "import torch\nm = torch.nn.Linear(8, 2).eval()\n"
                   "print('evaluating', flush=True)\nwith torch.no_grad():\n"
                   "    while True:\n        m(torch.randn(4, 8))\n")
    notes: list[str] = []
    sim = SimJetson(get_device("orin-agx"), clock=RealClock())
    src = ScriptSource(sim, [sys.executable, str(infer)], tmp_path / "log", first_step_timeout=12.0,
                       whatif=False, notify=notes.append, progress_every=1.0)
    src.start()
    try:
        with pytest.raises(ScriptUnprofilable) as got:
            for _ in src.events(0.1):
                pass
    finally:
        src.stop()
    e = str(got.value)
    assert src.forward_passes > 0, (e, notes)          # it ran its loop before the timeout
    assert "forward passes of its model in" in e and "only runs inference or evaluation" in e, e
    assert "still running but has taken no optimizer step" not in e, e
    assert "a --startup-timeout longer than the 12 s given" in e, e
    said = [n for n in notes if "forward pass" in n]
    assert said and all("stopped at --startup-timeout 12 s" in n for n in said), notes


@pytest.mark.slow
def test_the_forward_passes_said_are_those_of_the_run_timed(tmp_path, cli, monkeypatch):
    """The inference-only error said "ran N forward passes in X s" with N counted over every run of
    passes (a burst, a pause, then the loop) but X the last run's time only.  Now N is the passes
    of the run that lasted X s."""
    import re
    monkeypatch.setattr("ptui.core.profiling.userscript.FORWARD_ONLY_S", 2.0)
    monkeypatch.setattr("ptui.core.profiling.userscript.FORWARD_GAP_S", 2.0)
    monkeypatch.setattr("ptui.core.profiling.userscript.STARTUP_TIMEOUT_S", 30.0)
    infer = _write(tmp_path, "infer.py", textwrap.dedent("""
        import time, torch
        model = torch.nn.Linear(8, 2).eval()
        with torch.no_grad():
            for _ in range(5000):                    # a warm-up burst
                model(torch.randn(1, 8))
            time.sleep(3.5)                          # longer than FORWARD_GAP_S: another run
            while True:                              # at most 50 passes a second
                model(torch.randn(1, 8))
                time.sleep(0.02)
    """))
    rc, _, err = cli("tune", "--count", "0", "--budget-w", "30", "--", sys.executable, infer)
    assert rc == 1, err
    got = re.search(r"ran (\d+) forward passes of its model in (\d+) s", err)
    assert got, err
    n, s = int(got[1]), int(got[2])
    assert 0 < n <= 50 * (s + 1), err


# the model of an inference loop, made as a compiled or TorchScript model is made
MODELS = {
    "torch.compile(module)": "model = torch.compile(net, backend='eager')",
    "module.compile()": "net.compile(backend='eager'); model = net",
    "compiled function naming it": "model = torch.compile(lambda x: net(x).softmax(-1), backend='eager')",
    "compiled function given it": "predict = torch.compile(lambda m, x: m(x).softmax(-1), backend='eager')\n"
                                  "model = lambda x: predict(net, x)",
    "compiled function naming it later": "@torch.compile(backend='eager')\ndef model(x):\n"
                                         "    return later(x)\nlater = net",
    "@torch.compile on forward": "class Net(torch.nn.Module):\n    def __init__(self):\n"
                                 "        super().__init__()\n        self.fc = torch.nn.Linear(8, 2)\n"
                                 "    @torch.compile(backend='eager')\n    def forward(self, x):\n"
                                 "        return self.fc(x).relu()\nmodel = Net().eval()",
    "frozen TorchScript": "model = torch.jit.freeze(torch.jit.script(net))",
    "frozen TorchScript file": "import os, tempfile\nf = os.path.join(tempfile.mkdtemp(), 'm.pt')\n"
                               "torch.jit.save(torch.jit.freeze(torch.jit.script(net)), f)\n"
                               "model = torch.jit.load(f)",
    "optimize_for_inference": "model = torch.jit.optimize_for_inference(torch.jit.trace(net, torch.randn(4, 8)))",
    # an eager model after an unrelated compiled function (its calls were not counted)
    "eager after a compiled function": "norm = torch.compile(lambda x: x / (x.std() + 1e-6), backend='eager')\n"
                                       "model = lambda x: net(norm(x))",
}


@pytest.mark.slow
@pytest.mark.parametrize("make", list(MODELS.values()), ids=list(MODELS))
def test_a_compiled_or_torchscript_inference_loop_is_named_as_an_eager_one_is(tmp_path, cli, monkeypatch,
                                                                             make):
    """An inference loop over a compiled model (torch.compile stopped the counting of forward
    passes), an eager one after an unrelated compiled function (the same), or a frozen
    TorchScript one (its parameters folded into its graph: no module with parameters was called)
    waited out the whole start-up timeout (600 s); an eager model's was stopped after
    FORWARD_ONLY_S.  Now they end the same way."""
    monkeypatch.setattr("ptui.core.profiling.userscript.FORWARD_ONLY_S", 2.0)
    monkeypatch.setattr("ptui.core.profiling.userscript.STARTUP_TIMEOUT_S", 60.0)
    infer = _write(tmp_path, "infer.py", textwrap.dedent("""
        import torch
        net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2)).eval()
        MAKE
        print("evaluating", flush=True)
        with torch.no_grad():
            while True:
                model(torch.randn(4, 8))
    """).replace("MAKE", make))
    rc, _, err = cli("tune", "--count", "0", "--budget-w", "30", "--", sys.executable, infer)
    assert rc == 1, err
    errors = [x for x in err.splitlines() if x.startswith("ptui: error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert "forward passes of its model in" in errors[0], err          # not the 60 s timeout's
    assert "only runs inference or evaluation" in errors[0] and "last output: evaluating" in errors[0], err


@pytest.mark.slow
def test_a_compiled_function_without_a_model_before_training_is_not_inference(tmp_path, cli, monkeypatch):
    """A compiled function on tensors alone (data preparation, augmentation) is no model's forward
    pass: run longer than FORWARD_ONLY_S before training, the script is still counted."""
    monkeypatch.setattr("ptui.core.profiling.userscript.FORWARD_ONLY_S", 1.5)
    monkeypatch.setattr("ptui.core.profiling.userscript.STARTUP_TIMEOUT_S", 60.0)
    prep = _write(tmp_path, "prep.py", textwrap.dedent("""
        import time, torch
        model = torch.nn.Linear(8, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        normalise = torch.compile(lambda x: (x - x.mean(0)) / (x.std(0) + 1e-6), backend="eager")
        data, t0 = [], time.monotonic()
        while time.monotonic() - t0 < 4.0:           # features prepared in advance
            data.append(normalise(torch.randn(64, 8)))
        while True:
            for x in data:
                opt.zero_grad()
                model(x).pow(2).mean().backward()
                opt.step()
    """))
    rc, _, err = cli("tune", "--count", "0", "--budget-w", "30", "--", sys.executable, prep)
    assert rc == 0, err
    assert "counted in" in err, err


@pytest.mark.slow
def test_a_compiled_function_given_an_unhashable_module_does_not_break_the_script(tmp_path, cli, monkeypatch):
    """A compiled function given a module without parameters whose class defines __eq__ (so
    unhashable) crashed the user's script under the probe: looking the module up among the
    TorchScript models raised "TypeError: unhashable type" inside the script's call.  The probe
    never breaks the script: it is no model, and the script trains and is counted."""
    monkeypatch.setattr("ptui.core.profiling.userscript.STARTUP_TIMEOUT_S", 60.0)
    script = _write(tmp_path, "scale.py", textwrap.dedent("""
        import torch
        class Scale(torch.nn.Module):
            def __eq__(self, other):
                return isinstance(other, Scale)
            def forward(self, x):
                return x * 2
        scale = Scale()
        apply = torch.compile(lambda m, x: m(x), backend="eager")
        for _ in range(3):
            apply(scale, torch.randn(4, 8))
        model = torch.nn.Linear(8, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        while True:
            opt.zero_grad()
            model(torch.randn(4, 8)).pow(2).mean().backward()
            opt.step()
    """))
    rc, _, err = cli("tune", "--count", "0", "--budget-w", "30", "--", sys.executable, script)
    assert rc == 0 and "TypeError" not in err, err
    assert "counted in" in err, err


def test_forward_passes_before_training_are_waited_for_longer_than_backward_without_a_step(
        tmp_path, cli, monkeypatch):
    """A DQN-style loop fills its replay buffer with its policy's forward passes before it trains:
    stopped as inference only after NO_STEP_S (60 s), the limit for backward() without a step.
    Forward passes alone are waited for FORWARD_ONLY_S (120 s), then the script is counted."""
    monkeypatch.setattr("ptui.core.profiling.userscript.NO_STEP_S", 1.0)
    monkeypatch.setattr("ptui.core.profiling.userscript.FORWARD_ONLY_S", 60.0, raising=False)
    warm = _write(tmp_path, "warm.py", textwrap.dedent("""
        import time, torch
        policy = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
        opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
        replay, t0 = [], time.monotonic()
        with torch.no_grad():
            while time.monotonic() - t0 < 4.0:       # the warm-up: acting, no learning yet
                s = torch.randn(8)
                replay.append((s, int(policy(s).argmax())))
        print("warm-up done", len(replay), flush=True)
        while True:
            opt.zero_grad()
            policy(torch.stack([s for s, _ in replay[:32]])).pow(2).mean().backward()
            opt.step()
    """))
    rc, _, err = cli("tune", "--count", "0", "--budget-w", "30", "--", sys.executable, warm)
    assert rc == 0, err
    assert "counted in" in err, err


def test_a_script_that_trains_through_autograd_grad_is_not_told_it_only_runs_inference(tmp_path, cli,
                                                                                    monkeypatch):
    """A functional training loop (torch.autograd.grad, the parameters updated by hand: no
    backward(), no optimizer step) was told that it only runs inference, once its forward passes
    had gone on for NO_STEP_S; it trains, with no torch.optim step to time, and is told that."""
    monkeypatch.setattr("ptui.core.profiling.userscript.NO_STEP_S", 2.0)
    monkeypatch.setattr("ptui.core.profiling.userscript.STARTUP_TIMEOUT_S", 60.0)
    functional = _write(tmp_path, "functional.py", textwrap.dedent("""
        import torch
        model = torch.nn.Linear(16, 2)
        x, y = torch.randn(32, 16), torch.randn(32, 2)
        print("training", flush=True)
        while True:
            loss = torch.nn.functional.mse_loss(model(x), y)
            grads = torch.autograd.grad(loss, list(model.parameters()))
            with torch.no_grad():
                for p, g in zip(model.parameters(), grads):
                    p -= 0.01 * g
    """))
    rc, _, err = cli("tune", "--count", "0", "--budget-w", "30", "--", sys.executable, functional)
    assert rc == 1, err
    errors = [x for x in err.splitlines() if x.startswith("ptui: error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert "torch.autograd.grad" in errors[0] and "stepped no torch.optim optimizer" in errors[0], err
    assert "made by hand" in errors[0] and "only runs inference" not in errors[0], err


def test_a_script_that_ends_before_its_model_is_counted_is_told_how_many_steps_it_needs(tmp_path, cli):
    """A script that ended by itself after 2 optimizer steps was told only that it had ended (exit
    code 0, after 2 optimizer steps), not that ptui counts the model over the third."""
    two = _write(tmp_path, "two.py", TRAIN)
    rc, _, err = cli("tune", "--count", "0", "--budget-w", "30", "--", sys.executable, two, "2")
    assert rc == 1, err
    errors = [x for x in err.splitlines() if x.startswith("ptui: error:")]
    assert len(errors) == 1 and "ended (exit code 0) after 2 optimizer steps" in errors[0], err
    assert "it must run at least 3 iterations" in errors[0], err


@pytest.mark.slow
def test_profiles_a_script_on_the_emulated_board_and_restores(tmp_path, script, emulated_board, cli):
    from tests.support import fakesys
    root, _ = emulated_board
    before = fakesys.read_mode(root)
    rc, _, err = cli("profile", "--backend", "sysfs", "--sysfs-root", root, "--count", "2",
                       "--sample-interval", "0.1", "--out", tmp_path / "s.csv", "--", sys.executable,
                       script, "100000")
    assert rc == 0, err
    # this machine's torch has no CUDA: on a board that means CPU training, and it is said
    assert "warning: the script trains on the CPU: torch in it sees no CUDA device" in err
    rows = (tmp_path / "s.csv").read_text().splitlines()[1:]
    assert len(rows) == 2 and all(20.0 <= float(r.split(",")[4]) < 500 for r in rows)
    assert all(float(r.split(",")[5]) > 5 for r in rows)          # power read from the INA3221 files
    assert fakesys.read_mode(root) == before                       # restored


@pytest.mark.slow
def test_a_profile_on_the_emulated_board_is_labelled_simulated_in_its_csv(tmp_path, script,
                                                                          emulated_board, cli,
                                                                          monkeypatch):
    """A profile on ptui emulate's board wrote `one optimizer step` in its CSV's timed column, as
    a Jetson's would, so `ptui pool push` added its rows as a real board's (pool list: 0
    simulated) and a model of it was decided on without a word (a user trial).  The column says
    the emulated board's power and clocks are SIMULATED, and the pool counts the rows so."""
    root, _ = emulated_board
    out = tmp_path / "s.csv"
    rc, _, err = cli("profile", "--backend", "sysfs", "--sysfs-root", root, "--count", "1",
                     "--sample-interval", "0.1", "--out", out, "--", sys.executable, script, "100000")
    assert rc == 0, err
    from ptui.core.board.csvio import profile_tags
    timed = profile_tags(out).get("timed", "")
    assert timed.startswith("one optimizer step") and "emulated board (SIMULATED)" in timed, timed
    monkeypatch.setenv("PTUI_POOL", f"sqlite:///{tmp_path}/pool.sqlite")
    rc, _, err = cli("pool", "push", "--device", "orin-agx", "--profile", out, "--workload", "mine",
                     "--batch-size", "8")
    assert rc == 0, err
    rc, doc, err = cli("pool", "list", "--json")
    import json
    (g,) = json.loads(doc)["groups"]
    assert g["rows"] == 1 and g["simulated_rows"] == 1, g


@pytest.mark.slow
def test_builtin_torch_loop_on_a_real_backend(tmp_path, emulated_board, cli):
    root, _ = emulated_board
    rc, _, err = cli("profile", "--backend", "sysfs", "--sysfs-root", root, "--workload", "mobilenetv3",
                       "--batch-size", "1", "--count", "1", "--sample-interval", "0.1",
                       "--out", tmp_path / "l.csv")
    assert rc == 0, err
    assert "ptui.probe.loops mobilenetv3" in err
    assert len((tmp_path / "l.csv").read_text().splitlines()) == 2
    rc, _, err = cli("profile", "--backend", "sysfs", "--sysfs-root", root, "--workload", "yolov8n",
                     "--out", tmp_path / "y.csv")
    assert rc == 2 and "no built-in training loop for yolov8n" in err


# -- issue 10 A: scripts as people write them -----------------------------------------------------
GAN = textwrap.dedent("""
    import sys, time, torch
    torch.manual_seed(0)
    G, D = torch.nn.Linear(8, 16), torch.nn.Linear(16, 1)
    og = torch.optim.Adam(G.parameters(), lr=1e-3)
    od = torch.optim.SGD(D.parameters(), lr=1e-2)
    for i in range(int(sys.argv[1])):
        od.zero_grad()
        D(G(torch.randn(32, 8)).detach()).mean().backward()
        time.sleep(0.015)
        od.step()
        og.zero_grad()
        (-D(G(torch.randn(32, 8)))).mean().backward()
        time.sleep(0.015)
        og.step()
""")

ACCUM = textwrap.dedent("""
    import sys, time, torch
    model = torch.nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i in range(int(sys.argv[1])):
        for micro in range(4):                     # gradient accumulation over 4 micro-batches
            (model(torch.randn(8, 16)) ** 2).mean().backward()
            time.sleep(0.008)
        opt.step()
        opt.zero_grad()
""")

LOADER = textwrap.dedent("""
    import sys, torch
    from torch.utils.data import DataLoader, TensorDataset
    width = int(sys.argv[1])
    model = torch.nn.Sequential(torch.nn.Linear(32, width), torch.nn.ReLU(), torch.nn.Linear(width, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = DataLoader(TensorDataset(torch.randn(4096, 32), torch.randint(0, 4, (4096,))), batch_size=16)
    for epoch in range(1000):
        for x, y in data:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
""")

# a launcher like torchrun/accelerate: closes every inherited fd, then starts rank 0 and rank 1
LAUNCHER = textwrap.dedent("""
    import os, subprocess, sys
    os.closerange(3, 4096)
    procs = [subprocess.Popen([sys.executable] + sys.argv[1:], close_fds=True,
                              env=dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2"))
             for r in (0, 1)]
    sys.exit(max(p.wait() for p in procs))
""")

# rank 1 steps 3x faster than rank 0: timing it would give ~10 ms instead of ~30 ms
RANKED = textwrap.dedent("""
    import os, sys, time, torch
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    pause = 0.03 if os.environ.get("RANK") == "0" else 0.01
    for i in range(int(sys.argv[1])):
        model(torch.randn(2, 4)).sum().backward()
        time.sleep(pause)
        opt.step()
""")


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def _source(tmp_path, argv, **kw):
    """A ScriptSource on a real-time simulated board, timing the script as on a Jetson."""
    from ptui.core.board.backends.sim import SimJetson
    from ptui.core.catalogue.devices import get_device
    from ptui.core.clock import RealClock
    from ptui.core.profiling.userscript import ScriptSource
    sim = SimJetson(get_device("orin-agx"), clock=RealClock())
    return ScriptSource(sim, [str(a) for a in argv], tmp_path / "log", whatif=False, **kw)


def _minibatches(src, n, interval=0.1):
    from ptui.core.board.backends.base import MinibatchEvent
    out = []
    src.start()
    try:
        for ev in src.events(interval):
            if isinstance(ev, MinibatchEvent):
                out.append(ev)
                if len(out) >= n:
                    break
    finally:
        src.stop()
    return out


def test_a5_no_sitecustomize_noise_in_the_log(tmp_path, script):
    """venv/pyenv/conda Pythons have no other sitecustomize: chaining must not print a KeyError."""
    src = _source(tmp_path, [sys.executable, script, "100000"])
    assert len(_minibatches(src, 2)) == 2
    assert "sitecustomize" not in (tmp_path / "log").read_text()


def test_a5_another_sitecustomize_still_runs(tmp_path, script, monkeypatch):
    other = tmp_path / "site2"
    other.mkdir()
    (other / "sitecustomize.py").write_text("print('USER SITECUSTOMIZE RAN', flush=True)\n")
    monkeypatch.setenv("PYTHONPATH", str(other))
    src = _source(tmp_path, [sys.executable, script, "100000"])
    assert len(_minibatches(src, 2)) == 2
    log = (tmp_path / "log").read_text()
    assert "USER SITECUSTOMIZE RAN" in log and "Error in sitecustomize" not in log


def test_a3_two_optimizers_are_timed_per_whole_iteration(tmp_path):
    gan = _write(tmp_path, "gan.py", GAN)
    src = _source(tmp_path, [sys.executable, gan, "100000"])
    evs = _minibatches(src, 4)
    assert all(e.ms >= 30.0 for e in evs)           # both steps (2 x 15 ms), not one of them
    assert src.it.optimizers == 2
    assert src.it.timed() == "iteration of 2 optimizers (2 optimizer steps, 2 backward passes)"


def test_a6_gradient_accumulation_is_named(tmp_path):
    acc = _write(tmp_path, "acc.py", ACCUM)
    said = []
    src = _source(tmp_path, [sys.executable, acc, "100000"], notify=said.append)
    evs = _minibatches(src, 3)
    assert all(e.ms >= 32.0 for e in evs)           # 4 micro-batches of 8 ms per timed step
    assert "4 micro-batches" in src.it.timed() and "gradient accumulation" in src.it.timed()
    assert any("timing one optimizer step over 4 micro-batches" in m for m in said)


@pytest.mark.slow
def test_a2_launcher_that_closes_fds_reports_rank0_only(tmp_path):
    launcher = _write(tmp_path, "launch.py", LAUNCHER)
    ranked = _write(tmp_path, "ranked.py", RANKED)
    src = _source(tmp_path, [sys.executable, launcher, ranked, "100000"])
    evs = _minibatches(src, 4)
    assert len(evs) == 4 and all(e.ms >= 30.0 for e in evs)      # rank 0's steps only
    assert src.proc.poll() is not None


def test_a2_probe_reports_for_rank_zero_only():
    from ptui.probe.hook import is_reporting_rank
    assert is_reporting_rank({}) and is_reporting_rank({"RANK": "0", "LOCAL_RANK": "0"})
    assert not is_reporting_rank({"RANK": "3", "LOCAL_RANK": "0"})
    assert not is_reporting_rank({"LOCAL_RANK": "1"})


@pytest.mark.slow
def test_a4_still_starting_is_not_never_stepping(tmp_path):
    """A slow start (torch.compile, data preparation) is reported as progress, then timed; one
    step is enough to end the start-up phase."""
    slow = _write(tmp_path, "slow.py", TRAIN.replace("for i in range(steps):",
                                                     "time.sleep(2.5)\nfor i in range(steps):"))
    said = []
    src = _source(tmp_path, [sys.executable, slow, "100000"], first_step_timeout=60,
                  notify=said.append, progress_every=0.5)
    assert len(_minibatches(src, 2)) == 2
    starting = [m for m in said if m.startswith("still starting: the script is running")]
    assert starting
    # before its first backward() the user is told what an inference-only script would mean
    assert "no backward() either" in starting[0] and "only runs inference" in starting[0]


def test_a4_startup_timeout_flag(tmp_path, script, cli):
    rc, _, err = cli("profile", "--device", "orin-agx", "--count", "2", "--startup-timeout", "0",
                     "--out", tmp_path / "s.csv", "--", sys.executable, script, "10")
    assert rc == 2 and "--startup-timeout" in err and "positive" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s.csv").exists()


def test_a6_one_step_then_crash_says_one_step(tmp_path, emulated_board, cli):
    root, _ = emulated_board
    once = _write(tmp_path, "once.py", TRAIN.replace(
        "    opt.step()\n", "    opt.step()\n    if i == 0:\n        sys.exit('stopped after one step')\n"))
    rc, _, err = cli("profile", "--backend", "sysfs", "--sysfs-root", root, "--count", "1",
                     "--sample-interval", "0.1", "--out", tmp_path / "s.csv", "--", sys.executable,
                     once, "100")
    assert rc == 1 and "after 1 optimizer step (0 whole iterations)" in err, err
    assert "0 minibatches" not in err


def test_a6_script_that_never_steps_gets_a_hint(tmp_path, emulated_board, cli):
    root, _ = emulated_board
    idle = _write(tmp_path, "eval.py", "import torch\nprint('evaluated', flush=True)\n")
    rc, _, err = cli("profile", "--backend", "sysfs", "--sysfs-root", root, "--count", "1",
                     "--sample-interval", "0.1", "--out", tmp_path / "s.csv", "--", sys.executable, idle)
    assert rc == 1 and "ended (exit code 0) before its first optimizer step" in err
    assert "ptui times optimizer.step() calls" in err and "last output: evaluated" in err
    assert "each mode needs at least 42 training iterations" in err


UNPROFILABLE = {
    "inference only": "m = torch.nn.Linear(8, 2).eval()\nwith torch.no_grad():\n    while True:\n"
                      "        m(torch.randn(4, 8))\n",
    "no training at all": "print('nothing to train', flush=True)\n",
    "an update made by hand": "m = torch.nn.Linear(8, 2)\nwhile True:\n    m(torch.randn(4, 8)).sum()"
                              ".backward()\n    with torch.no_grad():\n        m.weight -= 0.01 * m.weight.grad\n",
}


@pytest.mark.parametrize("body", list(UNPROFILABLE.values()), ids=list(UNPROFILABLE))
@pytest.mark.slow
def test_a_script_ptui_cannot_profile_is_offered_no_resume(tmp_path, cli, monkeypatch, body):
    """A script ptui cannot profile (it trains no step ptui can time) was told to resume with the
    same command, which runs it the same way and fails the same way.  Now no resume is offered;
    a crash still gets one (test_a7_resume_needs_the_same_command_and_the_hint_has_it)."""
    monkeypatch.setattr("ptui.core.profiling.userscript.FORWARD_ONLY_S", 1.5)
    monkeypatch.setattr("ptui.core.profiling.userscript.NO_STEP_S", 1.5)
    monkeypatch.setattr("ptui.core.profiling.userscript.STARTUP_TIMEOUT_S", 30.0)
    bad = _write(tmp_path, "bad.py", "import torch\n" + body)
    rc, _, err = cli("profile", "--device", "orin-agx", "--count", "2", "--session", "s1",
                     "--out", tmp_path / "s.csv", "--", sys.executable, bad)
    assert rc == 1 and "ptui: error: the training script" in err, err
    assert "resume" not in err, err


@pytest.mark.slow
def test_a7_resume_needs_the_same_command_and_the_hint_has_it(tmp_path, script, emulated_board, cli):
    root, _ = emulated_board
    args = ("profile", "--backend", "sysfs", "--sysfs-root", root, "--count", "2",
            "--sample-interval", "0.1", "--session", "s1", "--out", tmp_path / "s.csv")
    rc, _, err = cli(*args, "--", sys.executable, script, "30", "crash")
    assert rc == 1
    hint = f"ptui profile --session s1 --resume --out {tmp_path / 's.csv'} -- {sys.executable} {script} 30 crash"
    assert hint in err
    other = tmp_path / "other.py"
    other.write_text(TRAIN)
    rc, _, err = cli(*args, "--resume", "--", sys.executable, other, "30")
    assert rc == 2 and err.count("\n") == 1
    assert f"{script} 30 crash" in err and f"{other} 30" in err


@pytest.mark.parametrize("command", ["profile", "tune"])
def test_the_resume_hint_keeps_the_startup_timeout_given(tmp_path, script, cli, command):
    """A run under --startup-timeout 900 that crashed was told to resume without it: the resume
    would wait the default 600 s where the user had asked for longer."""
    goal = ("--budget-w", "30") if command == "tune" else ()
    rc, _, err = cli(command, "--device", "orin-agx", "--count", "6" if goal else "2", "--session", "s1", *goal,
                     "--startup-timeout", "900", "--out", tmp_path / "s.csv", "--",
                     sys.executable, script, "30", "crash")
    assert rc == 1, err
    hint = [x for x in err.splitlines() if f"ptui {command} --session s1 --resume" in x]
    assert hint and "--startup-timeout 900" in hint[-1], err


def test_a1_whatif_follows_the_mode_and_the_model(tmp_path, cli):
    """No Jetson: time and power come from the script's measured model through the simulator's
    physics (they change with the mode and with the model); the host time is reported apart."""
    loader = _write(tmp_path, "loader.py", LOADER)
    modes = tmp_path / "modes.csv"
    modes.write_text("cores,cpu_mhz,gpu_mhz,mem_mhz\n12,2201.6,1300.5,3199\n4,729.6,318.75,665.6\n")
    rc, _, err = cli("profile", "--device", "orin-agx", "--modes", modes, "--out", tmp_path / "a.csv",
                     "--", sys.executable, loader, "64")
    assert rc == 0, err
    assert "what-if from the model's measured size (SIMULATED)" in err
    assert "16 samples per iteration" in err and "0 DataLoader workers" in err
    import csv
    with open(tmp_path / "a.csv") as fh:
        rows = list(csv.DictReader(fh))
    fast, slow = rows if float(rows[0]["gpu_mhz"]) > 1000 else rows[::-1]
    assert float(slow["time_ms"]) > 1.5 * float(fast["time_ms"])     # follows the mode
    assert float(slow["power_w"]) < float(fast["power_w"])
    assert rows[0]["timed"].startswith("what-if from the model's measured size (SIMULATED)")
    assert float(rows[0]["host_step_ms"]) > 0


def test_a1_whatif_workload_scales_with_the_measured_size():
    from ptui.core.board.physics import steady_state
    from ptui.core.catalogue.devices import get_device
    from ptui.core.profiling.userscript import whatif_workload
    dev = get_device("orin-agx")
    small = {"flops": 2e9, "bytes": 4e8, "ops": 600, "params": 1e6, "param_bytes": 4e6,
             "state_bytes": 8e6, "samples": 16, "input_bytes": 16 * 4096, "workers": 4}
    big = dict(small, flops=2e11, bytes=4e9, ops=1200, params=2.5e7, param_bytes=1e8, state_bytes=2e8)
    ws, wb = whatif_workload(small), whatif_workload(big)
    assert ws.batch_size == 16 and ws.workers == 4
    top, low = (12, 2201.6, 1300.5, 3199), (12, 2201.6, 318.75, 3199)
    ts, tb = (float(steady_state(dev, w, *top).time_ms) for w in (ws, wb))
    assert tb > 2 * ts                                                     # 100x the FLOPs
    assert float(steady_state(dev, wb, *low).time_ms) > 2.5 * tb          # compute-bound: GPU clock
    assert float(steady_state(dev, wb, *top).power_w) > float(steady_state(dev, ws, *top).power_w)
    with pytest.raises(Exception, match="no FLOPs"):
        whatif_workload(dict(small, flops=0))


# what the probe measured over one iteration of ptui's plain-torch ResNet-18 at batch 16 (CPU;
# SGD with momentum steps its 62 tensors one by one there, 186 of the 482 operators)
RESNET18_BS16 = {"flops": 170374594560, "bytes": 3344492312, "ops": 482, "params": 11689512,
                 "param_bytes": 46758048, "state_bytes": 46758048, "samples": 16,
                 "input_bytes": 9633792, "workers": 4, "device": "cpu", "step_ops": 186,
                 "step_tensors": 62, "step_groups": 1}


def test_a1_a_measured_resnet18_lands_on_the_catalogs():
    """The what-if physics is calibrated: a ResNet-18 measured by the probe gives the catalog
    ResNet-18's time and power (within 10 %) on fast and slow modes."""
    from ptui.core.board.physics import steady_state
    from ptui.core.catalogue.devices import get_device
    from ptui.core.catalogue.workloads import get_workload
    from ptui.core.profiling.userscript import whatif_workload
    dev = get_device("orin-agx")
    w, ref = whatif_workload(RESNET18_BS16), get_workload("resnet18", 16)
    for mode in [(12, 2201.6, 1300.5, 3199), (4, 1190.4, 522.75, 2133), (2, 729.6, 318.75, 665.6)]:
        a, b = steady_state(dev, w, *mode), steady_state(dev, ref, *mode)
        assert abs(float(a.time_ms) / float(b.time_ms) - 1) < 0.1
        assert abs(float(a.power_w) / float(b.power_w) - 1) < 0.1


def test_a1_a_batch_the_probe_cannot_see_prices_the_same_iteration():
    """A script with no DataLoader (tensors made on the GPU, nanoGPT's get_batch, ptui's own loops)
    gives the probe no batch size: its iteration is one unit.  The same ResNet-18 iteration was
    then priced as one sample of 170 GFLOP at the kernel efficiency of a batch of 1 (relative to
    the calibration batch 16): 2x the GPU time of the same work seen through a DataLoader.  The
    kernels are the same whatever the batch is called, so the time and power must be too."""
    from ptui.core.board.physics import steady_state
    from ptui.core.catalogue.devices import get_device
    from ptui.core.profiling.userscript import whatif_workload
    seen = dict(RESNET18_BS16, workers=0, input_bytes=0)
    unseen = dict(seen, samples=0)
    for name, modes in (("orin-agx", [(12, 2201.6, 1300.5, 3199), (10, 1804.8, 420.75, 665.6),
                                      (4, 1190.4, 522.75, 2133)]),
                        ("orin-nano", [(6, 1510.4, 624.75, 2133), (4, 729.6, 306.0, 665.6)])):
        dev = get_device(name)
        for mode in modes:
            a = steady_state(dev, whatif_workload(seen), *mode)
            b = steady_state(dev, whatif_workload(unseen), *mode)
            assert abs(float(b.time_ms) / float(a.time_ms) - 1) < 0.02, (name, mode)
            assert abs(float(b.power_w) / float(a.power_w) - 1) < 0.02, (name, mode)


def test_a1_a_cpu_count_prices_the_optimizer_step_the_jetson_runs():
    """torch's optimizers step all parameters at once on CUDA (foreach) and one by one on a CPU: the
    same ResNet-18 iteration counted 482 operators on a CPU and 279 on CUDA, so the what-if from a
    laptop's count put 13 % more host work in each step than the same script counted on a GPU
    (measured on an H100, tests/functional/test_probe_cuda.py).  The CPU count's per-parameter step
    is now priced as the CUDA step: the same as a count made with foreach on the CPU (measured)."""
    from ptui.core.board.physics import steady_state
    from ptui.core.catalogue.devices import get_device
    from ptui.core.prediction.roofline import WorkloadSpec, launch_ops
    from ptui.core.profiling.userscript import whatif_workload
    per_param = dict(RESNET18_BS16, samples=0, workers=0, input_bytes=0)
    foreach = dict(per_param, ops=299, bytes=3204218168, step_ops=3)
    assert launch_ops(per_param) == launch_ops(foreach) == 299
    from ptui.core.profiling.userscript import describe_model
    assert "482 operators (299 as a Jetson launches them" in describe_model(per_param)
    assert "299 operators," in describe_model(foreach)
    assert launch_ops(dict(per_param, device="cuda")) == 482     # counted on CUDA: as launched
    dev = get_device("orin-agx")
    for mode in [(10, 883.2, 930.75, 3199), (2, 729.6, 1300.5, 3199), (12, 2201.6, 318.75, 665.6)]:
        a = steady_state(dev, whatif_workload(per_param), *mode)
        b = steady_state(dev, whatif_workload(foreach), *mode)
        assert abs(float(a.time_ms) / float(b.time_ms) - 1) < 0.03, mode
    a, b = WorkloadSpec.from_probe(per_param), WorkloadSpec.from_probe(foreach)
    assert a.host_ms == b.host_ms


@pytest.mark.parametrize("B", [4, 64])
def test_a1_a_script_at_another_batch_keeps_the_catalogs_batch_scaling(B):
    """A script measured through a DataLoader at batch 4 or 64 keeps the catalog's kernel
    efficiency at that batch (found by review: normalising the efficiency at the measured batch
    made it 1 at every batch, the GPU time at batch 4 a third of the catalog ResNet-18's)."""
    from ptui.core.board.physics import steady_state
    from ptui.core.catalogue.devices import get_device
    from ptui.core.catalogue.workloads import get_workload
    from ptui.core.profiling.userscript import whatif_workload
    r = RESNET18_BS16
    fixed = 8 * r["param_bytes"]
    per = (r["bytes"] - fixed) / 16
    info = dict(r, samples=B, flops=r["flops"] * B / 16, bytes=fixed + per * B,
                input_bytes=r["input_bytes"] * B / 16)
    dev, mode = get_device("orin-agx"), (12, 2201.6, 318.75, 3199)
    w = steady_state(dev, whatif_workload(info), *mode)
    c = steady_state(dev, get_workload("resnet18", B), *mode)
    assert abs(float(w.time_ms * w.gpu_util) / float(c.time_ms * c.gpu_util) - 1) < 0.15


TWO_OPTIMIZERS = textwrap.dedent("""
    import torch
    a = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8))        # 4 tensors
    b = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 1))        # 4 tensors
    frozen = torch.nn.Linear(8, 8)                                               # no grads
    opt_a = torch.optim.SGD([{"params": a[0].parameters()}, {"params": [*a[1].parameters(),
                             *frozen.parameters()]}], lr=0.01, momentum=0.9)    # default: foreach on CUDA
    opt_b = torch.optim.Adam(b.parameters(), lr=0.01, foreach=False)             # told otherwise
    lbfgs = torch.optim.LBFGS(torch.nn.Linear(8, 1).parameters(), max_iter=2)   # no foreach at all
    x = torch.randn(16, 8)
    while True:
        for opt in (opt_a, opt_b):
            opt.zero_grad()
        b(a(x)).pow(2).mean().backward()
        opt_a.step()
        opt_b.step()
""")


@pytest.mark.slow
def test_a1_the_probe_counts_only_the_steps_cuda_would_run_at_once(tmp_path):
    """The step operators a CPU count converts (roofline.launch_ops) are those of optimizers left
    to torch's default, over the tensors that had a gradient, group by group (found by review:
    foreach=False, frozen parameters and parameter groups were counted as foreach steps)."""
    from ptui.core.prediction.roofline import launch_ops
    info = _counted(tmp_path, text=TWO_OPTIMIZERS)
    assert info["device"] == "cpu" and info["step_groups"] == 2 and info["step_tensors"] == 4
    per_tensor = info["step_ops"] / 4                       # SGD with momentum, tensor by tensor
    assert per_tensor >= 1
    assert launch_ops(info) == info["ops"] - info["step_ops"] + 2 * int(np.ceil(per_tensor))


CNN_BATCHES = textwrap.dedent("""
    import sys, torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
                          nn.Flatten(), nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    data = TensorDataset(torch.randn(1024, 3, 32, 32), torch.randint(0, 10, (1024,)))
    batches = DataLoader(data, batch_size=int(sys.argv[2]), shuffle=True)
    while True:
        if sys.argv[1] == "loader":
            it = iter(batches)
        for _ in range(8):
            if sys.argv[1] == "loader":
                x, y = next(it)
            else:
                x, y = torch.randn(int(sys.argv[2]), 3, 32, 32), torch.randint(0, 10, (int(sys.argv[2]),))
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
""")


def _counted(tmp_path, *args, text=CNN_BATCHES):
    """What the probe counts of one iteration of the script `text` (run with `args`)."""
    from ptui.core.board.backends.sim import SimJetson
    from ptui.core.catalogue.devices import get_device
    from ptui.core.clock import RealClock
    from ptui.core.profiling.userscript import ScriptSource
    script = tmp_path / "cnn.py"
    script.write_text(text)
    sim = SimJetson(get_device("orin-agx"), clock=RealClock())
    src = ScriptSource(sim, [sys.executable, str(script), *args], tmp_path / f"log-{'-'.join(args)}",
                       whatif=True)
    src.start()
    try:
        for _ in src.events(0.1):
            if src.model_info is not None:
                break
    finally:
        src.stop()
    return src.model_info


@pytest.mark.slow
def test_a1_a_dataloaders_own_indexing_is_not_counted_as_the_models_work(tmp_path):
    """A DataLoader with no workers indexes its dataset sample by sample and collates the batch in
    the script's process: the probe counted those operators as the model's (131 against 65 for
    the same CNN with its batches made in the loop, 2 more per sample: the user's trial), and the
    what-if priced them as GPU launches.  The model's operators and bytes are now the same
    whichever way its batches come."""
    for bs in ("32", "64"):
        loader, inloop = _counted(tmp_path, "loader", bs), _counted(tmp_path, "inloop", bs)
        assert loader["samples"] == int(bs) and inloop["samples"] == 0
        assert inloop["ops"] - 2 <= loader["ops"] <= inloop["ops"]      # the loop's randn, randint
        assert loader["bytes"] == pytest.approx(inloop["bytes"], rel=0.05)


def test_a1_a_dataloader_without_workers_is_priced_at_its_measured_loading():
    """The data pipeline was priced at a decoding, augmenting pipeline's cost per input byte
    (45 Mcycles per MB), whatever the dataset: an in-memory TensorDataset cost 3x its CNN's step
    (the user's trial).  Where the script loads its batches itself (no workers) the probe times
    that loading, and the what-if and the prior take it, at the host's clock; with workers (not
    timed) the rule stays, and says nothing."""
    from ptui.core.board.physics import workload_physics
    from ptui.core.prediction.roofline import HOST_REF_MHZ, WorkloadSpec
    from ptui.core.profiling.userscript import describe_model, whatif_workload
    info = dict(RESNET18_BS16, workers=0, batches=2, samples=32, load_ms=4.0, host_mhz=2600.0)
    wp = workload_physics(whatif_workload(info))
    assert wp.data_mcycles == pytest.approx(4.0 / 1000 * 2600 / 16)          # per sample
    assert "4.0 ms loading each batch in the script's process, measured" in describe_model(info)
    assert WorkloadSpec.from_probe(info).loader_ms == pytest.approx(4.0 * 2 * 2600 / HOST_REF_MHZ)
    workers = dict(info, workers=4)
    rule = workload_physics(whatif_workload(workers)).data_mcycles
    assert rule == pytest.approx(0.02 + 45.0 * RESNET18_BS16["input_bytes"] / 32 / 1e6)
    assert "loading each batch" not in describe_model(workers)
    assert WorkloadSpec.from_probe(workers).loader_ms is None


LOADING = textwrap.dedent("""
    import queue, sys, threading, time, torch
    from torch import nn
    from torch.utils.data import DataLoader, Dataset
    class Slow(Dataset):
        first = True
        def __len__(self):
            return 10 ** 6
        def __getitem__(self, i):
            if Slow.first and sys.argv[1] == "cold":
                Slow.first = False
                time.sleep(0.5)                 # the first item only: a file opened, a cache warmed
            elif sys.argv[1] == "thread":
                time.sleep(0.05)
            return torch.randn(3, 32, 32), 1
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
                          nn.Flatten(), nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Slow(), batch_size=1)
    def background(it):                         # a prefetching thread (prefetch_generator's shape)
        q = queue.Queue(2)
        def run():
            for b in it:
                q.put(b)
        threading.Thread(target=run, daemon=True).start()
        while True:
            yield q.get()
    src = background(loader) if sys.argv[1] == "thread" else iter(loader)
    for x, y in src:
        if sys.argv[1] == "inloop":
            x, y = torch.randn(1, 3, 32, 32), torch.ones(1, dtype=torch.long)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
""")


@pytest.mark.slow
def test_a1_the_loading_timed_is_not_an_iterators_cold_first_batch(tmp_path):
    """load_ms was in practice the first batch (2 timed, the larger taken): 510 ms for a dataset
    slow on its first item only (found by review).  Each iterator's first batch is left out and
    the loading is sent over more batches after the measurement (the L line)."""
    info = _counted(tmp_path, "cold", text=LOADING)
    assert info["load_ms"] is not None and info["load_ms"] < 100.0, info


@pytest.mark.slow
def test_a1_a_prefetching_thread_does_not_hide_the_models_operators(tmp_path):
    """One loading flag for every thread: a background thread waiting in a DataLoader's __next__
    made the main thread's model operators uncounted, 3 against 41 (found by review)."""
    inloop = _counted(tmp_path, "inloop", text=LOADING)
    thread = _counted(tmp_path, "thread", text=LOADING)
    assert thread["ops"] >= inloop["ops"] - 4, (thread["ops"], inloop["ops"])


@pytest.mark.slow
def test_a4_slow_steps_extend_the_per_mode_limit(tmp_path):
    """Steps slower than the per-mode limit allows (here 0.25 s x 10 > 1.5 s) are waited for."""
    from ptui.core.board.backends.sim import SimJetson
    from ptui.core.catalogue.devices import get_device
    from ptui.core.clock import RealClock
    from ptui.core.profiling.profiler import ProfileConfig, Profiler, choose_modes, open_session
    from ptui.core.profiling.store import Store
    from ptui.core.profiling.userscript import ScriptSource, script_workload
    slow = _write(tmp_path, "slow.py", TRAIN.replace("time.sleep(0.02)", "time.sleep(0.25)"))
    argv = [sys.executable, str(slow), "100000"]
    dev = get_device("orin-agx")
    sim = SimJetson(dev, clock=RealClock())
    store = Store(tmp_path / "s.sqlite")
    wl = script_workload(16, argv)
    info = open_session(store, "slow", resume=False, device=dev, workload=wl, seed=0,
                        backend_kind="sim", plan_fn=lambda: choose_modes(dev, count=1),
                        original_mode=sim.current_mode(), params={})
    src = ScriptSource(sim, argv, tmp_path / "log", whatif=False, steps_per_mode=10)
    cfg = ProfileConfig(min_minibatches=8, mode_timeout_s=1.5, sample_interval=0.1, min_settle_s=0.2)
    (r,) = Profiler(sim, wl, store, "slow", cfg, source=src).run(info)
    assert r.n_minibatches >= 8 and 250.0 <= r.time_ms < 1000.0


LOADER32 = textwrap.dedent("""
    import sys, torch
    from torch.utils.data import DataLoader, TensorDataset
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(256, 32), torch.randint(0, 4, (256,)))
    for epoch in range(int(sys.argv[1])):
        for x, y in DataLoader(data, batch_size=32, shuffle=True):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
""")


def _tags(csv_path):
    import csv as _csv
    rows = list(_csv.DictReader(open(csv_path)))
    return {r["batch_size"] for r in rows}, {r["session"] for r in rows}


@pytest.mark.slow
def test_script_profile_tags_the_batch_it_measured_not_a_default(tmp_path, cli):
    """A script's profile said batch_size 16 (ptui's default for built-in workloads) and named its
    session '...-bs16-...' while the script's DataLoader fed 32 samples per step: the CSV now gives
    the measured batch (32), and a script without a DataLoader gets no batch size at all."""
    loader = tmp_path / "loader.py"
    loader.write_text(LOADER32)
    rc, _, err = cli("profile", "--device", "orin-agx", "--count", "2", "--sample-interval", "0.1",
                     "--out", tmp_path / "a.csv", "--", sys.executable, loader, "1000")
    assert rc == 0, err
    bs, sess = _tags(tmp_path / "a.csv")
    assert bs == {"32"}, bs
    assert not any("-bs16-" in s for s in sess), sess
    plain = tmp_path / "train.py"
    plain.write_text(TRAIN)
    rc, _, err = cli("profile", "--device", "orin-agx", "--count", "2", "--sample-interval", "0.1",
                     "--out", tmp_path / "b.csv", "--", sys.executable, plain, "100000")
    assert rc == 0, err
    bs, sess = _tags(tmp_path / "b.csv")
    assert bs == {""}, bs
    assert not any("-bs16-" in s for s in sess), sess
    # a batch size the user states is kept
    rc, _, err = cli("profile", "--device", "orin-agx", "--count", "2", "--sample-interval", "0.1",
                     "--batch-size", "32", "--out", tmp_path / "c.csv", "--", sys.executable,
                     loader, "1000")
    assert rc == 0, err
    bs, sess = _tags(tmp_path / "c.csv")
    assert bs == {"32"} and all("-bs32-" in s for s in sess), (bs, sess)


def _probe_run(tmp_path, code, timeout=60):
    """Run `python -c code` under the probe as ptui starts a script; returns (stdout, probe lines)."""
    import os
    import socket
    import subprocess
    import threading

    from ptui.core.profiling.userscript import PROBE_SITE, PTUI_ROOT
    path = str(tmp_path / "p.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(4)
    got = []
    done = threading.Event()

    def serve():
        # accept until the script has exited and no connection is left pending: closing the
        # listening socket as soon as the script exits dropped a connection the thread had not yet
        # accepted on a busy machine (the probe's lines then seemed never sent)
        srv.settimeout(0.2)
        while True:
            ended = done.is_set()     # before the wait: the script's connections are queued by then
            try:
                conn, _ = srv.accept()
            except socket.timeout:
                if ended:
                    return
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(timeout)
                try:
                    while chunk := conn.recv(4096):
                        got.append(chunk.decode())
                except OSError:
                    pass

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(PROBE_SITE), str(PTUI_ROOT)]),
               PTUI_PROBE_SOCK=path)
    try:
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             timeout=timeout)
    finally:
        done.set()
        server.join(timeout)
        srv.close()
    return out.stdout + out.stderr, "".join(got).splitlines()


def test_a2_the_probe_does_not_import_torch_into_processes_that_do_not(tmp_path):
    """Launcher parents and helper tools run under the probe too: it must not load torch there."""
    out, lines = _probe_run(tmp_path, "import sys; print('torch loaded:', 'torch' in sys.modules)")
    assert "torch loaded: False" in out, out
    assert any(x.startswith("H ") for x in lines)             # the probe is there, connected


def test_a2_the_probe_hooks_torch_when_the_script_imports_it(tmp_path):
    code = ("import torch.optim as o, torch\n"
            "m = torch.nn.Linear(2, 1); opt = o.SGD(m.parameters(), lr=0.1)\n"
            "for _ in range(3):\n    m(torch.ones(1, 2)).sum().backward(); opt.step()\n"
            "print('loader', type(torch.__spec__.loader).__name__)")
    out, lines = _probe_run(tmp_path, code)
    steps = [x for x in lines if x.startswith("S ")]
    assert len(steps) == 3 and [x.split()[3] for x in steps] == ["1", "1", "1"], (out, lines)
    assert any(x.startswith("D ") for x in lines)
    assert "loader _HookAfterLoad" not in out and "probe not installed" not in out, out


def test_a2_a_library_looking_for_torch_first_does_not_unhook_it(tmp_path):
    """Lightning, transformers, accelerate ask importlib.util.find_spec('torch') before importing."""
    code = ("import importlib.util; assert importlib.util.find_spec('torch') is not None\n"
            "import torch\n"
            "m = torch.nn.Linear(2, 1); opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
            "for _ in range(2):\n    m(torch.ones(1, 2)).sum().backward(); opt.step()\n")
    out, lines = _probe_run(tmp_path, code)
    assert len([x for x in lines if x.startswith("S ")]) == 2, (out, lines)


SLOW = textwrap.dedent("""
    import os, sys, time, torch
    open(sys.argv[1], "w").write(str(os.getpid()))
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    while True:
        model(torch.randn(2, 4)).sum().backward()
        time.sleep(0.2)
        opt.step()
""")


def _alive(pid):
    import os
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:                                   # a zombie nobody reaped has ended too
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_script_ends_when_ptui_is_killed(tmp_path, emulate):
    """The script runs in its own session: kill -9 of ptui must not leave it training.  On an
    emulated board the script trains for the whole profile (on the simulator it may already have
    been stopped once its what-if steps were timed, which raced the check below)."""
    import os
    import signal
    import subprocess
    import time
    slow = _write(tmp_path, "slow.py", SLOW)
    pidfile = tmp_path / "pid"
    root = emulate(tmp_path / "root").root
    ptui = subprocess.Popen([sys.executable, "-m", "ptui", "profile", "--backend", "sysfs",
                             "--sysfs-root", str(root), "--count", "50", "--sample-interval", "0.1", "--out",
                             str(tmp_path / "s.csv"), "--", sys.executable, str(slow), str(pidfile)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    try:
        deadline = time.monotonic() + 60
        while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        pid = int(pidfile.read_text())
        time.sleep(2.0)
        assert _alive(pid) and ptui.poll() is None      # profiling: both running
        os.kill(ptui.pid, signal.SIGKILL)
        ptui.wait()
        # the script trains forever unless stopped: it goes within a second on a quiet machine;
        # the bound is generous so that a busy one does not read as "kept running"
        t0 = time.monotonic()
        while _alive(pid) and time.monotonic() < t0 + 30:
            time.sleep(0.1)
        gone = not _alive(pid)
        print(f"script gone {time.monotonic() - t0:.2f} s after kill -9 of ptui")
        if not gone:
            os.kill(pid, signal.SIGKILL)
        assert gone, "the training script kept running after ptui was killed"
    finally:
        if ptui.poll() is None:
            ptui.kill()
            ptui.wait()


def test_a_script_over_batch_sizes_is_one_session_with_a_log_per_size(tmp_path, cli):
    """--batch-sizes with a script: the command runs once per size ({bs} filled in, its output in
    NAME@bsB.log), the store holds one session whose rows carry their size, and a resume with
    another command is refused before anything runs, leaving the session as it was."""
    from contextlib import closing

    from ptui.core.paths import logs_dir
    from ptui.core.profiling.store import Store
    train = tmp_path / "train.py"
    train.write_text(TRAIN.replace("x, y = torch.randn(64, 32), torch.randint(0, 4, (64,))",
                                   "bs = int(sys.argv[2])\n"
                                   "x, y = torch.randn(bs, 32), torch.randint(0, 4, (bs,))")
                     .replace("if len(sys.argv) > 2:", "if len(sys.argv) > 3:"))
    args = ("profile", "--device", "orin-agx", "--batch-sizes", "8,16", "--count", "3",
            "--sample-interval", "0.1", "--session", "s", "--out", tmp_path / "s.csv")
    rc, _, err = cli(*args, "--", sys.executable, train, "100000", "{bs}")
    assert rc == 0, err
    with closing(Store()) as store:
        assert [x.name for x in store.list_sessions()] == ["s"]
        rows = store.results("s")
        assert len(rows) == 3 and {r["batch_size"] for _, r in rows} <= {8, 16}
        sizes = sorted({r["batch_size"] for _, r in rows})
    assert sorted(p.name for p in logs_dir().iterdir()) == sorted(f"s@bs{b}.log" for b in sizes)
    lines = (tmp_path / "s.csv").read_text().splitlines()
    i = lines[0].split(",").index("batch_size")
    assert sorted(int(x.split(",")[i]) for x in lines[1:]) == sorted(r["batch_size"] for _, r in rows)
    with closing(Store()) as store:
        store.set_status("s", "aborted")
        before = store.get_session("s")
    rc, _, err = cli(*args, "--resume", "--", sys.executable, train, "99", "{bs}")
    assert rc == 2 and "resume with the same command" in err and len(err.strip().splitlines()) == 1
    with closing(Store()) as store:
        assert store.get_session("s").status == before.status == "aborted"


@pytest.mark.slow
def test_a_later_batch_size_that_takes_no_step_in_time_is_offered_a_longer_resume(tmp_path, cli):
    """Over --batch-sizes, a later size that took no step within --startup-timeout (a slower start
    at a larger batch) ended with no resume offered, as if the script could not be profiled at all,
    though the finished size was kept and a resume with a longer --startup-timeout profiles the
    rest.  Now the error offers that resume, with the longer timeout in it, and it works."""
    marker = tmp_path / "slow"
    marker.write_text("")
    train = tmp_path / "train.py"
    train.write_text(TRAIN.replace("x, y = torch.randn(64, 32), torch.randint(0, 4, (64,))",
                                   "bs = int(sys.argv[2])\n"
                                   f"while bs == 16 and __import__('os').path.exists({str(marker)!r}):\n"
                                   "    time.sleep(0.2)\n"
                                   "x, y = torch.randn(bs, 32), torch.randint(0, 4, (bs,))")
                     .replace("if len(sys.argv) > 2:", "if len(sys.argv) > 3:"))
    modes = tmp_path / "modes.csv"
    modes.write_text("cores,cpu_mhz,gpu_mhz,mem_mhz\n12,2201.6,1300.5,3199\n")
    rc, _, err = cli("profile", "--device", "orin-agx", "--batch-sizes", "8,16", "--modes", modes,
                     "--sample-interval", "0.1", "--session", "s", "--out", tmp_path / "s.csv",
                     "--startup-timeout", "10", "--", sys.executable, train, "100000", "{bs}")
    assert rc == 1 and "taken no optimizer step in 10 s" in err, err
    assert "finished modes are kept in session s" in err, err
    assert "a resume with a larger --startup-timeout could get past this: " in err, err
    hint = err.split("could get past this: ")[1].splitlines()[0]
    assert "--resume" in hint and "--batch-sizes 8,16" in hint and "--startup-timeout 20" in hint, hint
    marker.unlink()
    import shlex
    rc, _, err = cli(*shlex.split(hint)[1:])
    assert rc == 0, err
    lines = (tmp_path / "s.csv").read_text().splitlines()
    i = lines[0].split(",").index("batch_size")
    assert sorted(int(x.split(",")[i]) for x in lines[1:]) == [8, 16], lines


def test_the_last_lines_of_a_script_that_exits_at_once_are_not_lost_on_a_busy_machine(tmp_path,
                                                                                       monkeypatch):
    """ptui ended the script's stream 0.1 s after it exited ("a last connection may still be
    being accepted"): on a busy machine the accept thread ran later than that, and a reporter's
    last lines (connected, sent, exited) came after the end, or never.  The end now waits until
    no connection is left pending.  The accept thread is held back 0.6 s here, as a loaded CPU
    does."""
    import time

    from ptui.core.profiling import userscript
    script = _write(tmp_path, "last.py", textwrap.dedent("""
        import os, socket
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(os.environ["PTUI_PROBE_SOCK"])
        s.sendall(b"Z the last line\\n")
        s.close()
    """))
    src = _source(tmp_path, [sys.executable, script])
    accept = userscript.ScriptSource._accept

    def late_accept(self):
        time.sleep(0.6)
        accept(self)
    monkeypatch.setattr(userscript.ScriptSource, "_accept", late_accept)
    src.start()
    got = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            item = src.q.get(timeout=30)
            if item is None:
                break
            got.append(item[1])
    finally:
        src.stop()
    assert "Z the last line" in got


def test_durations_are_said_in_the_unit_a_person_would_use():
    from ptui.core.profiling.userscript import duration_words
    assert [duration_words(s) for s in (12, 89, 150, 1800, 5399, 9000)] == [
        "12 s", "89 s", "2 min", "30 min", "90 min", "2.5 h"]


@pytest.mark.slow
def test_tunes_json_says_a_board_script_trains_on_the_cpu(tmp_path, script, emulated_board, cli):
    """The CPU-training warning went to stderr only: a fleet script reading `tune --json` had
    `"notes": []` (the user's trial).  The document carries it, and where the script trained."""
    import json
    root, _ = emulated_board
    rc, out, err = cli("tune", "--backend", "sysfs", "--sysfs-root", root, "--count", "6",
                       "--budget-w", "30", "--sample-interval", "0.1", "--json", "--",
                       sys.executable, script, "100000")
    assert rc == 0, err
    d = json.loads(out)
    assert d["trains_on"] == "cpu"
    assert d["notes"][0].startswith("warning: the script trains on the CPU"), d["notes"]
