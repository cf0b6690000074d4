"""The commands, the only entry points (setup.py console_scripts; no module outside cli/ runs as
__main__): oxygen-demo, oxygen-bench (`oxygen-bench <benchmark>`: bench/registry.py), oxygen_node,
oxygen-eval, oxygen-replay, oxygen-inspect, oxygen-sim (`oxygen-sim <verb>`, `oxygen-sim aloha
<verb>`: sim.py), oxygen-dev (`oxygen-dev <verb>`: dev.py). Their helpers: commands.py (a verb's
dispatch), engine_args.py (the engine flags oxygen-demo and oxygen-replay share), sim_run.py and
sim_eval.py (oxygen-sim's robots and its eval verb). Library code never imports this package.
"""
