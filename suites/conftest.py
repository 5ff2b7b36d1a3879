# Marks this directory as k3conformance suites: the plugin resolves and checks the
# endpoint before anything runs, so a bad endpoint is one message, not a failure per item.
K3CONFORMANCE_SUITES = True
