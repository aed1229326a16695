"""Mutation testing for ptui/core: plant one small bug at a time and see whether the tests notice.

    python benchmarks/mutation.py                        # every module in MODULES, 25 mutants each
    python benchmarks/mutation.py --module pareto --limit 40 --seed 1
    python benchmarks/mutation.py --module apply --list  # print the mutants, run nothing
    python benchmarks/mutation.py --root /tmp/old-tree   # score another checkout's tests

Each mutant is a single-point change made on the module's syntax tree: a comparison flipped
(< <=, == !=, in / not in, is / is not), + and - or * and / swapped, `and` / `or` swapped, `not`
dropped, True / False swapped, a number moved by one, a statement replaced by `pass`, a returned
value replaced by None, one argument removed from a call.  The whole tree is copied once to a
temporary directory; the mutant is written into the copy (never into the checkout), the module's
relevant tests run there (`-x -q`, SVG snapshot tests never included) with a per-mutant timeout,
and the copy is put back.  A mutant is *killed* when the tests fail or time out, *survives* when
they pass.  Mutants that do not compile are skipped (not counted).

The kill rate is a benchmark, not a test: it takes minutes (each mutant starts pytest).  Sample with
--limit and --seed; run one module with --module.  Prints the rate per module and every survivor
as file:line and the mutation.
"""
from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# module -> (source file, tests that exercise it, fastest and most specific first)
MODULES: dict[str, tuple[str, list[str]]] = {
    "pareto": ("ptui/core/decision/pareto.py", ["tests/unit/test_decisions.py", "tests/unit/test_pareto.py",
                                                "tests/unit/test_batch.py"]),
    "apply": ("ptui/core/board/apply.py", ["tests/unit/test_faults.py", "tests/unit/test_board_state.py",
                                     "tests/functional/test_sysfs.py"]),
    "csvio": ("ptui/core/board/csvio.py", ["tests/unit/test_csvio.py", "tests/unit/test_predictor.py::test_bad_profiles"]),
    "profiler": ("ptui/core/profiling/profiler.py", ["tests/unit/test_profiler_safety.py",
                                           "tests/unit/test_board_state.py", "tests/unit/test_cycle.py",
                                           "tests/functional/test_profiler.py"]),
    "undo": ("ptui/core/board/undo.py", ["tests/unit/test_board_state.py"]),
    "sysfs": ("ptui/core/board/backends/sysfs.py", ["tests/unit/test_faults.py", "tests/unit/test_persist.py",
                                              "tests/functional/test_sysfs.py"]),
    "store": ("ptui/core/profiling/store.py", ["tests/unit/test_store.py", "tests/unit/test_store_versions.py",
                                               "tests/functional/test_profiler.py"]),
    "predictor": ("ptui/core/prediction/predictor.py", ["tests/unit/test_predictor_unit.py",
                                             "tests/unit/test_predictor.py"]),
}
# slow or environment-bound tests left out of every run (kill -9 takes 20 s; torch may be missing)
DESELECT = ["not kill_9", "not fit_predict_pareto_cli", "not transfer_across_devices",
            "not scaling_equals_sklearn", "not stacked_members"]

CMP_SWAP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
            ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
BIN_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
            ast.FloorDiv: ast.Mult, ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult}
SYM = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
       ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not", ast.Add: "+",
       ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
       ast.And: "and", ast.Or: "or"}


@dataclass(frozen=True)
class Mutant:
    k: int            # position among the module's mutation points (stable for a given source)
    line: int
    what: str


def _skip_node(node, parents) -> bool:
    """Docstrings, annotations, f-string pieces and imports are not mutated."""
    for p in parents:
        if isinstance(p, (ast.JoinedStr, ast.Import, ast.ImportFrom)):
            return True
    return False


