#!/bin/bash
# issue 42: knob c (random-LTD's starting kept length) after everything else, if time allows.
cd ../wt42 || exit 1
export OMP_NUM_THREADS=1
while kill -0 31277 2>/dev/null; do sleep 10; done  # sweep_e.sh first
python reproduce.py --jobs=2 --ratios=300 --out_dir=../grid300 --fractions=1 --seeds=1337 \
  --ltd_starts=4,8,32 > ../grid300_logs/sweep3_ltd_starts.log 2>&1
echo "sweep_f done $(date)"
