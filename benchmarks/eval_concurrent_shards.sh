#!/bin/sh
# The concurrent sweep in K parallel shards (a many-core machine): every case of --truth indep,
# then the same with the walk's measurements noisy (--noise 1), then --truth sim, each shard's rows
# in $OUT/<run>_<i>.jsonl (flushed per case: a run cut short keeps its finished cases); then
#   python benchmarks/eval_concurrent.py --summarize $OUT/indep_*.jsonl
# Usage: OUT=dir sh benchmarks/eval_concurrent_shards.sh [K] [seconds]
K=${1:-16}
LIMIT=${2:-400}
PY=${PY:-python3}
$PY -c "import numpy, scipy" || { echo "no numpy/scipy for $PY"; exit 7; }
i=0
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
  i=$((i + 1))
done
sleep "$LIMIT"
echo "rows: $(cat "$OUT"/indep_*.jsonl | wc -l) indep, $(cat "$OUT"/noisy_*.jsonl 2>/dev/null | wc -l) noisy, $(cat "$OUT"/sim_*.jsonl 2>/dev/null | wc -l) sim"
kill 0 2>/dev/null
exit 0
