# Sourced by the device scripts under results/ (sandbox/run.sh, production-shapes/run.sh)
# after they set `stage`, with their name as the argument: the CUDA paths, B (the carried
# release binary), O (the output folder: $OUT on the device machine, else /tmp/<name>-out),
# R (scratch for this stage), LOG (O/<stage>.log), S (the example submissions), and run().
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
B=${B:-./.carry/nvfp4-oracle}  # relative: the scripts run from the repository root
O=${OUT:-/tmp/$1-out}
R=/tmp/$1/$stage
LOG=$O/$stage.log
mkdir -p "$R" "$O"
S=examples/submissions
run() {  # run NAME command...: appended to the stage's log with its time and exit code
  local name=$1; shift
  { echo; echo "=== $name"; echo "\$ $*"; } >> "$LOG"
  local started=$SECONDS
  "$@" >> "$LOG" 2>&1
  local code=$?
  echo "exit $code ($((SECONDS - started)) s)" >> "$LOG"
  echo "$name: exit $code ($((SECONDS - started)) s)"
}
