"""Runs on disk: the records of one run, its summary, and loading a stored run back."""
