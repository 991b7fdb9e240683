"""Verify layer: calibration fits from logs, fabric contracts, NIC counters."""
