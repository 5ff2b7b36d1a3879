"""`k3conformance audit`: a verifier's spot check of a stored run against the live endpoint.

A receiver of a vendor's stored run asks a random sample of its items again, with the very
requests the run recorded, and tests whether the answers agree with the stored ones within their
sampling spread: bit for bit at temperature 0 (`exchanges.py` collects them, `replay.py` sends
them, `rescore.py` scores them with the suites' own scorers, `verdict.py` decides).
"""
