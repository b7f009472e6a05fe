#!/usr/bin/env python3
"""The diagnosis table (results/diagnosis.md) from certificates: for every failed kernel,
cases until detection, the minimal repro, the shrunk data and the diagnosis or localization.

    nvfp4-oracle certify --kernel 'cpu-mutant-*' --cases 200 --seed 7 --report-dir R
    python3 scripts/diagnosis_table.py R > table.md
"""
import glob
import json
import os
import sys


def row(cert):
    f = cert.get("failure")
    if not f:
        return f"| {cert['kernel']} | {cert['status']} | {cert['coverage']['cases']} | - | - | - | - |"
    m = f["minimal_case"]
    data = f.get("minimal_data") or {}
    nonzero = len(data.get("nonzero", [])) if data else "-"
    shape = data.get("shape") if data else None
    shrunk = f"{shape['m']}x{shape['n']}x{shape['k']}x{shape['l']}" if shape else "-"
    explanation = data.get("explanation") or "-" if data else "-"
    localization = "; ".join(data.get("localization", [])) if data else "-"
    cell = lambda text: str(text).replace("|", "/")
    return (f"| {cert['kernel']} | {cert['status']} | {cert['coverage']['cases']} | "
            f"{m['shape']['m']}x{m['shape']['n']}x{m['shape']['k']}x{m['shape']['l']} {m['dist']} | "
            f"{shrunk}, {nonzero} nonzero | {cell(f['diagnosis'])} | {cell(explanation)}; {cell(localization)} |")


def main():
    certs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(sys.argv[1], "*.json")))
             if not p.endswith("bench.json")]
    print("| kernel | status | cases until detection | minimal case (shape shrink) | minimal data | diagnosis | single misread input; localization |")
    print("|---|---|---|---|---|---|---|")
    for cert in certs:
        if "coverage" in cert:
            print(row(cert))


if __name__ == "__main__":
    main()
