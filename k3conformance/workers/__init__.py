"""pytest-xdist support: the controller hooks and the scheduler that gives each worker its share up front."""
