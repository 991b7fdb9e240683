"""Each module here is one command of the same name (`foo_bar.py` is `tierwise foo-bar`): its
`register(app)` adds that command or command group to the typer app. `tierwise --help` lists
the modules without importing them (the summary is the module docstring's first paragraph
after "`tierwise ...`: "); a module is imported only when its command runs."""
