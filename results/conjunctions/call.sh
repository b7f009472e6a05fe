#!/usr/bin/env bash
# One device call: the planted kernels all at once (call2.sh, LIMIT seconds each), then the
# timed default campaigns alone, one after another (call1.sh's, those that fit).
set -u
cd "$(dirname "$0")/../.."
LIMIT=${LIMIT:-200} bash results/conjunctions/call2.sh
bash results/conjunctions/call1.sh
