"""Step-time simulator: compute + communication per tier + overlap + pipeline schedule."""
