# The plugin's own tests drive pytest sessions through pytester.
pytest_plugins = ["pytester"]
