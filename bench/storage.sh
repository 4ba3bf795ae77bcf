#!/usr/bin/env bash
# Storage benchmarks next to the raw disk, in one run: BenchmarkAppend and BenchmarkRead from
# internal/storage, dd on the same directory, and the ratios issue 2 sets as targets.
#   bench/storage.sh [dir]       (default: a temp dir under $TMPDIR; BENCHTIME=2s, OPEN=1 adds BenchmarkOpen2GiB)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(mktemp -d "${1:-${TMPDIR:-/tmp}}/weir-storage-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
benchtime=${BENCHTIME:-2s}

# dd prints "... bytes (...) copied, 1.23 s, 456 MB/s"; normalise its rate to MB/s.
dd_mbs() {
	dd "$@" 2>&1 | awk '/copied/ {v=$(NF-1); u=$NF;
		if (u=="GB/s") v*=1000; else if (u=="kB/s") v/=1000; else if (u=="B/s") v/=1e6; print v}'
}

echo "== raw disk ($dir)"
buffered=$(dd_mbs if=/dev/zero of="$dir/dd.bin" bs=1M count=1024)
rm -f "$dir/dd.bin"; sync
fdatasync=$(dd_mbs if=/dev/zero of="$dir/dd.bin" bs=1M count=1024 conv=fdatasync)
read_mbs=$(dd_mbs if="$dir/dd.bin" of=/dev/null bs=1M)
rm -f "$dir/dd.bin"; sync
dsync=$(dd_mbs if=/dev/zero of="$dir/dd.bin" bs=16k count=1000 oflag=dsync)
rm -f "$dir/dd.bin"
dsync_ops=$(awk -v m="$dsync" 'BEGIN {printf "%.0f", m*1e6/16384}')
printf '  dd buffered write        %8.1f MB/s\n' "$buffered"
printf '  dd write conv=fdatasync  %8.1f MB/s\n' "$fdatasync"
printf '  dd oflag=dsync bs=16k    %8.1f MB/s (%s writes/s)\n' "$dsync" "$dsync_ops"
printf '  dd read (page cache)     %8.1f MB/s\n' "$read_mbs"

echo "== go benchmarks (benchtime $benchtime)"
pattern='BenchmarkAppend|BenchmarkRead$'
if [[ -n "${OPEN:-}" ]]; then pattern="$pattern|BenchmarkOpen2GiB"; fi
out=$(WEIR_BENCH_DIR="$dir" WEIR_BENCH_OPEN="${OPEN:-}" go test -run '^$' -bench "$pattern" -benchtime "$benchtime" ./internal/storage/)
echo "$out" | grep -E '^Benchmark'

mbs() { echo "$out" | awk -v n="$1" '$1 ~ "^"n"(-[0-9]+)?$" {for (i=1;i<=NF;i++) if ($(i+1)=="MB/s") {print $i; exit}}'; }
nsop() { echo "$out" | awk -v n="$1" '$1 ~ "^"n"(-[0-9]+)?$" {print $3; exit}'; }
never=$(mbs BenchmarkAppend/never)
always8=$(mbs BenchmarkAppend/always-8logs)
always8_ns=$(nsop BenchmarkAppend/always-8logs)
inflight=$(mbs BenchmarkAppend/always-8logs-inflight5)
inflight_ns=$(nsop BenchmarkAppend/always-8logs-inflight5)
readb=$(mbs BenchmarkRead)

echo "== ratios (target)"
awk -v a="$never" -v b="$buffered" 'BEGIN {printf "  append never / dd buffered write         %.2f (>= 0.8)\n", a/b}'
awk -v a="$always8" -v b="$fdatasync" 'BEGIN {printf "  append always 8 logs / dd fdatasync      %.2f (>= 0.5)\n", a/b}'
awk -v ns="$always8_ns" -v d="$dsync_ops" 'BEGIN {printf "  always 8 logs batches/s / dsync writes/s %.2f (>= 4)  [%.0f vs %s]\n", (1e9/ns)/d, 1e9/ns, d}'
awk -v a="$inflight" -v b="$fdatasync" 'BEGIN {printf "  same, 5 appends in flight per log / dd fdatasync  %.2f\n", a/b}'
awk -v ns="$inflight_ns" -v d="$dsync_ops" 'BEGIN {printf "  same, batches/s / dsync writes/s                  %.2f\n", (1e9/ns)/d}'
awk -v a="$readb" -v b="$read_mbs" 'BEGIN {printf "  sequential read / dd read               %.2f (>= 0.8)\n", a/b}'