def _points(tree: ast.Module):
    """Yield (node, kind, payload, line, description) for every mutation point, in a fixed order."""
    ann_ids = set()
    for n in ast.walk(tree):
        for a in ("annotation", "returns"):
            sub = getattr(n, a, None)
            if sub is not None:
                ann_ids.update(id(x) for x in ast.walk(sub))
    doc_ids = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body:
            first = n.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                doc_ids.add(id(first))

    def visit(node, parents):
        if id(node) in ann_ids or _skip_node(node, parents):
            return
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in CMP_SWAP:
                    yield node, "cmp", i, line, f"{SYM[type(op)]} -> {SYM[CMP_SWAP[type(op)]]}"
        elif isinstance(node, ast.BinOp) and type(node.op) in BIN_SWAP:
            yield node, "bin", None, line, f"{SYM[type(node.op)]} -> {SYM[BIN_SWAP[type(node.op)]]}"
        elif isinstance(node, ast.AugAssign) and type(node.op) in BIN_SWAP:
            yield node, "aug", None, line, f"{SYM[type(node.op)]}= -> {SYM[BIN_SWAP[type(node.op)]]}="
        elif isinstance(node, ast.BoolOp):
            other = "or" if isinstance(node.op, ast.And) else "and"
            yield node, "bool", None, line, f"{SYM[type(node.op)]} -> {other}"
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield node, "not", None, line, "drop `not`"
        elif isinstance(node, ast.Constant) and not isinstance(node.value, str):
            v = node.value
            if isinstance(v, bool):
                yield node, "const", (not v), line, f"{v} -> {not v}"
            elif isinstance(v, int) and not isinstance(v, bool):
                yield node, "const", v + 1, line, f"{v} -> {v + 1}"
                if v != 0:
                    yield node, "const", v - 1, line, f"{v} -> {v - 1}"
            elif isinstance(v, float):
                nv = v * 2 if v not in (0.0, 1.0) and abs(v) < 1 else v + 1
                yield node, "const", nv, line, f"{v!r} -> {nv!r}"
        elif isinstance(node, ast.Call):
            for i in range(len(node.args)):
                yield node, "dropargpos", i, line, f"drop argument {i + 1} of {_name(node.func)}()"
            for i, kw in enumerate(node.keywords):
                if kw.arg:
                    yield node, "dropargkw", i, line, f"drop {kw.arg}= of {_name(node.func)}()"
        if isinstance(node, ast.Return) and node.value is not None and not (
                isinstance(node.value, ast.Constant) and node.value.value is None):
            yield node, "retnone", None, line, "return None instead"
        if isinstance(node, (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Raise,
                             ast.If, ast.For, ast.While, ast.With, ast.Try, ast.Return, ast.Continue,
                             ast.Break)) and id(node) not in doc_ids and any(
                isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)) for p in parents):
            yield node, "del", None, line, f"replace `{_stmt_head(node)}` with pass"
        for child in ast.iter_child_nodes(node):
            yield from visit(child, parents + [node])

    yield from visit(tree, [])


def _name(f) -> str:
    try:
        return ast.unparse(f)[:40]
    except Exception:  # noqa: BLE001
        return "?"


def _stmt_head(node) -> str:
    s = ast.unparse(node).splitlines()[0]
    return s if len(s) <= 50 else s[:47] + "..."


def enumerate_mutants(src: str) -> list[Mutant]:
    return [Mutant(k, line, what) for k, (_, _, _, line, what) in enumerate(_points(ast.parse(src)))]


def mutate(src: str, k: int) -> str:
    tree = ast.parse(src)
    for j, (node, kind, payload, _, _) in enumerate(_points(tree)):
        if j != k:
            continue
        if kind == "cmp":
            node.ops[payload] = CMP_SWAP[type(node.ops[payload])]()
        elif kind in ("bin", "aug"):
            node.op = BIN_SWAP[type(node.op)]()
        elif kind == "bool":
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        elif kind == "not":
            _replace(tree, node, node.operand)
        elif kind == "const":
            node.value = payload
        elif kind == "dropargpos":
            del node.args[payload]
        elif kind == "dropargkw":
            del node.keywords[payload]
        elif kind == "retnone":
            node.value = ast.Constant(None)
        elif kind == "del":
            _replace(tree, node, ast.Pass())
        break
    else:
        raise IndexError(k)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _replace(tree, old, new) -> None:
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if isinstance(value, list):
                for i, x in enumerate(value):
                    if x is old:
                        value[i] = copy.copy(new)
                        return
            elif value is old:
                setattr(parent, field, new)
                return


def copy_tree(src_root: Path, dst: Path) -> None:
    ign = shutil.ignore_patterns("__pycache__", ".git", "*.pyc", ".venv", "venv", "node_modules",
                                 ".pytest_cache", "*.egg-info", "snapshot_report.html")
    for name in ("ptui", "tests"):
        shutil.copytree(src_root / name, dst / name, ignore=ign, symlinks=True)
    for name in ("pyproject.toml", "conftest.py", "pytest.ini", "setup.cfg", "README.md"):
        if (src_root / name).exists():
            shutil.copy2(src_root / name, dst / name)


