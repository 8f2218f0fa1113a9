"""raftlog benchmarks (``make bench``): each ``bench/bench_*.py`` module is one suite."""
