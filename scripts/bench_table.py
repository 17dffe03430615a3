#!/usr/bin/env python3
"""Print the table of ratios xlite/peer from one run of xlite's benchmarks.

Reads the JSON that `xlite_benchmarks --benchmark_out=FILE --benchmark_out_format=json`
writes (`cmake --build --preset bench` leaves it in build/bench/benchmarks.json), and
merges further files of the same run (the preset's second OpenBLAS process). Benchmark
names are "<case>/<impl>/<args>" (benchmarks/bench_common.hpp); rows of one case with equal
args are compared: each impl's rate, xlite's rate over it, and its fraction of the
machine's limit for the case.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import statistics
import sys
from dataclasses import dataclass

XLITE = "xlite"
LIMIT = "limit"
PEAK_FMA = "peak_fma"  # the limit of FLOP-rated cases that have no limit row of their own
# Cases whose limit is another peak: the first of these measured at the same thread count.
PEAKS_OF = {"bf16gemm": ["peak_amx", "peak_bf16", PEAK_FMA]}
TRIAD = "triad"  # its limit, the machine's bandwidth, bounds byte-rated cases that have none

# Parts of a name that are Google Benchmark's run settings, not args. "threads:<t>" stays:
# it is an arg in xlite's convention, whoever set it.
RUN_SETTING = re.compile(r"(real_time|manual_time|process_time|(min_time|min_warmup_time|iterations|repeats):.*)")

LEGEND = """\
rate        GB/s for memory-bound cases (bytes as STREAM counts them), GFLOP/s for
            compute-bound ones (FLOPs reported as items)
xlite/impl  xlite's rate over this row's rate, same case and args: > 1 means xlite is
            faster; '-' where the case has no xlite row yet
