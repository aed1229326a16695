"""ptui's Flower app for a fleet on real processes (deploy/flower/local_fleet.py)."""
