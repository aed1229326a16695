"""The layers ptui is built in, and the checker that keeps them (README: Architecture).

From the top: the faces (CLI, app) -> use cases -> profiling, prediction, decision -> devices,
backends, simulator, files -> the board and workload catalogue -> errors, paths, clock.  A module
imports only from its own layer or below, and no modules import each other in a cycle, counting
imports inside functions (which hide cycles from Python but not from a reader) and type-only
imports (a type still ties the modules)."""
import pytest

from tests.support.imports import cycles, function_level, graph

LAYERS = [
    ("faces", ("ptui.__main__", "ptui.cli", "ptui.cliprogress", "ptui.app", "ptui.screens",
               "ptui.widgets", "ptui.state", "ptui.messages", "ptui.flower", "ptui.interleave")),
    ("use cases", ("ptui.core.usecases", "ptui.core")),      # ptui.core: the façade the faces use
    ("profiling, prediction, decision", ("ptui.core.profiling", "ptui.probe", "ptui.core.prediction",
                                         "ptui.core.decision")),
    ("devices, backends, simulator, files", ("ptui.core.board",)),
    ("catalogue", ("ptui.core.catalogue",)),
    ("errors, paths, clock", ("ptui", "ptui.core.errors", "ptui.core.paths",
                              "ptui.core.clock", "ptui.core.progress", "ptui.assets")),
]


def layer_of(module: str) -> int:
    best = None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            exact_only = p in ("ptui", "ptui.core")           # the packages, not what they hold
            if module == p or (not exact_only and module.startswith(p + ".")):
                if best is None or len(p) > best[1]:
                    best = (i, len(p))
    if best is None:
        raise AssertionError(f"{module} has no layer: add it to LAYERS in {__file__}")
    return best[0]


G = graph()


def test_every_module_has_a_layer():
    for m in G:
        layer_of(m)


def test_no_module_imports_from_a_layer_above_its_own():
    bad = [f"{m} ({LAYERS[layer_of(m)][0]}) imports {t} ({LAYERS[layer_of(t)][0]})"
           for m in sorted(G) for t in sorted(G[m]) if layer_of(t) < layer_of(m)]
    assert not bad, "\n".join(bad)


FACES = LAYERS[0][1]


def test_the_faces_use_core_through_its_facade_only():
    """The CLI and the app import ptui.core (the façade) and nothing inside it: what they use of
    core is listed in one place, and core's packages can move without touching a face."""
    bad = [f"{m} imports {t}" for m in sorted(G) if layer_of(m) == 0
           for t in sorted(G[m]) if t.startswith("ptui.core.")]
    assert not bad, "\n".join(bad)


def test_the_facade_gives_every_name_it_lists():
    import ptui.core as core
    missing = [n for n in core.__all__ if not hasattr(core, n)]
    assert not missing and "fit" in core.__all__ and "view" in core.__all__
    with pytest.raises(AttributeError):
        core.not_a_use_case  # noqa: B018


def test_no_import_cycles():
    assert cycles(G) == []


def test_the_checker_sees_a_cycle_and_a_layer_break():
    """The checks can fail: a planted cycle (also through a function-level import) and an upward
    import are found."""
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert cycles(g) == [["a", "b", "c"]]
    assert layer_of("ptui.core.errors") > layer_of("ptui.core.decision.pareto") > layer_of("ptui.cli")
    with pytest.raises(AssertionError, match="has no layer"):
        layer_of("ptui.somewhere_new")


def test_function_level_and_type_checking_imports_count(tmp_path, monkeypatch):
    from tests.support import imports
    pkg = tmp_path / "ptui"
    (pkg / "core").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "core" / "a.py").write_text("def f():\n    from .b import x\n")
    (pkg / "core" / "b.py").write_text("from typing import TYPE_CHECKING\nfrom .a import f\n"
                                       "if TYPE_CHECKING:\n    from . import c\n")
    (pkg / "core" / "c.py").write_text("")
    monkeypatch.setattr(imports, "PKG", pkg)
    g = imports.graph()
    # `from . import c` imports c and runs the package's __init__: both are edges
    assert g["ptui.core.a"] == {"ptui.core.b"} and g["ptui.core.b"] == {"ptui.core.a", "ptui.core.c", "ptui.core"}
    assert imports.cycles(g) == [["ptui.core.a", "ptui.core.b"]]


def test_a_module_importing_a_sibling_through_a_facade_package_is_in_its_cycle(tmp_path, monkeypatch):
    """`from .. import paths` in a use case runs ptui/core/__init__.py, the façade that imports the
    use cases: a cycle {core, the use case} the checker missed while it counted only ptui.core.paths."""
    from tests.support import imports
    pkg = tmp_path / "ptui"
    (pkg / "core" / "usecases").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "__init__.py").write_text("from typing import TYPE_CHECKING\n"
                                              "if TYPE_CHECKING:\n    from .usecases.fit import fit\n")
    (pkg / "core" / "paths.py").write_text("")
    (pkg / "core" / "usecases" / "__init__.py").write_text("")
    (pkg / "core" / "usecases" / "fit.py").write_text("from .. import paths\n")
    monkeypatch.setattr(imports, "PKG", pkg)
    assert ["ptui.core", "ptui.core.usecases.fit"] in imports.cycles(imports.graph())


# Imports of ptui's own modules stay at the module's top (issue 24), where a reader sees what a module
# depends on; these alone are written inside a function, each for its reason.
LAZY = {
    ("ptui.core.prediction.fit", "ptui.core.prediction.train"): "train imports torch at its top",
    ("ptui.core.usecases.fit", "ptui.core.prediction.train"): "train imports torch at its top",
    ("ptui.cli", "ptui.app"): "the app imports textual: a command starts without it",
    # backends/__init__ runs with backends.base, on the app's first screen: each backend loads when opened
    **{("ptui.core.board.backends", f"ptui.core.board.backends.{b}"): "the app starts without the backends"
       for b in ("jtop", "replay", "sim", "sysfs")},
}


def test_internal_imports_are_at_the_module_top():
    found = function_level()
    bad = [f"{m}:{line} imports {t} inside a function" for m, t, line in found
           if (m, t) not in LAZY]
    assert not bad, "\n".join(bad)
    stale = sorted(set(LAZY) - {(m, t) for m, t, _ in found})
    assert not stale, f"listed in LAZY but imported at the top now: {stale}"


def test_the_top_import_check_sees_an_import_in_a_function(tmp_path, monkeypatch):
    from tests.support import imports
    pkg = tmp_path / "ptui"
    (pkg / "core").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "core" / "a.py").write_text("import os\n\n\ndef f():\n    import json\n    from .b import x\n"
                                       "    from .. import core\n")
    (pkg / "core" / "b.py").write_text("x = 1\n")
    monkeypatch.setattr(imports, "PKG", pkg)
    assert imports.function_level() == [("ptui.core.a", "ptui.core.b", 6), ("ptui.core.a", "ptui.core", 7)]
