#!/usr/bin/env bash
# Call 4: call 1's script again on the committed kernels (call 3's changes, two CTAs an SM): the
# GPU reference's tests and the four campaigns, d0f162c and this build in turn.
bash "$(dirname "$0")/call1.sh"
