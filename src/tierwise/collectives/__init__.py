"""Collective cost model: time of each collective/algorithm/protocol on a placed group."""
