#!/bin/bash
# issue 42: the method's settings at 300 tokens per parameter, one knob at a time from today's
# defaults, seed 1337, 100% budget; one piece per knob, in priority order, each reusing the
# earlier pieces' runs through the shared --out_dir (the baseline and the defaults run once).
cd ../wt42 || exit 1
export OMP_NUM_THREADS=1
common="--jobs=2 --ratios=300 --fractions=1 --seeds=1337 --out_dir=../grid300"
python reproduce.py $common --cl_fracs=0.2,0.4,0.8 > ../grid300_logs/sweep1_cl_fracs.log 2>&1
python reproduce.py $common --ltd_fracs=0.25,0.6,1 > ../grid300_logs/sweep2_ltd_fracs.log 2>&1
python reproduce.py $common --ltd_starts=4,8,32 > ../grid300_logs/sweep3_ltd_starts.log 2>&1
python reproduce.py $common --cl_starts=0.25:4,1:8,4:32 > ../grid300_logs/sweep4_cl_starts.log 2>&1
echo "sweep done $(date)"
