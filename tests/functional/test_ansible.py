"""The Ansible role deploy/ansible/roles/ptui_mode against a fleet of three emulated boards.

Three local-connection hosts, each its own `ptui emulate` board (driven with --backend sysfs
--sysfs-root) and its own PTUI_DATA_DIR, run the example playbook deploy/ansible/site.yml: the first
run decides (ptui tune --json on the simulator) and applies the decided mode to each board, read
back from the emulated sysfs and from `ptui status --json`; a second run reports changed=0 and
profiles nothing; `--check` on a board put in another mode reports the change and writes nothing;
a run after it changes that board only.  Needs ansible-playbook (the `ansible` extra: ansible-core
2.19.14); skipped, saying so, without it.  No wall-clock limits: the times are printed only."""
import json
import os
import re
import shutil
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from ptui.core.board import emulator
from ptui.core.catalogue.devices import get_device
from ptui.core.catalogue.workloads import WORKLOADS
from ptui.core.decision.pareto import DEFAULT_RISK
from tests.support.cli import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

SITE = ROOT / "deploy" / "ansible" / "site.yml"
# device, goal: every goal kind the role passes to ptui tune
BOARDS = {"board1": ("orin-agx", {"ptui_budget_w": 20}),
          # kept across reboots (a custom nvpmodel mode), and the status as an executable local fact
          "board2": ("xavier-agx", {"ptui_budget_w": 20, "ptui_persist": True}),
          "board3": ("orin-nano", {"ptui_objective": "energy"})}


def ansible_playbook() -> str | None:
    """$PTUI_ANSIBLE_PLAYBOOK, else ansible-playbook beside this Python, else on PATH."""
    env = os.environ.get("PTUI_ANSIBLE_PLAYBOOK")
    if env:
        return env
    here = Path(sys.executable).parent / "ansible-playbook"
    return str(here) if here.is_file() else shutil.which("ansible-playbook")


PLAYBOOK = ansible_playbook()
if PLAYBOOK is None:
    pytestmark.append(pytest.mark.skip(
        reason="ansible-playbook not found (pip install -e '.[ansible]' installs ansible-core 2.19.14, "
               "or set PTUI_ANSIBLE_PLAYBOOK)"))


def recap(out: str) -> dict[str, dict[str, int]]:
    """PLAY RECAP's counts per host: {"board1": {"ok": 16, "changed": 4, ...}}."""
    tail = out[out.rindex("PLAY RECAP"):]
    return {m.group(1): {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
            for m in re.finditer(r"^(\S+)\s*:\s*(ok=.*)$", tail, re.M)}


def play(tmp_path, inventory, *extra, rc=0) -> tuple[dict[str, dict[str, int]], str, float]:
    env = dict(os.environ)
    env.update(PYTHONPATH=str(ROOT), ANSIBLE_HOME=str(tmp_path / "ansible-home"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_RETRY_FILES_ENABLED="0", ANSIBLE_PIPELINING="1")
    t0 = time.monotonic()
    r = subprocess.run([PLAYBOOK, "-i", str(inventory), str(SITE), *extra], capture_output=True,
                       text=True, env=env, cwd=SITE.parent)
    took = time.monotonic() - t0
    assert r.returncode == rc, f"ansible-playbook {' '.join(extra)} failed (rc {r.returncode}):\n{r.stdout[-6000:]}\n{r.stderr[-3000:]}"
    return recap(r.stdout), r.stdout, took


def ptui_json(data_dir, *args) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PTUI_DATA_DIR=str(data_dir))
    r = subprocess.run([sys.executable, "-m", "ptui", *map(str, args)], capture_output=True, text=True,
                       env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def tree(*dirs) -> dict[str, tuple[int, int]]:
    """Every file under `dirs`: (size, mtime in ns), to prove nothing was written."""
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns)
            for d in dirs if Path(d).exists() for p in sorted(Path(d).rglob("*")) if p.is_file()}


def knob_files(plan: dict) -> dict[str, str]:
    """The files an apply writes (its plan's `echo V > PATH` steps) and what they read now."""
    paths = [m.group(1) for s in plan["steps"] for m in [re.match(r"echo \S+ > (\S+)", s)] if m]
    assert paths, plan["steps"]
    return {p: Path(p).read_text() for p in paths}


