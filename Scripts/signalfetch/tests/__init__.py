"""Tests of the signalfetch package itself (run by Scripts/test: python3 -m unittest discover)."""
