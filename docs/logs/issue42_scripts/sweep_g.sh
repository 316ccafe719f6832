#!/bin/bash
# issue 42 (05:03): knob c's ltd_start=32 gave 1.4394 on seed 1337, the best of the sweep, with
# random-LTD still dropping (effective tokens 2.9% below raw): its second seed and its 70% budgets.
cd ../wt42 || exit 1
export OMP_NUM_THREADS=1
python reproduce.py --jobs=2 --ratios=300 --out_dir=../grid300 --fractions=0.7,1 \
  --seeds=1337,1338 --ltd_starts=32 > ../grid300_logs/sweep9_ltd_start32.log 2>&1
echo "sweep_g done $(date)"
