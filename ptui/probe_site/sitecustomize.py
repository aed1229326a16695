# Loaded by Python at start-up when ptui profiles a training script (ptui puts this directory on
# PYTHONPATH).  It installs ptui's minibatch probe, then chains to any other sitecustomize.
import os
import sys

if os.environ.get("PTUI_PROBE_FD"):
    try:
        from ptui.core import probe
        probe.install()
    except Exception as e:  # noqa: BLE001 - never break the user's script
        sys.stderr.write(f"ptui probe not installed: {e}\n")

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
sys.modules.pop("sitecustomize", None)
try:
    import sitecustomize  # noqa: F401  the next one on the path, if any
except ImportError:
    pass
