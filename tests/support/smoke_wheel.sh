#!/usr/bin/env bash
# Wheel smoke test (run by .ci/run): build ptui's wheel, install it into a fresh venv in a temporary
# folder away from the source tree, and run the main commands against the installed copy:
# modes, a 3-mode simulated profile, a user-script profile through the probe, fit, pareto.
# Exits nonzero at the first failure.  PYTHON=python3.11 and TORCH=torch==2.13.0 by default.
# SCRIPT_PYTHON=PY runs the user script with PY (an interpreter that has torch, as a user's
# training environment often is not ptui's: CI passes its test venv's) and leaves torch out of the
# fresh venv (installing it, and deleting its 12,000 files at the end, was most of this test's
# time); unset, torch is installed into the fresh venv and the script runs there.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PYTHON=${PYTHON:-python3.11}
TORCH=${TORCH:-torch==2.13.0}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ptui-smoke.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
step() { printf '\n== smoke: %s\n' "$*"; }
fail() { echo "smoke: FAILED: $*" >&2; exit 1; }

step "build the wheel"
"$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$WORK/dist" "$SRC"
WHEEL=$(ls "$WORK"/dist/ptui-*.whl)
for f in ptui/probe/site/sitecustomize.py ptui/assets/reference-orin-agx-resnet18/meta.json ptui/app.tcss; do
    "$PYTHON" -c "import sys, zipfile; sys.exit('$f' not in zipfile.ZipFile('$WHEEL').namelist())" \
        || fail "$f is missing from $(basename "$WHEEL")"
done

"$PYTHON" -m venv "$WORK/venv"
if [ -n "${SCRIPT_PYTHON:-}" ]; then
    step "install it into a fresh venv (the user script runs with $SCRIPT_PYTHON)"
    "$SCRIPT_PYTHON" -c "import torch" || fail "$SCRIPT_PYTHON has no torch"
    "$WORK/venv/bin/python" -m pip install --quiet "$WHEEL"
else
    step "install it into a fresh venv ($TORCH for the user script)"
    "$WORK/venv/bin/python" -m pip install --quiet "$TORCH" "$WHEEL"
    SCRIPT_PYTHON="$WORK/venv/bin/python"
fi
cd "$WORK"                                   # the source tree is not importable from here
unset PYTHONPATH
export PTUI_DATA_DIR="$WORK/data"
PT="$WORK/venv/bin/ptui"
"$WORK/venv/bin/python" -c "import ptui, sys; sys.exit(ptui.__file__.startswith('$SRC'))" \
    || fail "ptui was imported from the source tree"
"$PT" --version

step "modes"
"$PT" modes --device orin-agx --grid presets
"$PT" modes --device orin-agx --grid pt --out pt.csv
[ "$(wc -l < pt.csv)" -gt 1000 ] || fail "ptui modes --grid pt wrote $(wc -l < pt.csv) lines"

step "a 3-mode simulated profile"
"$PT" profile --device orin-agx --workload resnet18 --count 3 --out sim3.csv
[ "$(wc -l < sim3.csv)" -eq 4 ] || fail "sim3.csv has $(wc -l < sim3.csv) lines, not a header and 3 modes"

step "a user script profiled through the probe"
cat > train.py <<'EOF'
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 32), torch.randint(0, 4, (64,))
for _ in range(10_000_000):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
EOF
"$PT" profile --device orin-agx --count 3 --sample-interval 0.1 --out script.csv -- "$SCRIPT_PYTHON" train.py
[ "$(wc -l < script.csv)" -eq 4 ] || fail "script.csv has $(wc -l < script.csv) lines, not a header and 3 modes"

step "fit (needs at least 6 modes: a 12-mode simulated profile) and pareto"
"$PT" profile --device orin-agx --workload resnet18 --count 12 --out sim12.csv
"$PT" fit --device orin-agx --profile sim12.csv --workload resnet18 --out model
"$PT" pareto --model model --budget-w 30 --epochs 10
"$PT" pareto --model model --budget-w 30 --epochs 10 --json > pareto.json
"$WORK/venv/bin/python" -c "import json; d = json.load(open('pareto.json')); assert d['power_w'] > 0 and d['front']"

step "passed"
