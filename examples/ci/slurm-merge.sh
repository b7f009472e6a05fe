#!/usr/bin/env bash
# Merges the shards slurm-certify.sh wrote, against the main branch's certificates when
# BASELINE names them; exit 0 certified, 1 failed, 5 worse than the baseline (README: exit codes).
#SBATCH --job-name=nvfp4-oracle-merge
#SBATCH --output=nvfp4-oracle-merge.log
set -euo pipefail
ORACLE=${ORACLE:-nvfp4-oracle}
REPORTS=${REPORTS:-nvfp4-oracle-reports}
baseline=()
if [ -n "${BASELINE:-}" ]; then baseline=(--baseline "$BASELINE"); fi
"$ORACLE" merge "$REPORTS"/shards/*.shard-*-of-*.json --report-dir "$REPORTS/merged" \
  "${baseline[@]}" --junit "$REPORTS/junit.xml" --summary "$REPORTS/summary.md"
