#!/usr/bin/env bash
# The batch clock's false-alarm set on an H100 host of four cards (third run), from the
# repository root, with the stripped release binary carried as .carry/nvfp4-oracle:
#   bash results/bench-clock/run_x4.sh
# Four lanes at once, one per GPU and its own 16 cores. Lane g benches the examples
# (torch, triton, cuda_inline, library) RUNS times in all, example (g + r) mod 4 as its run r,
# so that every bench runs beside three others and each example is benched RUNS times in all
# (over the four lanes, 2 or 3 times on each for 10 runs). Then,
# while time is left (DEADLINE stops starting benches), the forgeries: the triton example's
# timer rebound to report 5% less (lane 0) and 20 us less (lane 1) at the benchmark shapes,
# cuda_inline's both at SHORT (lane 2), the forged libraries (forge_library.cu: f5, u20) at the
# benchmark shapes and SHORT (lane 3). The functions are run_lone.sh's.
set -u
export W=results/bench-clock B=.carry/nvfp4-oracle R=${R:-$HOME/bench-x4}
export DEADLINE=${DEADLINE:-470} BENCH_TIMEOUT=${BENCH_TIMEOUT:-120} RUNS=${RUNS:-10}
export SHORT=${SHORT:-128x1024x256}
RUN_LONE_FUNCTIONS_ONLY=1 source results/bench-clock/run_lone.sh
EXAMPLE_LIST=(torch triton cuda_inline library)
build
lane() {  # lane G: this lane's honest benches, then its forgeries
  local g=$1
  for r in $(seq 0 $((RUNS - 1))); do
    # Run r of the whole set is bench number r of every lane; the example rotates with the lane.
    local example=${EXAMPLE_LIST[$(((g + r) % 4))]}
    bench_one "$O/honest-gpu$g.log" "honest-$r-gpu$g" "$R/honest-$example-$r-gpu$g" \
      --manifest "$S/$example/kernel.toml" --shapes "$SHAPES"
  done
  case $g in
  0) PYFORGES=0.95:0 forge_py triton "$SHAPES" ;;
  1) PYFORGES=1:20 forge_py triton "$SHAPES" ;;
  2) forge_py cuda_inline "$SHORT" "0.95:0 1:20" ;;
  3) LIBFORGES="f5 u20" forge_lib ;;
  esac
}
for g in 0 1 2 3; do
  ( export CUDA_VISIBLE_DEVICES=$g
    taskset -cp "$((g * 16))-$((g * 16 + 15))" $BASHPID > /dev/null
    lane $g ) &
done
wait
echo "done at $SECONDS s" >> "$O/host.log"
