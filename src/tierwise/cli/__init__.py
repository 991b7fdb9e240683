"""Command-line interface: one module per command under `tierwise.cli.commands`."""
