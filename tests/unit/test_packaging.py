"""What `pip install .` ships: every module and data file under ptui/, and every third-party
import of ptui/ declared as a dependency (tests/support/smoke_wheel.sh builds and runs the wheel)."""
import ast
import fnmatch
import re
import sys
import tomllib
from pathlib import Path

from setuptools import find_namespace_packages

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETUP = PYPROJECT["tool"]["setuptools"]


def _shipped_packages() -> set[str]:
    find = SETUP["packages"]["find"]
    assert find.get("namespaces", True), "ptui/probe/site has no __init__.py: namespaces must stay on"
    return set(find_namespace_packages(str(ROOT), include=find["include"], exclude=find.get("exclude", ())))


def _source_files() -> list[Path]:
    skip = {"__pycache__"}
    return [p for p in (ROOT / "ptui").rglob("*") if p.is_file() and not skip & set(p.parts)
            and p.suffix not in (".pyc",)]


def test_every_module_under_ptui_is_in_a_shipped_package():
    pkgs = _shipped_packages()
    for p in _source_files():
        if p.suffix == ".py":
            pkg = ".".join(p.relative_to(ROOT).parent.parts)
            assert pkg in pkgs, f"{p.relative_to(ROOT)} would be missing from the wheel"
    assert "ptui.probe.site" in pkgs  # the probe: without it a user-script profile waits and fails


def test_every_data_file_under_ptui_is_package_data():
    pkgs = _shipped_packages()
    data = SETUP["package-data"]
    for p in _source_files():
        if p.suffix == ".py":
            continue
        rel = p.relative_to(ROOT)
        owners = [pkg for pkg in pkgs if rel.parts[:len(pkg.split("."))] == tuple(pkg.split("."))]
        ok = False
        for pkg in owners:
            sub = Path(*rel.parts[len(pkg.split(".")):]).as_posix()
            ok |= any(fnmatch.fnmatch(sub, g) for g in data.get(pkg, ()))
        assert ok, f"{rel} is not covered by [tool.setuptools.package-data]"


def _dist_name(req: str) -> str:
    return re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0].lower()


# import name -> distribution name, for the ones that differ
DIST = {"textual_plotext": "textual-plotext", "sklearn": "scikit-learn", "jtop": "jetson-stats"}


def _third_party_imports() -> dict[str, str]:
    found = {}
    for p in (ROOT / "ptui").rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for n in names:
                top = n.split(".")[0]
                # sitecustomize: the probe chains to the interpreter's own hook, not a distribution
                own = ("ptui", "sitecustomize", "usercustomize")
                if top not in own and top not in sys.stdlib_module_names:
                    found.setdefault(top, str(p.relative_to(ROOT)))
    return found


def test_every_third_party_import_is_declared():
    runtime = {_dist_name(r) for r in PYPROJECT["project"]["dependencies"]}
    extras = {_dist_name(r) for reqs in PYPROJECT["project"]["optional-dependencies"].values() for r in reqs}
    for mod, where in _third_party_imports().items():
        dist = DIST.get(mod, mod)
        assert dist in runtime | extras, f"{where} imports {mod}, which pyproject.toml does not declare"
    # optional and heavy: never a runtime dependency (a Jetson keeps NVIDIA's torch; jtop is AGPL)
    assert "torch" not in runtime and "jetson-stats" not in runtime
    opt = PYPROJECT["project"]["optional-dependencies"]
    assert any(_dist_name(r) == "torch" for r in opt["train"])


def test_setuptools_floor_accepts_an_spdx_license_string():
    req = PYPROJECT["build-system"]["requires"]
    st = next(r for r in req if _dist_name(r) == "setuptools")
    floor = re.search(r">=\s*(\d+)", st)
    assert isinstance(PYPROJECT["project"]["license"], str)
    assert floor and int(floor.group(1)) >= 77, "license = 'SPDX' needs setuptools >= 77"
