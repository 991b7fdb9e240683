"""Planner: search layouts, place ranks on tiers, emit launch configs, fabric what-ifs."""
