# Sourced by the call scripts here, and by later stages' after they set `stage`: the stage's
# paths (../stage.sh), the device's line in $O/device.log, and campaign(), one default campaign
# traced with a given binary.
set -u
stage=${stage:-case-overlap}  # a later stage sets its own and sources this file
. "$(dirname "${BASH_SOURCE[0]}")/../stage.sh" "$stage"
echo "build: $(cat .carry/build 2>/dev/null)" > "$O/device.log"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv >> "$O/device.log" 2>&1
echo "cores: $(nproc)" >> "$O/device.log"
campaign() {  # campaign JOB NAME TIMEOUT SUFFIX BINARY: out $O/NAME-default-SUFFIX.log.gz, at-once-1-NAME-SUFFIX.log
  B=$5 NVFP4_ORACLE_TRACE=1 JOBS=$1 AT_ONCE=1 JOB_TIMEOUT=$3 bash results/throughput/run.sh > /dev/null
  mv "$O/$2-gpu-0-at-once-1.log.gz" "$O/$2-default-$4.log.gz"
  mv "$O/at-once-1.log" "$O/at-once-1-$2-$4.log"
}
