#!/usr/bin/env bash
# Per-kernel ncu profiles through the device tool (stage with scripts/stage-device-run.sh, carry .devrun, run
# `bash bench/device/profile_h200.sh`): one MLP batch-1024 step (every kernel) and the element-wise and
# batchnorm kernels of about one ResNet-18 fp16 and bf16 step at batch 512: duration, DRAM bytes, TB/s each,
# then totals per kernel name. First run in the seventh session (bench/results/2026-12-01_h200_session7.json,
# call 1); the launch-skip counts aim past compilation and warm-up and may need adjusting.
source bench/device/device_env.sh
summ() { grep '^"' "$1" | python3 -c "
import csv,sys,collections
rows=list(csv.reader(sys.stdin)); h=rows[0]; per=collections.OrderedDict()
for r in rows[1:]:
    d=dict(zip(h,r)); key=(d['ID'],d['Kernel Name'][:70],d['Grid Size'])
    per.setdefault(key,{})[d['Metric Name']]=d['Metric Value']
for (i,k,g),m in per.items():
    t=float(m.get('gpu__time_duration.sum','0').replace(',','')); b=float(m.get('dram__bytes.sum','0').replace(',',''))
    print('%4s %8.1f us %8.1f MB %5.2f TB/s %-14s %s' % (i, t/1e3, b/1e6, b/t/1e3 if t else 0, g.replace(' ', ''), k))
"; }
FRESCO_CUBLAS_AUTOTUNE=0 timeout 150 ncu --clock-control none --graph-profiling node --launch-skip 2300 --launch-count 40 --metrics gpu__time_duration.sum,dram__bytes.sum --csv $B/bench_mlp_epoch --device cuda --batch 1024 --epochs 1 --steps 20 > $OUT/ncu_mlp1024.csv 2>&1; echo "ncu mlp rc=$?"
summ $OUT/ncu_mlp1024.csv | tee $OUT/ncu_mlp1024.txt | head -45
for p in fp16 bf16; do
  timeout 200 ncu --clock-control none --graph-profiling node -k 'regex:bn_|moments|sums_finalize|add_relu|sgd|cast|pool|normalize|softmax|add_kernel|pointwise|channel|column' --launch-skip 150 --launch-count 130 --metrics gpu__time_duration.sum,dram__bytes.sum --csv $B/bench_resnet_step --model resnet18 --batch 512 --precision $p --steps 3 --warm 1 > $OUT/ncu_rn18_$p.csv 2>&1; echo "ncu rn18 $p rc=$?"
  summ $OUT/ncu_rn18_$p.csv > $OUT/ncu_rn18_$p.txt
  python3 - $OUT/ncu_rn18_$p.txt <<'PY'
import sys,re,collections
agg=collections.OrderedDict()
for l in open(sys.argv[1]):
    p=l.split()
    if len(p)<8: continue
    t=float(p[1]); b=float(p[3]); name=' '.join(p[8:]).split('(')[0][:60]
    a=agg.setdefault(name,[0,0.0,0.0]); a[0]+=1; a[1]+=t; a[2]+=b
for k,(n,t,b) in sorted(agg.items(), key=lambda x:-x[1][1]): print('%3d x %8.1f us %8.1f MB %5.2f TB/s  %s' % (n,t,b,b/t if t else 0,k))
PY
done
rm -f $OUT/*.csv
