#!/usr/bin/env bash
# benchmarks/accuracy.py on a quiet host: a lent device machine's CPUs, two cores pinned.
#
#   OUT=dir bash benchmarks/device_accuracy.sh [DEADLINE_S]
#
# Runs one repetition at a time (`accuracy.py --reps 1`, CPU only, gloo, OMP_NUM_THREADS=1,
# `taskset -c $CORES`, default 2,3) and starts another only while the time the last one took
# still fits before DEADLINE_S (default 540 s from the start), so that a repetition either
# finishes or is never begun. Each repetition leaves in $OUT its result JSON
# (`acc_rN.json`) and its kept traces, comm profile and log (`keep_rN.tgz`) for
# `accuracy.py --merge` and `--repredict`; `$OUT/host.txt` records the host (lscpu, load
# average before and after, what else ran). SIZES, LAYOUTS and TRACES (one-process traces
# pooled per model, `accuracy.py --traces`) pass through. Where the repo is not pip-installed, wheels in
# `.whl/` (orjson, xlsxwriter) are installed to /tmp/site first.
set -u
OUT=${OUT:?set OUT to the output folder}
DEADLINE_S=${1:-540}
CORES=${CORES:-2,3}
SIZES=${SIZES:-gpt-s,bert,resnet}
LAYOUTS=${LAYOUTS:-ddp,fsdp}
TRACES=${TRACES:-1}
START=$(date +%s)
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 3
    export PYTHONPATH=$PWD:/tmp/site
else
    export PYTHONPATH=$PWD
fi
export CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=${GLOO_SOCKET_IFNAME:-lo}
{
    date -u; nproc --all; uptime
    lscpu | grep -E 'Model name|^CPU\(s\)|Thread|MHz|L3'
    python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__)'
    echo "cores $CORES sizes $SIZES layouts $LAYOUTS traces $TRACES deadline ${DEADLINE_S}s"
    echo "other processes using CPU:"; ps -eo pcpu,comm --sort=-pcpu | head -6
} > "$OUT/host.txt" 2>&1
last=0
for rep in 0 1 2 3 4 5; do
    now=$(( $(date +%s) - START ))
    if [ "$rep" -gt 0 ] && [ $(( now + last + last / 8 )) -gt "$DEADLINE_S" ]; then
        echo "rep $rep not started: ${now}s used, the last took ${last}s" >> "$OUT/host.txt"
        break
    fi
    t0=$(date +%s)
    keep=/tmp/keep_r$rep
    rm -rf "$keep"  # a second call on a warm machine: accuracy.py refuses a used --keep
    mkdir -p "$keep"
    taskset -c "$CORES" python3 benchmarks/accuracy.py --reps 1 --steps 12 --warmup 3 \
        --sizes "$SIZES" --layouts "$LAYOUTS" --traces "$TRACES" --timeout 150 --keep "$keep" \
        --output "$OUT/acc_r$rep.json" > "$keep/run.log" 2>&1
    echo "rep $rep exit $? in $(( $(date +%s) - t0 ))s; load $(cut -d' ' -f1-3 /proc/loadavg)" \
        >> "$OUT/host.txt"
    tar czf "$OUT/keep_r$rep.tgz" -C /tmp "keep_r$rep"
    last=$(( $(date +%s) - t0 ))
done
uptime >> "$OUT/host.txt"
