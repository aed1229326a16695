#!/bin/sh
# The concurrent sweep in K parallel shards (a many-core machine): every case of --truth indep,
# then the same with the walk's measurements noisy (--noise 1), then --truth sim, each shard's rows
# in $OUT/<run>_<i>.jsonl (flushed per case: a run cut short keeps its finished cases); then
#   python benchmarks/eval_concurrent.py --summarize $OUT/indep_*.jsonl
# Usage: OUT=dir sh benchmarks/eval_concurrent_shards.sh [K] [seconds]  (ends when every shard has
# finished, or at the time limit, stopping them)
K=${1:-16}
LIMIT=${2:-400}
PY=${PY:-python3}
$PY -c "import numpy, scipy" || { echo "no numpy/scipy for $PY"; exit 7; }
i=0
pids=""
while [ $i -lt "$K" ]; do
  (
    for run in indep noisy sim; do
      case $run in
        indep) args="--truth indep";;
        noisy) args="--truth indep --noise 1";;
        sim) args="--truth sim";;
      esac
      PYTHONPATH=$PWD $PY benchmarks/eval_concurrent.py $args --limit 675 --seed 0 --shard $i/$K \
        --out "$OUT/${run}_$i.jsonl" > "$OUT/${run}_$i.log" 2>&1
    done
  ) &
  pids="$pids $!"
  i=$((i + 1))
done
end=$(($(date +%s) + LIMIT))
while [ "$(date +%s)" -lt "$end" ]; do
  alive=0
  for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
  [ $alive -eq 1 ] || break
  sleep 2
done
echo "rows: $(cat "$OUT"/indep_*.jsonl | wc -l) indep, $(cat "$OUT"/noisy_*.jsonl 2>/dev/null | wc -l) noisy, $(cat "$OUT"/sim_*.jsonl 2>/dev/null | wc -l) sim"
for p in $pids; do pkill -P "$p" 2>/dev/null; kill "$p" 2>/dev/null; done   # its own shards only
exit 0
