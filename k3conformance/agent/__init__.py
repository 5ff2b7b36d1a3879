"""The agentic coding suite's agent: its tasks, its tools in the sandbox, and the loop that drives a model through them."""
