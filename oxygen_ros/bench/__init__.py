"""Measuring code, apart from serving code. The benchmarks are the modules of bench/suite/, one
each, every one run as `oxygen-bench <name>` (registered by name in registry.py; `oxygen-bench`
alone is the mode sweep, cli/bench.py); no other module here runs. The rest is what they and the
sweep share: sweep.py (one run of a mode), probe.py (one in a fresh process), metrics.py,
timing.py, profile.py (stage costs), floor.py (the bandwidth floor), rate.py (action-rate
targets), table4.py, compare.py (two runs' outputs), kv_recorder.py, fake_humanoid.py,
patterns.py, power.py, frame_profile.py, report.py and plots.py (the sweep's report), args.py
(the flags benchmarks share). docs/benchmarks.md describes each benchmark and its results."""
