#!/usr/bin/env bash
# The probe's CUDA path on a machine with an NVIDIA GPU (the device tool's machine; no Jetson):
# a plain CUDA training loop, a compiled CUDA optimizer step and an LBFGS closure loop on CUDA,
# each profiled through `ptui profile -- python3 SCRIPT` on the simulated board (a what-if: step
# times measured on this GPU, power and clocks SIMULATED); then `ptui tune --count 0` on the CUDA
# loop (the probe counts one CUDA iteration, no mode profiled) and `ptui interleave-demo` (the demo
# pair on CUDA beside the simulated board).  Prints the probe's device line, what was timed, each
# CSV, the zero-profile decision and the demo's figures; exits non-zero when one of them fails.  Usage, from the repository root:
#   OUT=/tmp/out bash benchmarks/gpu_probe_check.sh
set -uo pipefail
OUT=${OUT:-/tmp/gpu-probe}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PTUI_DATA_DIR=$OUT/data PTUI_LOCK_DIR=$OUT/locks PTUI_STATE_DIR=$OUT/state
PY=${PY:-python3}
nvidia-smi -L || true
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
W=$OUT/scripts
mkdir -p "$W"
cat > "$W/cuda_loop.py" <<'PY'
import sys, torch
m = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 10)).cuda()
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x, y = torch.randn(256, 1024, device="cuda"), torch.randint(0, 10, (256,), device="cuda")
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 10 ** 9):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(m(x), y).backward()
    opt.step()
PY
cat > "$W/cuda_compiled_step.py" <<'PY'
import torch
m = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 10)).cuda()
opt = torch.optim.Adam(m.parameters(), lr=1e-3)
step = torch.compile(opt.step)
x, y = torch.randn(128, 512, device="cuda"), torch.randint(0, 10, (128,), device="cuda")
while True:
    opt.zero_grad()
    torch.nn.functional.cross_entropy(m(x), y).backward()
    step()
PY
cat > "$W/cuda_lbfgs.py" <<'PY'
import torch
m = torch.nn.Linear(256, 1).cuda()
opt = torch.optim.LBFGS(m.parameters(), max_iter=5, tolerance_grad=0.0, tolerance_change=0.0)
x, y = torch.randn(512, 256, device="cuda"), torch.randn(512, 1, device="cuda")
def closure():
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(m(x), y)
    loss.backward()
    return loss
while True:                       # a new batch every step: the closure is evaluated 5 times
    x, y = torch.randn(512, 256, device="cuda"), torch.randn(512, 1, device="cuda")
    opt.step(closure)
PY
rc=0
for s in cuda_loop cuda_compiled_step cuda_lbfgs; do
    echo "== $s"
    if timeout 240 $PY -m ptui profile --backend sim --device orin-agx --count 2 --sample-interval 0.1 \
            --startup-timeout 180 --session "$s" --out "$OUT/$s.csv" -- $PY "$W/$s.py" 2> "$OUT/$s.err"; then
        echo "profile ok"
    else
        echo "profile FAILED"; rc=1
    fi
    grep -E "timing one|ran compiled|ptui: error|warning" "$OUT/$s.err" | head -5
    head -3 "$OUT/$s.csv" 2>/dev/null | cut -c1-240
    grep -h "^D \|device" "$OUT"/data/logs/"$s".log 2>/dev/null | head -3
done
echo "== tune --count 0 -- cuda_loop.py (counted on CUDA, nothing profiled)"
if timeout 240 $PY -m ptui tune --backend sim --device orin-agx --count 0 --budget-w 30 --startup-timeout 180 \
        --json -- $PY "$W/cuda_loop.py" > "$OUT/count0.json" 2> "$OUT/count0.err"; then
    echo "tune ok"
else
    echo "tune FAILED"; rc=1
fi
head -c 1200 "$OUT/count0.json"; echo
grep -E "GFLOP|device|error" "$OUT/count0.err" | cut -c1-300 | head -4
echo "== interleave-demo (the demo pair on this GPU beside the simulated board)"
if timeout 240 $PY -m ptui interleave-demo --then-rate 40 > "$OUT/demo.txt" 2> "$OUT/demo.err"; then
    echo "demo ok"
else
    echo "demo FAILED"; rc=1
fi
cat "$OUT/demo.txt"; tail -4 "$OUT/demo.err"
exit $rc