of limit    this row's rate over the machine's limit: the case's 'limit' row (a paired
            case's: its base case's, sum_xy/limit for sum_xy_paired), or for a
            case without one, triad/limit at the same args (GB/s: the bandwidth) or
            peak_fma/limit at the same thread count (GFLOP/s; for bf16gemm the fastest
            bf16 peak measured: peak_amx, else peak_bf16)"""


class InputError(Exception):
    """The file is missing, unreadable, or not Google Benchmark JSON."""


@dataclass
class Row:
    case: str
    impl: str
    args: str
    unit: str  # "GB/s" or "GFLOP/s"; "" when the row has no rate
    rate: float | None  # in units of `unit`
    note: str  # the benchmark's label, or why there is no rate


def load(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as file:
            document = json.load(file)
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror}") from error
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError(f"{path} is not JSON: {error}") from error
    if not isinstance(document, dict) or not isinstance(document.get("benchmarks"), list):
        raise InputError(f"{path} is not Google Benchmark output: it has no 'benchmarks' list")
    if not all(isinstance(run, dict) and isinstance(run.get("name"), str) for run in document["benchmarks"]):
        raise InputError(f"{path} is not Google Benchmark output: a benchmark entry has no name")
    return document


def one_run_per_benchmark(runs: list[dict]) -> dict[str, dict | list[dict]]:
    """The run of each benchmark, in the file's order. With repetitions: Google Benchmark's
    median if it reported one, else the list of repetitions (rate_of takes their median)."""
    chosen: dict[str, dict | list[dict]] = {}
    for run in runs:
        name = run.get("run_name", run["name"])
        if run.get("run_type") == "aggregate":
            if run.get("aggregate_name") == "median":
                chosen[name] = run
        elif not isinstance(chosen.get(name), dict):
            chosen.setdefault(name, []).append(run)
    return chosen


def rate_of(run: dict | list[dict]) -> tuple[str, float | None, str]:
    """(unit, rate, note) of one benchmark, from its run or the median of its repetitions."""
    runs = [run] if isinstance(run, dict) else run
    failed = [r for r in runs if r.get("error_occurred")]
    if failed:
        return "", None, "error: " + str(failed[0].get("error_message", "no message"))
    label = str(runs[0].get("label", ""))
    has_bytes = "bytes_per_second" in runs[0]
    has_flops = "items_per_second" in runs[0]
    if has_bytes == has_flops:
        return "", None, "reports " + ("both bytes and items" if has_bytes else "neither bytes nor items")
    key, unit = ("bytes_per_second", "GB/s") if has_bytes else ("items_per_second", "GFLOP/s")
    return unit, statistics.median(float(r[key]) for r in runs) / 1e9, label


def parse_rows(document: dict) -> tuple[list[Row], list[str]]:
    rows, misnamed = [], []
    for name, run in one_run_per_benchmark(document["benchmarks"]).items():
        parts = name.split("/")
        if len(parts) < 2:
            misnamed.append(name)
            continue
        args = "/".join(part for part in parts[2:] if not RUN_SETTING.fullmatch(part))
        rows.append(Row(parts[0], parts[1], args, *rate_of(run)))
    return rows, misnamed


def threads_of(args: str) -> str:
    named = dict(part.split(":", 1) for part in args.split("/") if ":" in part)
    return named.get("threads", "1")


def impl_order(row: Row) -> tuple[int, str]:
    """The limit first, then xlite, then the peers by name."""
    return ({LIMIT: 0, XLITE: 1}.get(row.impl, 2), row.impl)


def table(rows: list[Row]) -> list[list[str]]:
    groups: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        groups.setdefault((row.case, row.args), []).append(row)
    peaks = {(case, threads_of(args)): rs for (case, args), rs in groups.items() if case.startswith("peak_")}

    def measured(group: list[Row], impl: str) -> Row | None:
        return next((r for r in group if r.impl == impl and r.rate), None)

    def shared_limit(case: str, group: list[Row], args: str) -> Row | None:
        """The limit of a case without a limit row: the bandwidth or a peak."""
        units = {r.unit for r in group if r.rate}
        if units == {"GB/s"}:
            return measured(groups.get((TRIAD, args), []), LIMIT)
        if units == {"GFLOP/s"}:
            for peak in PEAKS_OF.get(case, [PEAK_FMA]):
                found = measured(peaks.get((peak, threads_of(args)), []), LIMIT)
                if found:
                    return found
        return None

    def base_limit(case: str, args: str) -> Row | None:
        """A paired case's (sum_xy_paired) is its base case's own limit row, if it has one."""
        suffix = "_paired"
        return measured(groups.get((case[: -len(suffix)], args), []), LIMIT) if case.endswith(suffix) else None

    lines = [["case", "args", "impl", "rate", "", "xlite/impl", "of limit", "note"]]
    previous_case = None
    for (case, args), group in groups.items():
        xlite = measured(group, XLITE)
        limit = measured(group, LIMIT) or base_limit(case, args) or shared_limit(case, group, args)
        if previous_case is not None and case != previous_case:
            lines.append([])
        for i, row in enumerate(sorted(group, key=impl_order)):
            rate = ratio = fraction = "-"
            if row.rate:
                rate = f"{row.rate:.1f}"
                if xlite and xlite.unit == row.unit:
                    ratio = f"{xlite.rate / row.rate:.2f}"
                if limit and limit.unit == row.unit:
                    fraction = f"{row.rate / limit.rate:.0%}"
            lines.append([case if i == 0 else "", args if i == 0 else "", row.impl, rate, row.unit, ratio, fraction,
                          row.note])
        previous_case = case
    return lines


def render(lines: list[list[str]]) -> str:
    widths = [max(len(line[column]) for line in lines if line) for column in range(len(lines[0]))]
    right_aligned = {3, 5, 6}  # the numbers
    text = []
    for line in lines:
        cells = [cell.rjust(width) if column in right_aligned else cell.ljust(width)
                 for column, (cell, width) in enumerate(zip(line, widths))]
        text.append("  ".join(cells).rstrip())
    return "\n".join(text)


def context_line(context: dict) -> str:
    facts = [f"{context.get('host_name', '?')}, {context.get('num_cpus', '?')} CPUs at "
             f"{context.get('mhz_per_cpu', '?')} MHz, {context.get('date', '?')}"]
    if context.get("load_avg"):  # other work running during the run lowers every rate
        facts.append(f"load average {context['load_avg'][0]:.2f} at start")
    if context.get("core_round_trip_ns", "-") != "-":  # what a job on two threads pays to start and end
        facts.append(f"core round trip {context['core_round_trip_ns']} ns at start")
    if "xlite_isa" in context:
        facts.append(f"xlite ISA {context['xlite_isa']}")
    if "peers" in context:
        facts.append(f"peers built: {context['peers']}")
    return "; ".join(facts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="Columns:\n" + LEGEND)
    parser.add_argument("json_files", nargs="+", metavar="json_file",
                        help="Google Benchmark output, written with --benchmark_out_format=json; "
                             "further files of the same run are merged into the first")
    options = parser.parse_args()
    try:
        documents = [load(path) for path in options.json_files]
    except InputError as error:
        print(f"bench_table.py: {error}", file=sys.stderr)
        return 1
    document = documents[0]
    for extra in documents[1:]:
        document["benchmarks"].extend(extra["benchmarks"])
    rows, misnamed = parse_rows(document)
    if not rows:
        print(f"bench_table.py: {', '.join(options.json_files)} hold no benchmark results", file=sys.stderr)
        return 1
    print(context_line(document.get("context", {})))
    print()
    print(render(table(rows)))
    print()
    print(LEGEND)
    if misnamed:
        print("\nNot named <case>/<impl>/<args>, left out: " + ", ".join(misnamed))
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `bench_table.py FILE | head` ends quietly
    sys.exit(main())
