#!/usr/bin/env bash
# One shard of a certification campaign per Slurm array task (nvfp4-oracle reads the array's
# variables itself: SLURM_ARRAY_TASK_ID from SLURM_ARRAY_TASK_MIN, of SLURM_ARRAY_TASK_COUNT).
# Submit the shards, then the merge once they have all ended (failed ones included):
#
#   jid=$(sbatch --parsable examples/ci/slurm-certify.sh)
#   sbatch --dependency=afterany:$jid examples/ci/slurm-merge.sh
#
# The array must be contiguous. Every task uses the same seed. Shards on several nodes must share
# the signing key: NVFP4_ORACLE_SECRETS names a directory holding it (readable by the job only).
#SBATCH --job-name=nvfp4-oracle-certify
#SBATCH --array=0-3
#SBATCH --gres=gpu:1
#SBATCH --output=nvfp4-oracle-certify-%a.log
set -euo pipefail
ORACLE=${ORACLE:-nvfp4-oracle}
# What to certify: your kernel's manifest (docs/guides/door.md), or any certify selection.
read -r -a what <<< "${ORACLE_ARGS:---manifest kernel.toml}"
SEED=${SEED:-2026}
REPORTS=${REPORTS:-nvfp4-oracle-reports}
# Exit 1 (a failing kernel) still leaves its certificate for the merge; anything else is an error.
"$ORACLE" certify "${what[@]}" --seed "$SEED" --report-dir "$REPORTS/shards" || [ $? -eq 1 ]
