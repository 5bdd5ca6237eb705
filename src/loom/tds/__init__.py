"""The Training Data Service: log lines ingested, stored, queried and streamed."""
