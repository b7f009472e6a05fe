#!/usr/bin/env bash
# The Python package's tests: builds the abi3 wheel with maturin, installs it with numpy and
# pytest into a private virtual environment (target/python-venv), runs python/tests. Tests that
# need torch say why they skip. Run from anywhere; CI runs it after `cargo test` (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/python-venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "maturin==1.16.0" "numpy>=1.21" "pytest>=7" "hypothesis>=6"
rm -rf target/wheels
"$venv/bin/maturin" build --quiet --release --strip --locked -m python/Cargo.toml -o target/wheels
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps \
  target/wheels/nvfp4_oracle-*.whl
# From the repository root, so that the installed package (not python/nvfp4_oracle, which has no
# compiled _core) is the one imported.
"$venv/bin/python" -m pytest -q -rs python/tests
