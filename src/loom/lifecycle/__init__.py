"""The lifecycle: admits, queues, launches, watches, halts and reconciles jobs."""
