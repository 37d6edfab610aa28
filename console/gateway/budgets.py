"""Token buckets: how many frames or commands a connection or an identity may send.

A bucket holds up to ``burst`` tokens and refills at ``rate`` tokens per second; a frame takes
one. The gateway keeps one bucket per connection and one per identity (token) for each
channel, so opening more connections does not buy more budget. See SECURITY.md for the
numbers and what happens to what is over budget.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

Clock = Callable[[], float]


@dataclass
class TokenBucket:
    rate: float  # tokens per second
    burst: float  # capacity
    clock: Clock = time.monotonic
    tokens: float = field(default=-1.0)
    _at: float = field(default=0.0)

    def __post_init__(self) -> None:
        if self.tokens < 0:
            self.tokens = self.burst
        self._at = self.clock()

    def take(self, n: float = 1.0) -> bool:
        """Take ``n`` tokens if there are enough; False (and nothing taken) otherwise."""
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self._at) * self.rate)
        self._at = now
        if self.tokens >= n:
            self.tokens -= n
            return True
        return False


class IdentityBuckets:
    """One bucket per identity, for at most ``max_identities`` (least recently used go)."""

    def __init__(self, rate: float, burst: float, *, max_identities: int = 10_000,
                 clock: Clock = time.monotonic) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self.max_identities = max_identities
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()

    def take(self, identity: str, n: float = 1.0) -> bool:
        bucket = self._buckets.get(identity)
        if bucket is None:
            bucket = TokenBucket(self.rate, self.burst, self.clock)
            self._buckets[identity] = bucket
            while len(self._buckets) > self.max_identities:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(identity)
        return bucket.take(n)
