"""Scoring of the accuracy suites: math answers, code in a sandbox, tool calls, repetition, and per-item scores."""
