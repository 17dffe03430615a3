#!/usr/bin/env python3
"""Compile E3 written with xlite and with xtensor, alternately, and print the ratio.

#3 asks that a file including xlite/expr.hpp and evaluating E3 compile in at most 1.5x
the time of the same expression written with xtensor. Both files are compiled the same
number of times, alternating (a busy machine slows both alike), with the flags of the
benchmarks; the ratio is of the fastest times, the least disturbed.

    python3 benchmarks/compile_time/measure.py [--compiler g++] [--rounds 5] [2 3 s ...]

The levels are -O's arguments, one row each (2 and 3 by default).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
INCLUDE = HERE.parent.parent / "include"
FILES = {"xlite": HERE / "e3_xlite.cpp", "xtensor": HERE / "e3_xtensor.cpp"}


def compile_seconds(compiler: str, level: str, source: Path) -> float:
    command = [compiler, "-std=c++20", level, "-march=native", "-DNDEBUG", f"-I{INCLUDE}", "-c", str(source),
               "-o", "/dev/null"]
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{result.stderr}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compiler", default="g++")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("levels", nargs="*", default=["2", "3"], help="-O levels, one row each")
    args = parser.parse_args()
    print(f"{'flags':6} {'xlite s':>8} {'xtensor s':>10} {'ratio':>6}   (fastest of {args.rounds}; medians)")
    for level in (f"-O{level}" for level in args.levels):
        times: dict[str, list[float]] = {name: [] for name in FILES}
        for _ in range(args.rounds):
            for name, source in FILES.items():
                times[name].append(compile_seconds(args.compiler, level, source))
        xlite, xtensor = min(times["xlite"]), min(times["xtensor"])
        medians = f"{statistics.median(times['xlite']):.2f} / {statistics.median(times['xtensor']):.2f}"
        print(f"{level:6} {xlite:8.2f} {xtensor:10.2f} {xlite / xtensor:6.2f}   ({medians})")


if __name__ == "__main__":
    main()
