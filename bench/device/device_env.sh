# Sourced by the device scripts (check_h200.sh, profile_h200.sh) in the checkout's root on the GPU machine:
# the build was made here under /work/main/build-gpu and finds its libraries, test data and plugins there, so
# /work/main, its build-gpu (the staged .devrun/stage) and the Fashion-MNIST path are linked to this copy;
# then the staged Debian libraries join LD_LIBRARY_PATH. Sets root (this checkout) and B (the programs).
set -u
root=$PWD
mkdir -p /work; [ -e /work/main ] || ln -s "$root" /work/main
[ -e /work/main/build-gpu ] || ln -s "$root/.devrun/stage" /work/main/build-gpu
mkdir -p /usr/share/datasets && { [ -e /usr/share/datasets/fashion-mnist ] || ln -s "$root/.devrun/fashion-mnist" /usr/share/datasets/fashion-mnist; }
source "$root/.devrun/stage/devenv.sh"; export LD_LIBRARY_PATH="$root/.devrun/stage/lib:$LD_LIBRARY_PATH"
B=/work/main/build-gpu/bin
# bench_step ARGS: one bench_resnet_step run's JSON line appended to $OUT/fresco.json (its log to $OUT/log.txt).
bench_step() { timeout 60 $B/bench_resnet_step "$@" 2>>$OUT/log.txt | grep resnet_step >> $OUT/fresco.json; }
# trace_step NAME ARGS: a CUPTI timeline of bench_resnet_step ARGS over 40 steps, the last 20 summarised by
# kernel class into $OUT/traces/NAME.txt (its log NAME.log); prints the summary's first line.
trace_step() {
  local name=$1; shift
  mkdir -p $OUT/traces
  CUDA_INJECTION64_PATH=/work/main/build-gpu/lib/libfresco_cupti_trace.so FRESCO_TRACE_OUT=/tmp/$name.csv \
    FRESCO_TRACE_KEEP=60000 timeout 100 $B/bench_resnet_step "$@" --steps 40 --warm 5 > $OUT/traces/$name.log 2>&1
  python3 bench/trace/timeline.py /tmp/$name.csv --last 20 --classes > $OUT/traces/$name.txt 2>&1
  head -1 $OUT/traces/$name.txt
}
# ab_run TAG [VAR=VALUE...] -- [ARGS...]: one ResNet-18 b512 step run at precision $P with those environment
# variables and bench_resnet_step arguments, its JSON line tagged "variant": TAG in $OUT/fresco.json (the
# interleaved A/B scripts); nothing once $SECONDS passes ${STOP_AT:-560}.
ab_run() {
  local tag=$1 envs=()
  shift
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  [ $SECONDS -gt ${STOP_AT:-560} ] && return
  env "${envs[@]}" timeout 90 $B/bench_resnet_step --model resnet18 --batch 512 --precision $P "$@" \
    2>>$OUT/log.txt | grep resnet_step | sed "s/^{/{\"variant\":\"$tag\",/" >> $OUT/fresco.json
}
# ab_summary: each (dtype, variant)'s step times in $OUT/fresco.json, their mean and device memory.
ab_summary() {
  python3 - <<'PY'
import json, collections, os
d = collections.defaultdict(list); mem = {}
for l in open(os.environ['OUT'] + '/fresco.json'):
    j = json.loads(l); k = (j['dtype'], j['variant']); d[k].append(j['ms_step']); mem[k] = j.get('device_mib')
for k, v in sorted(d.items()): print(k, v, round(sum(v) / len(v), 4), mem[k])
PY
}
