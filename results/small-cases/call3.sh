#!/usr/bin/env bash
# Call 3 (one H100). What slows a Python worker's small cases inside a campaign (6.3 ms a case there, 2.9 ms alone):
# the worker's own loop (results/small-cases/profile_worker.py) alone, beside another process's
# stream of small GPU work with a synchronize each (as the parent's GPU reference for small
# cases: uploads, one kernel, downloads), and beside 16 busy CPU threads.
set -u
mkdir -p "$OUT"
p() { timeout 90 python3 results/small-cases/profile_worker.py examples/submissions/torch/submission.py 300 2>&1 | grep "as served"; }
echo "alone: $(p)" > "$OUT/contention.log"
python3 - <<'PY' &
import torch, time
x = [torch.randint(0, 255, (300_000,), dtype=torch.uint8) for _ in range(6)]
end = time.time() + 40
while time.time() < end:
    d = [t.cuda() for t in x]
    y = d[0].float().sum() + d[1].float().sum()
    for _ in range(3):
        torch.empty(60_000, dtype=torch.float16, device="cuda").cpu()
    torch.cuda.synchronize()
PY
gpu=$!
sleep 8
echo "beside small GPU work in another process: $(p)" >> "$OUT/contention.log"
kill $gpu; wait $gpu 2>/dev/null
for i in $(seq 16); do ( end=$((SECONDS + 40)); while [ $SECONDS -lt $end ]; do :; done ) & done
sleep 1
echo "beside 16 busy CPU threads: $(p)" >> "$OUT/contention.log"
wait
cat "$OUT/contention.log"
