"""The `loom` command: Typer, one module per noun, thin over `loom.client`."""
