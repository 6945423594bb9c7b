

# Set (`bench.writes --unfrozen`, or by hand for `bench.billing`; inherited by child processes):
# the benches leave the heap unfrozen (rebill/heap.py), to measure what the freeze saves.
UNFROZEN = "REBILL_BENCH_UNFROZEN"
