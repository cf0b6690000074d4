"""The console scripts, one module each (setup.py entry_points): oxygen-demo, oxygen-bench,
oxygen_node, oxygen-eval, oxygen-replay, oxygen-inspect, oxygen-sim, oxygen-sim-eval; and the engine
flags oxygen-demo and oxygen-replay share (engine_args.py)."""
