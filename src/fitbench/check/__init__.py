"""`fitbench check`'s decisions: which scenarios, estimated on which cards, which of them this
machine measures, and what advice each gets. The command (fitbench.cli.check) parses its options,
calls these, runs the measurements and prints; nothing here prints.

machine.py    this machine: its GPUs (NVML, no framework import), catalog card, installed backends
scenarios.py  the brief's scenarios as workloads (at the brief's settings, and as measured)
plan.py       CheckPlan (what to run and where the advice points); run_scenario estimates and advises one
result.py     ScenarioResult: one scenario's estimates, measurement and advice
advice.py     the advice for one scenario, and for a machine without a GPU
"""
