"""tierwise: topology-aware distributed training — tiers, collectives, step time, plans."""

__version__ = "0.1.0"
