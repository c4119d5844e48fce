"""Prefixes of Flink's restart-strategy option keys, as the option and preview tests write them."""

TYPE = "restart-strategy.type"
FD = "restart-strategy.fixed-delay."
FR = "restart-strategy.failure-rate."
ED = "restart-strategy.exponential-delay."
