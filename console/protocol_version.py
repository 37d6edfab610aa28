"""The version of the gateway's wire protocol (PROTOCOL.md) that this irq speaks.

Its own module, importing nothing, so ``irq --version`` can say it without loading the
protocol's pydantic models (``console.gateway.protocol`` costs ~0.1 s to import).
"""

PROTOCOL_VERSION = 1
