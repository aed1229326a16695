# Loaded by Python at start-up when ptui profiles a training script (ptui puts this directory on
# PYTHONPATH).  It installs ptui's optimizer-step probe, then runs the sitecustomize that would
# have run without ptui, if there is one (Debian's, a conda environment's ...).
import os
import sys

if os.environ.get("PTUI_PROBE_SOCK"):
    try:
        from ptui.probe import hook as probe
        probe.install()
    except Exception as e:  # noqa: BLE001 - never break the user's script
        sys.stderr.write(f"ptui probe not installed: {e}\n")


def _chain() -> None:
    """Run the next sitecustomize on the path without touching sys.modules['sitecustomize'].

    Popping this module from sys.modules and importing again fails where there is no other one
    (venv, pyenv, conda): the import machinery then finds no 'sitecustomize' entry when this file
    finishes and prints `Error in sitecustomize ... KeyError: 'sitecustomize'` into every log."""
    import importlib.machinery
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None or not spec.origin \
            or os.path.dirname(os.path.abspath(spec.origin)) == here:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["sitecustomize"] = module


try:
    _chain()
except Exception as e:  # noqa: BLE001 - the other sitecustomize failed: say so, as Python would
    sys.stderr.write(f"Error in sitecustomize (run after ptui's probe): {type(e).__name__}: {e}\n")
