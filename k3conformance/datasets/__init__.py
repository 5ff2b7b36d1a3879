"""The data the suites run on: bundled fixtures, dataset specs (`fixture:`, `hub:`, `file:`), suite item lists and synthetic long prompts."""
