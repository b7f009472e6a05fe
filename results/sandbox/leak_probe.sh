#!/usr/bin/env bash
# On a GPU machine as root: does anything of the host's reach a sandboxed worker? A fake
# interpreter (NVFP4_ORACLE_PYTHON) prints its environment's size and a planted token, the head
# of /etc/shadow and the names in the caller's home folder as its last words, under certify,
# bench and preflight; the verdicts quote them. Prints each command's output and a line
# "LEAK: ..." for anything of the host's found in it. From the repository root, the release
# binary at .carry/nvfp4-oracle; B and O as the other device scripts set them.
B=${B:-./.carry/nvfp4-oracle}
O=${O:-/tmp/leak-probe-out}
mkdir -p "$O"
dir=$PWD/.carry/leak-probe
rm -rf "$dir"; mkdir -p "$dir"
cat > "$dir/fakepy.sh" <<SH
#!/bin/sh
echo "LEAKENV: \$(env | wc -l) vars; token=\$FAKE_CI_TOKEN" >&2
echo "LEAKFILE: \$(head -c 24 /etc/shadow 2>/dev/null)" >&2
echo "LEAKHOME: \$(ls -A $HOME 2>/dev/null | tr '\n' ' ')" >&2
exit 3
SH
chmod +x "$dir/fakepy.sh"
printf 'def custom_kernel(data):\n    return None\n' > "$dir/sub.py"
shadow=$(head -c 24 /etc/shadow)
home_first=$(ls -A "$HOME" | head -1)
for cmd in "certify --submission $dir/sub.py --cases 3 --report-dir $dir/report" \
           "bench --submission $dir/sub.py --force-untrusted --report-dir $dir/report" \
           "preflight --submission $dir/sub.py"; do
  echo "=== $cmd"
  out=$(FAKE_CI_TOKEN=ghp_secret123 NVFP4_ORACLE_PYTHON=$dir/fakepy.sh timeout 300 $B $cmd 2>&1)
  echo "exit $?"
  echo "$out" | grep -E "LEAK|sandbox|isolation" | cut -c1-600
  echo "$out" | grep -q ghp_secret123 && echo "LEAK: the token"
  [ -n "$shadow" ] && echo "$out" | grep -qF "$shadow" && echo "LEAK: /etc/shadow"
  [ -n "$home_first" ] && echo "$out" | grep -q "LEAKHOME:.*$home_first" && echo "LEAK: the home folder"
done
