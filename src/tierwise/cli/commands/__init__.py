"""Each module here defines `register(app)` adding its command(s) to the typer app."""
