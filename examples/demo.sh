#!/usr/bin/env bash
# The README demo: trace a real 2-rank DDP GPT job with no code change, then analyse,
# replay and simulate it with echo_sim.  Run from anywhere: bash examples/demo.sh [OUT]
# (OUT: where its outputs go, ./demo_out in the repository by default).
set -euo pipefail
case "${1:-}" in "") OUT=demo_out ;; /*) OUT="$1" ;; *) OUT="$PWD/$1" ;; esac
cd "$(dirname "$0")/.."
# It replaces only its own earlier output (a directory holding the .echo-demo it leaves, or
# the default demo_out) or an empty directory: anything else there is the user's.
if [ -e "$OUT" ] && [ ! -e "$OUT/.echo-demo" ] && [ "$OUT" != demo_out ] \
    && [ -n "$(ls -A "$OUT" 2>/dev/null || echo x)" ]; then
  echo "demo.sh: $OUT exists and is not an earlier demo's output: name another directory" >&2
  exit 2
fi
rm -rf "$OUT" && mkdir -p "$OUT" && touch "$OUT/.echo-demo"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

# TRACE_ON=1 works through echo_trace.pth (shipped by `pip install .`); without it,
# `python -m echo_trace.run` arms the same capture in front of the unchanged script.
if python -c 'import site, sys, os; sys.exit(not any(os.path.isfile(os.path.join(d, "echo_trace.pth")) for d in site.getsitepackages()))'; then
  SCRIPT=(examples/train.py)
else
  SCRIPT=(-m echo_trace.run examples/train.py)
fi

# 1. trace steps 2, 3, 4 of a plain 2-process DDP job: one directory per rank
TRACE_ON=1 TRACE_DIR="$OUT/traces" TRACE_START_STEP=2 TRACE_END_STEP=5 \
  torchrun --nproc_per_node 2 --master_addr 127.0.0.1 --master_port "${MASTER_PORT:-29500}" \
  "${SCRIPT[@]}" --layout ddp --model gpt --steps 6
ls "$OUT/traces"

# 2. analyse: per-operator statistics, iteration breakdown, critical path
python -m echo_sim statistic "$OUT/traces" --head 10
python -m echo_sim collect "$OUT/traces"
python -m echo_sim critical "$OUT/traces" -o "$OUT/critical.json"

# 3. replay the measured dependency graph (and a what-if: communication twice as fast)
python -m echo_sim replay "$OUT/traces"
python -m echo_sim replay "$OUT/traces" --scale 'Comm.*=0.5' -o "$OUT/replay.json"

# 4. predict the job at 4 processes on the hardware it ran on, then re-timed for 8 H100s
python -m echo_sim simulate "$OUT/traces" --dp 4
python -m echo_sim simulate "$OUT/traces" --dp 8 --cluster dgx-h100

# 5. search the layouts of 8 H100s for this model, and write the winner as a config
python -m echo_sim search "$OUT/traces" --gpus 8 --gpus-per-node 8 --cluster dgx-h100 \
  --global-batch 64 --top 5 --output "$OUT/best.json"

# 6. one page to look at: the measurement and the 4-process prediction side by side
python -m echo_sim report "$OUT/traces" --output "$OUT/report.html" --simulate '--dp 4'
echo "open $OUT/report.html in a browser"
