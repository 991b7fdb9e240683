"""Hardware layer: catalog, cluster spec, topology graph and tiers, ingestion."""
