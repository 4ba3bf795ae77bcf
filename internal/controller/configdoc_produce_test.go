package controller

// produceDoc is the part of docs/configs.md on the configs the produce path acts on: how compression.type,
// the timestamp window and flush.messages work, and what recompression costs.
const produceDoc = `
## Compression

With ` + "`compression.type=producer`" + ` (the default) every batch is stored as the producer compressed it. With
a codec (` + "`uncompressed`, `gzip`, `snappy`, `lz4`, `zstd`" + `) the leader recompresses each produced batch of
another codec before appending it, as Kafka does: the records section is decompressed and compressed anew at
the topic's level (` + "`compression.gzip.level`, `compression.lz4.level`, `compression.zstd.level`" + `), and the
batch keeps its base offset, producer id and epoch, base sequence, transactional bit, timestamps and records,
with a new length and CRC. The work is done by the api layer on the connection's goroutine, before the
partition's owner sees the batch, so no other append waits on it. An idempotent producer's retry is
converted again and deduplicated by its sequence as any retry is. Followers copy the leader's bytes and
never recompress.

- A payload that does not decompress is ` + "`CORRUPT_MESSAGE`" + `, records that do not match the header's count
  ` + "`INVALID_RECORD`" + `; nothing is written. The new batch must meet ` + "`max.message.bytes`" + `
  (` + "`MESSAGE_TOO_LARGE`" + `), and so must the decompressed records of a batch converted to ` + "`uncompressed`" + `;
  to another codec they may be at most 64 MiB.
- A batch already in the topic's codec, or any batch under ` + "`producer`" + `, is neither decompressed nor copied
  and costs no allocation.
- weir compresses lz4 levels 1 to 9 (Kafka's default 9 among them) with lz4's fast compressor and 10 to 17
  in the high-compression mode of its lz4 library, which on JSON-like text was about twenty times slower than
  the fast one for a tenth fewer bytes. zstd levels map to the nearest of the zstd encoder's four speeds.

The cost, measured by ` + "`go test -run XXX -bench BenchmarkProduceConform -benchmem -count 5 ./internal/kafka/api/`" + `
on one core (a 100-record batch of 1 KiB JSON-like records, about 100 KiB before compression; medians of 5,
MB/s of records before compression; the shared 2-core machine had a load average near 20, so absolute
numbers are low and their ratios are what to read):

| batch → topic | per batch | MB/s | allocations |
|---|---|---|---|
| zstd → ` + "`producer`" + ` | 0.31 µs | 350,350 | 0 |
| zstd → zstd | 0.27 µs | 394,083 | 0 |
| lz4 → lz4 | 0.19 µs | 565,864 | 0 |
| uncompressed → uncompressed, ` + "`before.max.ms`" + ` set (every record walked) | 8.52 µs | 12,716 | 0 |
| zstd → zstd, ` + "`before.max.ms`" + ` set (decompressed to check) | 0.64 ms | 169 | 20 (223 KiB) |
| uncompressed → zstd | 1.48 ms | 73 | 2 (60 KiB) |
| uncompressed → lz4 | 1.00 ms | 108 | 3 (80 KiB) |
| gzip → lz4 | 2.52 ms | 43 | 79 (360 KiB) |
| snappy → zstd | 1.20 ms | 90 | 10 (518 KiB) |
| zstd → uncompressed | 0.85 ms | 128 | 21 (336 KiB) |

Per core, the matching path is some four orders of magnitude cheaper than any conversion: a topic whose
codec is the producer's pays nothing measurable. ` + "`BenchmarkAPIProduceRecompress`" + ` runs the whole path
(franz-go, 1 KiB records, acks=1) for the same pairs; on this machine its run-to-run noise (up to 2x) hid
the difference.

## Timestamps

On a ` + "`CreateTime`" + ` topic a produced record's timestamp must lie within
[now − ` + "`message.timestamp.before.max.ms`" + `, now + ` + "`message.timestamp.after.max.ms`" + `] by the leader's clock,
else the batch is refused with ` + "`INVALID_TIMESTAMP`" + ` and nothing is written; a record without a timestamp
(-1) is not checked, and ` + "`LogAppendTime`" + ` topics skip the check. The deprecated
` + "`message.timestamp.difference.max.ms`" + ` (removed in Kafka 4.0, set by older tools) bounds each direction whose
own limit is set neither on the topic nor on the broker, Kafka 3.6's rule. While all three are at their
defaults (after one hour, before unbounded), a batch stored as it came is judged by its header's maximum
timestamp, so the default path neither decompresses nor walks records; once one is set, every record of every
batch is checked (a compressed batch is decompressed for it).

## Flush

` + "`weir.flush.policy`" + ` decides when a log syncs (` + "`always`" + `: before acknowledging; ` + "`interval`" + `: every
` + "`flush.ms`" + `; ` + "`never`" + `). Kafka's ` + "`flush.messages`" + ` and ` + "`flush.ms`" + ` map onto it level by level, the
topic's configs first, then the broker's: at a level that sets ` + "`weir.flush.policy`" + `, that value; else at a
level that sets ` + "`flush.messages`" + ` or ` + "`flush.ms`" + `, ` + "`always`" + ` for ` + "`flush.messages=1`" + ` (Kafka syncs after
every message; weir after every batch, before acknowledging it) and ` + "`interval`" + ` with period ` + "`flush.ms`" + `
for any other value; else ` + "`always`" + `. DescribeConfigs shows the resulting ` + "`weir.flush.policy`" + ` with the
level it came from, so a user sees whether a topic syncs before acknowledging.
`
