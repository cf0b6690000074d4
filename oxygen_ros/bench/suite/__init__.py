"""The benchmarks, one module each with `main(argv)`, each registered by name in
bench/registry.py and run as `oxygen-bench <name>` (node_process.py: the node benchmarks'
helper, not one). Their results are committed under benchmarks/results/ and described in
docs/benchmarks.md."""
