"""The web UI: a single page built from `ui/` (npm, esbuild) into `static/`, served by the API
server on its own port under `/ui/`, and speaking only the public API with the user's token."""
