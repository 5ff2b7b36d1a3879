"""The gate: paired statistics against a stored baseline, the shape policy, the verdict and its reports."""
