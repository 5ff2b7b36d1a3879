"""Probes (the requests a test needs), the runner that sends them ahead of the tests, request bodies and request counters."""
