#!/bin/bash
# issue 42, reordered again after piece 2: ltd_frac=0.25 (1.4568) and cl_frac=0.8 (1.4572) both win
# by making random-LTD's kept length reach the curriculum's length before it (raw tokens ==
# effective tokens: LTD drops nothing). So the control that rules that out comes next: the
# curriculum alone (CL_seqtru_voc, no random-LTD), two seeds; then the 70% budgets; then the
# knobs left (c: ltd_starts, d: cl_starts).
cd ../wt42 || exit 1
export OMP_NUM_THREADS=1
while kill -0 26164 2>/dev/null; do sleep 10; done  # piece 5 (seed 1338, step-matched) first
L=../grid300_logs
common="--jobs=2 --ratios=300 --out_dir=../grid300"
python reproduce.py $common --fractions=1 --seeds=1337,1338 \
  "--cases=baseline,CL_seqtru_voc,CL_seqtru_voc + random-LTD" > $L/sweep7_cl_alone.log 2>&1
python reproduce.py $common --fractions=0.7,1 --seeds=1337,1338 --cl_fracs=0.4,0.8 \
  > $L/sweep6_two_seeds.log 2>&1
python reproduce.py $common --fractions=1 --seeds=1337 --ltd_starts=4,8,32 > $L/sweep3_ltd_starts.log 2>&1
python reproduce.py $common --fractions=1 --seeds=1337 --cl_starts=0.25:4,1:8,4:32 \
  > $L/sweep4_cl_starts.log 2>&1
echo "sweep_c done $(date)"
