"""A Flower fleet on real processes on this host: one SuperLink and N SuperNodes (flwr 1.42,
`--insecure`, 127.0.0.1, free ports), each SuperNode driving its own emulated Jetson (`ptui emulate`,
SIMULATED) through ptui's sysfs backend, with its own ptui data, lock and state directories and its
own FLWR_HOME; then `flwr run` of deploy/flower/app for a few rounds under a fleet power cap.

    pip install -e ".[flower]" torch          # flwr 1.42.0, a CPU torch is enough
    python deploy/flower/local_fleet.py --devices orin-agx,xavier-agx,orin-nano --rounds 2 --cap-w 45

Each round every node's ClientApp trains a tiny torch MLP in the mode ptui picked for the node's
share of the cap, on its board, and ptui puts the board back after.  The launcher prints, for each
round and node, the mode applied, the mode the board's tree read while it trained and after the
round, and the measured seconds, watts (the emulated board's rails: SIMULATED) and joules; it exits
1 if any node did not report or did not end a round in the mode it started in.  Every process it
started (and their children: Flower's SuperExec and ClientApp processes) is stopped at the end,
also on failure or Ctrl-C.  Runtime dependency installation is off: the nodes import flwr, torch
and ptui from this Python.  README: Flower on real processes.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
APP = HERE / "app"
REPO = HERE.parent.parent
DEVICES = ("orin-agx", "xavier-agx", "orin-nano")
BINARIES = ("flower-superlink", "flower-supernode", "flower-superexec", "flwr")


def find_binaries() -> dict[str, str]:
    """Flower's commands: beside this Python (a virtual environment's bin), else on PATH.  Raises
    FileNotFoundError naming the missing ones (pip install 'flwr==1.42.0')."""
    found, missing = {}, []
    for name in BINARIES:
        here = Path(sys.executable).parent / name
        path = str(here) if here.is_file() else shutil.which(name)
        if path is None:
            missing.append(name)
        else:
            found[name] = path
    if missing:
        raise FileNotFoundError(f"{', '.join(missing)} not found beside {sys.executable} or on PATH "
                                f"(pip install -e '.[flower]' installs flwr 1.42.0)")
    return found


def free_ports(n: int) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1 (bound together, then released)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def children_of(pids: set[int]) -> set[int]:
    """Every live descendant of `pids` (from /proc)."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
                parent[int(d.name)] = int(stat[stat.rindex(")") + 2:].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    out, todo = set(), set(pids)
    while todo:
        kids = {c for c, p in parent.items() if p in todo and c not in out}
        out |= kids
        todo = kids
    return out


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie, exited but not reaped, counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def toml_str(value: str) -> str:
    """A TOML literal string (node and run config values are TOML)."""
    if "'" in value or "\n" in value:
        raise ValueError(f"a path with a quote or newline cannot go into a node config: {value!r}")
    return f"'{value}'"


@dataclass
class Node:
    index: int
    device: str
    dir: Path
    port: int = 0
    emulator: subprocess.Popen | None = None
    supernode: subprocess.Popen | None = None
    start_mode: str = ""

    @property
    def root(self) -> Path:                  # the emulated board's tree
        return self.dir / "board"

    @property
    def data(self) -> Path:                  # PTUI_DATA_DIR
        return self.dir / "data"

    @property
    def model(self) -> Path:                 # the model the node decides with
        return self.dir / "model"

    def node_config(self) -> str:
        return " ".join([f"device={toml_str(self.device)}", "backend='sysfs'",
                         f"sysfs-root={toml_str(str(self.root))}", f"data-dir={toml_str(str(self.data))}",
                         f"model={toml_str(str(self.model))}", "emulated=true", f"seed={self.index}"])

    def env(self, base: dict) -> dict:
        return dict(base, PTUI_DATA_DIR=str(self.data), PTUI_LOCK_DIR=str(self.dir / "locks"),
                    PTUI_STATE_DIR=str(self.dir / "state"), FLWR_HOME=str(self.dir / "flwr"))


@dataclass
class LocalFleet:
    """The fleet's processes; a context manager that stops them all (killing what does not stop)."""
    work: Path
    devices: tuple[str, ...] = DEVICES
    rounds: int = 2
    cap_w: float = 45.0
    steps: int = 1000
    interval: float = 0.2                    # the emulated boards' sensor tick
    log: object = print
    nodes: list[Node] = field(default_factory=list)
    superlink: subprocess.Popen | None = None
    port: int = 0
    bins: dict = field(default_factory=dict)
    started: list[subprocess.Popen] = field(default_factory=list)
    seen: set[int] = field(default_factory=set)   # every pid started, with the children seen
    killed: list[str] = field(default_factory=list)  # what did not stop on SIGTERM in time

    def __post_init__(self) -> None:
        self.work = Path(self.work).resolve()
        self.bins = find_binaries()
        path = os.pathsep.join(dict.fromkeys([str(Path(p).parent) for p in self.bins.values()]
                                             + os.environ.get("PATH", "").split(os.pathsep)))
        self.base_env = dict(os.environ, PATH=path,
                             PYTHONPATH=os.pathsep.join(filter(None, [str(REPO),
                                                                      os.environ.get("PYTHONPATH")])),
                             FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION="1",
                             OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"),
                             PYTHONUNBUFFERED="1")
        self.base_env.pop("FLWR_HOME", None)

    # -- processes -------------------------------------------------------------------------------
    def _spawn(self, cmd: list[str], log: Path, env: dict, cwd: Path | None = None,
               stdout: Path | None = None) -> subprocess.Popen:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as err, open(stdout or log, "ab") as out:
            p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                 cwd=cwd or self.work, start_new_session=True)
        self.started.append(p)
        self.seen.add(p.pid)
        return p

    def _watch(self) -> None:
        """Note the children of the started processes (the SuperExecs and their ClientApps)."""
        self.seen |= children_of({p.pid for p in self.started})

    def _died(self) -> str | None:
        for p in self.started:
            if p.poll() is not None:
                return f"{' '.join(map(str, p.args[:3]))} exited with {p.returncode}"
        return None

    def start(self, timeout: float = 300.0) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        ports = free_ports(1 + len(self.devices))
        self.port = ports[0]
        self.nodes = [Node(i, d, self.work / f"node{i}-{d}", ports[1 + i])
                      for i, d in enumerate(self.devices)]
        # the boards first: each its own emulated tree, driven by the simulator
        for n in self.nodes:
            n.dir.mkdir(parents=True, exist_ok=True)
            n.emulator = self._spawn([sys.executable, "-m", "ptui", "emulate", "--device", n.device,
                                      "--root", str(n.root), "--interval", str(self.interval)],
                                     n.dir / "emulate.log", n.env(self.base_env),
                                     stdout=n.dir / "emulate.out")
        # each node's model: the roofline prior of its device for ResNet-18 (no mode profiled; give
        # a node a profiled model with `ptui tune`/`fit` instead, the node config's `model`)
        from ptui import core
        spec = core.workload_spec(workload="resnet18", batch_size=16)
        for n in self.nodes:
            core.fit_prior(core.get_device(n.device), spec, out=n.model, workload="resnet18")
        (self.work / "superlink").mkdir(exist_ok=True)
        self.superlink = self._spawn([self.bins["flower-superlink"], "--insecure", "--host", "127.0.0.1",
                                      "--port", str(self.port), "--disable-runtime-dependency-installation"],
                                     self.work / "superlink.log",
                                     dict(self.base_env, FLWR_HOME=str(self.work / "superlink")))
        end = time.monotonic() + timeout
        from ptui.core.board.emulator import read_mode
        for n in self.nodes:
            while not (n.dir / "emulate.out").read_text().strip():
                self._wait(end, f"ptui emulate --device {n.device}", n.dir / "emulate.log")
            n.start_mode = read_mode(n.root, n.device).key
            self.log(f"board {n.index}: emulated {n.device} at {n.root}, in {n.start_mode}")
        while not listening(self.port):
            self._wait(end, "flower-superlink", self.work / "superlink.log")
        self.log(f"SuperLink on 127.0.0.1:{self.port} (Control, Fleet and Runtime APIs, --insecure)")
        for n in self.nodes:
            self._spawn_supernode(n)
            self.log(f"SuperNode {n.index} ({n.device}) on 127.0.0.1:{n.port}: "
                     f"--node-config \"{n.node_config()}\"")

    def _spawn_supernode(self, n: Node) -> None:
        n.supernode = self._spawn([self.bins["flower-supernode"], "--insecure", "--superlink",
                                   f"127.0.0.1:{self.port}", "--host", "127.0.0.1", "--port", str(n.port),
                                   "--node-config", n.node_config()],
                                  n.dir / "supernode.log", n.env(self.base_env), cwd=n.dir)

    def kill_node(self, index: int) -> set[int]:
        """A node dies as a whole (power cut, OOM killer): SIGKILL to its SuperNode and every
        process under it (its SuperExec and a ClientApp mid-round), all at once, so none of them
        gets to put its board back.  Its emulated board keeps running.  Returns the pids killed."""
        n = self.nodes[index]
        assert n.supernode is not None
        pids = {n.supernode.pid} | children_of({n.supernode.pid})
        self.seen |= pids
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        n.supernode.wait(30)
        return pids

    def restart_node(self, index: int) -> None:
        """A dead node's SuperNode started again, with the same node config, data, lock and state
        directories and Flower home: what a node coming back after a crash runs."""
        n = self.nodes[index]
        if n.supernode is not None and n.supernode.poll() is None:
            raise RuntimeError(f"SuperNode {index} is still running")
        if n.supernode is not None:
            self.started.remove(n.supernode)
        n.port = free_ports(1)[0]
        self._spawn_supernode(n)
        self.log(f"SuperNode {index} ({n.device}) started again on 127.0.0.1:{n.port}")

    def _wait(self, end: float, what: str, log: Path) -> None:
        died = self._died()
        if died or time.monotonic() > end:
            raise RuntimeError(f"{what} not ready: {died or 'timed out'}\n{tail(log)}")
        time.sleep(0.1)

    def run(self, timeout: float = 600.0) -> dict:
        """`flwr run` of the app against this fleet's SuperLink; the ServerApp's result file."""
        home = self.work / "flwr-cli"
        home.mkdir(exist_ok=True)
        (home / "config.toml").write_text(
            '[superlink]\ndefault = "local-fleet"\n\n[superlink.local-fleet]\n'
            f'address = "127.0.0.1:{self.port}"\ninsecure = true\n')
        result = self.work / "result.json"
        config = (f"num-server-rounds={self.rounds} num-nodes={len(self.nodes)} cap-w={float(self.cap_w)} "
                  f"local-steps={self.steps} result-file={toml_str(str(result))}")
        cmd = [self.bins["flwr"], "run", str(APP), "local-fleet", "--stream", "--run-config", config]
        self.log(f"FLWR_HOME={home} {' '.join(cmd[:4])} --stream --run-config \"{config}\"")
        flwr = self._spawn(cmd, self.work / "flwr-run.log", dict(self.base_env, FLWR_HOME=str(home)))
        self.started.remove(flwr)               # it is meant to exit
        end = time.monotonic() + timeout
        try:
            while flwr.poll() is None:
                self._watch()
                died = self._died()
                if died:
                    raise RuntimeError(f"{died} during the run\n{self.logs()}")
                if time.monotonic() > end:
                    raise RuntimeError(f"the run did not finish in {timeout:.0f} s\n{self.logs()}")
                time.sleep(0.2)
        finally:
            if flwr.poll() is None:
                stop_group(flwr)
        doc = json.loads(result.read_text()) if result.is_file() else {}
        if flwr.returncode != 0 or not doc.get("done"):
            raise RuntimeError(f"flwr run ended with {flwr.returncode}, the ServerApp "
                               f"{'finished' if doc.get('done') else 'did not finish'}\n{self.logs()}")
        return doc

    def logs(self, n: int = 1500) -> str:
        files = [self.work / "flwr-run.log", self.work / "superlink.log",
                 *[nd.dir / "supernode.log" for nd in self.nodes],
                 *[nd.dir / "emulate.log" for nd in self.nodes]]
        return "\n".join(f"--- {f}\n{tail(f, n)}" for f in files if f.is_file())

    def final_modes(self) -> dict[int, str]:
        from ptui.core.board.emulator import read_mode
        return {n.index: read_mode(n.root, n.device).key for n in self.nodes}

    def stop(self, timeout: float = 20.0) -> dict[str, int | None]:
        """SIGTERM to the SuperNodes, then the SuperLink, then the boards (each a process group;
        Flower's SuperExecs and ClientApps with them), waiting for each; whatever is still running
        after `timeout` is killed.  Returns each process's exit code."""
        self._watch()
        codes: dict[str, int | None] = {}
        order = ([n.supernode for n in self.nodes] + [self.superlink] + [n.emulator for n in self.nodes])
        for group in (order[:len(self.nodes)], order[len(self.nodes):len(self.nodes) + 1],
                      order[len(self.nodes) + 1:]):
            group = [p for p in group if p is not None]
            for p in group:                  # the whole group, also when its leader has died
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(p.pid, signal.SIGTERM)
            end = time.monotonic() + timeout
            for p in group:
                try:
                    p.wait(max(0.1, end - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self.killed.append(" ".join(map(str, p.args[:4])))
                    stop_group(p, signal.SIGKILL)
                codes[" ".join(map(str, p.args[:4]))] = p.returncode
        # what is left of the children (a SuperExec in its own session stops when it sees its
        # parent gone: give it a moment, 10 s on a loaded machine, then kill it)
        end = time.monotonic() + 10.0
        while any(alive(pid) for pid in self.seen) and time.monotonic() < end:
            time.sleep(0.1)
        for pid in self.seen:
            if alive(pid):
                self.killed.append(f"pid {pid} (a child)")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        # a SIGKILLed process is gone only once the kernel has torn it down (seconds on a loaded
        # machine): stop returns when nothing it started runs
        end = time.monotonic() + 10.0
        while any(alive(pid) for pid in self.seen) and time.monotonic() < end:
            time.sleep(0.05)
        return codes

    def __enter__(self) -> LocalFleet:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def stop_group(p: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, sig)
    with contextlib.suppress(subprocess.TimeoutExpired):
        p.wait(5)


def tail(path: Path, n: int = 1500) -> str:
    try:
        return Path(path).read_text(errors="replace")[-n:]
    except OSError:
        return ""


def report(fleet: LocalFleet, doc: dict, say=print) -> list[str]:
    """Print each round's per-node figures; return the problems (a node missing or failing, a board
    not trained in the mode ptui applied, a board not back in its start mode after the round)."""
    problems = []
    for rnd in doc.get("rounds", []):
        f = rnd["fleet"]
        say(f"round {rnd['round']}: fleet {f['w']:.1f} W measured (SIMULATED rails), predicted "
            f"{f['predicted_w']:.1f} W, cap {f['cap_w']:g} W; {f['j']:.1f} J; slowest node {f['s']:.2f} s")
        rows = rnd["nodes"]
        if len(rows) != len(fleet.nodes):
            problems.append(f"round {rnd['round']}: {len(rows)} of {len(fleet.nodes)} nodes replied")
        for x in rows:
            if "error" in x:
                problems.append(f"round {rnd['round']}: node {x['node']}: {x['error']}")
                continue
            c = x.get("check", {})
            back = c.get("tree-after") == c.get("tree-before") == x["start_mode"] == x["end_mode"]
            say(f"  {x['device']:<10} applied {x['mode']:<22} "
                f"tree while training {c.get('tree-during')!s:<22} "
                f"after {c.get('tree-after')} ({'its start mode' if back else 'NOT its start mode'}); "
                f"{x['s']:.2f} s, {x['w']:.2f} W, {x['j']:.1f} J")
            if not back:
                problems.append(f"round {rnd['round']}: {x['device']} started in {c.get('tree-before')}, "
                                f"ended in {c.get('tree-after')} (ptui read {x['end_mode']})")
            if c.get("tree-during") != x["mode"]:
                problems.append(f"round {rnd['round']}: {x['device']} trained in {c.get('tree-during')}, "
                                f"ptui applied {x['mode']}")
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", default=",".join(DEVICES),
                   help="the boards, one SuperNode each (orin-agx, xavier-agx, orin-nano)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--cap-w", type=float, default=45.0, help="the fleet's power cap (W)")
    p.add_argument("--steps", type=int, default=1000, help="minibatches each node trains per round")
    p.add_argument("--work", help="where the nodes' boards, data and logs go (default: a new "
                                  "temporary directory, removed at the end unless --keep)")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds for the whole run")
    p.add_argument("--json", help="write the ServerApp's per-round, per-node figures here")
    a = p.parse_args(argv)
    from ptui import core
    devices = tuple(d.strip() for d in a.devices.split(","))
    for d in devices:                         # refused before any process starts
        try:
            core.get_device(d)
        except core.PtuiError as e:
            p.exit(2, f"{p.prog}: --devices: {e}\n")
    if (a.rounds < 1 or a.steps < 1 or not (math.isfinite(a.cap_w) and a.cap_w > 0)
            or not (math.isfinite(a.timeout) and a.timeout > 0)):
        p.exit(2, f"{p.prog}: --rounds and --steps must be >= 1, --cap-w and --timeout > 0 (finite)\n")
    if a.json and not os.path.isdir(os.path.dirname(os.path.abspath(a.json))):
        p.exit(2, f"{p.prog}: --json: no folder {os.path.dirname(os.path.abspath(a.json))} to write "
                  f"{os.path.basename(a.json)} in\n")
    if a.json and os.path.isdir(a.json):
        p.exit(2, f"{p.prog}: --json: {a.json} is a folder: name a file to write the figures to\n")
    if a.work and os.path.exists(a.work) and not os.path.isdir(a.work):
        p.exit(2, f"{p.prog}: --work: {a.work} is not a folder\n")
    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="ptui-fleet-"))
    t0 = time.monotonic()
    try:
        with LocalFleet(work, devices, rounds=a.rounds, cap_w=a.cap_w,
                        steps=a.steps) as fleet:
            fleet.start()
            doc = fleet.run(a.timeout)
            problems = report(fleet, doc)
            final = fleet.final_modes()
            for n in fleet.nodes:
                if final[n.index] != n.start_mode:
                    problems.append(f"{n.device} ended the run in {final[n.index]}, "
                                    f"started in {n.start_mode}")
            if a.json:
                Path(a.json).write_text(json.dumps(doc, indent=1))
        print(f"{len(fleet.nodes)} SuperNodes, {a.rounds} rounds, wall {time.monotonic() - t0:.1f} s; "
              f"every process stopped; work directory {work}"
              f"{' (kept)' if a.keep or a.work else ' (removed)'}")
        for x in problems:
            print(f"PROBLEM: {x}", file=sys.stderr)
        return 1 if problems else 0
    except (RuntimeError, FileNotFoundError) as e:
        print(f"local_fleet: {e}", file=sys.stderr)
        return 2
    finally:
        if not a.keep and not a.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
