"""The benchmarks that run the node, a soak or one measurement each (registered in
bench/registry.py: `oxygen-bench <name>`); their results are committed under benchmarks/results/
and described in docs/benchmarks.md."""
