"""Conformance checks, one module per suite and named like it (`suites/test_X.py` calls `checks/X.py`), with the shared failure format."""