def run_tests(work: Path, tests: list[str], timeout: float) -> str:
    """'killed', 'survived' or 'timeout' (a timeout counts as killed)."""
    present = [t for t in tests if (work / t.split("::")[0]).exists()]
    if not present:
        return "no-tests"
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(work))
    # the snapshot plugins import the whole Textual stack and no mapped test needs them
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
           "-p", "no:textual-snapshot", "-p", "no:syrupy",
           "--ignore=tests/functional/test_snapshots.py", "-k", " and ".join(DESELECT), *present]
    try:
        r = subprocess.run(cmd, cwd=work, env=env, capture_output=True, timeout=timeout, check=False,
                           start_new_session=True)
    except subprocess.TimeoutExpired:
        return "timeout"
    if r.returncode == 0:
        return "survived"
    if r.returncode == 5:              # nothing collected
        return "no-tests"
    return "killed"


def run_module(name: str, work: Path, limit: int | None, seed: int, timeout: float,
               verbose: bool) -> dict:
    rel, tests = MODULES[name]
    path = work / rel
    src = path.read_text()
    muts = enumerate_mutants(src)
    total_points = len(muts)
    if limit and limit < len(muts):
        muts = sorted(random.Random(f"{seed}:{name}").sample(muts, limit), key=lambda m: m.k)
    base = run_tests(work, tests, timeout * 3)
    if base != "survived":
        return {"module": name, "error": f"the unmutated tests do not pass ({base})",
                "points": total_points}
    out = {"module": name, "points": total_points, "sampled": len(muts), "killed": 0,
           "timeout": 0, "survived": [], "skipped": 0}
    try:
        for m in muts:
            try:
                new = mutate(src, m.k)
                compile(new, rel, "exec")
            except (SyntaxError, ValueError, IndexError, TypeError):
                out["skipped"] += 1
                continue
            path.write_text(new)
            t0 = time.time()
            res = run_tests(work, tests, timeout)
            if verbose:
                print(f"  {rel}:{m.line:<4} {m.what:<50} {res} ({time.time() - t0:.1f} s)",
                      flush=True)
            if res == "killed":
                out["killed"] += 1
            elif res == "timeout":
                out["timeout"] += 1
            elif res == "survived":
                out["survived"].append(f"{rel}:{m.line}: {m.what}")
            path.write_text(src)
    finally:
        path.write_text(src)
    counted = out["killed"] + out["timeout"] + len(out["survived"])
    out["counted"] = counted
    out["rate"] = (out["killed"] + out["timeout"]) / counted if counted else float("nan")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", action="append", choices=sorted(MODULES),
                    help="module(s) to mutate (default: all)")
    ap.add_argument("--limit", type=int, default=25, help="mutants sampled per module (0 = all)")
    ap.add_argument("--seed", type=int, default=0, help="seed for sampling mutants")
    ap.add_argument("--timeout", type=float, default=90.0, help="seconds per mutant before it counts as killed")
    ap.add_argument("--root", type=Path, default=ROOT, help="tree whose code and tests to use")
    ap.add_argument("--list", action="store_true", help="list the mutation points and exit")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every mutant's outcome")
    a = ap.parse_args(argv)
    mods = a.module or list(MODULES)
    if a.list:
        for name in mods:
            rel = MODULES[name][0]
            for m in enumerate_mutants((a.root / rel).read_text()):
                print(f"{rel}:{m.line}: [{m.k}] {m.what}")
        return 0
    results = []
    with tempfile.TemporaryDirectory(prefix="ptui-mut-") as d:
        work = Path(d)
        copy_tree(a.root.resolve(), work)
        for name in mods:
            t0 = time.time()
            print(f"{name}: mutating {MODULES[name][0]} ...", flush=True)
            r = run_module(name, work, a.limit or None, a.seed, a.timeout, a.verbose)
            r["seconds"] = round(time.time() - t0, 1)
            results.append(r)
            if "error" in r:
                print(f"{name}: {r['error']}", flush=True)
            else:
                print(f"{name}: {r['killed'] + r['timeout']}/{r['counted']} killed "
                      f"({100 * r['rate']:.0f} %), {r['points']} points, {r['seconds']} s", flush=True)
    print()
    print(f"{'module':<10} {'killed':>7} {'of':>4} {'rate':>6}  survivors")
    for r in results:
        if "error" in r:
            print(f"{r['module']:<10} {r['error']}")
            continue
        print(f"{r['module']:<10} {r['killed'] + r['timeout']:>7} {r['counted']:>4} "
              f"{100 * r['rate']:>5.0f}%  {len(r['survived'])}")
    for r in results:
        for s in r.get("survived", []):
            print(f"  survived: {s}")
    if a.json:
        a.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