def test_role_decides_once_applies_where_needed_and_checks_without_writing(tmp_path, emulate):
    boards = {}
    for host, (device, _) in BOARDS.items():
        root = tmp_path / host / "board"
        emulate(root, device, "--interval", "1")           # a slow sensor tick: 2 shared cores
        boards[host] = root
    sysfs = {h: ("--backend", "sysfs", "--sysfs-root", boards[h], "--device", BOARDS[h][0]) for h in BOARDS}
    data = {h: tmp_path / h / "data" for h in BOARDS}
    hosts = {h: {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                 "ptui_device": BOARDS[h][0], "ptui_sysfs_root": str(boards[h]), "ptui_data_dir": str(data[h]),
                 **BOARDS[h][1]} for h in BOARDS}
    hosts["board2"]["ptui_facts_d"] = str(tmp_path / "facts.d")
    inventory = tmp_path / "inventory.yml"                 # JSON is YAML
    inventory.write_text(json.dumps({"jetsons": {"hosts": hosts, "vars": {
        "ptui_bin": [sys.executable, "-m", "ptui"], "ptui_backend": "sysfs",
        "ptui_tune_backend": "sim", "ptui_tune_args": ["--count", "8", "--seed", "1"]}}}))
    before = {h: ptui_json(data[h], "status", "--json", *sysfs[h]) for h in BOARDS}

    # first run: each board decided and put in its decided mode
    counts, out, fresh_s = play(tmp_path, inventory)
    decisions = {}
    for h, (device, _) in BOARDS.items():
        assert counts[h]["failed"] == 0 and counts[h]["changed"] >= 1, (h, counts)
        files = list((data[h] / "ansible-decisions").glob("*.json"))
        assert len(files) == 1 and files[0].name.startswith(f"resnet18-{device}-"), files
        d = decisions[h] = json.loads(files[0].read_text())
        assert d["schema_version"] == 2 and d["command"] == "tune" and d["feasible"] and d["simulated"]
        mode = get_device(device).mode(d["mode"]["cores"], d["mode"]["cpu_mhz"], d["mode"]["gpu_mhz"],
                                       d["mode"]["mem_mhz"])
        assert emulator.read_mode(boards[h]) == mode, h          # the emulated sysfs holds it
        st = ptui_json(data[h], "status", "--json", *sysfs[h])
        assert st["key"] == d["key"] == mode.key and st["emulated"], (h, st)
        assert before[h]["key"] != d["key"], f"{h} was already in its decided mode: the run proved nothing"
        assert len(list((data[h] / "tune").glob("*.csv"))) == 1         # one tune per host
    assert "would apply" not in out
    nvp = (boards["board2"] / "var/lib/nvpmodel/status").read_text()
    assert nvp.startswith("pmode:0099") and "NAME=PTUI" in (boards["board2"] / "etc/nvpmodel.conf").read_text()
    fact = subprocess.run([tmp_path / "facts.d" / "ptui.fact"], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert fact.returncode == 0 and json.loads(fact.stdout)["key"] == decisions["board2"]["key"], fact

    # second run: nothing changes, nothing is profiled again
    counts, out, converged_s = play(tmp_path, inventory)
    assert all(c["changed"] == 0 and c["failed"] == 0 for c in counts.values()), counts
    for h in BOARDS:
        assert len(list((data[h] / "tune").glob("*.csv"))) == 1, h
        assert emulator.read_mode(boards[h]).key == decisions[h]["key"]

    # board1 put in another mode by hand; --check says it would change, and writes nothing
    ptui_json(data["board1"], "apply", "--preset", "MODE_15W", "--yes", "--json", *sysfs["board1"])
    moved = ptui_json(data["board1"], "status", "--json", *sysfs["board1"])
    assert moved["key"] != decisions["board1"]["key"] and moved["preset"] == "MODE_15W"
    plan = ptui_json(data["board1"], "apply", "--dry-run", "--json", *sysfs["board1"],
                     *[f"--{k.replace('_', '-')}={v}" for k, v in decisions["board1"]["mode"].items()])
    assert plan["changed"]
    knobs, files = knob_files(plan), tree(*data.values(), os.environ["PTUI_STATE_DIR"])
    counts, out, check_s = play(tmp_path, inventory, "--check")
    assert counts["board1"]["changed"] == 1 and counts["board1"]["failed"] == 0, counts
    assert counts["board2"]["changed"] == 0 and counts["board3"]["changed"] == 0, counts
    assert f"would apply {decisions['board1']['key']} (the board is in {moved['key']})" in out
    assert knob_files(plan) == knobs                      # not one knob written
    assert tree(*data.values(), os.environ["PTUI_STATE_DIR"]) == files      # nor a decision, nor undo state
    assert ptui_json(data["board1"], "status", "--json", *sysfs["board1"])["key"] == moved["key"]

    # a real run changes board1 only, back to its decision (not decided again)
    counts, out, _ = play(tmp_path, inventory)
    assert counts["board1"]["changed"] == 1, counts
    assert counts["board2"]["changed"] == 0 and counts["board3"]["changed"] == 0, counts
    assert emulator.read_mode(boards["board1"]).key == decisions["board1"]["key"]
    assert len(list((data["board1"] / "tune").glob("*.csv"))) == 1
    print(f"\nfleet of 3 (local connection): fresh run {fresh_s:.1f} s, converged run {converged_s:.1f} s, "
          f"--check {check_s:.1f} s")


def test_role_stops_a_host_whose_goal_no_mode_meets_and_keeps_no_decision(tmp_path, emulate):
    root, data = tmp_path / "board", tmp_path / "data"
    emulate(root, "orin-nano", "--interval", "1")
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(json.dumps({"jetsons": {"hosts": {"nano": {
        "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
        "ptui_bin": [sys.executable, "-m", "ptui"], "ptui_backend": "sysfs", "ptui_sysfs_root": str(root),
        "ptui_data_dir": str(data), "ptui_tune_backend": "sim", "ptui_tune_args": ["--count", "6"],
        "ptui_budget_w": 2}}}}))
    before = emulator.read_mode(root)
    # two goals: refused before anything runs
    counts, out, _ = play(tmp_path, inventory, "-e", "ptui_objective=energy", rc=2)
    assert counts["nano"]["failed"] == 1 and "give exactly one goal" in out, out
    assert not (data / "tune").exists()
    # 2 W on an Orin Nano: ptui tune exits 3; the host fails with ptui's reason, no decision kept
    counts, out, _ = play(tmp_path, inventory, rc=2)
    assert counts["nano"]["failed"] == 1, counts
    assert "ptui tune exited 3: no mode stays within 2 W" in out, out
    # nothing decided, nothing changed: the decision directory was made first, changed=1 beside
    # failed=1 (a fleet trial)
    assert counts["nano"]["changed"] == 0 and not (data / "ansible-decisions").exists(), counts
    assert emulator.read_mode(root) == before


def test_role_refuses_tune_args_given_as_one_string(tmp_path):
    """`-e ptui_tune_args='["--count","3"]'` (key=value: a string, not a list) was passed to ptui
    tune one character at a time: "one workload at a time: --workload resnet18 ... or -- '[' '"'
    - - c o u n t ..." (a fleet trial).  The role now stops the host first, saying the variable is
    a list and how to give one, and nothing runs."""
    data = tmp_path / "data"
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(json.dumps({"jetsons": {"hosts": {"b": {
        "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
        "ptui_bin": [sys.executable, "-m", "ptui"], "ptui_backend": "sim", "ptui_device": "orin-agx",
        "ptui_data_dir": str(data), "ptui_budget_w": 20}}}}))
    counts, out, _ = play(tmp_path, inventory, "-e", 'ptui_tune_args=["--count","3"]', rc=2)
    assert counts["b"]["failed"] == 1 and "ptui_tune_args is a list" in out, out
    assert not data.exists()


def sim_host(tmp_path) -> tuple[Path, Path]:
    """An inventory of one local host "b" on the simulated Orin AGX (a 20 W budget, tune counting 6
    modes), and its data directory."""
    data = tmp_path / "data"
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(json.dumps({"jetsons": {"hosts": {"b": {
        "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
        "ptui_bin": [sys.executable, "-m", "ptui"], "ptui_backend": "sim", "ptui_device": "orin-agx",
        "ptui_data_dir": str(data), "ptui_tune_backend": "sim", "ptui_tune_args": ["--count", "6"],
        "ptui_budget_w": 20}}}}))
    return inventory, data


def test_role_refuses_a_bad_goal_before_it_changes_anything(tmp_path):
    """`-e ptui_budget_w=abc` made the decision directory and ran ptui tune, which refused it:
    changed=1, failed=1 (a fleet trial).  A goal that is no number above 0 (or an objective other
    than energy) now stops the host first, one line naming the variable: changed=0, nothing
    written."""
    inventory, data = sim_host(tmp_path)
    for given, says in (("ptui_budget_w=abc", 'ptui_budget_w is a power budget in W, a number above 0 '
                                              '(e.g. 25); given "abc"'),
                        ('{"ptui_budget_w": -5}', "ptui_budget_w is a power budget in W, a number above 0"),
                        ('{"ptui_budget_w": "nan"}', "ptui_budget_w is a power budget in W, a number above 0"),
                        ('{"ptui_budget_w": "", "ptui_deadline_ms": "1e999"}',
                         "ptui_deadline_ms is a minibatch deadline in ms, a number above 0"),
                        ('{"ptui_budget_w": "", "ptui_objective": "speed"}',
                         'ptui_objective is "energy" (the least energy per minibatch); given "speed"')):
        counts, out, _ = play(tmp_path, inventory, "-e", given, rc=2)
        assert counts["b"]["failed"] == 1 and counts["b"]["changed"] == 0, (given, counts, out[-3000:])
        assert says in out, (given, out[-3000:])
        assert not data.exists(), given


def one_board(tmp_path, emulate, **goal) -> tuple[Path, Path, Path]:
    """One emulated Orin AGX as a local-connection host "b", deciding on the simulator with
    --count 6: (inventory, its board's root, its data directory)."""
    root, data = tmp_path / "board", tmp_path / "data"
    emulate(root, "orin-agx", "--interval", "1")
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(json.dumps({"jetsons": {"hosts": {"b": {
        "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
        "ptui_bin": [sys.executable, "-m", "ptui"], "ptui_backend": "sysfs", "ptui_device": "orin-agx",
        "ptui_sysfs_root": str(root), "ptui_data_dir": str(data), "ptui_tune_backend": "sim",
        "ptui_tune_args": ["--count", "6", "--seed", "1"], **goal}}}}))
    return inventory, root, data


def report(out: str, host: str) -> str:
    """The line site.yml's "Report the mode each board is in" printed for `host`."""
    m = re.search(rf'"msg": "({re.escape(host)}: [^"]*)"', out[out.rindex("Report the mode"):])
    assert m, out[-3000:]
    return m.group(1)


def test_report_says_the_decision_and_the_board_are_simulated(tmp_path, emulate):
    """On the emulated inventory the report read "b: 8c/... (...), decided for fastest within 20 W
    (risk 0.05): 8c/..." although the decision file said simulated: true and the board was an
    emulated one (a fleet trial).  The line now says so, as ptui's own output does."""
    inventory, _, data = one_board(tmp_path, emulate, ptui_budget_w=20)
    counts, out, _ = play(tmp_path, inventory)
    assert counts["b"]["failed"] == 0, counts
    d = json.loads(next((data / "ansible-decisions").glob("*.json")).read_text())
    assert d["simulated"]
    line = report(out, "b")
    assert line.startswith(f"b: {d['key']} (") and line.endswith(f": {d['key']}"), line
    assert "; EMULATED, SIMULATED), decided" in line, line             # the board
    assert "decided on the SIMULATED orin-agx for fastest within 20 W" in line, line  # the decision


def test_a_goal_written_differently_reuses_the_decision(tmp_path, emulate):
    """`-e '{"ptui_budget_w":25.0}'` after a run with ptui_budget_w=25 profiled the board again,
    beside the first decision a second one (budget25.0w), and reported changed=2 (a fleet trial).
    Equal goals now name one decision file: 25, 25.0 and "25" (what `-e ptui_budget_w=25` gives)
    decide once."""
    inventory, root, data = one_board(tmp_path, emulate, ptui_budget_w=25)
    counts, _, _ = play(tmp_path, inventory)
    assert counts["b"]["changed"] >= 1 and counts["b"]["failed"] == 0, counts
    files = list((data / "ansible-decisions").glob("*.json"))
    assert len(files) == 1 and "-budget25w-" in files[0].name, files
    key = json.loads(files[0].read_text())["key"]
    for given in ('{"ptui_budget_w": 25.0}', '{"ptui_budget_w": "25"}', "ptui_budget_w=25.00"):
        counts, _, _ = play(tmp_path, inventory, "-e", given)
        assert counts["b"]["changed"] == 0 and counts["b"]["failed"] == 0, (given, counts)
        assert list((data / "ansible-decisions").glob("*.json")) == files, given
    assert len(list((data / "tune").glob("*.csv"))) == 1                  # profiled once
    assert emulator.read_mode(root).key == key



def test_a_risk_or_batch_size_written_differently_reuses_the_decision(tmp_path, emulate):
    """`-e ptui_risk=0.050` (or `-e '{"ptui_risk": " 5e-2"}'`) after a run with ptui_risk 0.05 gave a
    second decision file and profiled the board again, changed reported; so did a batch size of
    16 written "016" or 16.0 (ptui refused the "16.0" only after the role had made its decision
    directory) (a fleet trial).  Equal values now name one decision, as equal budgets do; 0.05,
    ptui's default risk, and 16, the workload's default batch size, are left out of the tune
    command (one decision with an empty ptui_risk and ptui_batch_size)."""
    import hashlib
    inventory, root, data = one_board(tmp_path, emulate, ptui_budget_w=25, ptui_risk=0.05,
                                      ptui_batch_size=16)
    counts, _, _ = play(tmp_path, inventory)
    assert counts["b"]["changed"] >= 1 and counts["b"]["failed"] == 0, counts
    files = list((data / "ansible-decisions").glob("*.json"))
    argv = ["tune", "--json", "--device", "orin-agx", "--backend", "sim", "--workload", "resnet18",
            "--budget-w", "25", "--count", "6", "--seed", "1"]
    name = f"resnet18-orin-agx-budget25w-{hashlib.sha1(' '.join(argv).encode()).hexdigest()[:12]}.json"
    assert [f.name for f in files] == [name], files
    for given in ("ptui_risk=0.050 ptui_batch_size=016",
                  '{"ptui_risk": " 5e-2", "ptui_batch_size": 16.0}',
                  '{"ptui_risk": "0.05", "ptui_batch_size": "+16"}'):
        counts, out, _ = play(tmp_path, inventory, "-e", given)
        assert counts["b"]["changed"] == 0 and counts["b"]["failed"] == 0, (given, counts, out[-3000:])
        assert list((data / "ansible-decisions").glob("*.json")) == files, given
    assert len(list((data / "tune").glob("*.csv"))) == 1                  # profiled once


def test_an_empty_risk_and_the_default_risk_share_one_decision(tmp_path, emulate):
    """`-e ptui_risk=0.05` after a run with the role's empty ptui_risk (ptui's default risk, 0.05)
    made a second decision file, profiled the board again and reported changed, and so did
    `-e ptui_risk=` after a run at 0.05 (a fleet trial): one goal, two tune commands.  The default
    risk, however written, is now left out of the tune command: one decision."""
    inventory, _, data = one_board(tmp_path, emulate, ptui_budget_w=25)
    counts, _, _ = play(tmp_path, inventory)
    assert counts["b"]["changed"] >= 1 and counts["b"]["failed"] == 0, counts
    files = list((data / "ansible-decisions").glob("*.json"))
    assert len(files) == 1, files
    for given in ("ptui_risk=0.05", '{"ptui_risk": 0.05}', "ptui_risk=5e-2", "ptui_risk="):
        counts, out, _ = play(tmp_path, inventory, "-e", given)
        assert counts["b"]["changed"] == 0 and counts["b"]["failed"] == 0, (given, counts, out[-3000:])
        assert list((data / "ansible-decisions").glob("*.json")) == files, given
    assert len(list((data / "tune").glob("*.csv"))) == 1                  # profiled once
    import yaml  # ansible-core's
    role_vars = yaml.safe_load((SITE.parent / "roles" / "ptui_mode" / "vars" / "main.yml").read_text())
    assert role_vars["_ptui_default_risk"] == DEFAULT_RISK       # the role's copy of ptui's default


def test_an_empty_batch_size_and_the_workloads_default_share_one_decision(tmp_path, emulate):
    """`-e ptui_batch_size=16` after a run with the role's empty ptui_batch_size (ResNet-18's
    default batch size, 16: ptui tune decides the same mode) made a second decision file, profiled
    the board again and reported changed (a fleet trial), as the default risk did.  A batch size
    equal to the workload's default is now left out of the tune command: one decision."""
    inventory, _, data = one_board(tmp_path, emulate, ptui_budget_w=25)
    counts, _, _ = play(tmp_path, inventory)
    assert counts["b"]["changed"] >= 1 and counts["b"]["failed"] == 0, counts
    files = list((data / "ansible-decisions").glob("*.json"))
    assert len(files) == 1, files
    for given in ("ptui_batch_size=16", '{"ptui_batch_size": 16.0}'):
        counts, out, _ = play(tmp_path, inventory, "-e", given)
        assert counts["b"]["changed"] == 0 and counts["b"]["failed"] == 0, (given, counts, out[-3000:])
        assert list((data / "ansible-decisions").glob("*.json")) == files, given
    assert len(list((data / "tune").glob("*.csv"))) == 1                  # profiled once
    import yaml  # ansible-core's
    role_vars = yaml.safe_load((SITE.parent / "roles" / "ptui_mode" / "vars" / "main.yml").read_text())
    assert role_vars["_ptui_default_batch_sizes"] == {k: w.batch_size for k, w in WORKLOADS.items()}


def test_role_refuses_a_bad_risk_or_batch_size_before_it_changes_anything(tmp_path):
    """`-e ptui_risk=abc` (or a risk of 0 or 1.5, a batch size of 0, -1, 2.5 or x) reached ptui
    tune, which refused it only after the role had made its decision directory: changed=1,
    failed=1 (a fleet trial).  They now stop the host in the goal's check, one line naming the
    variable: changed=0, nothing written."""
    inventory, data = sim_host(tmp_path)
    risk = "ptui_risk is the allowed probability of missing the goal, a number strictly between 0 and 1"
    batch = "ptui_batch_size is a batch size, a whole number above 0 (e.g. 16); given "
    for given, says in (("ptui_risk=abc", risk + ' (e.g. 0.05), or "mean"; given "abc"'),
                        ('{"ptui_risk": 0}', risk), ('{"ptui_risk": 1.5}', risk),
                        ("ptui_batch_size=0", batch + '"0"'), ('{"ptui_batch_size": -1}', batch + '"-1"'),
                        ('{"ptui_batch_size": 2.5}', batch + '"2.5"'), ("ptui_batch_size=x", batch + '"x"')):
        counts, out, _ = play(tmp_path, inventory, "-e", given, rc=2)
        assert counts["b"]["failed"] == 1 and counts["b"]["changed"] == 0, (given, counts, out[-3000:])
        assert says in out, (given, out[-3000:])
        assert not data.exists(), given

SSHD = shutil.which("sshd") or next((p for p in ("/usr/sbin/sshd",) if Path(p).is_file()), None)


def netns_hosts(tmp_path, stack: ExitStack, n: int) -> list[str]:
    """`n` network namespaces, each joined to this one by a veth pair and running its own sshd
    that lets this user in with a fresh key: their addresses (or pytest.skip, saying why)."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (ip netns)")
    if SSHD is None or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        pytest.skip("sshd or ssh not installed (apt-get install openssh-server openssh-client)")
    ip = shutil.which("ip") or pytest.skip("ip (iproute2) not installed")
    tag = f"pt{os.getpid() % 100000}"
    probe = subprocess.run([ip, "netns", "add", f"{tag}x"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"ip netns add failed: {probe.stderr.strip()}")
    subprocess.run([ip, "netns", "del", f"{tag}x"], capture_output=True)
    Path("/run/sshd").mkdir(exist_ok=True)                 # sshd's privilege separation directory
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key], check=True)
    auth = tmp_path / "authorized_keys"
    auth.write_text(Path(f"{key}.pub").read_text())
    addrs = []
    for i in range(n):
        ns, host_if, ns_if = f"{tag}n{i}", f"{tag}h{i}", f"{tag}v{i}"
        net = f"10.{200 + i}.{os.getpid() % 250}"
        for cmd in ([ip, "netns", "add", ns], [ip, "link", "add", host_if, "type", "veth", "peer", "name", ns_if],
                    [ip, "link", "set", ns_if, "netns", ns], [ip, "addr", "add", f"{net}.1/24", "dev", host_if],
                    [ip, "link", "set", host_if, "up"],
                    [ip, "netns", "exec", ns, "ip", "addr", "add", f"{net}.2/24", "dev", ns_if],
                    [ip, "netns", "exec", ns, "ip", "link", "set", ns_if, "up"],
                    [ip, "netns", "exec", ns, "ip", "link", "set", "lo", "up"]):
            r = subprocess.run(cmd, capture_output=True, text=True)
            assert r.returncode == 0, (cmd, r.stderr)
            if cmd[1:3] == ["netns", "add"]:
                stack.callback(subprocess.run, [ip, "netns", "del", ns], capture_output=True)
            elif cmd[1:3] == ["link", "add"]:
                stack.callback(subprocess.run, [ip, "link", "del", host_if], capture_output=True)
        hostkey = tmp_path / f"hostkey{i}"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", hostkey], check=True)
        sshd = subprocess.Popen([ip, "netns", "exec", ns, SSHD, "-D", "-e", "-f", "/dev/null", "-h", hostkey,
                                 "-o", f"ListenAddress={net}.2", "-o", "Port=22",
                                 "-o", f"AuthorizedKeysFile={auth}", "-o", "StrictModes=no",
                                 "-o", "PermitRootLogin=yes", "-o", "UsePAM=no",
                                 "-o", f"PidFile={tmp_path}/sshd{i}.pid"],
                                stdout=subprocess.DEVNULL, stderr=open(tmp_path / f"sshd{i}.log", "w"))
        stack.callback(lambda p=sshd: (p.terminate(), p.wait(10)))
        addrs.append(f"{net}.2")
    for i, a in enumerate(addrs):                          # each sshd answers before the play
        for _ in range(100):
            r = subprocess.run(["ssh", "-i", key, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                                "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=5",
                                f"root@{a}", "true"], capture_output=True, text=True)
            if r.returncode == 0:
                break
            time.sleep(0.2)
        assert r.returncode == 0, (r.stderr, (tmp_path / f"sshd{i}.log").read_text()[-2000:])
    return addrs


def test_role_over_ssh_into_network_namespaces(tmp_path, emulate):
    """The same role over SSH: three hosts, each an sshd in its own network namespace (the same
    file system), the first run puts each emulated board in its decided mode, the second changes
    nothing."""
    with ExitStack() as stack:
        addrs = netns_hosts(tmp_path, stack, len(BOARDS))
        boards, data, hosts = {}, {}, {}
        for (h, (device, goal)), addr in zip(BOARDS.items(), addrs):
            boards[h], data[h] = tmp_path / h / "board", tmp_path / h / "data"
            emulate(boards[h], device, "--interval", "1")
            hosts[h] = {"ansible_host": addr, "ansible_user": "root",
                        "ansible_ssh_private_key_file": str(tmp_path / "id_ed25519"),
                        "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
                        "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                        "ptui_device": device, "ptui_sysfs_root": str(boards[h]), "ptui_data_dir": str(data[h]),
                        **goal}
        inventory = tmp_path / "inventory.yml"
        inventory.write_text(json.dumps({"jetsons": {"hosts": hosts, "vars": {
            "ptui_bin": [sys.executable, "-m", "ptui"], "ptui_backend": "sysfs",
            "ptui_tune_backend": "sim", "ptui_tune_args": ["--count", "8", "--seed", "1"],
            # an SSH session starts with sshd's environment, not this process's
            "ptui_environment": {"PYTHONPATH": str(ROOT), "PTUI_STATE_DIR": os.environ["PTUI_STATE_DIR"],
                                 "PTUI_LOCK_DIR": os.environ["PTUI_LOCK_DIR"]}}}}))
        counts, out, fresh_s = play(tmp_path, inventory)
        for h in BOARDS:
            assert counts[h]["changed"] >= 1 and counts[h]["failed"] == 0, (h, counts)
            d = json.loads(next((data[h] / "ansible-decisions").glob("*.json")).read_text())
            assert emulator.read_mode(boards[h]).key == d["key"], h
        counts, out, converged_s = play(tmp_path, inventory)
        assert all(c["changed"] == 0 and c["failed"] == 0 for c in counts.values()), counts
        print(f"\nfleet of 3 over SSH (network namespaces): fresh run {fresh_s:.1f} s, "
              f"converged run {converged_s:.1f} s")
