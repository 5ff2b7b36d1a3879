"""What the plugin talks to: the HTTP client, completions, errors, endpoint URLs, preflight, the reference-process launcher and deployment shapes."""
