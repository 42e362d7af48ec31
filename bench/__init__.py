"""Benchmarks: ``python -m bench`` times every backend against its raw driver call.

``run`` (the command), ``measure`` (alternating rounds, latencies), ``report`` (bench.md,
bench.png, the README summary), ``stores/`` (per store: its server, raw call and peers),
``postgres_probes`` (PostgreSQL-only client and guard costs). ``bench_migrate`` and
``bench_reentry`` time migration and re-entry on their own (``harness`` is theirs).
"""
