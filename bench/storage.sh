#!/usr/bin/env bash
# Storage benchmarks next to the raw disk, in one run: BenchmarkAppend, BenchmarkRead (with plain preads of
# the same file), and the same shapes without weir (BenchmarkRawWrite: the batches written to a plain file;
# BenchmarkRawFdatasync: the durable-append ceiling) from internal/storage, dd on the same directory, and the
# ratios issue 2 sets as targets. The machine is shared and its disk swings between minutes, so the run
# alternates dd and the Go benchmarks for ROUNDS rounds and reports each round's ratios and their medians.
#   bench/storage.sh [dir]   (default: a temp dir under $TMPDIR; ROUNDS=3, BENCHTIME=2s, OPEN=1 adds BenchmarkOpen2GiB once)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(mktemp -d "${1:-${TMPDIR:-/tmp}}/weir-storage-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
benchtime=${BENCHTIME:-2s}
rounds=${ROUNDS:-3}

# dd prints "... bytes (...) copied, 1.23 s, 456 MB/s"; normalise its rate to MB/s.
dd_mbs() {
	dd "$@" 2>&1 | awk '/copied/ {v=$(NF-1); u=$NF;
		if (u=="GB/s") v*=1000; else if (u=="kB/s") v/=1000; else if (u=="B/s") v/=1e6; print v}'
}
# field NAME MB/s|ns: the value a benchmark line of $out reports.
field() {
	echo "$out" | awk -v n="$1" -v u="$2" '$1 ~ "^"n"(-[0-9]+)?$" {
		if (u=="ns") {print $3; exit}
		for (i=1;i<=NF;i++) if ($(i+1)==u) {print $i; exit}}'
}
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

pattern='BenchmarkAppend|BenchmarkRead|BenchmarkRaw'
names=(never_buffered never_raw always8_fdatasync always8_dsync always8_ceiling inflight5_dsync read_dd read_pread)
declare -A all
for r in $(seq 1 "$rounds"); do
	echo "== round $r: raw disk ($dir)"
	buffered=$(dd_mbs if=/dev/zero of="$dir/dd.bin" bs=1M count=1024)
	rm -f "$dir/dd.bin"; sync
	fdatasync=$(dd_mbs if=/dev/zero of="$dir/dd.bin" bs=1M count=1024 conv=fdatasync)
	read_mbs=$(dd_mbs if="$dir/dd.bin" of=/dev/null bs=1M count=256)
	rm -f "$dir/dd.bin"; sync
	dsync=$(dd_mbs if=/dev/zero of="$dir/dd.bin" bs=16k count=1000 oflag=dsync)
	rm -f "$dir/dd.bin"
	dsync_ops=$(awk -v m="$dsync" 'BEGIN {printf "%.0f", m*1e6/16384}')
	printf '  dd buffered write        %8.1f MB/s\n' "$buffered"
	printf '  dd write conv=fdatasync  %8.1f MB/s\n' "$fdatasync"
	printf '  dd oflag=dsync bs=16k    %8.1f MB/s (%s writes/s)\n' "$dsync" "$dsync_ops"
	printf '  dd read 256 MiB (cached) %8.1f MB/s\n' "$read_mbs"

	p=$pattern
	if [[ -n "${OPEN:-}" && $r == 1 ]]; then p="$p|BenchmarkOpen2GiB"; fi
	echo "== round $r: go benchmarks (benchtime $benchtime)"
	out=$(WEIR_BENCH_DIR="$dir" WEIR_BENCH_OPEN="${OPEN:-}" go test -run '^$' -bench "$p" -benchtime "$benchtime" ./internal/storage/)
	echo "$out" | grep -E '^Benchmark'

	never=$(field BenchmarkAppend/never MB/s)
	always8=$(field BenchmarkAppend/always-8logs MB/s)
	always8_ns=$(field BenchmarkAppend/always-8logs ns)
	inflight_ns=$(field BenchmarkAppend/always-8logs-inflight5 ns)
	raw8_ns=$(field BenchmarkRawFdatasync/8files ns)
	rawwrite=$(field BenchmarkRawWrite MB/s)
	readb=$(field BenchmarkRead/log MB/s)
	pread=$(field BenchmarkRead/pread MB/s)
	vals=(
		"$(awk -v a="$never" -v b="$buffered" 'BEGIN {print a/b}')"
		"$(awk -v a="$never" -v b="$rawwrite" 'BEGIN {print a/b}')"
		"$(awk -v a="$always8" -v b="$fdatasync" 'BEGIN {print a/b}')"
		"$(awk -v ns="$always8_ns" -v d="$dsync_ops" 'BEGIN {print (1e9/ns)/d}')"
		"$(awk -v ns="$always8_ns" -v raw="$raw8_ns" 'BEGIN {print (1e9/ns)/(8e9/raw)}')"
		"$(awk -v ns="$inflight_ns" -v d="$dsync_ops" 'BEGIN {print (1e9/ns)/d}')"
		"$(awk -v a="$readb" -v b="$read_mbs" 'BEGIN {print a/b}')"
		"$(awk -v a="$readb" -v b="$pread" 'BEGIN {print a/b}')"
	)
	for i in "${!names[@]}"; do all[${names[$i]}]+="${vals[$i]} "; done
	printf '  round %d ratios: %s\n' "$r" "$(for i in "${!names[@]}"; do printf '%s=%.2f ' "${names[$i]}" "${vals[$i]}"; done)"
done

m() { echo "${all[$1]}" | median; }
echo "== ratios, median of $rounds rounds (each round's values in brackets)"
row() { printf '  %-58s %5.2f %-8s [%s]\n' "$1" "$(m "$2")" "$3" "$(echo "${all[$2]}" | awk '{for (i=1;i<=NF;i++) printf "%.2f%s", $i, (i<NF?" ":"")}')"; }
row "append never / dd buffered write (1 MiB blocks)" never_buffered "(>= 0.8)"
row "append never / the same batches written to a plain file" never_raw ""
row "append always 8 logs / dd conv=fdatasync" always8_fdatasync "(>= 0.5)"
row "always 8 logs batches/s / dd oflag=dsync writes/s" always8_dsync "(>= 4)"
row "always 8 logs batches/s / raw 8-file fdatasync ceiling" always8_ceiling ""
row "5 appends in flight per log, batches/s / dsync writes/s" inflight5_dsync ""
row "sequential read / dd read" read_dd "(>= 0.8)"
row "sequential read / pread of the same segment file" read_pread ""
