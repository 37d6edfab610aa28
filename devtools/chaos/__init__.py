"""The chaos scenarios (fuzzed frames, silent connections, frozen processes, SIGKILL storms)
against real gateways and agents: run briefly by ``tests/chaos/test_chaos.py`` and at full
length by ``benchmarks/chaos.py``."""
