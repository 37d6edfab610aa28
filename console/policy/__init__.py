"""The deontic policy engine: rules, classes and lineage, conflicts, explanations.

Pure domain code (pydantic and the CEL library only): the gateway governs operator commands with
it and the agent-side guards evaluate tool calls with it, on the same policy.
"""
